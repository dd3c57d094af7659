"""Leaderboard benchmark: synthetic benchmarks with a known truth, replayed through the platform's queue with a
look after every 1 % of the budget (``scenarios``, ``naive``), and the replays on real seed-108 ratings of every
interval and verdict the leaderboard shows (``policies``), plus the uniform replay of human-only, PPI++ and active
estimates.

Usage (from the repository root)::

    .venv/bin/python bench/leaderboard.py [--quick] [--only synthetic,many_lalms,raters,seed108] [--workers 2]
        [--synthetic-replays N] [--many-lalms-replays N] [--raters-replays N]
        [--data-dir ../shared/data/orca_seed108] [--predictions var/leaderboard-crossfit.json] [--replays 100]
        [--draws 200] [--budgets 0.1,0.2,0.3,0.5] [--annotators 5] [--folds 5] [--epochs 3] [--threads 2] [--seed 0]

Prints ONE JSON object on stdout (progress goes to stderr)::

    {"scenarios": {"synthetic": {"policies": {POLICY: {"fwer", "power": {"0.3": {"0.05", "0.1", "0.2"},
                                                                         "0.5": {...}},
                                                       "coverage_min", "planner_power", ...}}},
                   "many_lalms": {"decided_share_0.2", "fwer", ...}, "raters": {"coverage_min", ...}},
     "naive": {"fwer", "by_policy", "replays"},
     "policies": {POLICY: {"budgets": {"0.3": {"classical": {"coverage", "width", "tau", ...}, "ppi": {...},
                                                 "active": {...}}, ...},
                           "false_verdict_rate": x, "planner_power": y, ...}, ...},
     "small_n": {"3": c, "5": c, "10": c}, "orca_dev_rho": r, "budgets": {...the uniform replay...},
     "wall_s": s, "load_avg": l, ...}

Synthetic scenarios (``scenarios``; :mod:`bench.leaderboard_synthetic` is the generating model,
:mod:`bench.leaderboard_looks` the looks, :mod:`bench.leaderboard_figures` the figures). Each replay draws a fresh
benchmark from a superpopulation — per LALM a planted mean correctness, answers' latent correctness with question
difficulty shared across LALMs (skewed paired differences; two LALMs of equal mean but different kinds of wrong
answers: skewed mean-zero differences), 5 annotators with severity sd 0.2 rating points, k = 3, ORCA-like
predictions with Spearman ρ ≈ 0.7 to the human mean — so the **truth is the generating mean**, not the finite
sample's. Keys and active draws are question-level (every answer of a question shares its key and u). Simulated
annotators take turns at the platform's queue (:class:`modelling.leaderboard.replay.QueueReplay`, routing
re-deciding after every rating) and rate from the model; after every 1 % of the budget (every answer rated 3 times)
the leaderboard is built by the page's own code, ``modelling.leaderboard.services.leaderboard_build`` (rows,
intervals, verdicts), from ``LeaderboardData`` that carries each rating's annotator, time and design epoch
(``raters``, ``rated_at``, ``rating_epoch``, ``epochs``).

* ``synthetic``: 2,000 questions × 8 LALMs (means 0.45 + 0, 0, 0.02, 0.05, 0.10, 0.15, 0.20, 0.30), every policy,
  looks up to 50 % of the budget (leaderboard precision draws with budget 0.5);
* ``many_lalms``: 40 LALMs × 300 questions (means on a grid 0.30 … 0.70), default policy, looks up to the full
  budget;
* ``raters``: 300 questions × 2 LALMs (0.50, 0.55), default policy, looks up to the full budget.

Figures (per scenario, and per policy in ``synthetic``):

* ``fwer``: share of replays with a false verdict at any look — a verdict on a pair whose true means are equal,
  or of the wrong sign;
* ``power``: at the 30 % and 50 % looks, share of (replay, pair) with a true difference of 0.05, 0.10 or 0.20
  decided the right way;
* ``coverage_min``: coverage of every interval shown against the estimand the page states for it (each row's
  human-only and ORCA-assisted interval against the row's estimand: the mean over the LALM's answers in this
  benchmark of what the annotator pool would rate each; each verdict's interval of the difference a − b against
  the generating difference, the verdicts' superpopulation estimand), pooled over replays per interval kind
  (``row_human``, ``row_with_orca``, ``pair``) and window of 10 consecutive looks; the worst (kind, window).
  ``coverage_min_at`` names it and its number of intervals, ``coverage_min_look`` is the worst single look
  (noisier), ``coverage`` each kind over all looks. A replay's annotators shift all its rows alike, so the figure
  rests on about as many independent units as replays. ``coverage_rows_vs_generating_mean``: the rows' intervals
  against the generating mean T_m instead (not their estimand: beside, not in ``coverage_min``);
* ``coverage_min_poststratified``: the same worst window post-stratified on the replay's annotator pool (a pool whose
  severities' mean lies beyond the t quantile of its 5 annotators, probability 0.05, shifts every row of its replay
  at every look, so a 20-replay ``coverage_min`` swings with how many such pools it drew: ``extreme_replays`` of
  ``replays`` against ``extreme_expected``); an unbiased estimate of the same coverage with less Monte-Carlo
  variance, beside ``coverage_min``, not instead of it;
* ``planner_power`` (``synthetic``): at the 10, 20 and 30 % looks up to two undecided pairs with a true difference
  are planned by the platform's planner (``leaderboard_budget_plan``); the replay goes on to exactly the ratings
  the plan asks for (now + ``more_ratings``) and looks there: the share decided the right way. ``planner_plans``
  counts the plans realised, declined (no plan), unreachable and beyond the budget; ``planner_counted_ratio``
  compares the counted shared questions the plan's ratings brought with those it said it needed (median, share
  short, the realised power of plans delivered and short); ``planner_power_by_gap`` the realised power by the
  pair's true difference; ``planner_detail`` each plan (true difference, observed difference, counted questions
  then and at the look, the needed ones, the Holm level then and at the look, the anytime p at the look, the test);
* ``row_width``: the rows' mean interval width (``row_human``, ``row_with_orca``) at the 30 % and 50 % looks, what
  the design buys the rows (``--floor`` sets leaderboard precision's uniform floor, default the platform's);
* Monte-Carlo uncertainty beside them: ``fwer_upper95`` (one-sided 95 % Clopper–Pearson bound from the replays:
  0 false replays of 10 says only fwer ≤ 0.26), ``power_se``, ``coverage_min_se``, ``coverage_se`` and
  ``planner_power_se`` (standard errors with the replay as the cluster: a replay's annotators and questions are
  shared by all its rows, pairs and looks);
* ``decided_share_0.2`` (``many_lalms``): at the last look, share of pairs 0.2 apart decided the right way;
* ``naive.fwer``: the ``fwer`` of a paired t-test at p < 0.05 without multiplicity, applied at every look to the
  same shared questions on the same ``synthetic`` runs (all policies; ``by_policy`` per policy, ``naive_fwer``
  per scenario): it must come out far above 0.05 — the bench can see an error;
* ``replays``, ``looks_per_replay``, ``ratings_per_replay``, ``queue_dry_at`` (mean budget share where the queue
  had nothing left to rate: routing and leaderboard precision ask for less than the budget; the last board stands
  for the later looks), ``orca_rho`` (μ against the mean of 3 fresh ratings), ``wall_s_per_replay``, ``design``.

Replays: the full run does up to 40 per policy in ``synthetic``, 8 in ``many_lalms`` and 200 in ``raters`` on
``--workers`` processes: each scenario's (and policy's) first replay, then always a replay of the one that has used
the least time so far (cheap scenarios get many replays, costly ones few), starting none that would end after
``--minutes`` (36, or 31 with the seed-108 part), so the run fits 40 minutes whatever the speed of the verdict and
interval methods under test (as long as one replay of each does): ``replays`` reports how many ran. ``--quick`` does
1, 1 and 6 on smaller benchmarks with sparser looks (300 questions and a look every 5 % in ``synthetic``, 60
questions and looks at 50 and 100 % in ``many_lalms``, every 5 % in ``raters``) and skips the seed-108 part unless
its cross-fit cache exists.

Seed-108 replays (``policies``, ``small_n``, ``budgets``, …) follow.

Data. ``seed_108_train.json`` + ``seed_108_dev.json``: 2,192 rated answers of 15 LALMs to 1,200 questions (5,573
ratings, 1–5 per answer). An item's key is ``<question id>_<LALM tag>``. The human value of an answer is the mean
of its normalised ratings (r − 1)/4; an LALM's *full-data mean* (the estimand's value on this data) is the mean of
that over all its answers.

ORCA predictions are *cross-fitted*: the 1,200 questions are split into ``--folds`` folds (seeded shuffle); for each
fold an ORCA model is trained on the answers to the other folds' questions and predicts μ and σ² for this fold's
answers. The recipe is the CPU default model (MiniLM, Beta head, no rationale, max length 96, embeddings + 2
lowest layers frozen, lr 1e-4 / head 2e-3, σ² penalty 5, ``--epochs`` 3; bench/orca_experiments.md). Predictions
are cached in ``--predictions`` after every fold (a rerun resumes or, with all folds there, trains nothing;
``--only-folds`` trains some folds and stops). ``orca_dev_rho``: Spearman ρ of the cross-fitted μ against the human
mean over the 269 dev answers.

Queue replays (``policies``). For each routing policy of :mod:`modelling.leaderboard.replay` — ``default`` (routing
off), ``disagreement`` (routing by predicted disagreement, no model vote), ``model_vote`` (the platform's default
routing rules: the model as a rater) and ``leaderboard_precision`` (the fixed active design) — ``--replays``
replays: every question gets a fresh random key (and active draw u) shared by its answers (question-level keys),
every answer's real ratings a fresh random order, and ``--annotators`` simulated annotators take turns taking the
next answer exactly as the platform's queue serves it and rating it with its next real rating (skipping it when none
is left), routing re-deciding after every rating, until 10, 20, 30 and 50 % of the 5,573 ratings are given (the
leaderboard-precision policy draws with budget = that share and runs until its draw is rated or the share is spent).
The routing model's (μ, σ²) are the cross-fitted predictions; the audit share is the default 0.2. At each budget the
leaderboard is built by the platform's own code (``modelling.leaderboard.services.leaderboard_build``, the page's
rows and verdicts) from the replay's ratings, with the cross-fitted μ as ORCA.
``tests/modelling/test_leaderboard_replay.py`` checks on a scratch database that one replay through the real
assignment, rating and routing services serves the same sequence of candidate answers as the fast replay.

Per policy and budget, for each interval the page shows: ``classical`` = the human-only row figure (classical on a
uniform sample or the audit share; for leaderboard precision the active estimate without ORCA), ``ppi`` = PPI++
(uniform, routed), ``active`` = the active estimate with ORCA (leaderboard precision); null where the page does not
show that estimator under that policy. ``coverage``: share of (replay, LALM) pairs with an interval shown whose
interval contains the LALM's full-data mean; ``shown``: share of (replay, LALM) pairs with an interval; ``width``:
mean width of the intervals shown; ``width_ratio``: mean over (replay, LALM) pairs where both are shown of width ÷
the human-only width; ``tau``: mean Kendall τ-b between the estimates and the full-data means (LALMs with an
estimate); ``labels``: mean labelled answers per LALM. ``false_verdict_rate``: share of replays with at least one
verdict "A > B" at any budget where the full-data mean of A ≤ that of B; ``verdicts_per_replay`` and
``tested_pairs_per_replay`` per budget: how many pairs had a verdict, and how many had the 10 shared rated
questions a test needs (LALMs of seed-108 share at most 32 questions).

``planner_power``: at the largest budget (50 %) of each replay up to three pairs are drawn at random (among those
with 10 shared labelled questions when there are any, else those with 2) and planned (``leaderboard_budget_plan``:
80 % power at the pair's Holm level, allowing for the uncertainty of the observed difference); ``--studies``
studies of the planned number of questions are drawn with replacement from the questions both LALMs answered in the
data (their full-data answer means), and the share that reach the verdict in the true direction (sign-flip p <= the
level and the interval excluding 0) is the realised power. Pairs the planner declines (fewer than 10 shared rated
questions, or a difference too uncertain for 80 % at any size) and plans above 500 questions (beyond any benchmark
here) are counted in ``planner_pairs``, not simulated. ``planner_power_true_effect``: the same with the plan computed
from the pool's true difference and spread (the formula's own calibration); ``planner_power_if_exact``: with the
observed difference taken as exact (the plan without its uncertainty, for comparison). This study simulates the
sign-flip verdict and ``stats.budget_plan``; where those are gone (the anytime-valid verdicts) the three figures are
null with ``planner_note``, and the planner is measured by ``scenarios.synthetic`` (``planner_power``) instead.

``small_n``: coverage of the human-only interval (``classical_mean``) of a known mean on synthetic benchmarks of
3, 5 and 10 questions — six LALMs from 5 % to 95 % correct answers, three ratings per answer drawn from discrete
distributions piled at the ends of the scale (as tests/modelling/test_leaderboard_stats.py) — null where no
interval is shown (below ``LEADERBOARD_MIN_QUESTIONS``, 5); ``small_n_if_shown`` gives the coverage the interval
would have there.

Uniform replay (``budgets``, the earlier bench kept beside): for each budget and each of ``--draws`` draws, a
uniform sample without replacement of max(5, round(b · N_L)) answers of each LALM for ``classical`` and ``ppi``, and
an independent Poisson sample with π ∝ σ (the platform's default uniform floor) for ``active``; coverage, width, τ
and ratings used.
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
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

from bench.leaderboard_queue import log, queue_replays  # noqa: E402

#: Rating budgets of the replays: shares of all ratings.
BUDGETS = (0.1, 0.2, 0.3, 0.5)


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


def uniform_replay(*, y, mu, sigma, lalm, k, budgets, draws: int, seed: int) -> dict:
    """The uniform replay (module docstring): coverage, width and Kendall τ of the three estimators per budget."""
    from scipy.stats import kendalltau

    from modelling.leaderboard.stats import active_mean, classical_mean, inclusion_probabilities, ppi_mean

    names = sorted(set(lalm))
    groups = {name: np.flatnonzero(lalm == name) for name in names}
    truth = np.array([y[groups[n]].mean() for n in names])
    rng = np.random.default_rng(seed)
    out = {}
    for b in budgets:
        acc = {m: {"cover": [], "width": [], "tau": [], "n": []} for m in ("classical", "ppi", "active")}
        for _ in range(draws):
            est = {m: np.zeros(len(names)) for m in acc}
            used = {m: 0 for m in acc}
            for j, name in enumerate(names):
                idx = groups[name]
                n = max(5, int(round(b * idx.size)))
                labelled = np.zeros(idx.size, dtype=bool)
                labelled[rng.choice(idx.size, size=n, replace=False)] = True
                results = {"classical": classical_mean(y[idx][labelled]),
                           "ppi": ppi_mean(y=y[idx][labelled], yhat=mu[idx][labelled], yhat_all=mu[idx])}
                used["classical"] += int(k[idx][labelled].sum())
                used["ppi"] += int(k[idx][labelled].sum())
                pi = inclusion_probabilities(sigma[idx], budget=n)
                sampled = rng.random(idx.size) < pi
                while sampled.sum() < 5:  # an interval needs five labels; redraw (rare at these budgets)
                    sampled = rng.random(idx.size) < pi
                results["active"] = active_mean(y=y[idx], yhat=mu[idx], pi=pi, sampled=sampled)
                used["active"] += int(k[idx][sampled].sum())
                for m, r in results.items():
                    est[m][j] = r.estimate
                    acc[m]["cover"].append(r.ci[0] <= truth[j] <= r.ci[1])
                    acc[m]["width"].append(r.ci[1] - r.ci[0])
            for m in acc:
                acc[m]["tau"].append(kendalltau(est[m], truth).statistic)
                acc[m]["n"].append(used[m])
        out[f"{b:g}"] = {
            m: {"coverage": round(float(np.mean(s["cover"])), 4), "width": round(float(np.mean(s["width"])), 4),
                "tau": round(float(np.mean(s["tau"])), 4), "n_ratings": round(float(np.mean(s["n"])), 1)}
            for m, s in acc.items()
        }
        log("uniform budget", budget=b, result=out[f"{b:g}"])
    return out


def small_n(*, seed: int, draws: int = 2000) -> tuple[dict, dict]:
    """Coverage of ``classical_mean`` on synthetic benchmarks of 3, 5 and 10 questions (module docstring):
    ({n: coverage or None when not shown}, {n: coverage if it were shown})."""
    from modelling.leaderboard.stats import MIN_QUESTIONS, classical_mean

    good = np.array([0.02, 0.03, 0.10, 0.25, 0.60])
    bad = good[::-1]
    scale = np.arange(5) / 4
    rng = np.random.default_rng(seed)
    shown, if_shown = {}, {}
    for n in (3, 5, 10):
        hits = []
        for share in (0.05, 0.15, 0.35, 0.6, 0.85, 0.95):
            truth = share * float(good @ scale) + (1 - share) * float(bad @ scale)
            for _ in range(draws):
                correct = rng.random(n) < share
                ratings = np.where(correct[:, None], rng.choice(5, (n, 3), p=good), rng.choice(5, (n, 3), p=bad))
                result = classical_mean((ratings / 4).mean(axis=1), min_questions=2)
                hits.append(result.ci[0] <= truth <= result.ci[1])
        if_shown[str(n)] = round(float(np.mean(hits)), 4)
        shown[str(n)] = if_shown[str(n)] if n >= MIN_QUESTIONS else None
    return shown, if_shown


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="synthetic,many_lalms,raters,seed108",
                   help="comma-separated parts to run: synthetic, many_lalms, raters, seed108")
    p.add_argument("--quick", action="store_true", help="CI-sized run (a couple of minutes)")
    p.add_argument("--workers", type=int, default=2, help="processes for the synthetic replays")
    p.add_argument("--minutes", type=float, default=None,
                   help="stop starting synthetic replays that would end after this (default: 36, 31 with seed108; "
                        "--quick: none)")
    for name in ("synthetic", "many-lalms", "raters"):
        p.add_argument(f"--{name}-replays", type=int, default=0,
                       help=f"replays of {name} (per policy); 0: the default of the full run or --quick")
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "orca_seed108"))
    p.add_argument("--predictions", default=str(REPO / "var" / "leaderboard-crossfit.json"),
                   help="cache of the cross-fitted predictions (read when there, written fold by fold)")
    p.add_argument("--replays", type=int, default=0, help="seed-108 queue replays per policy (0: 100, --quick 3)")
    p.add_argument("--policies", default="default,disagreement,model_vote,leaderboard_precision",
                   help="policies of the seed-108 replay and of the synthetic scenario")
    p.add_argument("--floor", type=float, default=None,
                   help="the synthetic scenario's uniform floor under leaderboard precision (default: the platform's)")
    p.add_argument("--annotators", type=int, default=5)
    p.add_argument("--studies", type=int, default=10, help="simulated studies per planned pair")
    p.add_argument("--draws", type=int, default=0, help="draws per budget of the uniform replay (0: 200, --quick 20)")
    p.add_argument("--budgets", default=",".join(f"{b:g}" for b in BUDGETS))
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only-folds", help="train only these folds, in this order (e.g. 4,3), then stop")
    p.add_argument("--merge-predictions", action="append", default=[],
                   help="another cache file of the same recipe whose finished folds are taken over")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    only = set(args.only.split(","))
    unknown = only - {"synthetic", "many_lalms", "raters", "seed108"}
    if unknown:
        print(f"bench/leaderboard.py: --only takes synthetic, many_lalms, raters, seed108; got {sorted(unknown)}",
              file=sys.stderr)
        return 2
    t0 = time.perf_counter()

    import django

    django.setup()
    from bench.leaderboard_looks import scenarios_section

    result: dict = {}
    if only & {"synthetic", "many_lalms", "raters"}:
        result.update(scenarios_section(
            quick=args.quick, only=only, workers=args.workers, seed=args.seed, log=log,
            minutes=args.minutes if args.minutes is not None else None if args.quick else (
                31.0 if "seed108" in only else 36.0),
            replays={"synthetic": args.synthetic_replays, "many_lalms": args.many_lalms_replays,
                     "raters": args.raters_replays}, policies=tuple(args.policies.split(",")), floor=args.floor))
    if "seed108" in only:
        code = seed108(args, result)
        if code is not None:
            return code
    result.update({"wall_s": round(time.perf_counter() - t0, 1), "load_avg": round(os.getloadavg()[0], 2)})
    print(json.dumps(result))
    return 0


def seed108(args, result: dict) -> int | None:
    """The seed-108 part (module docstring) into ``result``; an exit code when it cannot run, else None."""
    from modelling.orca import load_items, spearman
    from modelling.orca.data import normalise_rating

    replays = args.replays or (3 if args.quick else 100)
    draws = args.draws or (20 if args.quick else 200)
    data = Path(args.data_dir)
    paths = [data / "seed_108_train.json", data / "seed_108_dev.json"]
    if args.quick and not (all(path.exists() for path in paths) and Path(args.predictions).exists()):
        result["policies"] = None  # --quick never trains ORCA
        result["seed108_note"] = (f"skipped: --quick needs the seed-108 data ({data}) and the cross-fit cache "
                                  f"({args.predictions}); a full run trains the cache")
        return None
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
    var = np.clip([preds[it.id]["var"] for it in items], 0.0, None)
    lalm = np.array([split_key(it.id)[1] for it in items])
    question = [split_key(it.id)[0] for it in items]
    k = np.array([len(it.ratings) for it in items])
    dev = slice(len(train_items), len(items))
    budgets = [float(b) for b in args.budgets.split(",")]
    result["policies"] = {}
    for policy in args.policies.split(","):
        log("policy", policy=policy)
        result["policies"][policy] = queue_replays(
            items=items, y=y, mu=mu, var=var, lalm=lalm, question=question, policy=policy, replays=replays,
            budgets=budgets, annotators=args.annotators, seed=args.seed, studies=args.studies)
        log("policy done", policy=policy, result=result["policies"][policy])
    result["small_n"], result["small_n_if_shown"] = small_n(seed=args.seed)
    result["budgets"] = uniform_replay(y=y, mu=mu, sigma=np.sqrt(var), lalm=lalm, k=k, budgets=budgets,
                                       draws=draws, seed=args.seed)
    result.update({
        "orca_dev_rho": round(spearman(mu[dev].tolist(), y[dev].tolist()), 4),
        "orca_rho_all": round(spearman(mu.tolist(), y.tolist()), 4),
        "n_answers": len(items),
        "n_ratings": int(k.sum()),
        "n_lalms": len(set(lalm)),
        "annotators": args.annotators,
        "crossfit": {"recipe": cache["recipe"], "fold_wall_s": cache["fold_wall_s"], "cache": args.predictions},
    })
    return None


if __name__ == "__main__":
    raise SystemExit(main())
