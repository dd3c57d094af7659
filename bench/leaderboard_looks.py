"""Replays of synthetic benchmarks (:mod:`leaderboard_synthetic`) with a look after every 1 % of the budget, each
look scored against the generating truth with the leaderboard page's own code, for ``bench/leaderboard.py``.

One replay (:class:`LookRun`): a fresh population, question-level keys and draws, 5 annotators with fresh
severities; :class:`leaderboard_synthetic.RatedReplay` serves and rates exactly as the platform's queue and routing
do. The *budget* is every answer rated k = 3 times (questions × LALMs × 3 ratings). After every ``step`` of it up to
``horizon`` the leaderboard is built by ``modelling.leaderboard.services.leaderboard_build`` — the page's rows,
intervals and verdicts — from the ratings so far (with each rating's annotator, time and design epoch), and scored:

* false verdict: a verdict on a pair whose true means are equal or ordered the other way;
* power: at the 30 % and 50 % looks, pairs whose true difference is 0.05, 0.10 or 0.20, decided the right way;
* coverage: each interval shown against the estimand the page states for it — each row's human-only and
  ORCA-assisted interval against the row's estimand, the mean over the LALM's answers in this benchmark of what the
  annotator pool would rate each (E[y | answer], annotators' severity and noise averaged out); each pair's interval
  of the difference a − b against the true (generating) difference, the verdicts' estimand. Rows are also scored
  against the generating mean T_m (``coverage_rows_vs_generating_mean``, reported beside, not in ``coverage_min``):
  a row's estimand is this benchmark's answers, and its prediction-powered interval treats their predictions as
  known, so it is not meant to cover the superpopulation's mean;
* naive: a paired t-test (``scipy.stats``' one-sample t on the pair's differences over the same shared questions
  the verdicts use) at p < 0.05 with no multiplicity and no allowance for looks, whenever a pair shares at least
  the verdicts' minimum of questions — what the bench would see from a method that is known to be wrong;
* planner: at the ``planner_at`` looks, up to two undecided pairs with a true difference are planned with the
  platform's planner (``leaderboard_budget_plan``); the replay goes on to exactly the ratings it asked for (now +
  ``more_ratings``) and looks: the plan succeeded when the pair is then decided the right way.

When the queue runs dry before a look (routing and leaderboard precision ask for fewer ratings than the budget),
the last board stands for every later look.
"""
from __future__ import annotations

import dataclasses
import gc
import inspect
import math
import time
from dataclasses import dataclass, field

import numpy as np

from bench import leaderboard_synthetic as syn
from bench.leaderboard_figures import WINDOW, summarise
from modelling.services.routing_policy import DEFAULT_ACTIVE_FLOOR

#: Differences whose power is reported, and the budgets where.
POWER_DIFFS = (0.05, 0.1, 0.2)
POWER_AT = (0.3, 0.5)
#: Pairs planned per planning look.
PLANS_PER_LOOK = 2
_EPS = 1e-9


@dataclass(frozen=True)
class Scenario:
    """A synthetic benchmark and how it is replayed.

    Attributes:
        name: scenario name; truths: {LALM: planted mean (normalised)}; questions: questions in the benchmark.
        horizon: the last look, as a share of the budget; step: share between looks.
        planner_at: budget shares whose looks plan pairs; annotators: simulated annotators.
        floor: the active design's uniform floor under ``leaderboard_precision`` (share of the budget spread
            uniformly; None: the platform's default, ``modelling.services.routing_policy.DEFAULT_ACTIVE_FLOOR``).
    """

    name: str
    truths: dict
    questions: int
    horizon: float = 0.5
    step: float = 0.01
    planner_at: tuple = ()
    annotators: int = 5
    floor: float | None = None


