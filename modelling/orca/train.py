"""Training ORCA by maximum likelihood of every individual rating (ORCA paper, Eq. 5; Section 5.5).

Recipe (bench/orca_experiments.md; the named presets of :mod:`modelling.orca.presets`): AdamW with a
separate (higher) learning rate for the head, linear warm-up then cosine/linear decay sized to the run
(one-cycle), gradient clipping, dynamic padding with length-bucketed batches, dev evaluation after every epoch,
the last (or best) epoch kept, then the clamp threshold tuned on dev (Section 5.5) and everything saved to one
folder, which is reloaded and checked (:func:`~modelling.orca.model.save_orca`).

Progress is reported through ``callback(event: dict)``; the CLI prints each event as one JSON line.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from .data import OrcaItem, item_targets, load_items
from .losses import predict_moments, rating_nll, reduce_nll
from .metrics import evaluate_predictions, tune_clamp_threshold, tune_concentration_scale
from .model import (
    OrcaConfig,
    OrcaModel,
    build_orca,
    collate,
    collate_hidden,
    encode_items,
    lower_hidden,
    out_dir_check,
    predict,
    save_orca,
    supports_layer_cache,
    verify_sample,
)

Callback = Callable[[dict], None]


@dataclass
class TrainConfig:
    """Optimisation settings (stored in the saved config under ``train_settings``).

    Attributes:
        epochs: passes over the training items (the schedule is sized to epochs × batches).
        lr: learning rate of the backbone (or LoRA adapters); head_lr: of the head.
        weight_decay: AdamW weight decay (not applied to biases / LayerNorm).
        batch_size: items per step (each item brings all its ratings).
        warmup_frac: fraction of steps with linear warm-up; then ``schedule`` decay to 0.
        schedule: ``cosine`` | ``linear`` | ``constant``.
        grad_clip: max global gradient norm (0 = off).
        reduction: ``rating`` (mean over ratings, Eq. 5) or ``item`` (mean over items).
        freeze_layers: freeze the embeddings and the lowest N transformer layers (full fine-tuning only).
        freeze_embeddings: freeze the token / position embeddings even when freeze_layers is 0 (saves the
            optimiser update of the large embedding matrix).
        cache_frozen: with freeze_layers > 0 on a BERT-family encoder or a Llama-family decoder, run every item
            through the frozen layers once and train from the cached hidden states (same result, far less compute).
        lora_rank: LoRA rank (0 = full fine-tuning); lora_alpha = 2 × rank; dropout 0.05.
        var_weight: weight of an auxiliary |σ² − s²| term on items with ≥ 2 ratings (0 = paper loss only).
        bucket: length-bucketed shuffling (batches of similar length; fewer pad tokens).
        seed: RNG seed (python, torch).
        device: ``cpu`` or ``cuda``; threads: torch CPU threads (0 = leave torch's default).
        time_budget_s: stop training (after the current step) once this many seconds have passed (0 = none).
        eval_batch_size: batch size for dev scoring.
        log_every: emit a ``step`` event every N optimiser steps (0 = only epoch events).
        select_epoch: which epoch's weights are kept: ``last`` (default: the schedule has decayed the learning
            rate to 0 by then, and dev stays an unbiased judge of the model, used only to tune the clamp and κ)
            or ``best`` (the epoch with the highest dev ρ: early stopping on dev, which makes the reported dev ρ
            the maximum of several noisy estimates, optimistically biased).

    The defaults are the best CPU recipe measured (bench/orca_experiments.md: MiniLM, embeddings and the 2 lowest
    layers frozen and cached, σ² penalty 5, 6 epochs with 6 % warm-up and linear decay to 0); the CLI, the
    platform's training form and bench/orca.py all start from them.
    """

    epochs: int = 6
    lr: float = 1e-4
    head_lr: float = 2e-3
    weight_decay: float = 0.01
    batch_size: int = 16
    warmup_frac: float = 0.06
    schedule: str = "linear"
    grad_clip: float = 1.0
    reduction: str = "rating"
    freeze_layers: int = 2
    freeze_embeddings: bool = False
    cache_frozen: bool = True
    lora_rank: int = 0
    var_weight: float = 5.0
    bucket: bool = True
    seed: int = 0
    device: str = "cpu"
    threads: int = 0
    time_budget_s: float = 0.0
    eval_batch_size: int = 64
    log_every: int = 0
    select_epoch: str = "last"


#: Keys of a preset / platform run config that belong to OrcaConfig and to TrainConfig.
_MODEL_KEYS = ("base_model", "head", "pooling", "max_length", "rationale", "question", "transcript")
_TRAIN_KEYS = ("epochs", "lr", "batch_size", "freeze_layers", "lora_rank", "var_weight", "device")


def configs_from_settings(values: dict, **train_overrides) -> tuple[OrcaConfig, TrainConfig]:
    """``(OrcaConfig, TrainConfig)`` of a preset's or a platform run's settings (the keys of
    :data:`modelling.orca.presets.PRESETS`; missing keys keep the dataclass defaults), with ``train_overrides``
    (e.g. ``seed``, ``log_every``) set on the TrainConfig. Raises TypeError for an unknown override."""
    model = OrcaConfig(**{k: values[k] for k in _MODEL_KEYS if k in values})
    train_config = TrainConfig(**{k: values[k] for k in _TRAIN_KEYS if k in values}, **train_overrides)
    return model, train_config


def cuda_check(device: str) -> None:
    """Refuse a CUDA device where torch sees none (a CPU build of torch, or no GPU), with a message saying so.

    Raises:
        ValueError: ``device`` is ``cuda…`` and ``torch.cuda.is_available()`` is False.
    """
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r}: torch {torch.__version__} sees no CUDA device here; use the CPU "
                         "(--device cpu) or a machine with a GPU and a CUDA build of torch")


def _lr_lambda(total: int, warmup: int, schedule: str) -> Callable[[int], float]:
    def f(step: int) -> float:
        if warmup > 0 and step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        p = min(1.0, (step - warmup) / max(1, total - warmup))
        if schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * p))
        return max(0.0, 1.0 - p)

    return f


def _bucketed_batches(lengths: Sequence[int], batch_size: int, rng: random.Random, bucket: bool) -> list[list[int]]:
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    if bucket:
        # sort inside windows of 50 batches, then shuffle the batches: similar lengths, random order
        win = batch_size * 50
        idx = [i for s in range(0, len(idx), win) for i in sorted(idx[s : s + win], key=lambda i: lengths[i])]
    batches = [idx[s : s + batch_size] for s in range(0, len(idx), batch_size)]
    rng.shuffle(batches)
    return batches


def _ratings_tensor(items: Sequence[OrcaItem]) -> torch.Tensor:
    r = max(len(it.ratings) for it in items)
    t = torch.zeros((len(items), r), dtype=torch.long)
    for i, it in enumerate(items):
        t[i, : len(it.ratings)] = torch.tensor(it.ratings, dtype=torch.long)
    return t


def _freeze_lower(backbone: torch.nn.Module, n: int, embeddings: bool = False) -> None:
    if n <= 0 and not embeddings:
        return
    for name, p in backbone.named_parameters():
        if "embed" in name:
            p.requires_grad_(False)
            continue
        for part in name.split("."):
            if part.isdigit():
                if int(part) < n:
                    p.requires_grad_(False)
                break


def _apply_lora(model: OrcaModel, rank: int) -> None:
    from peft import LoraConfig, get_peft_model

    names = {n.split(".")[-1] for n, m in model.backbone.named_modules() if isinstance(m, torch.nn.Linear)}
    preferred = [t for t in ("q_proj", "k_proj", "v_proj", "o_proj", "query", "key", "value", "dense",
                             "gate_proj", "up_proj", "down_proj") if t in names]
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.05, target_modules=preferred or "all-linear")
    model.backbone = get_peft_model(model.backbone, cfg)


def evaluate_items(model: OrcaModel, tokenizer, items: Sequence[OrcaItem], device: str = "cpu",
                   batch_size: int = 64, encoded=None) -> tuple[dict, dict]:
    """Predictions and metrics (unclamped) for labelled items. Returns (predictions, metrics)."""
    pred = predict(model, tokenizer, items, batch_size=batch_size, device=device, encoded=encoded)
    hm, hv = item_targets(items)
    return pred, evaluate_predictions(pred["mu"], pred["var"], hm, hv)


def train(
    train_data: str | Path | Sequence[OrcaItem],
    dev_data: str | Path | Sequence[OrcaItem] | None,
    out_dir: str | Path | None,
    model_config: OrcaConfig | None = None,
    train_config: TrainConfig | None = None,
    callback: Callback | None = None,
) -> dict:
    """Fine-tune ORCA, pick the best epoch on dev ρ, tune the clamp on dev, save to ``out_dir``.

    Args:
        train_data, dev_data: file paths (JSONL or seed-108 dict) or lists of items. Without dev data the
            last epoch is kept and no clamp threshold is tuned.
        out_dir: folder to write (None: do not save; the model is still returned).
        model_config, train_config: see :class:`OrcaConfig`, :class:`TrainConfig`.
        callback: called with each progress event, a JSON-serialisable dict with ``event`` in
            {``start``, ``step``, ``epoch``, ``done``}; ``epoch`` events carry ``epoch``, ``loss`` (mean
            training NLL per rating, nats), ``dev`` metrics and ``elapsed_s``.

    Returns:
        dict with ``model``, ``tokenizer``, ``config`` (OrcaConfig, clamp threshold and dev metrics filled
        in), ``history`` (epoch events), ``train_wall_s`` and ``train_cpu_s`` (seconds from tokenising to
        the last epoch; CPU time is summed over threads) and ``out_dir``.

    Raises:
        OrcaDataError: malformed input files; OrcaModelError: base model not loadable;
        ValueError: bad settings (unknown head, pooling, reduction).
    """
    mc = copy.deepcopy(model_config) if model_config is not None else OrcaConfig(pooling="auto")
    tc = copy.deepcopy(train_config) if train_config is not None else TrainConfig()
    emit = callback or (lambda e: None)
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    random.seed(tc.seed)
    torch.manual_seed(tc.seed)
    train_items = load_items(train_data) if isinstance(train_data, (str, Path)) else list(train_data)
    dev_items = (
        (load_items(dev_data) if isinstance(dev_data, (str, Path)) else list(dev_data)) if dev_data is not None else []
    )
    cuda_check(tc.device)
    if tc.select_epoch not in ("last", "best"):
        raise ValueError(f"select_epoch must be 'last' or 'best', not {tc.select_epoch!r}")
    if not train_items:
        raise ValueError("no training items")
    if any(not it.ratings for it in train_items):
        raise ValueError("every training item needs at least one rating")
    if out_dir is not None:
        out_dir_check(out_dir)  # a wrong folder fails now, not after training

    mc.lora_rank = tc.lora_rank
    model, tok = build_orca(mc)
    mc = model.config
    if tc.lora_rank > 0:
        _apply_lora(model, tc.lora_rank)
    else:
        _freeze_lower(model.backbone, tc.freeze_layers, tc.freeze_embeddings)
    model.to(tc.device).train()

    t0, c0 = time.perf_counter(), time.process_time()
    train_ids = encode_items(tok, train_items, mc)
    dev_ids = encode_items(tok, dev_items, mc)
    ratings = _ratings_tensor(train_items)
    use_cache = tc.cache_frozen and tc.freeze_layers > 0 and tc.lora_rank == 0 and supports_layer_cache(model.backbone)
    k = tc.freeze_layers
    if use_cache:
        train_h = lower_hidden(model.backbone, train_ids, k, tok.pad_token_id, tc.eval_batch_size, tc.device)
        dev_h = lower_hidden(model.backbone, dev_ids, k, tok.pad_token_id, tc.eval_batch_size, tc.device)

    def dev_metrics() -> dict:
        if not use_cache:
            return evaluate_items(model, tok, dev_items, tc.device, tc.eval_batch_size, dev_ids)[1]
        model.eval()
        mus, vs = [0.0] * len(dev_items), [0.0] * len(dev_items)
        order = sorted(range(len(dev_h)), key=lambda i: dev_h[i].shape[0])
        with torch.no_grad():
            for s0 in range(0, len(order), tc.eval_batch_size):
                idx = order[s0 : s0 + tc.eval_batch_size]
                h, m = collate_hidden([dev_h[i] for i in idx])
                p = predict_moments(model.forward_from_hidden(h.to(tc.device), m.to(tc.device), k), mc.head)
                for j, i in enumerate(idx):
                    mus[i], vs[i] = float(p["mu"][j]), float(p["var"][j])
        model.train()
        return evaluate_predictions(mus, vs, *item_targets(dev_items))
    s2 = torch.tensor([v if v == v else -1.0 for v in item_targets(train_items)[1]], dtype=torch.float32)

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
    bb = [(n, p) for n, p in model.backbone.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in bb if not n.endswith(no_decay)], "lr": tc.lr, "weight_decay": tc.weight_decay},
        {"params": [p for n, p in bb if n.endswith(no_decay)], "lr": tc.lr, "weight_decay": 0.0},
        {"params": list(model.head.parameters()), "lr": tc.head_lr, "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW([g for g in groups if g["params"]])
    steps_per_epoch = math.ceil(len(train_items) / tc.batch_size)
    total = steps_per_epoch * tc.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(total, int(tc.warmup_frac * total), tc.schedule))
    rng = random.Random(tc.seed)
    lengths = [len(x) for x in train_ids]
    emit({"event": "start", "n_train": len(train_items), "n_dev": len(dev_items), "steps": total,
          "base_model": mc.base_model, "head": mc.head, "pooling": mc.pooling,
          "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
          "mean_tokens": sum(lengths) / len(lengths)})

    history: list[dict] = []
    best_rho, best_state, best_epoch, dev_best_epoch = -math.inf, None, 0, 0
    step = 0
    out_of_time = False
    for epoch in range(1, tc.epochs + 1):
        model.train()
        tot_nll, tot_n = 0.0, 0
        for batch in _bucketed_batches(lengths, tc.batch_size, rng, tc.bucket):
            r = ratings[batch]
            r = r[:, : int((r > 0).sum(1).max())].to(tc.device)
            if use_cache:
                h, mask = collate_hidden([train_h[i] for i in batch])
                out = model.forward_from_hidden(h.to(tc.device), mask.to(tc.device), k)
            else:
                inp, mask = collate([train_ids[i] for i in batch], tok.pad_token_id)
                out = model(inp.to(tc.device), mask.to(tc.device))
            nll = rating_nll(out, r, mc.head, eps=mc.rating_eps)
            loss = reduce_nll(nll, r, tc.reduction)
            if tc.var_weight > 0:
                tv = s2[batch].to(tc.device)
                ok = tv >= 0
                if ok.any():
                    pv = predict_moments(out, mc.head)["var"]
                    loss = loss + tc.var_weight * (pv[ok] - tv[ok]).abs().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tc.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], tc.grad_clip)
            opt.step()
            sched.step()
            step += 1
            tot_nll += float(nll.detach().sum())
            tot_n += int((r > 0).sum())
            if tc.log_every and step % tc.log_every == 0:
                emit({"event": "step", "epoch": epoch, "step": step, "steps": total, "loss": float(loss.detach()),
                      "elapsed_s": round(time.perf_counter() - t0, 2)})
            if tc.time_budget_s and time.perf_counter() - t0 > tc.time_budget_s:
                out_of_time = True
                break
        ev = {"event": "epoch", "epoch": epoch, "loss": tot_nll / max(1, tot_n), "step": step,
              "elapsed_s": round(time.perf_counter() - t0, 2), "cpu_s": round(time.process_time() - c0, 2)}
        if dev_items:
            m = dev_metrics()
            ev["dev"] = m
            rho = m["rho"] if m["rho"] == m["rho"] else -math.inf
            if rho > best_rho:
                best_rho, dev_best_epoch = rho, epoch
                if tc.select_epoch == "best":
                    best_epoch = epoch
                    best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        history.append(ev)
        emit(ev)
        if out_of_time:
            break
    train_wall, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    if best_state is not None:
        model.load_state_dict(best_state)
    if tc.select_epoch == "last":
        best_epoch = len(history)  # the kept epoch; "best_epoch" stays the key readers know

    if dev_items:
        pred, m = evaluate_items(model, tok, dev_items, tc.device, tc.eval_batch_size, dev_ids)
        hm, hv = item_targets(dev_items)
        thr, _ = tune_clamp_threshold(pred["mu"], pred["var"], hm, hv)
        kappa, mcl = tune_concentration_scale(pred["mu"], pred["var"], hm, hv, threshold=thr)
        mc.clamp_threshold, mc.concentration_scale = thr, kappa
        mc.dev_metrics = {"unclamped": m, "clamped": mcl, "best_epoch": best_epoch, "dev_best_epoch": dev_best_epoch,
                          "select_epoch": tc.select_epoch, "n_items": len(dev_items)}
    mc.train_settings = asdict(tc) | {"train_wall_s": round(train_wall, 2), "train_cpu_s": round(train_cpu, 2),
                                      "stopped_by_time_budget": out_of_time}
    model.eval()
    if out_dir is not None:
        # save, reload and compare on dev (else training) items: a model that does not reload identically is refused
        save_orca(model, tok, out_dir, verify_items=verify_sample(dev_items or train_items))
    done = {"event": "done", "train_wall_s": round(train_wall, 2), "train_cpu_s": round(train_cpu, 2),
            "best_epoch": best_epoch,
            "clamp_threshold": mc.clamp_threshold, "concentration_scale": mc.concentration_scale,
            "dev": mc.dev_metrics, "out_dir": str(out_dir) if out_dir else None}
    emit(done)
    return {"model": model, "tokenizer": tok, "config": mc, "history": history, "train_wall_s": train_wall,
            "train_cpu_s": train_cpu, "out_dir": out_dir}
