"""Training ORCA by maximum likelihood of every individual rating (ORCA paper, Eq. 5; Section 5.5).

Recipe (bench/orca_experiments.md; the named presets of :mod:`modelling.orca.presets`): AdamW with a
separate (higher) learning rate for the head, linear warm-up then cosine/linear decay sized to the run
(one-cycle), gradient clipping, dynamic padding with length-bucketed batches, dev evaluation after every epoch,
the last (or best) epoch kept, then everything saved to one folder, which is reloaded and checked
(:func:`~modelling.orca.saving.save_orca`); the clamp threshold and κ are tuned on dev (Section 5.5) from the
*reloaded* model's predictions, and the dev metrics recorded are that model's, scored as ``evaluate`` scores it.

A run can start from a saved ORCA folder instead of a base LM (``TrainConfig.init_from``: its weights, tokenizer and
model settings; the new folder records it as ``parent``), and weight the loss per item by the item's groups
(``TrainConfig.group_weights``): how a model adapts to a new benchmark from its first ratings.

Progress is reported through ``callback(event: dict)``; the CLI prints each event as one JSON line.
"""

from __future__ import annotations

import copy
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .data import OrcaItem, group_names, item_targets, load_items
from .losses import mean_bce, predict_moments, rating_nll, reduce_nll
from .metrics import evaluate_predictions, tune_clamp_threshold, tune_concentration_scale
from .model import (
    SCORE_BATCH_SIZE,
    OrcaConfig,
    OrcaModel,
    build_orca,
    collate,
    collate_hidden,
    encode_items,
    features_kw,
    item_features,
    lower_hidden,
    predict,
    supports_layer_cache,
)
from .quality import items_per_group
from .saving import load_orca, out_dir_check, save_orca, verify_sample

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
        lora_rank: LoRA rank (0 = full fine-tuning); lora_alpha = 2 × rank; dropout 0.05. Merged into the weights
            before saving.
        var_weight: weight of an auxiliary |σ² − s²| term on items with ≥ 2 ratings (0 = paper loss only).
        mu_weight: weight of an auxiliary mean loss on every item, the soft-label cross-entropy of μ against the
            item's mean normalised rating ȳ (:func:`~modelling.orca.losses.mean_bce`, nats per item, weighted by
            the item weights; fractional-response loss, Papke & Wooldridge 1996). ≥ 0; 0 = off (the paper loss and
            the σ² penalty only). Added for benchmarks with one aggregated label per answer (AQEval), where the Beta
            NLL of a single rating at 0 or 1 teaches μ little (bench/orca_experiments.md, issue 36).
        single_rating_nll: False: items with exactly one rating get no rating NLL (only the mean loss, when
            ``mu_weight`` > 0); True (default): every rating is scored (Eq. 5).
        bucket: length-bucketed shuffling (batches of similar length; fewer pad tokens).
        seed: RNG seed (python, torch).
        device: ``cpu`` or ``cuda``; threads: torch CPU threads (0 = leave torch's default).
        time_budget_s: stop training (after the current step) once this many seconds have passed (0 = none).
        eval_batch_size: batch size for the per-epoch dev scoring (the recorded dev metrics are scored with
            ``SCORE_BATCH_SIZE``, as ``evaluate`` does).
        log_every: emit a ``step`` event every N optimiser steps (0 = only epoch events).
        select_epoch: which epoch's weights are kept: ``last`` (default: the schedule has decayed the learning
            rate to 0 by then, and dev stays an unbiased judge of the model, used only to tune the clamp and κ)
            or ``best`` (the epoch with the highest dev ρ: early stopping on dev, which makes the reported dev ρ
            the maximum of several noisy estimates, optimistically biased).
        init_from: a saved ORCA folder to start from (warm start): its weights, tokenizer and model settings
            (base model, head, pooling, inputs, max length) replace those of the model config given to
            :func:`train`; the saved folder records it as ``parent``. None: start from the base LM.
        group_weights: {"benchmark=NAME" or "benchmark=NAME|KEY=VALUE": weight > 0}: an item's loss weight is the
            **product** of the weights of its groups listed (:func:`item_weights`; 1 for an item in none), so a
            benchmark's answers can count more while the rest is replayed. {}: every item weighs 1.

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
    mu_weight: float = 0.0
    single_rating_nll: bool = True
    bucket: bool = True
    seed: int = 0
    device: str = "cpu"
    threads: int = 0
    time_budget_s: float = 0.0
    eval_batch_size: int = 64
    log_every: int = 0
    select_epoch: str = "last"
    init_from: str | None = None
    group_weights: dict[str, float] = field(default_factory=dict)


