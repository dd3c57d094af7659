"""Are the per-benchmark quality figures and verdicts valid where the platform shows them? (README, "ORCA on each
benchmark").

Usage (from the repository root)::

    .venv/bin/python bench/benchmark_quality.py --model DIR [--data ../shared/data/aqeval_val/val.csv]
        [--replicates 400] [--verdict-replicates 60] [--seed 0] [--threads 2] [--scores FILE.npy]
        [--parts interval,verdict]

``--model`` is a saved ORCA folder that never trained on the benchmark of ``--data`` (AQEval val: 1,968 answers of 4
LALMs to 496 questions, one aggregated label 0 / 0.5 / 1 each, read as ratings 1 / 3 / 5), e.g. the CPU recipe
trained on the platform's seed-108 data (the model of a training run before AQEval val was imported, or
``python -m modelling.orca train --train <run>/data/train.jsonl --dev <run>/data/dev.jsonl --out DIR``). It scores
every answer once (``--scores``: kept in that file and read from it on the next run); those (μ, rating) pairs are
the *population*, and its Spearman ρ the estimand.

1. ``interval`` — the 95 % interval of ρ the pages show (Fisher z with a jackknife standard error over questions,
   ``modelling.services.orca_evaluation.rho_interval_clustered``) against the naive interval that takes the answers
   as independent pairs (Fisher z with the Bonett–Wright standard error, ``rho_interval``): for samples of 10, 25,
   50 and 100 questions (about 4 answers each: a benchmark's held-out test split is drawn by question, as the
   platform's split is), ``--replicates`` draws without replacement per size; coverage of the population ρ, mean
   width, and how often the routing gate (ρ ≥ 0.5, ``ORCA_ROUTING_MIN_RHO``) decides as it would on the whole
   population.
2. ``verdict`` — the activation verdict ("worse on this benchmark", ``compare_on_benchmark``: Δρ below
   −``ORCA_ACTIVATION_RHO_TOLERANCE`` and its 95 % cluster-bootstrap interval below 0) against the naive rule of
   the dev-ρ era ("the new ρ is lower"). *False refusals*: two equally good models — the model's μ plus two
   independent draws of Gaussian noise (σ 0.1) — swapped per question by a fair coin, so "new" and "active" are
   exchangeable and every "worse" is wrong. *Power*: "new" is the model's μ with Gaussian noise (σ 0.10 and 0.20:
   a genuinely worse model, its population ρ drop reported), "active" the model itself.

Prints ONE JSON object: ``{"population": {...}, "interval": {...}, "verdict": {...}, "wall_s", "load_avg"}``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

SIZES = (10, 25, 50, 100)
VERDICT_SIZES = (25, 50)
SCALE = {"0.0": 1, "0.5": 3, "1.0": 5}


def _log(msg: str, **kw) -> None:
    print(json.dumps({"msg": msg, **kw}), file=sys.stderr, flush=True)


def _items(path: Path):
    from modelling.orca import OrcaItem

    items, questions = [], []
    with path.open(newline="", encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            items.append(OrcaItem(id=str(i), question=row["question"], reference=row["reference"],
                                  candidate=row["response"], ratings=(SCALE[row["final_annotation"]],)))
            questions.append(f"{row['filename']}|{row['question']}")
    return items, np.unique(questions, return_inverse=True)[1]


def _score(folder: str, items, threads: int) -> np.ndarray:
    import torch

    from modelling.orca import load_orca, predict

    torch.set_num_threads(threads)
    model, tokenizer = load_orca(folder, "cpu")
    return np.asarray(predict(model, tokenizer, items, batch_size=32)["mu"], dtype=float)


def _sample(rng, members, k: int) -> np.ndarray:
    return np.concatenate([members[q] for q in rng.choice(len(members), size=k, replace=False)])


def _interval_part(mus: dict, y, questions, members, *, replicates: int, rng, threshold: float) -> dict:
    from scipy.stats import spearmanr

    from modelling.services.orca_evaluation import rho_interval, rho_interval_clustered

    out = {}
    for name, mu in mus.items():
        target = float(spearmanr(mu, y).statistic)
        rows = {}
        for k in SIZES:
            cover = cover_naive = agree = 0
            widths, widths_naive, sizes = [], [], []
            for _ in range(replicates):
                idx = _sample(rng, members, k)
                rho = float(spearmanr(mu[idx], y[idx]).statistic)
                n = idx.size
                lo, hi = rho_interval_clustered(mu[idx], y[idx], questions[idx], rho=rho)
                nlo, nhi = rho_interval(rho, n)
                cover += lo <= target <= hi
                cover_naive += nlo <= target <= nhi
                widths.append(hi - lo)
                widths_naive.append(nhi - nlo)
                sizes.append(n)
                agree += (rho >= threshold) == (target >= threshold)
            rows[str(k)] = {
                "answers_mean": round(float(np.mean(sizes)), 1),
                "coverage": round(cover / replicates, 3), "coverage_naive": round(cover_naive / replicates, 3),
                "width": round(float(np.mean(widths)), 3), "width_naive": round(float(np.mean(widths_naive)), 3),
                "gate_agrees_with_population": round(agree / replicates, 3),
            }
        out[name] = {"population_rho": round(target, 4), "by_questions": rows}
    return out


def _verdict_part(mu, y, questions, members, *, replicates: int, rng, tolerance: float) -> dict:
    from scipy.stats import spearmanr

    from modelling.services.orca_evaluation import compare_on_benchmark

    def run(pair, k) -> tuple[float, float]:
        """Rates of "worse" (ours) and of "new ρ lower" (naive) over replicates; ``pair()`` gives (new, old)."""
        worse = naive = 0
        for r in range(replicates):
            new, old = pair()
            idx = _sample(rng, members, k)
            c = compare_on_benchmark(mu_new=new[idx], mu_active=old[idx], human_mean=y[idx],
                                     questions=questions[idx], tolerance=tolerance, seed=r)
            worse += bool(c["worse"])
            naive += c["diff"] is not None and c["diff"] < 0
        return round(worse / replicates, 3), round(naive / replicates, 3)

    def exchanged():
        swap = (rng.random(len(members)) < 0.5)[questions]  # per question: which model plays "new"
        return np.where(swap, mu_b, mu_a), np.where(swap, mu_a, mu_b)

    out = {"false_refusals": {}, "power": {}}
    noise = np.random.default_rng(11)
    mu_a, mu_b = mu + noise.normal(0.0, 0.1, mu.size), mu + noise.normal(0.0, 0.1, mu.size)
    for k in VERDICT_SIZES:
        ours, naive = run(exchanged, k)
        out["false_refusals"][str(k)] = {"ours": ours, "naive_new_rho_lower": naive}
        _log("verdict null", questions=k, ours=ours, naive=naive)
    base = float(spearmanr(mu, y).statistic)
    for sigma in (0.10, 0.20):
        worse_mu = mu + np.random.default_rng(7).normal(0.0, sigma, mu.size)
        drop = base - float(spearmanr(worse_mu, y).statistic)
        for k in VERDICT_SIZES:
            ours, naive = run(lambda worse_mu=worse_mu: (worse_mu, mu), k)
            out["power"][f"noise_{sigma:.2f}_q{k}"] = {"population_rho_drop": round(drop, 4), "ours": ours,
                                                       "naive_new_rho_lower": naive}
            _log("verdict power", sigma=sigma, questions=k, ours=ours, naive=naive)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="A saved ORCA folder that never trained on --data.")
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "aqeval_val" / "val.csv"))
    p.add_argument("--replicates", type=int, default=400)
    p.add_argument("--verdict-replicates", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--scores", help="A .npy file keeping the model's μ per answer (written once, then read).")
    p.add_argument("--parts", default="interval,verdict", help="Which parts to run (comma-separated).")
    args = p.parse_args(argv)
    import django

    django.setup()
    from django.conf import settings
    from scipy.stats import spearmanr

    started = time.perf_counter()
    items, questions = _items(Path(args.data))
    y = np.asarray([(it.ratings[0] - 1) / 4 for it in items])
    members = [np.flatnonzero(questions == q) for q in range(questions.max() + 1)]
    if args.scores and Path(args.scores).exists():
        mus = {"model": np.load(args.scores)}
    else:
        mus = {"model": _score(args.model, items, args.threads)}
        if args.scores:
            np.save(args.scores, mus["model"])
    _log("scored", answers=len(items), questions=len(members), wall_s=round(time.perf_counter() - started, 1))
    rng = np.random.default_rng(args.seed)
    parts = set(args.parts.split(","))
    out = {"population": {"answers": len(items), "questions": len(members),
                          **{f"rho_{k}": round(float(spearmanr(v, y).statistic), 4) for k, v in mus.items()}}}
    if "interval" in parts:
        out["interval"] = _interval_part(mus, y, questions, members, replicates=args.replicates, rng=rng,
                                         threshold=settings.ORCA_ROUTING_MIN_RHO or 0.5)
    if "verdict" in parts:
        out["verdict"] = _verdict_part(mus["model"], y, questions, members, replicates=args.verdict_replicates,
                                       rng=rng, tolerance=settings.ORCA_ACTIVATION_RHO_TOLERANCE)
    out |= {"wall_s": round(time.perf_counter() - started, 1), "load_avg": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
