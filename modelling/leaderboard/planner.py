"""The budget planner, Django-free: about how many more human ratings, under the benchmark's own queue and policy,
until the verdict between two LALMs (:mod:`modelling.leaderboard.verdicts`) is reached with 80 % power.

Method. The verdict rule is the anytime-valid betting test of equal means at the pair's Holm level (the level of
Holm's next step given the verdicts the table already has); its confidence sequence at that level excludes 0
exactly when the test rejects (both are the same capital process), so the planner simulates the test. The capital
process is *continued* from where it stands (the pair's observed counted questions, in order), not restarted: the
planned ratings are looked at as often as anyone likes and the rule already allows for that. Future differences
are drawn from a planning distribution that allows for the uncertainty of what was observed: in each of
``simulations`` runs, Bayesian-bootstrap weights (Dirichlet(1, …, 1) over the observed differences; Rubin, *Ann.
Stat.* 1981) pick a plausible distribution of differences, and the future differences are drawn from it. The
planned number of counted questions is the 80th percentile of the runs' first hitting times of the Holm level (the
smallest h with P(decided within h more counted questions) ≥ 0.8, averaged over the uncertainty: "assurance").
Given the spread of true differences among the pairs planned (the table's undecided pairs, by the method of moments:
``modelling.leaderboard.services._difference_spread``), the planning distribution's mean is shrunk towards 0
(empirical Bayes): a difference that looks large on few questions is partly luck, and undecided pairs are the close
ones.

Questions to ratings. The queue serves by question (all LALMs' answers to a question), so one more counted shared
question costs (answers per question × ratings per answer) ratings, divided by the share of the questions the
queue serves next that count for verdicts (:attr:`modelling.leaderboard.verdicts.VerdictInputs.counted_share`:
1 under the uniform policy; under routing the audit share, or 1 when audit answers have the queue's top priority
and are served first; under the active design the draw share among drawn questions).

A pair whose verdict is prediction-powered (:mod:`modelling.leaderboard.verdicts_ppi`: routing, the active design)
is planned with *that* test (:func:`ppi_hitting_times`): each run continues the pair's counted questions with
(human difference, ORCA's predicted difference) pairs drawn jointly from Bayesian-bootstrap reweightings of the
observed ones (so ORCA's agreement with the humans carries over), recomputes the predictable weights λ_i and the
one-sided capital processes on φ's grid, and stops when max(M⁺, M⁻) reaches 1/level; φ's evidence from the
held-out questions is fixed, as in the test. (Planning such a pair with the human-only test asked for far more
ratings than its verdict needed, and for "0 more" when the human-only test had crossed while the verdict's had
not.)
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from modelling.leaderboard import verdicts_ppi
from modelling.leaderboard.verdicts import BET_CAP, MIN_SHARED_QUESTIONS, betting_process

#: Power the planner aims at.
PLANNER_POWER = 0.8
#: Simulated continuations per plan.
SIMULATIONS = 300
#: Plans above this many more counted questions are not simulated further (they count as not reachable).
HORIZON_LIMIT = 4_000
#: Simulated continuations the prediction-powered test takes at once (memory: batch × questions × φ grid floats).
PPI_BATCH = 10


@dataclass(frozen=True)
class PairPlan:
    """About how many more ratings decide a pair with ``power`` under the verdict rule.

    Attributes:
        n_counted: counted shared questions now (rated for both, chosen at random).
        mean_diff, sd_diff: mean and standard deviation of their differences (None below 2); for a
            prediction-powered pair of d − λf, the mean plus λ·(held-out mean predicted difference).
        level: the Holm level the pair's test must reach.
        power: the power planned for.
        p_anytime: the pair's anytime p-value now.
        decided: the pair already has its verdict at ``level`` (needed_questions 0).
        needed_questions: more counted shared questions for ``power`` (None when no plan: ``note``).
        available_questions: counted shared questions still to come: questions both LALMs answered that count once
            rated (the audit share under routing, the draw share under the active design) and are not counted yet.
        answers_per_question, ratings_per_answer: the queue's cost of serving one question (its answers × k).
        counted_share: the share of the questions the queue serves next that count (module docstring).
        more_ratings: needed_questions × answers_per_question × ratings_per_answer / counted_share, rounded up.
        reachable: a plan exists and needs at most ``available_questions``.
        note: why there is no plan, or why it is not reachable ('' otherwise).
        powered: planned with the prediction-powered test (:func:`ppi_hitting_times`).
    """

    n_counted: int
    mean_diff: float | None
    sd_diff: float | None
    level: float
    power: float
    p_anytime: float
    decided: bool
    needed_questions: int | None
    available_questions: int
    answers_per_question: float
    ratings_per_answer: float
    counted_share: float
    more_ratings: int | None
    reachable: bool
    note: str = ""
    powered: bool = False

    @property
    def ratings_per_question(self) -> float:
        """Ratings one more counted question costs: answers per question × k ÷ counted share."""
        return self.answers_per_question * self.ratings_per_answer / self.counted_share


def hitting_times(d: Sequence[float], *, level: float, horizon: int, simulations: int = SIMULATIONS,
                  seed: int = 0, shift: float = 0.0) -> np.ndarray:
    """(simulations,) more counted questions until the continued test of equal means reaches ``level``
    (``inf`` when not within ``horizon``), drawing future differences from Bayesian-bootstrap reweightings of the
    observed ``d`` less ``shift`` (clipped to [−1, 1]; module docstring). ``d``: (n,) observed differences in
    [−1, 1] in verdict order, n >= 1."""
    x0 = np.clip((np.asarray(d, dtype=np.float64) + 1.0) / 2.0, 0.0, 1.0)
    n = x0.size
    threshold = -math.log(level)
    rng = np.random.default_rng(seed)
    out = np.full(simulations, np.inf)
    if horizon < 1:
        return out
    # the observed process's state at m = 1/2: its estimates and the two halves of the hedged capital
    t = np.arange(1, n + 1, dtype=np.float64)
    mu_after = (0.5 + np.cumsum(x0)) / (t + 1)
    sq_after = np.cumsum((x0 - mu_after) ** 2)
    prev_mu = np.concatenate([[0.5], mu_after[:-1]])
    prev_var = np.concatenate([[0.25], ((0.25 + sq_after) / (t + 1))[:-1]])
    bets = (prev_mu - 0.5) / (prev_var + (prev_mu - 0.5) ** 2)
    cap = BET_CAP / 0.5  # c/m = c/(1 − m) at m = 1/2
    up0 = float(np.sum(np.log1p(np.clip(bets, 0, cap) * (x0 - 0.5))))
    down0 = float(np.sum(np.log1p(-np.clip(-bets, 0, cap) * (x0 - 0.5))))
    sq0 = float(sq_after[-1])
    if betting_process(x0, 0.5)[:, 0].max() >= threshold:
        return np.zeros(simulations)
    weights = rng.dirichlet(np.ones(n), size=simulations)
    future = np.clip(x0 - shift / 2.0, 0.0, 1.0)
    draws = np.stack([future[np.minimum(np.searchsorted(np.cumsum(w), rng.random(horizon)), n - 1)]
                      for w in weights])
    steps = np.arange(n + 1, n + horizon + 1, dtype=np.float64)
    mu = (0.5 + x0.sum() + np.cumsum(draws, axis=1)) / (steps + 1)
    var = (0.25 + sq0 + np.cumsum((draws - mu) ** 2, axis=1)) / (steps + 1)
    mu_prev = np.concatenate([np.full((simulations, 1), mu_after[-1]), mu[:, :-1]], axis=1)
    var_prev = np.concatenate([np.full((simulations, 1), (0.25 + sq0) / (n + 1)), var[:, :-1]], axis=1)
    bet = (mu_prev - 0.5) / (var_prev + (mu_prev - 0.5) ** 2)
    up = up0 + np.cumsum(np.log1p(np.clip(bet, 0, cap) * (draws - 0.5)), axis=1)
    down = down0 + np.cumsum(np.log1p(-np.clip(-bet, 0, cap) * (draws - 0.5)), axis=1)
    hit = (np.logaddexp(up, down) - math.log(2.0)) >= threshold
    found = hit.any(axis=1)
    out[found] = np.argmax(hit[found], axis=1) + 1
    return out


def ppi_hitting_times(d: Sequence[float], f: Sequence[float], phi: verdicts_ppi.PhiEvidence, *, level: float,
                      horizon: int, simulations: int = SIMULATIONS, seed: int = 0, shift: float = 0.0) -> np.ndarray:
    """(simulations,) more counted questions until the prediction-powered test of equal means
    (:mod:`modelling.leaderboard.verdicts_ppi`) reaches ``level`` (``inf`` when not within ``horizon``; 0 when it
    has already), continuing the observed pairs (d_i, f_i) with pairs drawn jointly from Bayesian-bootstrap
    reweightings of them, human differences less ``shift`` (module docstring).

    Args:
        d, f: (n,) the counted questions' human and predicted differences a − b in verdict order, in [−1, 1], n >= 1.
        phi: the pair's held-out evidence (:func:`modelling.leaderboard.verdicts_ppi.phi_evidence`), fixed.
        level: the pair's Holm level in (0, 1); horizon: most more counted questions simulated (>= 0).
    """
    d, f = np.asarray(d, dtype=np.float64), np.asarray(f, dtype=np.float64)
    n = d.size
    threshold = -math.log(level)
    out = np.full(simulations, np.inf)
    if verdicts_ppi.null_evidence_paths(d[None, :], f[None, :], phi)[0].max() >= threshold:
        return np.zeros(simulations)
    if horizon < 1:
        return out
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(n), size=simulations)
    future_d = np.clip(d - shift, -1.0, 1.0)
    for start in range(0, simulations, PPI_BATCH):
        w = weights[start:start + PPI_BATCH]
        pick = np.stack([np.minimum(np.searchsorted(np.cumsum(row), rng.random(horizon)), n - 1) for row in w])
        dd = np.concatenate([np.broadcast_to(d, (len(w), n)), future_d[pick]], axis=1)
        ff = np.concatenate([np.broadcast_to(f, (len(w), n)), f[pick]], axis=1)
        hit = verdicts_ppi.null_evidence_paths(dd, ff, phi)[:, n:] >= threshold
        found = hit.any(axis=1)
        block = out[start:start + len(w)]
        block[found] = np.argmax(hit[found], axis=1) + 1
    return out


def plan_pair(
    d: Sequence[float], *, level: float, available_questions: int, answers_per_question: float,
    ratings_per_answer: float, counted_share: float, p_anytime: float = 1.0, power: float = PLANNER_POWER,
    min_shared: int = MIN_SHARED_QUESTIONS, simulations: int = SIMULATIONS, seed: int = 0,
    prior_sd: float | None = None, f: Sequence[float] | None = None, phi: verdicts_ppi.PhiEvidence | None = None,
) -> PairPlan:
    """Plan the ratings that decide a pair with ``power`` at ``level`` (module docstring).

    Args:
        d: (n,) the pair's counted differences a − b in verdict order (values in [−1, 1]).
        level: the pair's Holm level (0 < level < 1).
        available_questions: counted shared questions still to come (>= 0).
        answers_per_question: LALMs' answers per question the queue serves together (>= 1).
        ratings_per_answer: k, valid ratings per rated answer (> 0).
        counted_share: share of served questions that count, in (0, 1].
        p_anytime: the pair's anytime p now (a pair at or below ``level`` is decided).
        min_shared: fewest counted questions to plan on (from a handful the observed differences say too little).
        prior_sd: the spread of true differences among the pairs planned (e.g. of the board's undecided pairs;
            None: no shrinkage).
            Most pairs differ little, so a difference seen on few questions is partly luck: the planning
            distribution's mean is shrunk towards 0 by the empirical-Bayes factor τ²/(τ² + s²/n) (τ = prior_sd,
            s the differences' sd), which keeps plans from being too optimistic for the pairs that look best.
        f, phi: for a prediction-powered pair, (n,) ORCA's predicted differences of the same questions and the
            pair's held-out evidence: the plan simulates that test (:func:`ppi_hitting_times`); its mean and sd
            are then those of the prediction-powered differences d − λf (λ the last predictable weight) plus λ·φ̂.

    Raises ValueError for arguments out of range.
    """
    d = np.asarray(d, dtype=np.float64)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if ratings_per_answer <= 0 or answers_per_question <= 0 or not 0 < counted_share <= 1:
        raise ValueError("ratings_per_answer and answers_per_question must be positive, counted_share in (0, 1]")
    n = int(d.size)
    powered = f is not None and phi is not None
    if powered:
        f = np.asarray(f, dtype=np.float64)
        if f.shape != d.shape:
            raise ValueError("human and predicted differences must have the same length")
    lam = float(verdicts_ppi.predictable_lambdas(np.append(d, 0.0), np.append(f, 0.0))[-1]) if powered else 0.0
    r = d - lam * f if powered else d
    mean = float(r.mean() + (lam * phi.mean if powered else 0.0)) if n else None
    sd = float(r.std(ddof=1)) if n >= 2 else None
    base = dict(n_counted=n, mean_diff=mean, sd_diff=sd, level=float(level), power=float(power), powered=powered,
                p_anytime=float(p_anytime), available_questions=int(available_questions),
                answers_per_question=float(answers_per_question), ratings_per_answer=float(ratings_per_answer),
                counted_share=float(counted_share))
    if p_anytime <= level and n >= min_shared:
        return PairPlan(decided=True, needed_questions=0, more_ratings=0, reachable=True, **base)
    if n < min_shared:
        return PairPlan(decided=False, needed_questions=None, more_ratings=None, reachable=False, note=(
            f"{n} counted shared questions are too few to plan on: rate at least {min_shared} first"), **base)
    horizon = min(int(available_questions), HORIZON_LIMIT)
    shift = 0.0
    if prior_sd is not None and sd:
        shift = mean * (1.0 - prior_sd ** 2 / (prior_sd ** 2 + sd ** 2 / n))
    if powered:
        times = ppi_hitting_times(d, f, phi, level=level, horizon=horizon, simulations=simulations, seed=seed,
                                  shift=shift)
    else:
        times = hitting_times(d, level=level, horizon=horizon, simulations=simulations, seed=seed, shift=shift)
    times = np.sort(times)
    needed = times[max(0, math.ceil(power * simulations) - 1)]
    if not math.isfinite(needed) and available_questions <= 0:
        return PairPlan(decided=False, needed_questions=None, more_ratings=None, reachable=False, note=(
            f"not reachable: no counted shared question is left to rate (all {n} are rated; under routing only the "
            "audit share counts, under the active design the draw share)"), **base)
    if not math.isfinite(needed):
        reach = float(np.mean(np.isfinite(times)))
        where = (f"all {available_questions} counted shared questions still to come" if horizon == available_questions
                 else f"{HORIZON_LIMIT} more counted shared questions")
        return PairPlan(decided=False, needed_questions=None, more_ratings=None, reachable=False, note=(
            f"not reachable: even {where} give only {reach:.0%} power (observed difference {mean:+.3f} over {n} "
            "questions)"), **base)
    needed = int(needed)
    more = math.ceil(needed * answers_per_question * ratings_per_answer / counted_share)
    return PairPlan(decided=False, needed_questions=needed, more_ratings=more, reachable=True, **base)
