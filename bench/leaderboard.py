"""Leaderboard replay on real ratings: human-only, prediction-powered and active estimates of each LALM's mean.

Usage (from the repository root)::

    .venv/bin/python bench/leaderboard.py [--data-dir ../shared/data/orca_seed108]
        [--predictions /tmp/orca-leaderboard-crossfit.json] [--draws 200] [--budgets 0.1,0.2,0.3,0.5]
        [--folds 5] [--epochs 3] [--threads 2] [--seed 0]

Prints ONE JSON object on stdout::

    {"budgets": {"0.1": {"classical": {"coverage", "width", "tau"}, "ppi": {...}, "active": {...}}, ...},
     "orca_dev_rho", "wall_s", ...extra keys: savings, n_answers, n_lalms, crossfit, ...}

Data. ``seed_108_train.json`` + ``seed_108_dev.json``: 2,192 rated answers of 15 LALMs to 1,200 questions. An
item's key is ``<question id>_<LALM tag>`` (tags ``M1_0`` … ``M2_7``). The human value of an answer is the mean of
its normalised ratings (r − 1)/4; an LALM's *full-data mean* (the estimand's value on this data) is the mean of
that over all its answers.

ORCA predictions are *cross-fitted*: the 1,200 questions are split into ``--folds`` folds (seeded shuffle); for
each fold an ORCA model is trained on the answers to the other folds' questions and predicts μ and σ² for this
fold's answers, so no answer is predicted by a model that saw it (or any answer to its question). The recipe is the
fastest CPU recipe of ``bench/orca.py`` (bench/orca_experiments.md): MiniLM, Beta head, no rationale, max length
96, embeddings + 2 lowest layers frozen and cached, lr 1e-4 / head 2e-3, σ² penalty 5, ``--epochs`` epochs (3 by
default, half the CPU time of bench/orca.py's 6: five folds of 6 epochs do not fit a shared 2-core machine's hour;
bench/orca_experiments.md reached ρ ≈ 0.70 at epoch 3); no dev set per fold (the last epoch is kept, no clamp).
Predictions are cached in ``--predictions`` after every fold (a rerun resumes or, with all folds there, trains
nothing). ``orca_dev_rho`` is the Spearman ρ of the cross-fitted μ against the human mean over the 269 answers of
``seed_108_dev.json`` (``orca_rho_all``: over all 2,192).

Replay. For each budget b (share of the rated answers that humans rate) and each of ``--draws`` draws, per method:

* ``classical`` — a uniform sample without replacement of max(3, round(b · N_L)) answers of each LALM L; the
  human-only mean with its 95 % CI (``modelling.leaderboard.stats.mean_ci``: Student t, the small-sample interval
  the leaderboard reports beside the cluster bootstrap);
* ``ppi`` — the same sample plus ORCA's μ on all N_L answers: PPI++ (``ppi_py``'s estimate) with its interval for
  the mean over the N_L answers (``modelling.leaderboard.stats.ppi_mean``: λ the regression coefficient, t with
  n − 2 df, no term for the predictions' known mean; no finite-population correction for any method);
* ``active`` — Poisson sampling with inclusion probabilities ∝ ORCA's σ mixed with a uniform floor, scaled to the
  same expected budget (``modelling.leaderboard.stats.inclusion_probabilities``), and the inverse-probability-
  weighted prediction-powered estimate (``modelling.leaderboard.stats.active_mean``; Zrnic & Candès 2024).

Reported per budget and method: ``coverage`` = share of (draw, LALM) pairs whose CI contains the LALM's full-data
mean; ``width`` = mean CI width (normalised scale); ``tau`` = mean over draws of Kendall's τ-b between the
estimated and the full-data ranking of the 15 LALMs; ``n_ratings`` = mean human ratings used per draw.
``savings`` per budget: the share of human ratings a human-only study saves at equal precision, 1 − (width_m /
width_classical)² (a CI's width scales as 1/√n).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def log(msg: str, **kw) -> None:
    print(json.dumps({"msg": msg, **kw}, default=float), file=sys.stderr, flush=True)


def split_key(key: str) -> tuple[str, str]:
    """``<question id>_<LALM tag>`` → (question id, LALM tag); the tag is the last two ``_`` parts (``M2_7``)."""
    parts = key.rsplit("_", 2)
    if len(parts) != 3:
        raise ValueError(f"item id {key!r} is not <question>_<LALM tag>")
    return parts[0], f"{parts[1]}_{parts[2]}"


def question_folds(questions: list[str], folds: int, seed: int) -> dict[str, int]:
    """Fold number 0..folds-1 of each question: a seeded shuffle of the sorted question ids, dealt round-robin."""
    order = sorted(set(questions))
    rng = np.random.default_rng(seed)
    rng.shuffle(order)
    return {q: i % folds for i, q in enumerate(order)}


def _save(path: Path, cache: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    tmp.write_text(json.dumps(cache))
    tmp.replace(path)


def crossfit(items, *, path: Path, folds: int, epochs: int, threads: int, seed: int,
             only: list[int] | None = None, merge: list[Path] = ()) -> dict[str, dict]:
    """Cross-fitted ORCA predictions {item id: {mu, var, fold}}, resumed from and saved to ``path`` per fold.

    ``only``: train just these folds, in this order (several processes can share a cross-fit, each with its own
    cache file); ``merge``: cache files of the same recipe whose finished folds are taken over first.
    """
    recipe = {"base_model": "minilm", "head": "beta", "max_length": 96, "rationale": False, "freeze_layers": 2,
              "lr": 1e-4, "head_lr": 2e-3, "var_weight": 5.0, "batch_size": 16, "epochs": epochs, "folds": folds,
              "seed": seed}
    cache = {"recipe": recipe, "folds_done": [], "predictions": {}, "fold_wall_s": {}}
    if path.exists():
        cache = json.loads(path.read_text())
        if cache.get("recipe") != recipe:
            raise SystemExit(f"bench/leaderboard.py: {path} holds predictions of another recipe "
                             f"({cache.get('recipe')}); pass another --predictions file")
    for other in merge:
        extra = json.loads(Path(other).read_text())
        if extra.get("recipe") != recipe:
            raise SystemExit(f"bench/leaderboard.py: {other} holds predictions of another recipe")
        for k in extra["folds_done"]:
            if k not in cache["folds_done"]:
                cache["folds_done"].append(k)
                cache["fold_wall_s"][str(k)] = extra["fold_wall_s"][str(k)]
                cache["predictions"].update({i: p for i, p in extra["predictions"].items() if p["fold"] == k})
        _save(path, cache)
    fold_of = question_folds([split_key(it.id)[0] for it in items], folds, seed)
    todo = [k for k in (only if only is not None else range(folds)) if k not in cache["folds_done"]]
    if todo:
        import torch

        from modelling.orca import OrcaConfig, TrainConfig, predict, train

        torch.set_num_threads(threads)
        for k in todo:
            fit = [it for it in items if fold_of[split_key(it.id)[0]] != k]
            held = [it for it in items if fold_of[split_key(it.id)[0]] == k]
            log("fold", fold=k, fit=len(fit), held=len(held))
            t0 = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="orca-lb-fold-") as tmp:
                result = train(
                    fit, None, tmp,
                    OrcaConfig(base_model="minilm", head="beta", pooling="auto", max_length=96, rationale=False),
                    TrainConfig(epochs=epochs, lr=1e-4, head_lr=2e-3, freeze_layers=2, batch_size=16,
                                var_weight=5.0, seed=seed, threads=threads),
                    callback=lambda e: log("train", **{x: e[x] for x in ("event", "epoch", "loss", "elapsed_s")
                                                       if x in e}) if e.get("event") != "step" else None,
                )
                pred = predict(result["model"], result["tokenizer"], held, batch_size=32)
            for i, it in enumerate(held):
                cache["predictions"][it.id] = {"mu": pred["mu"][i], "var": pred["var"][i], "fold": k}
            cache["folds_done"].append(k)
            cache["fold_wall_s"][str(k)] = round(time.perf_counter() - t0, 1)
            _save(path, cache)
            log("fold done", fold=k, wall_s=cache["fold_wall_s"][str(k)])
    missing = [it.id for it in items if it.id not in cache["predictions"]]
    if missing and only is None:
        raise SystemExit(f"bench/leaderboard.py: {path} lacks predictions for {len(missing)} items, e.g. {missing[:3]}")
    return cache


def replay(*, y, mu, sigma, lalm, k, budgets, draws: int, seed: int) -> dict:
    """Coverage, width and Kendall τ of the three methods per budget (module docstring)."""
    from scipy.stats import kendalltau

    from modelling.leaderboard.stats import (
        active_mean,
        inclusion_probabilities,
        mean_ci,
        ppi_mean,
    )

    names = sorted(set(lalm))
    groups = {name: np.flatnonzero(lalm == name) for name in names}
    truth = np.array([y[groups[n]].mean() for n in names])
    rng = np.random.default_rng(seed)
    out = {}
    for b in budgets:
        stats = {m: {"cover": [], "width": [], "tau": [], "n": []} for m in ("classical", "ppi", "active")}
        for _ in range(draws):
            est = {m: np.zeros(len(names)) for m in stats}
            used = {m: 0 for m in stats}
            for j, name in enumerate(names):
                idx = groups[name]
                n = max(3, int(round(b * idx.size)))
                pick = rng.choice(idx.size, size=n, replace=False)
                labelled = np.zeros(idx.size, dtype=bool)
                labelled[pick] = True
                results = {
                    "classical": mean_ci(y[idx][labelled]),
                    "ppi": ppi_mean(y=y[idx][labelled], yhat=mu[idx][labelled], yhat_all=mu[idx]),
                }
                used["classical"] += int(k[idx][labelled].sum())
                used["ppi"] += int(k[idx][labelled].sum())
                pi = inclusion_probabilities(sigma[idx], budget=n)
                sampled = rng.random(idx.size) < pi
                while sampled.sum() < 3:  # the estimator needs three labels; redraw (rare at these budgets)
                    sampled = rng.random(idx.size) < pi
                results["active"] = active_mean(y=y[idx], yhat=mu[idx], pi=pi, sampled=sampled)
                used["active"] += int(k[idx][sampled].sum())
                for m, r in results.items():
                    est[m][j] = r.estimate
                    stats[m]["cover"].append(r.ci[0] <= truth[j] <= r.ci[1])
                    stats[m]["width"].append(r.ci[1] - r.ci[0])
            for m in stats:
                stats[m]["tau"].append(kendalltau(est[m], truth).statistic)
                stats[m]["n"].append(used[m])
        out[f"{b:g}"] = {
            m: {"coverage": round(float(np.mean(s["cover"])), 4), "width": round(float(np.mean(s["width"])), 4),
                "tau": round(float(np.mean(s["tau"])), 4), "n_ratings": round(float(np.mean(s["n"])), 1)}
            for m, s in stats.items()
        }
        log("budget", budget=b, result=out[f"{b:g}"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "orca_seed108"))
    p.add_argument("--predictions", default="/tmp/orca-leaderboard-crossfit.json",
                   help="cache of the cross-fitted predictions (read when there, written fold by fold)")
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--budgets", default="0.1,0.2,0.3,0.5")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only-folds", help="train only these folds, in this order (e.g. 4,3), then stop")
    p.add_argument("--merge-predictions", action="append", default=[],
                   help="another cache file of the same recipe whose finished folds are taken over")
    args = p.parse_args(argv)
    t0 = time.perf_counter()

    from modelling.orca import load_items, spearman
    from modelling.orca.data import normalise_rating

    data = Path(args.data_dir)
    paths = [data / "seed_108_train.json", data / "seed_108_dev.json"]
    if not all(path.exists() for path in paths):
        print(f"bench/leaderboard.py: seed-108 data not found under {data.resolve()}", file=sys.stderr)
        return 2
    train_items, dev_items = (load_items(path) for path in paths)
    items = train_items + dev_items
    only = [int(k) for k in args.only_folds.split(",")] if args.only_folds else None
    cache = crossfit(items, path=Path(args.predictions), folds=args.folds, epochs=args.epochs,
                     threads=args.threads, seed=args.seed, only=only, merge=args.merge_predictions)
    if only is not None:
        log("folds trained", folds_done=cache["folds_done"], cache=args.predictions)
        return 0
    preds = cache["predictions"]
    y = np.array([np.mean([normalise_rating(r) for r in it.ratings]) for it in items])
    mu = np.array([preds[it.id]["mu"] for it in items])
    sigma = np.sqrt(np.clip([preds[it.id]["var"] for it in items], 0.0, None))
    lalm = np.array([split_key(it.id)[1] for it in items])
    k = np.array([len(it.ratings) for it in items])
    dev = slice(len(train_items), len(items))
    budgets = [float(b) for b in args.budgets.split(",")]
    result = {"budgets": replay(y=y, mu=mu, sigma=sigma, lalm=lalm, k=k, budgets=budgets, draws=args.draws,
                                seed=args.seed)}
    savings = {}
    for b, methods in result["budgets"].items():
        base = methods["classical"]["width"]
        savings[b] = {m: round(1.0 - (methods[m]["width"] / base) ** 2, 4) for m in ("ppi", "active")}
        savings[b].update({f"{m}_width_ratio": round(methods[m]["width"] / base, 4) for m in ("ppi", "active")})
    per_lalm_r = {name: round(float(np.corrcoef(mu[lalm == name], y[lalm == name])[0, 1]), 3)
                  for name in sorted(set(lalm))}
    result.update({
        "orca_dev_rho": round(spearman(mu[dev].tolist(), y[dev].tolist()), 4),
        "orca_rho_all": round(spearman(mu.tolist(), y.tolist()), 4),
        "orca_pearson_r_by_lalm": per_lalm_r,
        "savings": savings,
        "n_answers": len(items),
        "n_ratings": int(sum(len(it.ratings) for it in items)),
        "n_lalms": len(set(lalm)),
        "draws": args.draws,
        "crossfit": {"recipe": cache["recipe"], "fold_wall_s": cache["fold_wall_s"], "cache": args.predictions},
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_avg": os.getloadavg()[0],
    })
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