#: Keys of a preset / platform run config that belong to OrcaConfig and to TrainConfig.
_MODEL_KEYS = ("base_model", "head", "pooling", "max_length", "rationale", "question", "transcript", "lexical")
_TRAIN_KEYS = ("epochs", "lr", "batch_size", "freeze_layers", "lora_rank", "var_weight", "device")


def configs_from_settings(values: dict, **train_overrides) -> tuple[OrcaConfig, TrainConfig]:
    """``(OrcaConfig, TrainConfig)`` of a preset's or a platform run's settings (the keys of
    :data:`modelling.orca.presets.PRESETS`; missing keys keep the dataclass defaults), with ``train_overrides``
    (e.g. ``seed``, ``log_every``, ``init_from``, ``group_weights``) set on the TrainConfig. Raises TypeError for an
    unknown override."""
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


def item_weights(items: Sequence[OrcaItem], group_weights: Mapping[str, float]) -> list[float]:
    """Each item's loss weight: the product of ``group_weights[name]`` over the item's ``per_group`` names
    (:func:`~modelling.orca.data.group_names`: ``benchmark=NAME`` and ``benchmark=NAME|KEY=VALUE``); 1 for an item in
    no weighted group. A product (not the maximum) so that weighting a benchmark and one of its answer types
    compounds, as the platform's training form describes.

    Raises:
        ValueError: a weight that is not a finite number > 0 (names the group).
    """
    for name, w in group_weights.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise ValueError(f"group weight of {name!r} must be a finite number above 0, not {w!r}")
    out = []
    for it in items:
        w = 1.0
        for name in group_names(it.groups):
            w *= float(group_weights.get(name, 1.0))
        out.append(w)
    return out


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


def merge_lora(model: OrcaModel) -> OrcaModel:
    """Merge LoRA adapters into the backbone's weights in place (W + (α/r)·B·A, in the weights' dtype, float32;
    ``model.backbone`` becomes the plain model); nothing for a model without adapters. Returns ``model``."""
    if hasattr(model.backbone, "merge_and_unload"):
        model.backbone = model.backbone.merge_and_unload(safe_merge=True)
    return model


def evaluate_items(model: OrcaModel, tokenizer, items: Sequence[OrcaItem], device: str = "cpu",
                   batch_size: int = SCORE_BATCH_SIZE, encoded=None) -> tuple[dict, dict]:
    """Predictions and metrics (unclamped) for labelled items. Returns (predictions, metrics)."""
    pred = predict(model, tokenizer, items, batch_size=batch_size, device=device, encoded=encoded)
    hm, hv = item_targets(items)
    return pred, evaluate_predictions(pred["mu"], pred["var"], hm, hv)


def _load(data: str | Path | Sequence[OrcaItem] | None) -> list[OrcaItem]:
    if data is None:
        return []
    return load_items(data) if isinstance(data, (str, Path)) else list(data)


def _check_inputs(tc: TrainConfig, train_items: list[OrcaItem], out_dir) -> None:
    cuda_check(tc.device)
    if tc.select_epoch not in ("last", "best"):
        raise ValueError(f"select_epoch must be 'last' or 'best', not {tc.select_epoch!r}")
    if not train_items:
        raise ValueError("no training items")
    if any(not it.ratings for it in train_items):
        raise ValueError("every training item needs at least one rating")
    item_weights([], tc.group_weights)  # a bad weight fails now
    if not (math.isfinite(tc.mu_weight) and tc.mu_weight >= 0):
        raise ValueError(f"mu_weight must be a finite number >= 0, not {tc.mu_weight!r}")
    if tc.init_from is not None and not Path(tc.init_from).is_dir():
        raise ValueError(f"init_from {tc.init_from!r} is not a folder (a saved ORCA model)")
    if out_dir is not None:
        out_dir_check(out_dir)  # a wrong folder fails now, not after training