def synthetic_truths() -> dict[str, float]:
    """8 LALMs at 0.45 + (0, 0, 0.02, 0.05, 0.10, 0.15, 0.20, 0.30): pairs 0 (one, of two styles), 0.02, 0.05
    (5 pairs), 0.10 (5) and 0.20 (3) apart."""
    return {f"lalm{j}": round(0.45 + o, 4) for j, o in enumerate((0, 0, 0.02, 0.05, 0.10, 0.15, 0.20, 0.30))}


def many_truths(n: int = 40) -> dict[str, float]:
    """``n`` LALMs on a grid 0.30, 0.35 … 0.70 (round-robin): many equal pairs and many 0.2 apart."""
    return {f"lalm{j:02d}": round(0.30 + 0.05 * (j % 9), 4) for j in range(n)}


def rater_truths() -> dict[str, float]:
    """Two LALMs 0.05 apart."""
    return {"lalm0": 0.50, "lalm1": 0.55}


def _call_planner(fn, **available):
    """Call the platform's planner with the keyword arguments its signature takes (its arguments are being
    reworked; it always takes ``board``, ``a`` and ``b``)."""
    params = inspect.signature(fn).parameters
    return fn(**{k: v for k, v in available.items() if k in params})


@dataclass
class Outcome:
    """What one replay saw (summed over replays by :func:`summarise`)."""

    false: bool = False
    naive_false: bool = False
    power: dict = field(default_factory=dict)  # {"0.3": {"0.05": [hits, pairs]}}
    coverage: dict = field(default_factory=dict)  # {(kind, window): [covered, shown]}
    coverage_look: dict = field(default_factory=dict)  # {(kind, look): [covered, shown]}
    coverage_generating: dict = field(default_factory=dict)  # {row kind: [covered, shown]} against T_m
    widths: dict = field(default_factory=dict)  # {"0.3": {row kind: [sum of widths, rows]}}
    plans: dict = field(default_factory=lambda: {"hits": [], "detail": [], "declined": 0, "unreachable": 0,
                                                 "beyond": 0})
    decided_02: list = field(default_factory=lambda: [0, 0])
    looks: int = 0
    ratings: int = 0
    dry_at: float | None = None
    orca_rho: float = 0.0
    wall_s: float = 0.0
    pool_t: float = 0.0  # the annotator pool's mean severity ÷ its standard error (t with annotators − 1 df)
    pool_size: int = 0


