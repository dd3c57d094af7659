"""The seed-108 queue replays of ``bench/leaderboard.py`` (its docstring, "Queue replays", documents every
figure): each routing policy of :mod:`modelling.leaderboard.replay` replayed on the real ratings with question-level
keys and draws, the leaderboard built by the page's own code at each budget."""
from __future__ import annotations

import json
import sys
import time

import numpy as np

#: Plans above this many shared questions are not simulated (no benchmark here has that many).
PLAN_CAP = 500


def log(msg: str, **kw) -> None:
    print(json.dumps({"msg": msg, **kw}, default=float), file=sys.stderr, flush=True)




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
    """The replay's state as the leaderboard's ``LeaderboardData`` (one benchmark, pk 1), with each rating's
    simulated annotator, a made-up time (30 s per rating, in serving order) and one design epoch (OWNERS.md
    interface 2)."""
    from modelling.leaderboard.selectors import ACTIVE, ROUTED, UNIFORM, LeaderboardData

    data = LeaderboardData(answers=answers)
    data.scores = {i: list(r) for i, r in enumerate(state.ratings) if r}
    kind = {"default": UNIFORM, "leaderboard_precision": ACTIVE}.get(policy, ROUTED)
    data.sampling = {1: kind}
    data.audit_share = {1: audit_share}
    if policy == "leaderboard_precision":
        data.design = {i: (float(state.pi[i]), float(u[i])) for i in range(len(answers))}
    data.raters, data.rated_at = {i: [] for i in data.scores}, {i: [] for i in data.scores}
    step = 0
    for i, a, what in state.served:
        if what == "rate":
            step += 1
            data.raters[i].append(int(a))
            data.rated_at[i].append(1_750_000_000.0 + 30.0 * step)
    data.rating_epoch = {i: [1] * len(r) for i, r in data.scores.items()}
    data.epochs = {1: [{"number": 1, "policy": kind, "audit_share": audit_share if kind == ROUTED else None,
                        "started": "2025-06-15T00:00:00+00:00", "reason": "the replay's one design"}]}
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


