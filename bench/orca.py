"""ORCA benchmark: train a preset on seed-108 train, tune the clamp on dev, report dev metrics, the reload check and
scoring speed; or time CPU scoring of a saved model.

Usage (from the repository root)::

    .venv/bin/python bench/orca.py [--preset cpu-minilm] [--data-dir /work/shared/data/orca_seed108] [--out DIR]
    .venv/bin/python bench/orca.py --preset gpu-gemma3-270m --device cuda       # on a GPU machine
    .venv/bin/python bench/orca.py --model DIR      # no training: evaluate and time a saved model
    .venv/bin/python bench/orca.py --score-only --model DIR [--threads 2]   # CPU scoring items/s, fp32 and int8

``--preset`` (:mod:`modelling.orca.presets`; the same values as ``python -m modelling.orca train --preset`` and the
platform's training form) sets the defaults of the training options; options given explicitly win.

Prints ONE JSON object on stdout::

    {"model", "device", "preset", "train_wall_s", "items_per_s", "reload_max_abs_diff", "dev": {rho, tau, mae_mu,
     mae_var}, "dev_clamped": {...}, ...extra keys: config, best_epoch, clamp_threshold, concentration_scale,
     mae_var_crossfit, mae_var_by_definition (upstream Bessel and population variance), n_dev, load_avg, ...}

``train_wall_s`` (``train_cpu_s``: process CPU time, all threads) is the whole ``train()`` call (loading the
base model, tokenising, caching the frozen layers, all epochs with their dev evaluations, clamp tuning, saving and
the save's reload check); with ``--model`` they are the values saved in that model's config.json (``trained_here``
false). ``reload_max_abs_diff`` is the largest |Δμ| over every dev item between the model in memory after training
and the saved folder reloaded (target ≤ 1e-4; ``save_orca`` refuses more on a sample of 64 items).

Scoring uses the code path of ``python -m modelling.orca score`` (``score_setup`` + ``predict``): the saved
folder is reloaded on ``--threads`` threads, float32 unless ``--int8``. ``items_per_s`` is the best of 3
passes over the dev items (tokenisation included, ``--score-batch-size`` items per forward pass); ``dev`` /
``dev_clamped`` are the metrics of those predictions (clamped: ORCA's μ clamp with the saved dev threshold,
and our σ² extensions: 0 for clamped items, the others from the Beta with its concentration scaled by the
saved dev-tuned κ). Because κ is tuned on dev itself (as the paper tunes the clamp), ``mae_var_crossfit`` gives
an out-of-sample estimate: dev is halved at random 50 times (seeded), κ is tuned on one half and MAE_σ² taken on
the other, both ways; the mean and standard deviation over the 50 splits are reported. On CPU,
``items_per_s_int8`` / ``dev_int8`` (or ``_fp32`` with ``--int8``) time and evaluate the other precision in the same run
(passes interleaved), so the speed-up and the metric change of int8 quantisation are measured side by side.
``items_per_cpu_s`` divides by process CPU seconds (all threads) instead of wall seconds: steadier on a
shared machine. ``load_avg`` is the 1-minute load average before and after timing. ``--score-only`` skips the
metrics and adds ``load_s`` (loading and checking the folder), ``max_abs_diff_mu_int8`` (int8 against float32) and
``seconds_for_4192`` (the 4,192 seed-108 candidate answers at the measured rate). Progress events go to stderr as
JSON lines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from modelling.orca import (  # noqa: E402
    OrcaConfig,
    TrainConfig,
    clamp_predictions,
    configs_from_settings,
    evaluate_predictions,
    item_targets,
    item_variance_targets,
    load_items,
    mae_var_by_definition,
    predict,
    train,
    tune_concentration_scale,
)
from modelling.orca.cli import score_setup  # noqa: E402
from modelling.orca.presets import DEFAULT_PRESET, PRESETS, preset_cli_defaults, preset_settings  # noqa: E402

#: seed-108 candidate answers (train and dev of every split), for the time to score them all.
SEED108_ANSWERS = 4192


def _time_scoring(models: dict, items, device: str, batch_size: int, passes: int = 3) -> tuple[dict, dict, dict]:
    """Best wall seconds and best process CPU seconds (all threads) of ``passes`` scoring passes per model
    (interleaved), and each model's predictions."""
    best = {k: float("inf") for k in models}
    best_cpu = dict(best)
    preds = {}
    for _ in range(passes):
        for k, (model, tok) in models.items():
            t1, c1 = time.perf_counter(), time.process_time()
            preds[k] = predict(model, tok, items, batch_size=batch_size, device=device)
            best[k] = min(best[k], time.perf_counter() - t1)
            best_cpu[k] = min(best_cpu[k], time.process_time() - c1)
    return best, best_cpu, preds