class LookRun:
    """One replay of ``scenario`` under ``policy`` with looks (module docstring). ``seed``: a list of ints."""

    def __init__(self, scenario: Scenario, policy: str, seed: list[int]):
        from modelling.leaderboard.services import LeaderboardConfig, PredictionSet
        from modelling.services.routing_policy import RoutingRules

        self.scenario, self.policy = scenario, policy
        self.rng = np.random.default_rng(seed)
        self.pop = pop = syn.make_population(self.rng, truths=scenario.truths, questions=scenario.questions)
        qkey, qu = self.rng.random(scenario.questions), self.rng.random(scenario.questions)
        self.keys, self.u = qkey[pop.question], qu[pop.question]
        severity = self.rng.normal(0.0, syn.SEVERITY_SD, scenario.annotators)
        self.replay = syn.RatedReplay(pop=pop, keys=self.keys, u=self.u, severity=severity, rng=self.rng,
                                      policy=policy, rules=RoutingRules(), budget=scenario.horizon, audit_share=0.2,
                                      floor=DEFAULT_ACTIVE_FLOOR if scenario.floor is None else scenario.floor)
        self.total = pop.n * syn.K
        self.config = LeaderboardConfig()
        self.preds = PredictionSet("synthetic", "crossfit", dict(enumerate(pop.mu.tolist())),
                                   dict(enumerate(pop.var.tolist())), ppi_allowed=True)
        self.answers = {i: {"lalm": str(pop.lalm[i]), "question": int(pop.question[i]), "benchmark": scenario.name,
                            "benchmark_id": 1, "modality": "", "category": "", "words": 0, "key": float(self.keys[i]),
                            "metadata": {}} for i in range(pop.n)}
        self.out = Outcome(orca_rho=syn.orca_rho(pop, self.rng), pool_size=scenario.annotators,
                           pool_t=float(severity.mean() / (severity.std(ddof=1) / math.sqrt(scenario.annotators))))
        self.pending: list[dict] = []  # plans waiting for their look
        self.names = list(scenario.truths)
        # A row's estimand (README, "Statistics"): the mean over the LALM's answers in this benchmark of what the
        # annotator pool would rate each, E[y | answer] — not the generating mean T_m of the superpopulation.
        self.row_truth = {name: float(pop.expected[pop.lalm == name].mean()) for name in self.names}
        self._seen = None  # the board whose verdicts were scored last

    def data(self):
        """The replay's state as ``LeaderboardData`` (OWNERS.md interfaces 1 and 2: raters, times, one epoch)."""
        from modelling.leaderboard.selectors import ACTIVE, ROUTED, UNIFORM, LeaderboardData

        state, rep = self.replay.state, self.replay
        kind = {"default": UNIFORM, "leaderboard_precision": ACTIVE}.get(self.policy, ROUTED)
        data = LeaderboardData(answers=self.answers)
        data.scores = {i: list(r) for i, r in enumerate(state.ratings) if r}
        data.sampling, data.audit_share = {1: kind}, {1: 0.2}
        if self.policy == "leaderboard_precision":
            data.design = {i: (float(state.pi[i]), float(self.u[i])) for i in range(self.pop.n)}
        data.raters = {i: list(rep.raters[i]) for i in data.scores}
        data.rated_at = {i: [syn.CLOCK_START + s * syn.RATING_SECONDS for s in rep.steps[i]] for i in data.scores}
        data.rating_epoch = {i: [1] * len(data.scores[i]) for i in data.scores}
        data.epochs = {1: [{"number": 1, "policy": kind, "audit_share": 0.2 if kind == ROUTED else None,
                            "started": "2025-06-15T00:00:00+00:00", "reason": "the replay's one design"}]}
        return data

    def board(self):
        """The page's leaderboard of the ratings so far. Objects alive now are frozen out of the garbage
        collector first (:func:`gc.freeze`): statsmodels' ``multipletests`` calls ``gc.collect()``, which would
        otherwise walk the whole replay at every look (seconds each)."""
        from modelling.leaderboard.services import leaderboard_build

        gc.freeze()
        return leaderboard_build(data=self.data(), preds=self.preds, config=self.config)

    def run(self) -> Outcome:
        t0 = time.perf_counter()
        sc = self.scenario
        looks = [round(s * sc.step, 6) for s in range(1, int(round(sc.horizon / sc.step)) + 1)]
        board, dry = None, False
        for j, share in enumerate(looks):
            mark = int(round(share * self.total))
            board, dry = self._plans_until(mark, board, dry)
            if not dry:
                dry = not syn.advance(self.replay, mark)
                board = self.board()
                if dry:
                    self.out.dry_at = share
            self._score(board, share, j)
            if any(abs(share - p) < _EPS for p in sc.planner_at):
                self._plan(board)
        self._plans_until(self.total + 1, board, dry)
        for _plan in self.pending:  # never looked at: the queue cannot give the ratings
            self.out.plans["beyond"] += 1
        gc.unfreeze()
        self.out.ratings = self.replay.state.n_ratings
        self.out.wall_s = time.perf_counter() - t0
        return self.out

    def _plans_until(self, mark: int, board, dry: bool):
        """Look at every pending plan whose target comes before ``mark`` ratings."""
        while True:
            due = [p for p in self.pending if p["target"] < mark]
            if not due:
                return board, dry
            target = min(p["target"] for p in due)
            if not dry:
                dry = not syn.advance(self.replay, target)
                board = self.board()
            self._verdicts(board)
            for p in [p for p in self.pending if p["target"] == target or dry]:
                self.pending.remove(p)
                hit = self._decided_right(board, p["a"], p["b"])
                self.out.plans["hits"].append(hit)
                now = next((q for q in board.pairwise if {q.a, q.b} == {p["a"], p["b"]}), None)
                self.out.plans["detail"].append({
                    "gap": round(abs(self.scenario.truths[p["a"]] - self.scenario.truths[p["b"]]), 4),
                    "observed": p["observed"], "n": p["counted"], "needed": p["needed"], "level": p["level"],
                    "n_target": now.n_questions if now else 0, "level_target": now and now.level,
                    "p_target": now and now.p_anytime, "method": now and now.method, "hit": hit})

    def _decided_right(self, board, a, b) -> bool:
        truth = self.scenario.truths
        for p in board.pairwise:
            if {p.a, p.b} == {a, b}:
                return (p.verdict == "a>b" and truth[p.a] > truth[p.b]) or (p.verdict == "b>a" and truth[p.b] >
                                                                                truth[p.a])
        return False

    def _verdicts(self, board) -> None:
        """Mark a false verdict of ``board`` (and the naive test's); a board seen already (dry queue) counts as a
        look only."""
        self.out.looks += 1
        if board is self._seen:
            return
        self._seen = board
        truth = self.scenario.truths
        for p in board.pairwise:
            if (p.verdict == "a>b" and truth[p.a] <= truth[p.b] + _EPS) or (
                    p.verdict == "b>a" and truth[p.b] <= truth[p.a] + _EPS):
                self.out.false = True
        self.out.naive_false |= naive_false(board, truth, self.config.min_shared)

    def _score(self, board, share: float, look: int) -> None:
        self._verdicts(board)
        truth = self.scenario.truths
        window = look // WINDOW
        for kind, covered in _intervals(board, truth):  # rows against the generating mean: reported, not scored
            if kind.startswith("row"):
                self.out.coverage_generating.setdefault(kind, [0, 0])
                self.out.coverage_generating[kind][0] += covered
                self.out.coverage_generating[kind][1] += 1
        for kind, covered in _intervals(board, truth, self.row_truth):
            for key in ((kind, window),):
                self.out.coverage.setdefault(key, [0, 0])
                self.out.coverage[key][0] += covered
                self.out.coverage[key][1] += 1
            self.out.coverage_look.setdefault((kind, look), [0, 0])
            self.out.coverage_look[(kind, look)][0] += covered
            self.out.coverage_look[(kind, look)][1] += 1
        for at in POWER_AT:
            if abs(share - at) < _EPS:
                add_widths(self.out, board, f"{at:g}")
                slot = self.out.power.setdefault(f"{at:g}", {})
                for p in board.pairwise:
                    gap = abs(truth[p.a] - truth[p.b])
                    for d in POWER_DIFFS:
                        if abs(gap - d) < 1e-6:
                            slot.setdefault(f"{d:g}", [0, 0])
                            slot[f"{d:g}"][0] += self._decided_right(board, p.a, p.b)
                            slot[f"{d:g}"][1] += 1
        if abs(share - self.scenario.horizon) < _EPS:
            for p in board.pairwise:
                if abs(abs(truth[p.a] - truth[p.b]) - 0.2) < 1e-6:
                    self.out.decided_02[0] += self._decided_right(board, p.a, p.b)
                    self.out.decided_02[1] += 1

    def _plan(self, board) -> None:
        """Plan up to :data:`PLANS_PER_LOOK` undecided pairs with a true difference (module docstring)."""
        from modelling.leaderboard import services

        truth = self.scenario.truths
        candidates = [p for p in board.pairwise if p.verdict == "undecided" and abs(truth[p.a] - truth[p.b]) > _EPS
                      and p.n_questions >= 2]
        now = self.replay.state.n_ratings
        for i in self.rng.permutation(len(candidates))[:PLANS_PER_LOOK]:
            p = candidates[int(i)]
            try:
                plan = _call_planner(services.leaderboard_budget_plan, board=board, a=p.a, b=p.b,
                                     data=self.data(), preds=self.preds, config=self.config)
            except ValueError:
                self.out.plans["declined"] += 1
                continue
            more = getattr(plan, "more_ratings", None)
            if not getattr(plan, "reachable", True):
                self.out.plans["unreachable"] += 1
            elif more is None:
                self.out.plans["declined"] += 1
            elif now + more > self.total:
                self.out.plans["beyond"] += 1
            else:
                self.pending.append({"a": p.a, "b": p.b, "target": now + max(1, int(more)),
                                     "needed": int(plan.needed_questions or 0), "counted": int(plan.n_counted),
                                     "observed": plan.mean_diff, "level": plan.level})


