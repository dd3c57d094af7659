"""Several saved ORCA models (e.g. one recipe trained with different seeds) and their seed ensemble on labelled data.

Usage::

    python bench/orca_ensemble.py --models RUN_S0 RUN_S1 RUN_S2 --data seed_108_dev.json \
        [--aqeval ../shared/data/aqeval_val/val.csv] [--device cuda] [--batch-size 32] [--mu-out mu.json]

Each folder is loaded and scored as ``python -m modelling.orca evaluate`` does (:func:`modelling.orca.cli.score_setup`
then :func:`modelling.orca.predict`, same batch size by default) on each dataset: ``--data`` (a seed-108 JSON dict or
JSONL file, :func:`modelling.orca.load_items`) and/or ``--aqeval`` (AQEval val CSV, read by ``aqeval_items`` of
bench/orca_adapt.py: one aggregated label 0 / 0.5 / 1 per answer as the rating 1 / 3 / 5). The metrics are the
project's (:func:`modelling.orca.metrics.evaluate_predictions`): Spearman ρ and Kendall τ-b of μ against the mean
human rating, MAE_μ and MAE_σ² (ORCA paper, Section 5.4; None where no item has two ratings, as on AQEval).

Prints one JSON object::

    {"models": [DIR, ...], "datasets": {NAME: {
         "n_items", "per_model": [{"model", "unclamped": {rho, tau, mae_mu, mae_var}, "clamped": {...},
                                   "recorded_dev": {...}}, ...],
         "mean": {"unclamped": {rho: {"mean", "sd"}, ...}, "clamped": {...}},
         "ensemble": {"unclamped": {...}, "clamped": {...}}, "wall_s"}},
     "ensemble_clamp": {"threshold", "concentration_scale", "tuned_on"}, "device", "versions", "wall_s",
     "load_avg"}

* ``clamped`` per model: the model's own saved post-processing (clamp threshold and concentration scale tuned on the
  dev file it was trained with; ORCA paper, Section 5.5), as ``evaluate`` reports it.
* ``mean``: mean and sample standard deviation (ddof 1; 0 for one model) of each metric over the models.
* ``ensemble``: μ = the mean of the models' μ per item, σ² = the mean of their σ² (the Beta's own variance, not the
  mixture's). Its clamped figures use a threshold and concentration scale tuned by
  :func:`~modelling.orca.metrics.tune_clamp_threshold` and :func:`~modelling.orca.metrics.tune_concentration_scale`
  on the ensemble's predictions for ``--data`` (the dev file; no clamp when only ``--aqeval`` is given) — so the
  clamped ensemble figures *on* ``--data`` are tuned on the data they report, as each model's recorded dev figures
  are; on ``--aqeval`` they are out of sample.
* ``recorded_dev``: the dev metrics the folder's ``config.json`` recorded at training (unclamped and clamped).
* ``--mu-out FILE``: also writes each model's μ and σ² per item (ids in order) for later ensembles.

A model that fails to load or score is reported under ``errors`` and left out; the rest still run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

METRICS = ("rho", "tau", "mae_mu", "mae_var")


def load_datasets(a) -> dict[str, list]:
    """{name: items}: ``--data`` under its file stem, ``--aqeval`` as ``aqeval_val``."""
    from modelling.orca import load_items

    out = {}
    if a.data:
        out[Path(a.data).stem] = load_items(a.data)
    if a.aqeval:
        sys.path.insert(0, str(ROOT / "bench"))
        from orca_adapt import aqeval_items

        out["aqeval_val"] = aqeval_items(Path(a.aqeval))[0]
    return out


def mean_sd(rows: list[dict]) -> dict:
    """{metric: {"mean", "sd"}} over per-model metric dicts (None values left out)."""
    out = {}
    for k in METRICS:
        vals = [r[k] for r in rows if r.get(k) is not None and r[k] == r[k]]
        out[k] = {"mean": statistics.fmean(vals) if vals else None,
                  "sd": (statistics.stdev(vals) if len(vals) > 1 else 0.0) if vals else None}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", required=True, help="saved ORCA model folders")
    p.add_argument("--data", help="labelled seed-108 JSON dict or JSONL (the dev file: tunes the ensemble's clamp)")
    p.add_argument("--aqeval", help="AQEval val CSV (cross-benchmark)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--batch-size", type=int, default=None, help="items per forward pass (default: evaluate's)")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--mu-out", help="write per-item mu and var of each model to this JSON file")
    a = p.parse_args(argv)
    if not (a.data or a.aqeval):
        p.error("give --data and/or --aqeval")

    import numpy as np

    from modelling.orca import (
        clamp_predictions,
        evaluate_predictions,
        item_targets,
        predict,
        tune_clamp_threshold,
        tune_concentration_scale,
    )
    from modelling.orca.cli import score_setup
    from modelling.orca.metrics import json_finite
    from modelling.orca.model import SCORE_BATCH_SIZE

    t0 = time.perf_counter()
    batch = a.batch_size or SCORE_BATCH_SIZE
    datasets = load_datasets(a)
    targets = {name: item_targets(items) for name, items in datasets.items()}
    preds: dict[str, dict[str, dict]] = {name: {} for name in datasets}  # dataset -> model -> {mu, var}
    per_model: dict[str, list[dict]] = {name: [] for name in datasets}
    wall = dict.fromkeys(datasets, 0.0)
    errors = []
    for d in a.models:
        try:
            model, tok = score_setup(d, a.device, a.threads)
            for name, items in datasets.items():
                ts = time.perf_counter()
                pr = predict(model, tok, items, batch, a.device)
                wall[name] += time.perf_counter() - ts
                hm, hv = targets[name]
                preds[name][d] = {"mu": list(pr["mu"]), "var": list(pr["var"])}
                per_model[name].append({
                    "model": d,
                    "unclamped": evaluate_predictions(pr["mu"], pr["var"], hm, hv),
                    "clamped": evaluate_predictions(*model.config.postprocess(pr["mu"], pr["var"]), hm, hv),
                    "clamp_threshold": model.config.clamp_threshold,
                    "concentration_scale": model.config.concentration_scale,
                    "recorded_dev": {k: model.config.dev_metrics.get(k) for k in
                                     ("unclamped", "clamped", "best_epoch", "dev_best_epoch")},
                })
            del model, tok
            if a.device == "cuda":
                import torch

                torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - one bad folder must not lose the others' figures
            errors.append({"model": d, "error": f"{type(exc).__name__}: {exc}",
                           "trace": traceback.format_exc(limit=3)})

    ok_models = [d for d in a.models if all(d in preds[name] for name in datasets)]
    ens = {name: (np.mean([preds[name][d]["mu"] for d in ok_models], axis=0),
                  np.mean([preds[name][d]["var"] for d in ok_models], axis=0)) if ok_models else None
           for name in datasets}
    thr, kappa, tuned_on = None, 1.0, None
    if a.data and ok_models:
        tuned_on = Path(a.data).stem
        mu, var = ens[tuned_on]
        hm, hv = targets[tuned_on]
        thr, _ = tune_clamp_threshold(mu, var, hm, hv)
        kappa, _ = tune_concentration_scale(mu, var, hm, hv, threshold=thr)

    out = {"models": a.models, "ok_models": ok_models, "datasets": {}, "errors": errors,
           "ensemble_clamp": {"threshold": thr, "concentration_scale": kappa, "tuned_on": tuned_on}}
    for name, items in datasets.items():
        hm, hv = targets[name]
        res = {"n_items": len(items), "n_models": len(per_model[name]), "per_model": per_model[name],
               "mean": {k: mean_sd([r[k] for r in per_model[name]]) for k in ("unclamped", "clamped")},
               "wall_s_scoring": round(wall[name], 2)}
        if ens[name] is not None:
            mu, var = ens[name]
            res["ensemble"] = {
                "unclamped": evaluate_predictions(mu, var, hm, hv),
                "clamped": evaluate_predictions(*clamp_predictions(mu, var, thr, concentration_scale=kappa), hm, hv),
            }
        out["datasets"][name] = res
    if a.mu_out:
        Path(a.mu_out).write_text(json.dumps(json_finite(
            {name: {"ids": [it.id for it in items], "models": preds[name]} for name, items in datasets.items()})))

    import torch
    import transformers

    out["device"] = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    out["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    out["batch_size"] = batch
    out["wall_s"] = round(time.perf_counter() - t0, 2)
    out["load_avg"] = list(os.getloadavg())
    print(json.dumps(json_finite(out), default=float))
    return 1 if not ok_models else 0


if __name__ == "__main__":
    raise SystemExit(main())
