"""Leaderboard replays on real ratings: every interval and verdict the leaderboard shows, validated under the
platform's own queue order and routing policies, plus the uniform replay of human-only, PPI++ and active estimates.

Usage (from the repository root)::

    .venv/bin/python bench/leaderboard.py [--data-dir ../shared/data/orca_seed108]
        [--predictions var/leaderboard-crossfit.json] [--replays 100] [--draws 200] [--budgets 0.1,0.2,0.3,0.5]
        [--annotators 5] [--folds 5] [--epochs 3] [--threads 2] [--seed 0]

Prints ONE JSON object on stdout::

    {"policies": {POLICY: {"budgets": {"0.3": {"classical": {"coverage", "width", "tau", ...}, "ppi": {...},
                                                 "active": {...}}, ...},
                           "false_verdict_rate": x, "planner_power": y, ...}, ...},
     "small_n": {"3": c, "5": c, "10": c}, "orca_dev_rho": r, "budgets": {...the uniform replay...},
     "wall_s": s, "load_avg": l, ...}

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
replays: every answer gets a fresh random key (and active draw u), every answer's real ratings a fresh random
order, and ``--annotators`` simulated annotators take turns taking the next answer exactly as the platform's queue
serves it and rating it with its next real rating (skipping it when none is left), routing re-deciding after
every rating, until 10, 20, 30 and 50 % of the 5,573 ratings are given (the leaderboard-precision policy draws
with budget = that share and runs until its draw is rated or the share is spent). The routing model's (μ, σ²)
are the cross-fitted predictions; the audit share is the default 0.2. At each budget the leaderboard is built by
the platform's own code (``modelling.leaderboard.services.leaderboard_build``, the page's rows and verdicts) from
the replay's ratings, with the cross-fitted μ as ORCA. ``tests/modelling/test_leaderboard_replay.py`` checks on a
scratch database that one replay through the real assignment, rating and routing services serves the same
sequence of candidate answers as the fast replay.

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
observed difference taken as exact (the plan without its uncertainty, for comparison).

``small_n``: coverage of the human-only interval (``classical_mean``) of a known mean on synthetic benchmarks of
3, 5 and 10 questions — six LALMs from 5 % to 95 % correct answers, three ratings per answer drawn from discrete
distributions piled at the ends of the scale (as tests/modelling/test_leaderboard_stats.py) — null where no
interval is shown (below ``LEADERBOARD_MIN_QUESTIONS``, 5); ``small_n_if_shown`` gives the coverage the interval
would have there.

Uniform replay (``budgets``, the earlier bench kept beside): for each budget and each of ``--draws`` draws, a
uniform sample without replacement of max(5, round(b · N_L)) answers of each LALM for ``classical`` and ``ppi``, and
an independent Poisson sample with π ∝ σ (uniform floor 0.2) for ``active``; coverage, width, τ and ratings used.
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

#: Rating budgets of the replays: shares of all ratings.
BUDGETS = (0.1, 0.2, 0.3, 0.5)
#: Plans above this many shared questions are not simulated (no benchmark here has that many).
PLAN_CAP = 500


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


class _Accumulator:
    """Coverage, widths, τ and label counts of one interval kind at one budget."""

    def __init__(self):
        self.cover, self.width, self.ratio, self.tau, self.shown, self.labels = [], [], [], [], [], []

    def summary(self) -> dict | None:
        if not self.shown:
            return None
        return {
            "coverage": round(float(np.mean(self.cover)), 4) if self.cover else None,
            "shown": round(float(np.mean(self.shown)), 4),
            "width": round(float(np.mean(self.width)), 4) if self.width else None,
            "width_ratio": round(float(np.mean(self.ratio)), 4) if self.ratio else None,
            "tau": round(float(np.nanmean(self.tau)), 4) if self.tau else None,
            "labels": round(float(np.mean(self.labels)), 2),
        }


#: Which row figure each reported interval is, per policy: (human-only, with ORCA) → (key, key).
_FIGURES = {"default": ("classical", "ppi"), "disagreement": ("classical", "ppi"), "model_vote": ("classical", "ppi"),
            "leaderboard_precision": ("classical", "active")}


def _data(*, answers: dict, state, policy: str, audit_share: float, u=None):
    """The replay's state as the leaderboard's ``LeaderboardData`` (one benchmark, pk 1)."""
    from modelling.leaderboard.selectors import ACTIVE, ROUTED, UNIFORM, LeaderboardData

    data = LeaderboardData(answers=answers)
    data.scores = {i: list(r) for i, r in enumerate(state.ratings) if r}
    data.sampling = {1: {"default": UNIFORM, "leaderboard_precision": ACTIVE}.get(policy, ROUTED)}
    data.audit_share = {1: audit_share}
    if policy == "leaderboard_precision":
        data.design = {i: (float(state.pi[i]), float(u[i])) for i in range(len(answers))}
    return data


def _planner_power(*, board, rng, pool_values: dict, studies: int, pairs: int = 3) -> list[dict]:
    """Up to ``pairs`` randomly chosen plannable pairs of ``board`` (module docstring), preferring pairs with the
    verdict's minimum of shared rated questions: per pair {mode: ([success, ...], status)} for the three plans —
    ``assured`` (the planner's, from the observed differences and their uncertainty), ``if_exact`` (the observed
    difference taken as exact) and ``true_effect`` (the pool's true difference and spread); status is "planned",
    "declined" (no plan) or "unreachable" (above PLAN_CAP)."""


    names = [n for n, v in board.question_values.items() if v]
    candidates = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = set(board.question_values[a]) & set(board.question_values[b])
            pool = pool_values.get((a, b))
            if len(shared) >= 2 and pool is not None and len(pool) >= 2 and pool.mean() != 0:
                if np.mean([board.question_values[a][q] - board.question_values[b][q] for q in shared]) != 0:
                    candidates.append((a, b, pool))
    enough = [c for c in candidates if len(set(board.question_values[c[0]]) & set(board.question_values[c[1]]))
              >= board.config.min_shared]
    chosen = enough or candidates
    return [_plan_and_study(board=board, rng=rng, pair=chosen[i], studies=studies)
            for i in rng.permutation(len(chosen))[:pairs]]


def _plan_and_study(*, board, rng, pair, studies: int) -> dict:
    from scipy import stats as sps

    from modelling.leaderboard import stats
    from modelling.leaderboard.services import leaderboard_budget_plan

    a, b, pool = pair
    plan = leaderboard_budget_plan(board=board, a=a, b=b)
    truth = stats.budget_plan(diffs=pool, ratings_per_answer=plan.ratings_per_answer,
                              available_questions=plan.available_questions, level=plan.level,
                              min_shared=board.config.min_shared)
    direction = np.sign(pool.mean())
    out = {}
    for mode, n in (("assured", plan.needed_questions), ("if_exact", plan.needed_if_exact),
                    ("true_effect", truth.needed_if_exact)):
        if n is None:
            out[mode] = ([], "declined")
            continue
        if n > PLAN_CAP:
            out[mode] = ([], "unreachable")
            continue
        hits = []
        for _ in range(studies):
            d = rng.choice(pool, size=n, replace=True)
            p = stats.sign_flip_test(d, n_flips=board.config.sign_flips, seed=int(rng.integers(2**31)))
            centre, se, df = stats.adjusted_t_parts(d, low=-1.0, high=1.0)
            half = float(sps.t.ppf(0.975, df)) * se
            excludes = (centre - half > 0) if direction > 0 else (centre + half < 0)
            hits.append(bool(p <= plan.level and excludes))
        out[mode] = (hits, "planned")
    return out


def queue_replays(*, items, y, mu, var, lalm, question, policy: str, replays: int, budgets, annotators: int,
                  seed: int, studies: int) -> dict:
    """The queue replays of one policy (module docstring)."""
    from scipy.stats import kendalltau

    from modelling.leaderboard.replay import POLICIES, QueueReplay
    from modelling.leaderboard.services import LeaderboardConfig, PredictionSet, leaderboard_build
    from modelling.services.routing_policy import RoutingRules

    names = sorted(set(lalm))
    truth = {n: float(np.mean(y[lalm == n])) for n in names}
    total = int(sum(len(it.ratings) for it in items))
    config = LeaderboardConfig()
    preds = PredictionSet("crossfit", "crossfit", {i: float(m) for i, m in enumerate(mu)},
                          {i: float(v) for i, v in enumerate(var)}, ppi_allowed=True)
    rules = RoutingRules()
    answers = {i: {"lalm": lalm[i], "question": question[i], "benchmark": "seed-108", "benchmark_id": 1,
                   "modality": "", "category": "", "words": 0, "key": 0.0} for i in range(len(items))}
    by_question: dict[str, dict] = {}
    for i in range(len(items)):
        by_question.setdefault(question[i], {})[lalm[i]] = y[i]
    pool_values = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            diffs = [v[a] - v[b] for v in by_question.values() if a in v and b in v]
            pool_values[(a, b)] = np.array(diffs) if diffs else None
    acc = {f"{b:g}": {"classical": _Accumulator(), "ppi": _Accumulator(), "active": _Accumulator()}
           for b in budgets}
    false_any = []
    planner = {mode: {"hits": [], "planned": 0, "declined": 0, "unreachable": 0}
               for mode in ("assured", "if_exact", "true_effect")}
    human_key, orca_key = _FIGURES[policy]
    policy_index = POLICIES.index(policy)

    def record(budget: float, board, replay_false: list, rng) -> None:
        slot = acc[f"{budget:g}"]
        rows = {r.lalm: r for r in board.rows}
        for key, attr in ((human_key, "human"), (orca_key, "with_orca")):
            estimates = {}
            for name in names:
                row = rows.get(name)
                e = None if row is None else getattr(row, attr)
                human = None if row is None else row.human
                slot[key].labels.append(0 if row is None else row.labels)
                shown = e is not None and e.ci is not None
                slot[key].shown.append(shown)
                if e is not None:
                    estimates[name] = e.estimate
                if shown:
                    slot[key].cover.append(e.ci[0] <= truth[name] <= e.ci[1])
                    slot[key].width.append(e.ci[1] - e.ci[0])
                    if human is not None and human.ci is not None and human.width > 0:
                        slot[key].ratio.append(e.width / human.width)
            if len(estimates) >= 3:
                slot[key].tau.append(kendalltau([estimates[n] for n in estimates],
                                                [truth[n] for n in estimates]).statistic)
        slot["verdicts"] = slot.get("verdicts", 0) + sum(p.verdict != "undecided" for p in board.pairwise)
        slot["tested"] = slot.get("tested", 0) + sum(p.p_value is not None for p in board.pairwise)
        for p in board.pairwise:
            if (p.verdict == "a>b" and truth[p.a] <= truth[p.b]) or (p.verdict == "b>a" and truth[p.b] <= truth[p.a]):
                replay_false.append((budget, p.a, p.b))
        if abs(budget - max(budgets)) < 1e-9:  # where pairs share enough rated questions to plan on
            for result in _planner_power(board=board, rng=rng, pool_values=pool_values, studies=studies):
                for mode, (hits, status) in result.items():
                    planner[mode]["hits"].extend(hits)
                    planner[mode][status] += 1

    def one(keys, u, orders, rng) -> bool:
        """One replay; True when it produced a false verdict at some budget."""
        for i in range(len(items)):
            answers[i]["key"] = float(keys[i])
        replay_false: list = []

        def make(budget_share: float = 0.3):
            return QueueReplay(keys=keys, lalm=lalm, ratings=[list(o) for o in orders], mu=mu, variance=var,
                               policy=policy, annotators=annotators, rules=rules, budget=budget_share, u=u)

        def snapshot(budget: float, state) -> None:
            data = _data(answers=answers, state=state, policy=policy, audit_share=0.2, u=u)
            record(budget, leaderboard_build(data=data, preds=preds, config=config), replay_false, rng)

        if policy == "leaderboard_precision":
            for b in budgets:
                snapshot(b, make(b).run(ratings=int(round(b * total))))
        else:
            marks = {int(round(b * total)): b for b in budgets}
            make().run(ratings=max(marks), snapshots=list(marks),
                       on_snapshot=lambda n, state: snapshot(marks[n], state))
        return bool(replay_false)

    t0 = time.perf_counter()
    for r in range(replays):
        rng = np.random.default_rng([seed, policy_index, r])
        q_index = np.unique(np.asarray(question), return_inverse=True)[1]  # one key and one u per question
        keys, u = rng.random(q_index.max() + 1)[q_index], rng.random(q_index.max() + 1)[q_index]
        false_any.append(one(keys, u, [list(rng.permutation(it.ratings)) for it in items], rng))
        if (r + 1) % 10 == 0:
            log("replays", policy=policy, done=r + 1, false_so_far=int(sum(false_any)),
                wall_s=round(time.perf_counter() - t0, 1))
    return {
        "budgets": {b: {k: a.summary() for k, a in kinds.items() if isinstance(a, _Accumulator)}
                    for b, kinds in acc.items()},
        "verdicts_per_replay": {b: round(kinds.get("verdicts", 0) / replays, 3) for b, kinds in acc.items()},
        "tested_pairs_per_replay": {b: round(kinds.get("tested", 0) / replays, 3) for b, kinds in acc.items()},
        "false_verdict_rate": round(float(np.mean(false_any)), 4),
        "planner_power": _share(planner["assured"]["hits"]),
        "planner_power_true_effect": _share(planner["true_effect"]["hits"]),
        "planner_power_if_exact": _share(planner["if_exact"]["hits"]),
        "planner_pairs": {mode: {k: (len(v) if k == "hits" else v) for k, v in counts.items()}
                          for mode, counts in planner.items()},
        "replays": replays,
    }


def _share(hits: list) -> float | None:
    return round(float(np.mean(hits)), 4) if hits else None


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data" / "orca_seed108"))
    p.add_argument("--predictions", default=str(REPO / "var" / "leaderboard-crossfit.json"),
                   help="cache of the cross-fitted predictions (read when there, written fold by fold)")
    p.add_argument("--replays", type=int, default=100, help="queue replays per policy")
    p.add_argument("--policies", default="default,disagreement,model_vote,leaderboard_precision")
    p.add_argument("--annotators", type=int, default=5)
    p.add_argument("--studies", type=int, default=10, help="simulated studies per planned pair")
    p.add_argument("--draws", type=int, default=200, help="draws per budget of the uniform replay")
    p.add_argument("--budgets", default=",".join(f"{b:g}" for b in BUDGETS))
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only-folds", help="train only these folds, in this order (e.g. 4,3), then stop")
    p.add_argument("--merge-predictions", action="append", default=[],
                   help="another cache file of the same recipe whose finished folds are taken over")
    args = p.parse_args(argv)
    t0 = time.perf_counter()

    import django

    django.setup()
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
    var = np.clip([preds[it.id]["var"] for it in items], 0.0, None)
    lalm = np.array([split_key(it.id)[1] for it in items])
    question = [split_key(it.id)[0] for it in items]
    k = np.array([len(it.ratings) for it in items])
    dev = slice(len(train_items), len(items))
    budgets = [float(b) for b in args.budgets.split(",")]
    result = {"policies": {}}
    for policy in args.policies.split(","):
        log("policy", policy=policy)
        result["policies"][policy] = queue_replays(
            items=items, y=y, mu=mu, var=var, lalm=lalm, question=question, policy=policy, replays=args.replays,
            budgets=budgets, annotators=args.annotators, seed=args.seed, studies=args.studies)
        log("policy done", policy=policy, result=result["policies"][policy])
    result["small_n"], result["small_n_if_shown"] = small_n(seed=args.seed)
    result["budgets"] = uniform_replay(y=y, mu=mu, sigma=np.sqrt(var), lalm=lalm, k=k, budgets=budgets,
                                       draws=args.draws, seed=args.seed)
    result.update({
        "orca_dev_rho": round(spearman(mu[dev].tolist(), y[dev].tolist()), 4),
        "orca_rho_all": round(spearman(mu.tolist(), y.tolist()), 4),
        "n_answers": len(items),
        "n_ratings": int(k.sum()),
        "n_lalms": len(set(lalm)),
        "annotators": args.annotators,
        "crossfit": {"recipe": cache["recipe"], "fold_wall_s": cache["fold_wall_s"], "cache": args.predictions},
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_avg": round(os.getloadavg()[0], 2),
    })
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