class _PolicyReplays:
    """The queue replays of one policy (module docstring): set-up, one replay, the record of one look, the
    summary."""

    def __init__(self, *, items, y, mu, var, lalm, question, policy: str, budgets, annotators: int, studies: int):
        from modelling.leaderboard.services import LeaderboardConfig, PredictionSet
        from modelling.services.routing_policy import RoutingRules

        self.items, self.mu, self.var, self.lalm, self.question = items, mu, var, lalm, question
        self.policy, self.budgets, self.annotators, self.studies = policy, budgets, annotators, studies
        self.names = sorted(set(lalm))
        self.truth = {n: float(np.mean(y[lalm == n])) for n in self.names}
        self.total = int(sum(len(it.ratings) for it in items))
        self.config = LeaderboardConfig()
        self.preds = PredictionSet("crossfit", "crossfit", {i: float(m) for i, m in enumerate(mu)},
                                   {i: float(v) for i, v in enumerate(var)}, ppi_allowed=True)
        self.rules = RoutingRules()
        self.answers = {i: {"lalm": lalm[i], "question": question[i], "benchmark": "seed-108", "benchmark_id": 1,
                            "modality": "", "category": "", "words": 0, "key": 0.0} for i in range(len(items))}
        by_question: dict[str, dict] = {}
        for i in range(len(items)):
            by_question.setdefault(question[i], {})[lalm[i]] = y[i]
        self.pool_values = {}
        for i, a in enumerate(self.names):
            for b in self.names[i + 1:]:
                diffs = [v[a] - v[b] for v in by_question.values() if a in v and b in v]
                self.pool_values[(a, b)] = np.array(diffs) if diffs else None
        self.acc = {f"{b:g}": {"classical": _Accumulator(), "ppi": _Accumulator(), "active": _Accumulator()}
                    for b in budgets}
        self.planner = {mode: {"hits": [], "planned": 0, "declined": 0, "unreachable": 0}
                        for mode in ("assured", "if_exact", "true_effect")}
        self.planner_note = ""
        self.figures = _FIGURES[policy]

    def _record_rows(self, slot: dict, board) -> None:
        from scipy.stats import kendalltau

        rows = {r.lalm: r for r in board.rows}
        for key, attr in zip(self.figures, ("human", "with_orca")):
            estimates = {}
            for name in self.names:
                row = rows.get(name)
                e = None if row is None else getattr(row, attr)
                human = None if row is None else row.human
                slot[key].labels.append(0 if row is None else row.labels)
                shown = e is not None and e.ci is not None
                slot[key].shown.append(shown)
                if e is not None:
                    estimates[name] = e.estimate
                if shown:
                    slot[key].cover.append(e.ci[0] <= self.truth[name] <= e.ci[1])
                    slot[key].width.append(e.ci[1] - e.ci[0])
                    if human is not None and human.ci is not None and human.width > 0:
                        slot[key].ratio.append(e.width / human.width)
            if len(estimates) >= 3:
                slot[key].tau.append(kendalltau([estimates[n] for n in estimates],
                                                [self.truth[n] for n in estimates]).statistic)

    def record(self, budget: float, board, replay_false: list, rng) -> None:
        """Score the board of one look at ``budget`` (a share of all ratings)."""
        slot = self.acc[f"{budget:g}"]
        self._record_rows(slot, board)
        slot["verdicts"] = slot.get("verdicts", 0) + sum(p.verdict != "undecided" for p in board.pairwise)
        slot["tested"] = slot.get("tested", 0) + sum(p.n_questions >= self.config.min_shared
                                                     for p in board.pairwise)
        truth = self.truth
        for p in board.pairwise:
            if (p.verdict == "a>b" and truth[p.a] <= truth[p.b]) or (p.verdict == "b>a" and truth[p.b] <= truth[p.a]):
                replay_false.append((budget, p.a, p.b))
        if abs(budget - max(self.budgets)) < 1e-9:  # where pairs share enough rated questions to plan on
            try:
                results = _planner_power(board=board, rng=rng, pool_values=self.pool_values, studies=self.studies)
            except (AttributeError, ImportError, TypeError) as exc:  # the planner's helpers were reworked
                self.planner_note = f"the old planner study does not apply to the planner on this branch ({exc})"
                results = []
            for result in results:
                for mode, (hits, status) in result.items():
                    self.planner[mode]["hits"].extend(hits)
                    self.planner[mode][status] += 1

    def one(self, keys, u, orders, rng) -> bool:
        """One replay; True when it produced a false verdict at some budget."""
        from modelling.leaderboard.replay import QueueReplay
        from modelling.leaderboard.services import leaderboard_build

        for i in range(len(self.items)):
            self.answers[i]["key"] = float(keys[i])
        replay_false: list = []

        def make(budget_share: float = 0.3):
            return QueueReplay(keys=keys, lalm=self.lalm, ratings=[list(o) for o in orders], mu=self.mu,
                               variance=self.var, policy=self.policy, annotators=self.annotators, rules=self.rules,
                               budget=budget_share, u=u)

        def snapshot(budget: float, state) -> None:
            data = _data(answers=self.answers, state=state, policy=self.policy, audit_share=0.2, u=u)
            self.record(budget, leaderboard_build(data=data, preds=self.preds, config=self.config), replay_false,
                        rng)

        if self.policy == "leaderboard_precision":
            for b in self.budgets:
                snapshot(b, make(b).run(ratings=int(round(b * self.total))))
        else:
            marks = {int(round(b * self.total)): b for b in self.budgets}
            make().run(ratings=max(marks), snapshots=list(marks),
                       on_snapshot=lambda n, state: snapshot(marks[n], state))
        return bool(replay_false)

    def summary(self, false_any: list, replays: int) -> dict:
        acc, planner = self.acc, self.planner
        out = {
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
        if self.planner_note:
            out["planner_note"] = self.planner_note
        return out


def queue_replays(*, items, y, mu, var, lalm, question, policy: str, replays: int, budgets, annotators: int,
                  seed: int, studies: int) -> dict:
    """The queue replays of one policy (module docstring). Keys and active draws are question-level: every answer
    of a question gets the question's random key and u."""
    from modelling.leaderboard.replay import POLICIES

    runner = _PolicyReplays(items=items, y=y, mu=mu, var=var, lalm=lalm, question=question, policy=policy,
                            budgets=budgets, annotators=annotators, studies=studies)
    questions = sorted(set(question))
    false_any = []
    t0 = time.perf_counter()
    for r in range(replays):
        rng = np.random.default_rng([seed, POLICIES.index(policy), r])
        qkey = dict(zip(questions, rng.random(len(questions))))
        qu = dict(zip(questions, rng.random(len(questions))))
        keys = np.array([qkey[q] for q in question])
        u = np.array([qu[q] for q in question])
        false_any.append(runner.one(keys, u, [list(rng.permutation(it.ratings)) for it in items], rng))
        if (r + 1) % 10 == 0:
            log("replays", policy=policy, done=r + 1, false_so_far=int(sum(false_any)),
                wall_s=round(time.perf_counter() - t0, 1))
    return runner.summary(false_any, replays)


def _share(hits: list) -> float | None:
    return round(float(np.mean(hits)), 4) if hits else None