def _intervals(board, truth, row_truth=None):
    """(kind, covered) for every interval ``board`` shows: ``row_human`` and ``row_with_orca`` (each row's
    human-only and ORCA-assisted interval; the headline is one of them; ``row`` for a headline interval the row
    shows without either) against ``row_truth`` (default ``truth``), and ``pair`` (the difference a − b) against
    ``truth``."""
    row_truth = truth if row_truth is None else row_truth
    for row in board.rows:
        seen = set()
        for attr in ("human", "with_orca"):
            e = getattr(row, attr, None)
            ci = None if e is None else e.ci
            if ci is not None and tuple(ci) not in seen:
                seen.add(tuple(ci))
                yield f"row_{attr}", ci[0] - 1e-4 <= row_truth[row.lalm] <= ci[1] + 1e-4
        if row.ci is not None and not seen:
            yield "row", row.ci[0] - 1e-4 <= row_truth[row.lalm] <= row.ci[1] + 1e-4
    for p in board.pairwise:
        if p.ci is not None:
            diff = truth[p.a] - truth[p.b]
            yield "pair", p.ci[0] - 1e-4 <= diff <= p.ci[1] + 1e-4


def add_widths(outcome: Outcome, board, at: str) -> None:
    """Add the width of each row's human-only and ORCA-assisted interval on ``board`` (kinds ``row_human``,
    ``row_with_orca``) to ``outcome.widths[at]`` (sum of widths, rows), for the look at budget share ``at``."""
    for row in board.rows:
        for attr in ("human", "with_orca"):
            e = getattr(row, attr, None)
            if e is not None and e.ci is not None:
                cell = outcome.widths.setdefault(at, {}).setdefault(f"row_{attr}", [0.0, 0])
                cell[0] += float(e.ci[1] - e.ci[0])
                cell[1] += 1


