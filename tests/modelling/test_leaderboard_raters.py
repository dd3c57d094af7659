"""Annotators crossed with answers (issue #35, "Raters"): the row intervals add the annotators' share, two-way
clustered over answers and annotators (``modelling/leaderboard/raters.py``), for the human-only, PPI++ and active
estimators alike; unknown annotators change nothing; the benchmark's pooled severity estimate (what the leaderboard
passes) recovers the severity variance and keeps the active design's intervals covering. Stats-level, seeded
simulations."""
import numpy as np
import pytest
from scipy import stats as sps

from modelling.leaderboard import stats
from modelling.leaderboard.raters import pooled_excess, rater_excess, severity_of


def _expected(m, sd):
    """E[clip(round(m + e), 1, 5)] for e ~ N(0, sd²), per latent mean m (the pool's expected rating)."""
    cuts = np.array([1.5, 2.5, 3.5, 4.5])
    return 1 + sps.norm.sf((cuts[None, :] - m[:, None]) / sd).sum(axis=1)


def _rated_sample(rng, *, n_labels, annotators=5, severity=0.2, k=3, population=2000):
    """A population of answers, ``annotators`` with N(0, severity²) severities (rating points), ``n_labels``
    answers rated k times each by distinct annotators. Returns (truth, ratings, raters, latent means of labels)."""
    m = rng.uniform(1, 5, population)
    noise = 0.7
    truth = float(np.mean((_expected(m, np.hypot(noise, severity)) - 1) / 4))
    b = rng.normal(0, severity, annotators)
    idx = rng.choice(population, n_labels, replace=False)
    ratings, raters = [], []
    for i in idx:
        who = rng.choice(annotators, k, replace=False)
        r = np.clip(np.round(m[i] + b[who] + rng.normal(0, noise, k)), 1, 5)
        ratings.append(list((r - 1) / 4))
        raters.append([int(a) for a in who])
    return truth, ratings, raters, m, idx


def test_unknown_raters_change_nothing():
    rng = np.random.default_rng(1)
    _, ratings, raters, _, _ = _rated_sample(rng, n_labels=40)
    y = [np.mean(r) for r in ratings]
    plain = stats.classical_mean(y)
    unknown = stats.classical_mean(y, ratings=ratings, raters=[[None] * len(r) for r in ratings])
    assert unknown.ci == plain.ci and unknown.raters == 0 and plain.raters == 0
    excess, g = rater_excess(residuals=[0.1, -0.1], weights=[0.5, 0.5], answers=[0, 1], raters=[None, None])
    assert (excess, g) == (0.0, 0)


def test_strong_annotator_effects_widen_every_estimator():
    """Severity sd 0.6 rating points: the two-way interval is wider than the question-clustered one for the
    classical, PPI++ and active estimators, and its degrees of freedom are the annotators' − 1."""
    rng = np.random.default_rng(7)
    _, ratings, raters, m, idx = _rated_sample(rng, n_labels=200, severity=0.6)
    y = np.array([np.mean(r) for r in ratings])
    naive = stats.classical_mean(y)
    crossed = stats.classical_mean(y, ratings=ratings, raters=raters)
    assert crossed.raters == 5 and crossed.df == 4
    assert crossed.width > 1.3 * naive.width and crossed.estimate == naive.estimate
    mu = np.clip((m - 1) / 4 + rng.normal(0, 0.1, m.size), 0, 1)
    ppi_naive = stats.ppi_mean(y=y, yhat=mu[idx], yhat_all=mu)
    ppi_crossed = stats.ppi_mean(y=y, yhat=mu[idx], yhat_all=mu, ratings=ratings, raters=raters)
    assert ppi_crossed.width > 1.3 * ppi_naive.width and ppi_crossed.estimate == ppi_naive.estimate
    pi = np.full(m.size, idx.size / m.size)
    sampled = np.zeros(m.size, dtype=bool)
    sampled[np.sort(idx)] = True
    order = np.argsort(idx)  # active_mean reads the labels in population order
    values = np.full(m.size, np.nan)
    values[idx] = y
    active_naive = stats.active_mean(y=values, pi=pi, sampled=sampled)
    active_crossed = stats.active_mean(y=values, pi=pi, sampled=sampled, ratings=[ratings[j] for j in order],
                                       raters=[raters[j] for j in order])
    assert active_crossed.width > 1.3 * active_naive.width


