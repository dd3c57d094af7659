"""ORCA benchmark: train on seed-108 train, tune the clamp on dev, report dev metrics and speed.

Usage (from the repository root)::

    .venv/bin/python bench/orca.py [--data-dir ../shared/data/orca_seed108] [--out DIR] [--threads 2]

Prints ONE JSON object on stdout::

    {"model", "device", "train_wall_s", "items_per_s", "dev": {rho, tau, mae_mu, mae_var},
     "dev_clamped": {...}, ...extra keys: config, best_epoch, clamp_threshold, n_dev, ...}

``train_wall_s`` (``train_cpu_s``: process CPU time, all threads) is the whole ``train()`` call (loading the base model, tokenising, caching the frozen
layers, all epochs with their dev evaluations, clamp tuning and saving). ``items_per_s`` is scoring speed
of the reloaded artefact on the dev items (tokenisation included), best of 3 passes. Progress events go
to stderr as JSON lines. The defaults are the CPU recipe found in bench/orca_experiments.md.
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
    clamp_mu,
    evaluate_predictions,
    item_targets,
    load_items,
    load_orca,
    predict,
    train,
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=str(REPO / ".." / "shared" / "data" / "orca_seed108"))
    p.add_argument("--out", default=None, help="model folder (default: a temporary folder, removed)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--base-model", default="minilm")
    p.add_argument("--head", default="beta")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--head-lr", type=float, default=2e-3)
    p.add_argument("--freeze-layers", type=int, default=2)
    p.add_argument("--max-length", type=int, default=96)
    p.add_argument("--with-rationale", action="store_true", help="add the rationale to the input (slower)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--var-weight", type=float, default=5.0)
    p.add_argument("--time-budget", type=float, default=0.0, help="stop training after this many seconds")
    p.add_argument("--rating-eps", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    data = Path(a.data_dir)
    tr, dv = data / "seed_108_train.json", data / "seed_108_dev.json"
    if not (tr.exists() and dv.exists()):
        print(f"bench/orca.py: seed-108 data not found under {data.resolve()} (../shared/data is absent)", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    tmp = None
    if a.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="orca_bench_")
        out = Path(tmp.name) / "model"
    else:
        out = Path(a.out)

    mc = OrcaConfig(base_model=a.base_model, head=a.head, pooling="auto", max_length=a.max_length,
                    rating_eps=a.rating_eps, rationale=a.with_rationale)
    tc = TrainConfig(epochs=a.epochs, lr=a.lr, head_lr=a.head_lr, freeze_layers=a.freeze_layers,
                     batch_size=a.batch_size, var_weight=a.var_weight, seed=a.seed, device=a.device,
                     threads=a.threads, time_budget_s=a.time_budget)
    t0, c0 = time.perf_counter(), time.process_time()
    res = train(tr, dv, out, mc, tc, callback=lambda e: print(json.dumps(e, default=float), file=sys.stderr, flush=True))
    train_wall, train_cpu = time.perf_counter() - t0, time.process_time() - c0

    model, tok = load_orca(out, a.device)
    items = load_items(dv)
    best = float("inf")
    for _ in range(3):
        t1 = time.perf_counter()
        pred = predict(model, tok, items, batch_size=64, device=a.device)
        best = min(best, time.perf_counter() - t1)
    hm, hv = item_targets(items)
    thr = model.config.clamp_threshold
    result = {
        "model": f"{a.base_model} ({model.config.head} head, {model.config.pooling} pooling)",
        "device": f"{a.device}, {torch.get_num_threads()} threads",
        "train_wall_s": round(train_wall, 1),
        "train_cpu_s": round(train_cpu, 1),
        "items_per_s": round(len(items) / best, 1),
        "dev": evaluate_predictions(pred["mu"], pred["var"], hm, hv),
        "dev_clamped": evaluate_predictions(clamp_mu(pred["mu"], pred["var"], thr), pred["var"], hm, hv),
        "clamp_threshold": thr,
        "best_epoch": model.config.dev_metrics.get("best_epoch"),
        "n_dev": len(items),
        "always_zero_var_baseline": evaluate_predictions(pred["mu"], [0.0] * len(items), hm, hv)["mae_var"],
        "config": {"train": {k: v for k, v in vars(a).items() if k not in ("data_dir", "out")},
                   "epochs_run": len(res["history"])},
        "cpu_count": os.cpu_count(),
    }
    print(json.dumps(result))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
