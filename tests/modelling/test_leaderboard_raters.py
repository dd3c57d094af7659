"""Annotators crossed with answers (issue #35, "Raters"): the row intervals add the annotators' share, two-way
clustered over answers and annotators (``modelling/leaderboard/raters.py``), for the human-only, PPI++ and active
estimators alike; unknown annotators change nothing. Stats-level, seeded simulations."""
import numpy as np
import pytest
from scipy import stats as sps

from modelling.leaderboard import stats
from modelling.leaderboard.raters import rater_excess


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