def parent_record(folder: str | Path, config: OrcaConfig) -> dict:
    """What a model started from the saved folder ``folder`` (with settings ``config``) records as ``parent``."""
    from .config import CONFIG_NAME
    from .integrity import file_sha256

    return {"folder": str(folder), "config_sha256": file_sha256(Path(folder) / CONFIG_NAME),
            "base_model": config.base_model, "dev_metrics": config.dev_metrics,
            "train_settings": config.train_settings, "parent": config.parent}


def _start_model(model_config: OrcaConfig | None, tc: TrainConfig) -> tuple[OrcaModel, object, OrcaConfig]:
    """(model, tokenizer, its config) to train: the saved ``init_from`` folder (weights, tokenizer and model
    settings; the training records of the parent cleared, ``parent`` set) or a fresh model of the base LM."""
    if tc.init_from is not None:
        model, tok = load_orca(tc.init_from, "cpu")
        if not isinstance(model, OrcaModel) or model.config.upstream:
            raise ValueError(f"init_from {tc.init_from}: an imported checkpoint of the ORCA authors cannot be "
                             "fine-tuned here; start from one of our saved folders or a base model")
        parent = model.config
        mc = OrcaConfig.from_json(parent.to_json() | {
            "clamp_threshold": None, "concentration_scale": 1.0, "dev_metrics": {}, "train_settings": {},
            "verification": {}, "files_sha256": {}, "parent": parent_record(tc.init_from, parent)})
        model.config = mc
    else:
        mc = copy.deepcopy(model_config) if model_config is not None else OrcaConfig(pooling="auto")
        mc.lora_rank = tc.lora_rank
        model, tok = build_orca(mc)
        mc = model.config
    mc.lora_rank = tc.lora_rank
    if tc.lora_rank > 0:
        _apply_lora(model, tc.lora_rank)
    else:
        _freeze_lower(model.backbone, tc.freeze_layers, tc.freeze_embeddings)
    return model.to(tc.device).train(), tok, mc


@dataclass
class _Run:
    """What the steps of one training run share: the model, its inputs (token ids or cached hidden states of the
    frozen lower layers), targets, per-item weights and the progress callback."""

    mc: OrcaConfig
    tc: TrainConfig
    model: OrcaModel
    tok: object
    train_items: list[OrcaItem]
    dev_items: list[OrcaItem]
    emit: Callback
    train_ids: list = field(default_factory=list)
    dev_ids: list = field(default_factory=list)
    ratings: torch.Tensor | None = None
    s2: torch.Tensor | None = None
    ybar: torch.Tensor | None = None
    weights: torch.Tensor | None = None
    use_cache: bool = False
    train_h: list = field(default_factory=list)
    dev_h: list = field(default_factory=list)
    train_feats: torch.Tensor | None = None  # (N, 7) lexical features when the head reads them (OrcaConfig.lexical)
    dev_feats: torch.Tensor | None = None
    t0: float = 0.0
    c0: float = 0.0


def _prepare(run: _Run) -> None:
    """Tokenise, cache the frozen lower layers' output when possible, build the rating / variance / weight tensors."""
    tc, mc, tok = run.tc, run.mc, run.tok
    run.t0, run.c0 = time.perf_counter(), time.process_time()
    run.train_ids = encode_items(tok, run.train_items, mc)
    run.dev_ids = encode_items(tok, run.dev_items, mc)
    run.train_feats, run.dev_feats = item_features(run.train_items, mc), item_features(run.dev_items, mc)
    run.ratings = _ratings_tensor(run.train_items)
    run.use_cache = (tc.cache_frozen and tc.freeze_layers > 0 and tc.lora_rank == 0
                     and supports_layer_cache(run.model.backbone))
    if run.use_cache:
        k, pad = tc.freeze_layers, tok.pad_token_id
        run.train_h = lower_hidden(run.model.backbone, run.train_ids, k, pad, tc.eval_batch_size, tc.device)
        run.dev_h = lower_hidden(run.model.backbone, run.dev_ids, k, pad, tc.eval_batch_size, tc.device)
    means, variances = item_targets(run.train_items)
    run.s2 = torch.tensor([v if v == v else -1.0 for v in variances], dtype=torch.float32)
    run.ybar = torch.tensor(means, dtype=torch.float32)
    weights = item_weights(run.train_items, tc.group_weights)
    run.weights = None if all(w == 1.0 for w in weights) else torch.tensor(weights, dtype=torch.float32)