@pytest.mark.parametrize("n_labels", [100, 300])
def test_two_way_interval_covers_where_the_naive_one_does_not(n_labels):
    """5 annotators, severity sd 0.2 rating points, k = 3: the question-clustered interval under-covers at 300
    labels (the annotators' share does not shrink with more answers); the two-way one keeps ≥ 0.94."""
    rng = np.random.default_rng(2026 + n_labels)
    reps, naive_hits, crossed_hits = 300, 0, 0
    for _ in range(reps):
        truth, ratings, raters, _, _ = _rated_sample(rng, n_labels=n_labels)
        y = [np.mean(r) for r in ratings]
        naive = stats.classical_mean(y)
        crossed = stats.classical_mean(y, ratings=ratings, raters=raters)
        naive_hits += naive.ci[0] <= truth <= naive.ci[1]
        crossed_hits += crossed.ci[0] <= truth <= crossed.ci[1]
    assert crossed_hits / reps >= 0.94
    if n_labels == 300:
        assert naive_hits / reps < 0.9


def _linear_benchmark(rng, *, tau, annotators=40, answers=600, k=3, noise=0.15):
    """y = level + s_a + e on the normalised scale (no clipping): {answer: ratings}, {answer: annotator ids}."""
    s = rng.normal(0, tau, annotators)
    level = rng.uniform(0.2, 0.8, answers)
    scores, raters = {}, {}
    for i in range(answers):
        who = rng.choice(annotators, k, replace=False)
        scores[i] = list(level[i] + s[who] + rng.normal(0, noise, k))
        raters[i] = [int(a) for a in who]
    return scores, raters


@pytest.mark.parametrize("tau", [0.0, 0.05])
def test_pooled_severity_recovers_the_variance_component(tau):
    """Additive model with 40 annotators: τ̂² averages to τ² (within 15 %; without severity under 5 % of the
    0.0025 of τ = 0.05, what flooring at 0 leaves); a lone rating or unknown annotators are not used."""
    rng = np.random.default_rng(35)
    fits = [severity_of(*_linear_benchmark(rng, tau=tau)) for _ in range(40)]
    mean = float(np.mean([f.tau2 for f in fits]))
    assert all(f.annotators == 40 and f.ratings == 1800 for f in fits)
    if tau:
        assert abs(mean - tau * tau) < 0.15 * tau * tau
    else:
        assert mean < 0.05 * 0.05 ** 2
    lone = severity_of({0: [0.5], 1: [0.2, 0.4]}, {0: [1], 1: [None, 2]})
    assert (lone.tau2, lone.annotators, lone.ratings) == (0.0, 0, 0)


def test_pooled_excess_is_the_cross_answer_part_only():
    """One annotator rating two answers with weights 1/2 each: τ² (C² − Σ c²) = τ²/2; unknown ones add 0."""
    excess, g = pooled_excess(weights=[0.5, 0.5], answers=[0, 1], raters=[7, 7], tau2=0.01)
    assert g == 1 and excess == pytest.approx(0.005)
    assert pooled_excess(weights=[0.5, 0.5], answers=[0, 1], raters=[None, None], tau2=0.01) == (0.0, 0)


def test_the_active_design_covers_with_the_benchmark_pooled_severity():
    """Leaderboard precision's unequal π (0.05–0.6), 5 annotators with severity sd 0.4 rating points, k = 3, four
    LALMs rated by the same annotators: the row's interval with the severity pooled over the benchmark covers
    ≥ 0.93 of the finite-population truth (each answer's expected rating by the pool); without the annotators'
    share it covers < 0.8."""
    rng = np.random.default_rng(3535)
    reps, n, sev, noise, hits, naive_hits = 120, 400, 0.4, 0.7, 0, 0
    for _ in range(reps):
        m = rng.uniform(1, 5, (4, n))
        b = rng.normal(0, sev, 5)
        pi = rng.uniform(0.05, 0.6, (4, n))
        drawn = rng.uniform(size=(4, n)) < pi
        scores, raters = {}, {}
        for lalm, i in zip(*np.nonzero(drawn)):
            who = rng.choice(5, 3, replace=False)
            r = np.clip(np.round(m[lalm, i] + b[who] + rng.normal(0, noise, 3)), 1, 5)
            scores[lalm * n + i], raters[lalm * n + i] = list((r - 1) / 4), [int(a) for a in who]
        severity = severity_of(scores, raters)
        truth = float(np.mean((_expected(m[0], np.hypot(noise, sev)) - 1) / 4))
        labels = [i for i in range(n) if drawn[0, i]]
        y = np.array([np.mean(scores[i]) if drawn[0, i] else np.nan for i in range(n)])
        within = np.array([np.var(scores[i], ddof=1) / 3 if drawn[0, i] else 0.0 for i in range(n)])
        common = dict(y=y, pi=pi[0], sampled=drawn[0], within=within)
        pooled = stats.active_mean(**common, ratings=[scores[i] for i in labels], raters=[raters[i] for i in labels],
                                   severity=severity)
        naive = stats.active_mean(**common)
        hits += pooled.ci[0] <= truth <= pooled.ci[1]
        naive_hits += naive.ci[0] <= truth <= naive.ci[1]
    assert hits / reps >= 0.93
    assert naive_hits / reps < 0.8