def naive_false(board, truth: dict, min_shared: int) -> bool:
    """True when the naive paired t-test (module docstring) decides some pair of ``board`` wrongly."""
    from scipy import stats as sps

    names = [n for n, v in board.question_values.items() if v]
    if len(names) < 2:
        return False
    questions = sorted({q for n in names for q in board.question_values[n]})
    col = {q: j for j, q in enumerate(questions)}
    values = np.full((len(names), len(questions)), np.nan)
    for i, n in enumerate(names):
        for q, v in board.question_values[n].items():
            values[i, col[q]] = v
    t_names = np.array([truth[n] for n in names])
    for i in range(len(names) - 1):
        d = values[i][None, :] - values[i + 1:]
        ok = ~np.isnan(d)
        n = ok.sum(axis=1)
        mean = np.where(ok, d, 0.0).sum(axis=1) / np.maximum(n, 1)
        ss = np.where(ok, (d - mean[:, None]) ** 2, 0.0).sum(axis=1)
        sd = np.sqrt(ss / np.maximum(n - 1, 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            t = mean / (sd / np.sqrt(n))
        p = 2 * sps.t.sf(np.abs(t), np.maximum(n - 1, 1))
        decided = (n >= min_shared) & (p < 0.05) & np.isfinite(t)
        gap = t_names[i] - t_names[i + 1:]
        wrong = decided & (((mean > 0) & (gap <= _EPS)) | ((mean < 0) & (gap >= -_EPS)))
        if wrong.any():
            return True
    return False


def run_one(task: tuple) -> tuple:
    """Worker entry: (key, replay number, scenario, policy, seed) → (key, Outcome)."""
    key, _, scenario, policy, seed = task
    return key, LookRun(scenario, policy, seed).run()


class _Schedule:
    """Which replay runs next (:func:`run_all`): every key's first replay first, then the replay of the key that
    has used the least time so far (finished replays plus the expected time of running ones), so cheap scenarios
    get many replays and costly ones few; with a deadline, a replay starts only when its key's mean time still fits
    before it."""

    def __init__(self, tasks: list[tuple], deadline: float | None):
        self.queue, self.deadline = list(tasks), deadline
        self.walls: dict = {}
        self.running: dict = {}  # key → replays running

    def spent(self, key) -> float:
        walls = self.walls.get(key, [])
        return sum(walls) + self.running.get(key, 0) * (float(np.mean(walls)) if walls else 0.0)

    def next(self) -> tuple | None:
        """The task to start now, or None (nothing startable: wait for a running one, or all done)."""
        while True:
            firsts = [t for t in self.queue if t[1] == 0]
            ready = firsts or [t for t in self.queue if self.walls.get(t[0])]
            if not ready:
                return None
            task = min(ready, key=lambda t: (self.spent(t[0]), t[1]))
            self.queue.remove(task)
            if task[1] == 0 or self.deadline is None or (
                    time.perf_counter() + float(np.mean(self.walls[task[0]])) <= self.deadline):
                self.running[task[0]] = self.running.get(task[0], 0) + 1
                return task
            self.queue = [t for t in self.queue if t[0] != task[0]]  # its key does not fit any more

    def done(self, key, wall_s: float) -> None:
        self.running[key] -= 1
        self.walls.setdefault(key, []).append(wall_s)


def run_all(tasks: list[tuple], *, workers: int, log, minutes: float | None = None) -> dict:
    """{key: [Outcome, ...]} of the tasks (key, replay number, scenario, policy, seed) that :class:`_Schedule`
    starts, on ``workers`` processes (fork: Django is set up already). With ``minutes`` the run ends in about that
    time whatever the speed of the methods under test (each key's first replay always runs); the summaries report
    how many replays ran."""
    out: dict = {}
    t0 = time.perf_counter()
    schedule = _Schedule(tasks, None if not minutes else t0 + 60.0 * minutes)

    def take(key, outcome) -> None:
        out.setdefault(key, []).append(outcome)
        schedule.done(key, outcome.wall_s)
        log("synthetic replay", key=str(key), done=len(out[key]), false=outcome.false, naive=outcome.naive_false,
            wall_s=round(outcome.wall_s, 1), elapsed_s=round(time.perf_counter() - t0, 1))

    if workers <= 1:
        while (task := schedule.next()) is not None:
            take(*run_one(task))
        return out
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    running = set()
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        while True:
            while len(running) < workers and (task := schedule.next()) is not None:
                running.add(pool.submit(run_one, task))
            if not running:
                return out
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                take(*future.result())


#: Replays per scenario (per policy in ``synthetic``) of the full run (at most: ``--minutes`` stops it) and of
#: ``--quick``.
FULL_REPLAYS = {"synthetic": 40, "many_lalms": 8, "raters": 200}
QUICK_REPLAYS = {"synthetic": 1, "many_lalms": 1, "raters": 6}
POLICIES = ("default", "disagreement", "model_vote", "leaderboard_precision")


def scenarios(quick: bool) -> dict[str, tuple[Scenario, tuple]]:
    """{name: (scenario, policies)} of the full run or of ``--quick`` (fewer questions, sparser looks)."""
    if quick:
        return {
            "synthetic": (Scenario("synthetic", synthetic_truths(), 300, horizon=0.5, step=0.05,
                                   planner_at=(0.1, 0.2)), POLICIES),
            "many_lalms": (Scenario("many_lalms", many_truths(), 60, horizon=1.0, step=0.5), ("default",)),
            "raters": (Scenario("raters", rater_truths(), 300, horizon=1.0, step=0.05), ("default",)),
        }
    return {
        "synthetic": (Scenario("synthetic", synthetic_truths(), 2000, horizon=0.5, step=0.01,
                               planner_at=(0.1, 0.2, 0.3)), POLICIES),
        "many_lalms": (Scenario("many_lalms", many_truths(), 300, horizon=1.0, step=0.01), ("default",)),
        "raters": (Scenario("raters", rater_truths(), 300, horizon=1.0, step=0.01), ("default",)),
    }


def scenarios_section(*, quick: bool, only: set, replays: dict, workers: int, seed: int, log,
                      minutes: float | None = None, policies: tuple[str, ...] | None = None,
                      floor: float | None = None) -> dict:
    """{"scenarios": {...}, "naive": {...}} of the scenarios in ``only`` (``bench/leaderboard.py``'s docstring):
    up to ``replays`` (else the defaults) replays each, round-robin, stopping at ``minutes`` (:func:`run_all`);
    ``policies``: only these of ``synthetic``'s (None: all; the seeds stay those of the full run); ``floor``: the
    active design's uniform floor (None: the platform's default)."""
    chosen = {n: (dataclasses.replace(s, floor=floor), p) for n, (s, p) in scenarios(quick).items() if n in only}
    counts = {**(QUICK_REPLAYS if quick else FULL_REPLAYS), **{k: v for k, v in replays.items() if v}}
    tasks, chosen_policies = [], policies
    for s_index, (name, (scenario, policies)) in enumerate(chosen.items()):
        for p_index, policy in enumerate(policies):
            if name == "synthetic" and chosen_policies is not None and policy not in chosen_policies:
                continue
            for r in range(counts[name]):
                tasks.append(((name, policy), r, scenario, policy, [seed, 35, s_index, p_index, r]))
    tasks.sort(key=lambda t: (t[1], -t[2].questions * len(t[2].truths) * t[2].horizon))  # rounds, long ones first
    import ppi_py  # noqa: F401 - imported once here rather than in every worker (seconds each)
    import statsmodels.stats.multitest  # noqa: F401
    results = run_all(tasks, workers=workers, log=log, minutes=minutes)
    out: dict = {}
    if "synthetic" in chosen:
        out["synthetic"] = {"policies": {p: summarise(results[("synthetic", p)]) for p in chosen["synthetic"][1]
                                         if ("synthetic", p) in results}}
    if "many_lalms" in chosen:
        figures = summarise(results[("many_lalms", "default")], planner=False)
        out["many_lalms"] = {"decided_share_0.2": figures.pop("decided_share_0.2"), "fwer": figures.pop("fwer"),
                             **figures}
    if "raters" in chosen:
        figures = summarise(results[("raters", "default")], planner=False)
        out["raters"] = {"coverage_min": figures.pop("coverage_min"), **figures}
    for name, (scenario, _) in chosen.items():
        out[name]["design"] = {"questions": scenario.questions, "lalms": len(scenario.truths),
                               "horizon": scenario.horizon, "look_every": scenario.step,
                               "replays_asked": counts[name], "truths": scenario.truths}
    naive = [o.naive_false for key, outs in results.items() if key[0] == "synthetic" for o in outs]
    section = {"scenarios": out}
    if naive:
        section["naive"] = {"fwer": round(float(np.mean(naive)), 4), "replays": len(naive),
                            "by_policy": {p: out["synthetic"]["policies"][p]["naive_fwer"]
                                          for p in out["synthetic"]["policies"]}}
    return section