def crossfit_mae_var(mu, var, human_mean, human_var, threshold, splits: int = 50, seed: int = 0) -> dict:
    """Two-fold cross-fitted MAE_σ² of the post-processing: κ tuned on one random half of the items with a
    sample variance, MAE_σ² summed on the other half, both ways; mean and sd over ``splits`` random halvings."""
    import numpy as np

    mu, var, hm, hv = (np.asarray(x, float) for x in (mu, var, human_mean, human_var))
    rows = np.flatnonzero(np.isfinite(hv))
    rng = np.random.default_rng(seed)
    maes, kappas = [], []
    for _ in range(splits):
        order = rng.permutation(rows)
        halves = (order[: len(order) // 2], order[len(order) // 2:])
        total = 0.0
        for fit, held in (halves, halves[::-1]):
            kappa, _ = tune_concentration_scale(mu[fit], var[fit], hm[fit], hv[fit], threshold=threshold)
            _, var_c = clamp_predictions(mu[held], var[held], threshold, concentration_scale=kappa)
            total += float(np.abs(var_c - hv[held]).sum())
            kappas.append(kappa)
        maes.append(total / len(rows))
    return {"mean": float(np.mean(maes)), "sd": float(np.std(maes)), "splits": splits,
            "kappa_median": float(np.median(kappas))}


def build_parser(preset: str = DEFAULT_PRESET) -> argparse.ArgumentParser:
    """The bench's options; the training options default to ``preset``'s values (:mod:`modelling.orca.presets`)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=str(REPO / ".." / "shared" / "data" / "orca_seed108"))
    p.add_argument("--out", default=None, help="model folder (default: a temporary folder, removed)")
    p.add_argument("--model", default=None, help="evaluate and time this saved model folder; no training")
    p.add_argument("--score-only", action="store_true", help="with --model: only time scoring (fp32 and int8 on CPU)")
    p.add_argument("--int8", action="store_true", help="score with int8 quantisation (as `score --int8`)")
    p.add_argument("--score-batch-size", type=int, default=32, help="items per forward pass when scoring")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--preset", choices=list(PRESETS), default=DEFAULT_PRESET,
                   help="recipe whose settings are the defaults below (as `python -m modelling.orca train --preset`)")
    # One recipe per preset: the defaults below come from modelling.orca.presets, as the CLI's and the platform's do.
    p.add_argument("--device", choices=["cpu", "cuda"])
    p.add_argument("--base-model")
    p.add_argument("--head", choices=["beta", "multinomial"])
    p.add_argument("--pooling", choices=["auto", "mean", "cls", "last"])
    p.add_argument("--epochs", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--head-lr", type=float, default=TrainConfig.head_lr)
    p.add_argument("--freeze-layers", type=int)
    p.add_argument("--lora-rank", type=int)
    p.add_argument("--max-length", type=int)
    p.add_argument("--rationale", action=argparse.BooleanOptionalAction, help="add the rationale to the input")
    p.add_argument("--no-question", action="store_true")
    p.add_argument("--with-transcript", action="store_true")
    p.add_argument("--lexical", action=argparse.BooleanOptionalAction,
                   help="the head also reads the answer's lexical overlap with the reference (OrcaConfig.lexical)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--var-weight", type=float)
    p.add_argument("--time-budget", type=float, default=0.0, help="stop training after this many seconds")
    p.add_argument("--rating-eps", type=float, default=OrcaConfig.rating_eps)
    p.add_argument("--select-epoch", choices=["last", "best"], default=TrainConfig.select_epoch)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(**preset_cli_defaults(preset))
    return p


def parse_args(argv=None) -> argparse.Namespace:
    """Two passes, as the CLI: the first finds ``--preset``, the second parses with its values as the defaults."""
    a = build_parser().parse_args(argv)
    return build_parser(a.preset).parse_args(argv) if a.preset != DEFAULT_PRESET else a


def train_configs(a: argparse.Namespace):
    """``(OrcaConfig, TrainConfig)`` of the parsed options (through the same mapping as the platform's runs)."""
    mc, tc = configs_from_settings(preset_settings(vars(a)), head_lr=a.head_lr, seed=a.seed, threads=a.threads,
                                   time_budget_s=a.time_budget, select_epoch=a.select_epoch)
    mc.rating_eps = a.rating_eps
    return mc, tc


def score_only(a: argparse.Namespace, items) -> dict:
    """CPU scoring speed of a saved model: load time, items/s float32 and int8, their largest |Δμ|."""
    t0 = time.perf_counter()
    models = {"fp32": score_setup(a.model, a.device, a.threads)}
    load_s = time.perf_counter() - t0
    if a.device == "cpu":
        models["int8"] = score_setup(a.model, a.device, a.threads, int8=True)
    load_before = os.getloadavg()[0]
    best, best_cpu, preds = _time_scoring(models, items, a.device, a.score_batch_size)
    load_after = os.getloadavg()[0]
    model = models["fp32"][0]
    out = {
        "model": f"{model.config.base_model} ({model.config.head} head, {model.config.pooling} pooling)",
        "model_dir": a.model, "device": f"{a.device}, {torch.get_num_threads()} threads", "n_items": len(items),
        "load_s": round(load_s, 1), "load_avg": [load_before, load_after], "cpu_count": os.cpu_count(),
    }
    for name in models:
        rate = len(items) / best[name]
        out[f"items_per_s{'' if name == 'fp32' else '_int8'}"] = round(rate, 2)
        out[f"items_per_cpu_s{'' if name == 'fp32' else '_int8'}"] = round(len(items) / best_cpu[name], 2)
        out[f"seconds_for_{SEED108_ANSWERS}{'' if name == 'fp32' else '_int8'}"] = round(SEED108_ANSWERS / rate, 1)
    if "int8" in preds:
        out["max_abs_diff_mu_int8"] = max(abs(x - y) for x, y in zip(preds["fp32"]["mu"], preds["int8"]["mu"]))
    return out


def main() -> int:
    a = parse_args()
    data = Path(a.data_dir)
    tr, dv = data / "seed_108_train.json", data / "seed_108_dev.json"
    if not (tr.exists() and dv.exists()):
        print(f"bench/orca.py: seed-108 data not found under {data.resolve()} (pass --data-dir)", file=sys.stderr)
        return 2
    if a.score_only and a.model is None:
        print("bench/orca.py: --score-only needs --model DIR", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    if a.score_only:
        print(json.dumps(score_only(a, load_items(dv))))
        return 0
    tmp = None
    if a.model is not None:
        out = Path(a.model)
    elif a.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="orca_bench_")
        out = Path(tmp.name) / "model"
    else:
        out = Path(a.out)

    items = load_items(dv)
    reload_diff = None
    if a.model is None:
        mc, tc = train_configs(a)
        t0, c0 = time.perf_counter(), time.process_time()
        res = train(
            tr, dv, out, mc, tc, callback=lambda e: print(json.dumps(e, default=float), file=sys.stderr, flush=True)
        )
        train_wall, train_cpu = round(time.perf_counter() - t0, 1), round(time.process_time() - c0, 1)
        epochs_run = len(res["history"])
        dev_by_epoch = [e.get("dev", {}).get("rho") for e in res["history"]]
        in_memory = predict(res["model"], res["tokenizer"], items, batch_size=a.score_batch_size, device=a.device)

    models = {"scored": score_setup(out, a.device, a.threads, a.int8)}
    other = "fp32" if a.int8 else "int8"
    if a.device == "cpu":
        models[other] = score_setup(out, a.device, a.threads, int8=not a.int8)
    model = models["scored"][0]
    settings = model.config.train_settings
    if a.model is not None:
        train_wall, train_cpu = settings.get("train_wall_s"), settings.get("train_cpu_s")
        epochs_run = None
        dev_by_epoch = None
    load_before = os.getloadavg()[0]
    best, best_cpu, preds = _time_scoring(models, items, a.device, a.score_batch_size)
    load_after = os.getloadavg()[0]
    pred = preds["scored"]
    if a.model is None:
        reloaded = preds["fp32"] if a.int8 else pred
        reload_diff = max(abs(x - y) for x, y in zip(in_memory["mu"], reloaded["mu"]))
    hm, hv = item_targets(items)
    targets = item_variance_targets(items)
    thr, kappa = model.config.clamp_threshold, model.config.concentration_scale
    result = {
        "model": f"{model.config.base_model} ({model.config.head} head, {model.config.pooling} pooling)",
        "preset": a.preset,
        "device": f"{a.device}, {torch.get_num_threads()} threads, {'int8' if a.int8 else 'fp32'}",
        "train_wall_s": train_wall,
        "train_cpu_s": train_cpu,
        "trained_here": a.model is None,
        "reload_max_abs_diff": reload_diff,
        "verification": model.config.verification,
        "items_per_s": round(len(items) / best["scored"], 1),
        "items_per_cpu_s": round(len(items) / best_cpu["scored"], 1),
        "dev": evaluate_predictions(pred["mu"], pred["var"], hm, hv),
        "dev_clamped": evaluate_predictions(*model.config.postprocess(pred["mu"], pred["var"]), hm, hv),
        "clamp_threshold": thr,
        "concentration_scale": kappa,
        "mae_var_crossfit": crossfit_mae_var(pred["mu"], pred["var"], hm, hv, thr),
        "best_epoch": model.config.dev_metrics.get("best_epoch"),
        "dev_rho_by_epoch": dev_by_epoch,
        "n_dev": len(items),
        "always_zero_var_baseline": evaluate_predictions(pred["mu"], [0.0] * len(items), hm, hv)["mae_var"],
        # MAE_σ² under the ORCA authors' definitions (every item): Bessel-corrected sample variance (0 for one
        # rating) first, then the population variance; unclamped, post-processed and the always-zero baseline
        "mae_var_by_definition": {
            "dev": mae_var_by_definition(pred["var"], targets),
            "dev_clamped": mae_var_by_definition(model.config.postprocess(pred["mu"], pred["var"])[1], targets),
            "always_zero": mae_var_by_definition([0.0] * len(items), targets),
        },
        "load_avg": [load_before, load_after],
        "config": {"train": ({k: v for k, v in vars(a).items() if k not in ("data_dir", "out", "model", "score_only")}
                             if a.model is None else settings),
                   "epochs_run": epochs_run, "model_dir": str(out) if tmp is None else None},
        "cpu_count": os.cpu_count(),
    }
    if other in models:
        result[f"items_per_s_{other}"] = round(len(items) / best[other], 1)
        result[f"items_per_cpu_s_{other}"] = round(len(items) / best_cpu[other], 1)
        result[f"dev_{other}"] = evaluate_predictions(preds[other]["mu"], preds[other]["var"], hm, hv)
    print(json.dumps(result))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