def _epoch_dev_metrics(run: _Run) -> dict:
    """Unclamped dev metrics of the model being trained (from the cached hidden states when caching)."""
    model, tc = run.model, run.tc
    if not run.use_cache:
        return evaluate_items(model, run.tok, run.dev_items, tc.device, tc.eval_batch_size, run.dev_ids)[1]
    model.eval()
    mus, vs = [0.0] * len(run.dev_items), [0.0] * len(run.dev_items)
    order = sorted(range(len(run.dev_h)), key=lambda i: run.dev_h[i].shape[0])
    with torch.no_grad():
        for s0 in range(0, len(order), tc.eval_batch_size):
            idx = order[s0 : s0 + tc.eval_batch_size]
            h, m = collate_hidden([run.dev_h[i] for i in idx])
            out = model.forward_from_hidden(h.to(tc.device), m.to(tc.device), tc.freeze_layers,
                                            **features_kw(run.dev_feats, idx, tc.device))
            p = predict_moments(out, run.mc.head)
            for j, i in enumerate(idx):
                mus[i], vs[i] = float(p["mu"][j]), float(p["var"][j])
    model.train()
    return evaluate_predictions(mus, vs, *item_targets(run.dev_items))


def _optimizer(run: _Run):
    """AdamW (no decay on biases and norms; the head at ``head_lr``) and the one-cycle schedule. Returns
    (optimizer, scheduler, total steps)."""
    tc, model = run.tc, run.model
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "norm.weight")
    bb = [(n, p) for n, p in model.backbone.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in bb if not n.endswith(no_decay)], "lr": tc.lr, "weight_decay": tc.weight_decay},
        {"params": [p for n, p in bb if n.endswith(no_decay)], "lr": tc.lr, "weight_decay": 0.0},
        {"params": list(model.head.parameters()), "lr": tc.head_lr, "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW([g for g in groups if g["params"]])
    total = math.ceil(len(run.train_items) / tc.batch_size) * tc.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(total, int(tc.warmup_frac * total), tc.schedule))
    return opt, sched, total


def _batch_loss(run: _Run, batch: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss, per-rating NLL (B, R), ratings (B, R)) of one batch: the (weighted) rating NLL plus the σ² penalty
    (items with ≥ 2 ratings) plus the mean loss (every item)."""
    tc, mc, model = run.tc, run.mc, run.model
    r = run.ratings[batch]
    r = r[:, : int((r > 0).sum(1).max())].to(tc.device)
    if run.use_cache:
        h, mask = collate_hidden([run.train_h[i] for i in batch])
        out = model.forward_from_hidden(h.to(tc.device), mask.to(tc.device), tc.freeze_layers,
                                        **features_kw(run.train_feats, batch, tc.device))
    else:
        inp, mask = collate([run.train_ids[i] for i in batch], run.tok.pad_token_id)
        out = model(inp.to(tc.device), mask.to(tc.device), **features_kw(run.train_feats, batch, tc.device))
    w = w_nll = None if run.weights is None else run.weights[batch].to(tc.device)
    if not tc.single_rating_nll:  # items with one rating: no NLL term (ratings masked as padding, weight 0)
        multi = (r > 0).sum(1) > 1
        r = torch.where(multi[:, None], r, torch.zeros_like(r))
        w_nll = multi.float() if w is None else w * multi
    nll = rating_nll(out, r, mc.head, eps=mc.rating_eps)
    loss = reduce_nll(nll, r, tc.reduction, weights=w_nll)
    moments = predict_moments(out, mc.head) if tc.var_weight > 0 or tc.mu_weight > 0 else {}
    if tc.var_weight > 0:
        tv = run.s2[batch].to(tc.device)
        ok = tv >= 0
        if ok.any():
            gap = (moments["var"][ok] - tv[ok]).abs()
            wv = torch.ones_like(gap) if w is None else w[ok]
            loss = loss + tc.var_weight * (gap * wv).sum() / wv.sum()
    if tc.mu_weight > 0:
        loss = loss + tc.mu_weight * mean_bce(moments["mu"], run.ybar[batch].to(tc.device), w)
    return loss, nll, r


def _fit(run: _Run) -> dict:
    """The epochs: optimise, score dev after each, keep the best epoch's weights when asked. Returns {history,
    best_epoch (the kept one), dev_best_epoch, out_of_time}."""
    tc, model = run.tc, run.model
    opt, sched, total = _optimizer(run)
    rng = random.Random(tc.seed)
    lengths = [len(x) for x in run.train_ids]
    params = [p for g in opt.param_groups for p in g["params"]]
    run.emit({"event": "start", "n_train": len(run.train_items), "n_dev": len(run.dev_items), "steps": total,
              "base_model": run.mc.base_model, "head": run.mc.head, "pooling": run.mc.pooling,
              "init_from": tc.init_from, "group_weights": tc.group_weights,
              "weighted_items": 0 if run.weights is None else int((run.weights != 1).sum()),
              "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
              "mean_tokens": sum(lengths) / len(lengths)})
    history: list[dict] = []
    best_rho, best_state, best_epoch, dev_best_epoch, step, out_of_time = -math.inf, None, 0, 0, 0, False
    for epoch in range(1, tc.epochs + 1):
        model.train()
        tot_nll, tot_n = 0.0, 0
        for batch in _bucketed_batches(lengths, tc.batch_size, rng, tc.bucket):
            loss, nll, r = _batch_loss(run, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if tc.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, tc.grad_clip)
            opt.step()
            sched.step()
            step += 1
            tot_nll, tot_n = tot_nll + float(nll.detach().sum()), tot_n + int((r > 0).sum())
            if tc.log_every and step % tc.log_every == 0:
                run.emit({"event": "step", "epoch": epoch, "step": step, "steps": total,
                          "loss": float(loss.detach()), "elapsed_s": round(time.perf_counter() - run.t0, 2)})
            if tc.time_budget_s and time.perf_counter() - run.t0 > tc.time_budget_s:
                out_of_time = True
                break
        ev = {"event": "epoch", "epoch": epoch, "loss": tot_nll / max(1, tot_n), "step": step,
              "elapsed_s": round(time.perf_counter() - run.t0, 2), "cpu_s": round(time.process_time() - run.c0, 2)}
        if run.dev_items:
            ev["dev"] = _epoch_dev_metrics(run)
            rho = ev["dev"]["rho"] if ev["dev"]["rho"] == ev["dev"]["rho"] else -math.inf
            if rho > best_rho:
                best_rho, dev_best_epoch = rho, epoch
                if tc.select_epoch == "best":
                    best_epoch = epoch
                    best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        history.append(ev)
        run.emit(ev)
        if out_of_time:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    if tc.select_epoch == "last":
        best_epoch = len(history)  # the kept epoch; "best_epoch" stays the key readers know
    return {"history": history, "best_epoch": best_epoch, "dev_best_epoch": dev_best_epoch,
            "out_of_time": out_of_time}


def _record_dev(run: _Run, model: OrcaModel, tok, fit: dict) -> None:
    """Score dev with ``model`` (the saved folder reloaded, else the trained model with LoRA merged) exactly as
    ``evaluate`` does (:func:`predict`, ``SCORE_BATCH_SIZE``, on the training device), tune the clamp threshold and
    κ on those predictions and set them, the metrics (unclamped, clamped, per group) and the epochs on ``run.mc``."""
    mc = run.mc
    pred = predict(model, tok, run.dev_items, batch_size=SCORE_BATCH_SIZE, device=run.tc.device)
    hm, hv = item_targets(run.dev_items)
    thr, _ = tune_clamp_threshold(pred["mu"], pred["var"], hm, hv)
    kappa, clamped = tune_concentration_scale(pred["mu"], pred["var"], hm, hv, threshold=thr)
    mc.clamp_threshold, mc.concentration_scale = thr, kappa
    mc.dev_metrics = {"unclamped": evaluate_predictions(pred["mu"], pred["var"], hm, hv), "clamped": clamped,
                      "per_group": items_per_group(run.dev_items, pred["mu"], pred["var"]),
                      "best_epoch": fit["best_epoch"], "dev_best_epoch": fit["dev_best_epoch"],
                      "select_epoch": run.tc.select_epoch, "n_items": len(run.dev_items),
                      "scored": "saved folder, reloaded" if model is not run.model else "trained model"}


def _save(run: _Run, out_dir, fit: dict) -> tuple[OrcaModel, object]:
    """Merge LoRA, save the folder (reload check), record dev metrics of the reloaded folder in its config.json.
    Returns the model and tokenizer the run hands back: the reloaded folder's (the in-memory model without a
    folder)."""
    model = merge_lora(run.model).eval()
    if out_dir is None:
        if run.dev_items:
            _record_dev(run, model, run.tok, fit)
        return model, run.tok
    reloaded: list = []

    def on_reload(saved_model, saved_tok) -> None:
        reloaded[:] = [saved_model, saved_tok]
        if run.dev_items:
            _record_dev(run, saved_model, saved_tok, fit)

    # save, reload and compare on dev (else training) items: a model that does not reload identically is refused
    save_orca(model, run.tok, out_dir, verify_items=verify_sample(run.dev_items or run.train_items),
              on_reload=on_reload)
    saved_model, saved_tok = reloaded
    saved_model.config = run.mc  # what config.json now holds
    return saved_model, saved_tok


def train(
    train_data: str | Path | Sequence[OrcaItem],
    dev_data: str | Path | Sequence[OrcaItem] | None,
    out_dir: str | Path | None,
    model_config: OrcaConfig | None = None,
    train_config: TrainConfig | None = None,
    callback: Callback | None = None,
) -> dict:
    """Fine-tune ORCA (from a base LM or, with ``train_config.init_from``, a saved ORCA folder), keep the last or
    best epoch, save to ``out_dir``, and record the saved folder's dev metrics and dev-tuned clamp.

    Args:
        train_data, dev_data: file paths (JSONL or seed-108 dict) or lists of items. Without dev data the
            last epoch is kept and no clamp threshold is tuned.
        out_dir: folder to write (None: do not save; the model is still returned).
        model_config, train_config: see :class:`OrcaConfig`, :class:`TrainConfig`. With ``init_from`` the model
            settings are the saved folder's and ``model_config`` is ignored.
        callback: called with each progress event, a JSON-serialisable dict with ``event`` in
            {``start``, ``step``, ``epoch``, ``done``}; ``epoch`` events carry ``epoch``, ``loss`` (mean
            training NLL per rating, nats), ``dev`` metrics and ``elapsed_s``; ``done`` the recorded dev metrics
            (unclamped, clamped, ``per_group`` {"benchmark=NAME": {n, rho, rho_ci, tau, mae_mu, mae_var}, ...}).

    Returns:
        dict with ``model``, ``tokenizer`` (the saved folder reloaded, so whatever is scored with them is what
        ``evaluate`` of the folder gives), ``config`` (clamp threshold and dev metrics filled in), ``history``
        (epoch events), ``train_wall_s`` and ``train_cpu_s`` (seconds from tokenising to the last epoch; CPU time is
        summed over threads) and ``out_dir``.

    Raises:
        OrcaDataError: malformed input files; OrcaModelError: base model or ``init_from`` folder not loadable;
        ValueError: bad settings (unknown head, pooling, reduction, select_epoch; a group weight ≤ 0; mu_weight < 0).
    """
    tc = copy.deepcopy(train_config) if train_config is not None else TrainConfig()
    if tc.threads > 0:
        torch.set_num_threads(tc.threads)
    random.seed(tc.seed)
    torch.manual_seed(tc.seed)
    train_items, dev_items = _load(train_data), _load(dev_data)
    _check_inputs(tc, train_items, out_dir)
    model, tok, mc = _start_model(model_config, tc)
    run = _Run(mc=mc, tc=tc, model=model, tok=tok, train_items=train_items, dev_items=dev_items,
               emit=callback or (lambda e: None))
    _prepare(run)
    fit = _fit(run)
    train_wall, train_cpu = time.perf_counter() - run.t0, time.process_time() - run.c0
    mc.train_settings = asdict(tc) | {"train_wall_s": round(train_wall, 2), "train_cpu_s": round(train_cpu, 2),
                                      "stopped_by_time_budget": fit["out_of_time"]}
    model, tok = _save(run, out_dir, fit)
    run.emit({"event": "done", "train_wall_s": round(train_wall, 2), "train_cpu_s": round(train_cpu, 2),
              "best_epoch": fit["best_epoch"], "clamp_threshold": mc.clamp_threshold,
              "concentration_scale": mc.concentration_scale, "dev": mc.dev_metrics,
              "parent": mc.parent.get("folder"), "out_dir": str(out_dir) if out_dir else None})
    return {"model": model, "tokenizer": tok, "config": mc, "history": fit["history"], "train_wall_s": train_wall,
            "train_cpu_s": train_cpu, "out_dir": out_dir}
