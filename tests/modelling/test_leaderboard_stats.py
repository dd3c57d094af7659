"""The leaderboard's statistics (Django-free): hand-computed fixtures, the libraries called directly (ppi_py,
scipy), coverage on synthetic data with a known mean at small n, the active design's probabilities, weights and
variance. Verdicts and the planner: ``test_leaderboard_verdicts.py``."""
import math

import numpy as np
import ppi_py
import pytest
from scipy import stats as sps

from modelling.leaderboard import stats

#: Rating distributions of a correct and an incorrect answer (1–5): discrete, piled up at the ends, as real ones.
GOOD = np.array([0.02, 0.03, 0.10, 0.25, 0.60])
BAD = GOOD[::-1]
SCALE = np.arange(5) / 4


def _synthetic_answers(rng, *, share_correct: float, n: int, k: int = 3) -> np.ndarray:
    """n answer values: correct with probability ``share_correct``, each the mean of k normalised ratings."""
    correct = rng.random(n) < share_correct
    ratings = np.where(correct[:, None], rng.choice(5, (n, k), p=GOOD), rng.choice(5, (n, k), p=BAD))
    return (ratings / 4).mean(axis=1)


def _known_mean(share_correct: float) -> float:
    return share_correct * float(GOOD @ SCALE) + (1 - share_correct) * float(BAD @ SCALE)


def test_the_human_only_interval_is_t_with_one_pseudo_question_at_each_end_as_computed_by_hand():
    # values 0.25 0.5 0.75 0.5 1.0 + pseudo 0 and 1: mean 4/7, sd 0.362, t(6, 0.975) 2.447 → half 0.3346
    result = stats.classical_mean([0.25, 0.5, 0.75, 0.5, 1.0])
    v = np.array([0.25, 0.5, 0.75, 0.5, 1.0, 0.0, 1.0])
    half = sps.t.ppf(0.975, 6) * v.std(ddof=1) / math.sqrt(7)
    assert result.estimate == 0.6  # the plain mean: the pseudo-values move the interval, not the estimate
    assert result.ci == pytest.approx((4 / 7 - half, 4 / 7 + half))
    assert (result.method, result.estimator, result.df, result.n) == ("t_adjusted", "classical", 6, 5)
    # below the minimum of questions: the estimate, no interval
    assert stats.classical_mean([0.4, 0.6, 0.8, 0.2]).ci is None
    assert stats.classical_mean([0.4, 0.6, 0.8], min_questions=3).ci is not None
    with pytest.raises(ValueError):
        stats.classical_mean([])


@pytest.mark.parametrize("n", [3, 5, 10])
def test_small_n_coverage_on_synthetic_ratings_with_a_known_mean(n):
    """LALMs from almost always wrong to almost always right, three discrete ratings per answer: the interval shown
    covers the known mean at least 94 % of the time for every LALM, or is not shown (3 < 5 questions). Plain t on
    the same answers falls short at 5 questions — ties at the ends of the scale give near-zero standard errors."""
    rng = np.random.default_rng(n)
    plain_hits, plain_draws = 0, 0
    for share in (0.05, 0.15, 0.35, 0.6, 0.85, 0.95):
        truth, hits = _known_mean(share), 0
        for _ in range(1500):
            y = _synthetic_answers(rng, share_correct=share, n=n)
            result = stats.classical_mean(y)
            if n < stats.MIN_QUESTIONS:
                assert result.ci is None
                continue
            hits += result.ci[0] <= truth <= result.ci[1]
            half = sps.t.ppf(0.975, n - 1) * y.std(ddof=1) / math.sqrt(n)
            plain_hits += abs(y.mean() - truth) <= half
            plain_draws += 1
        if n >= stats.MIN_QUESTIONS:
            # 1500 draws: a true coverage of 0.95 falls below 0.94 with probability about 0.04; these sit near 0.99
            assert hits / 1500 >= 0.94, (share, hits / 1500)
    if n == 5:
        assert plain_hits / plain_draws < 0.92


def test_the_power_tuning_lambda_is_cochrans_regression_coefficient_clipped_to_0_1():
    # dy = [−.5, 0, 0, .5], dŷ = [−.3, −.3, .3, .3]: Σ dy·dŷ = 0.3, Σ dŷ² = 0.36 → b = 5/6
    assert stats.regression_lambda([0, 0.5, 0.5, 1], [0.2, 0.2, 0.8, 0.8]) == pytest.approx(5 / 6)
    assert stats.regression_lambda([0, 0.5, 0.5, 1], [0.8, 0.8, 0.2, 0.2]) == 0.0  # negative slope: clipped
    assert stats.regression_lambda([0, 0.2, 0.4, 1], [0.45, 0.5, 0.5, 0.55]) == 1.0  # slope 8.5: clipped
    assert stats.regression_lambda([0.1, 0.9], [0.5, 0.5]) == 0.0  # constant predictions teach nothing
    # weights: the second pair counted twice equals it repeated
    assert stats.regression_lambda([0, 0.5, 1], [0.2, 0.6, 0.7], w=[1, 2, 1]) == pytest.approx(
        stats.regression_lambda([0, 0.5, 0.5, 1], [0.2, 0.6, 0.6, 0.7]))


def test_the_ppi_estimate_is_ppi_py_called_directly_and_its_interval_is_for_the_benchmarks_answers():
    rng = np.random.default_rng(7)
    y_all = rng.beta(2, 3, 400)
    f_all = np.clip(y_all + rng.normal(0, 0.15, 400), 0, 1)
    labelled = rng.choice(400, 40, replace=False)
    y, f = y_all[labelled], f_all[labelled]
    for tuning, ddof in ((True, 2), (False, 1)):
        lam = stats.regression_lambda(y, f) if tuning else 1.0
        ours = stats.ppi_mean(y=y, yhat=f, yhat_all=f_all, power_tuning=tuning)
        assert ours.estimate == pytest.approx(float(np.squeeze(ppi_py.ppi_mean_pointestimate(y, f, f_all, lam=lam))))
        # Cochran's regression estimator with no term for the predictions' mean: the residuals y − λŷ plus the
        # pseudo-labels 0 and 1 at mean ŷ counted a quarter each, t_{n−ddof}
        r = np.concatenate([y - lam * f, [-lam * f.mean(), 1 - lam * f.mean()]])
        counts = np.array([1.0] * 40 + [0.25, 0.25])
        centre_r = np.sum(counts * r) / counts.sum()
        se = math.sqrt(np.sum(counts * (r - centre_r) ** 2) / (counts.sum() - ddof) / counts.sum())
        centre = lam * f_all.mean() + centre_r
        half = sps.t.ppf(0.975, 40 - ddof) * se
        assert ours.ci == pytest.approx((centre - half, centre + half))
        assert (ours.n, ours.method, ours.df) == (40, "ppi_t", 40 - ddof)
        # the pseudo-labels widen the plain rectifier interval a little (here a good predictor: residual sd 0.15)
        plain = sps.t.ppf(0.975, 40 - ddof) * np.std(y - lam * f, ddof=ddof) / math.sqrt(40)
        assert plain < half < 1.2 * plain
        # ppi_py's own interval (a larger population's mean, with Var(λŷ)/N) is wider at the same λ and level
        low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05, lam=lam)
        assert float(high[0] - low[0]) > 2 * sps.norm.isf(0.025) * np.std(y - lam * f) / math.sqrt(40)
    assert 0 < stats.regression_lambda(y, f) < 1
    with pytest.raises(ValueError, match="at least 5"):
        stats.ppi_mean(y=[0.5, 0.7, 0.2, 0.4], yhat=[0.5, 0.6, 0.3, 0.3], yhat_all=[0.5, 0.4, 0.6])
    with pytest.raises(ValueError, match="at least 3"):
        stats.ppi_mean(y=[0.5, 0.7], yhat=[0.5, 0.6], yhat_all=[0.5, 0.4, 0.6], min_questions=2)


def _coverage(method, reps: int, seed: int) -> tuple[float, float]:
    """Coverage of the estimand, the mean of the drawn benchmark's N answers (a new benchmark each draw)."""
    rng = np.random.default_rng(seed)
    hits, widths = 0, []
    for _ in range(reps):
        result, true_mean = method(rng)
        hits += result.ci[0] <= true_mean <= result.ci[1]
        widths.append(result.width)
    return hits / reps, float(np.mean(widths))


def _draw(rng, big_n: int = 300):
    y = rng.beta(2, 3, big_n)
    f = np.clip(y + rng.normal(0, 0.12, big_n), 0, 1)
    return y, f


def test_ppi_covers_a_known_mean_with_small_samples_and_is_narrower_than_human_only():
    def ppi(rng):
        y, f = _draw(rng)
        idx = rng.choice(y.size, 15, replace=False)
        return stats.ppi_mean(y=y[idx], yhat=f[idx], yhat_all=f), y.mean()

    def classical(rng):
        y, _ = _draw(rng)
        return stats.classical_mean(y[rng.choice(y.size, 15, replace=False)]), y.mean()

    ppi_cover, ppi_width = _coverage(ppi, 600, 11)
    classical_cover, classical_width = _coverage(classical, 600, 11)
    # 600 draws: a true 95 % coverage lands in [0.93, 0.97] with probability ≈ 0.98
    assert ppi_cover >= 0.93 and classical_cover >= 0.93
    assert ppi_width < 0.8 * classical_width


def test_inclusion_probabilities_follow_sigma_with_a_uniform_floor_and_sum_to_the_budget():
    sigma = np.array([0.0, 0.1, 0.1, 0.2])
    pi = stats.inclusion_probabilities(sigma, budget=2, floor=0.2)
    # shares: 0.8·σ/0.4 + 0.2/4 = [0.05, 0.25, 0.25, 0.45] → π = 2 × shares
    assert pi == pytest.approx([0.1, 0.5, 0.5, 0.9])
    assert pi.sum() == pytest.approx(2)
    weights = stats.inverse_probability_weights(pi)
    assert weights == pytest.approx([10.0, 2.0, 2.0, 1.0 / 0.9])


def test_inclusion_probabilities_cap_at_one_and_redistribute_the_rest():
    pi = stats.inclusion_probabilities([1.0, 0.01, 0.01, 0.01], budget=2, floor=0.1)
    assert pi[0] == 1.0
    assert pi.sum() == pytest.approx(2)
    assert pi[1:] == pytest.approx([1 / 3] * 3)  # the other three share the remaining budget equally
    assert stats.inclusion_probabilities([0, 0, 0, 0], budget=1) == pytest.approx([0.25] * 4)
    with pytest.raises(ValueError):
        stats.inclusion_probabilities([0.1, 0.2], budget=3)
    with pytest.raises(ValueError):
        stats.inverse_probability_weights([0.5, 0.0])


def test_the_active_interval_is_the_hajek_design_variance_with_one_minus_pi_as_computed_by_hand():
    y = np.array([0.5, 1.0, 0.25, 0.75, 0.0, np.nan, np.nan])
    pi = np.array([0.5, 1.0, 0.25, 0.5, 0.4, 0.3, 0.6])
    sampled = np.array([True, True, True, True, True, False, False])
    result = stats.active_mean(y=y, pi=pi, sampled=sampled)  # no ORCA: λ = 0
    w = 1 / pi[sampled]
    hajek = np.sum(w * y[sampled]) / np.sum(w)
    # the interval: the five labels plus pseudo-labels 0 and 1 with the mean weight and π, 7 values, 6 df
    v = np.concatenate([y[sampled], [0.0, 1.0]])
    wp = np.concatenate([w, [w.mean()] * 2])
    pp = np.concatenate([pi[sampled], [pi[sampled].mean()] * 2])
    centre = np.sum(wp * v) / np.sum(wp)
    var = np.sum((1 - pp) * wp ** 2 * (v - centre) ** 2) / np.sum(wp) ** 2 * 7 / 6
    half = sps.t.ppf(0.975, 6) * math.sqrt(var)
    assert result.estimate == pytest.approx(hajek)
    assert result.ci == pytest.approx((max(0, centre - half), min(1, centre + half)))
    assert (result.method, result.estimator, result.df) == ("design_t", "active", 6)
    # an answer drawn with certainty (π = 1) adds nothing to the design variance — only its raters' share does
    certain = stats.active_mean(y=[0.0, 1.0, 0.5, 0.5, 0.5], pi=[1.0] * 5, sampled=[True] * 5)
    assert certain.ci == pytest.approx((0.5, 0.5))
    raters = stats.active_mean(y=[0.0, 1.0, 0.5, 0.5, 0.5], pi=[1.0] * 5, sampled=[True] * 5, within=[0.01] * 5)
    assert raters.se == pytest.approx(math.sqrt(5 * 0.01 / 49))  # Σ w v / (Σ w + 2 pseudo-weights)²
    # half of the draw rated (the queue rates drawn answers in random-key order): effective π halves
    half_rated = stats.active_mean(y=y, pi=pi, sampled=sampled, drawn=np.ones(7, dtype=bool))
    assert half_rated.estimate == pytest.approx(hajek) and half_rated.width > result.width
    assert stats.active_mean(y=y[:4], pi=pi[:4], sampled=sampled[:4]).ci is None  # 4 labels < 5


def test_the_active_estimate_is_unbiased_and_covers_a_known_finite_population_mean():
    rng = np.random.default_rng(5)
    y = rng.beta(2, 3, 400)
    f = np.clip(y + rng.normal(0, 0.12, 400), 0, 1)
    sigma = np.abs(y - f) + 0.02  # an uncertainty that tracks the model's error
    pi = stats.inclusion_probabilities(sigma, budget=40)
    truth = y.mean()
    estimates, hits = [], 0
    for _ in range(600):
        drawn = rng.random(400) < pi
        sampled = drawn & (rng.random(400) < 0.7)  # 70 % of the draw rated so far, at random
        result = stats.active_mean(y=np.where(sampled, y, np.nan), yhat=f, pi=pi, sampled=sampled, drawn=drawn)
        estimates.append(result.estimate)
        hits += result.ci[0] <= truth <= result.ci[1]
    assert abs(np.mean(estimates) - truth) < 0.004
    assert hits / 600 >= 0.93


def test_rank_agreement_is_spearman_and_kendall_over_shared_lalms():
    result = stats.rank_agreement({"a": 1, "b": 2, "c": 3, "d": 4, "e": 9}, {"a": 1, "b": 3, "c": 2, "d": 4})
    # one swapped pair of 4: ρ = 1 − 6·2/(4·15) = 0.8; τ = (5 − 1)/6
    assert result == {"rho": pytest.approx(0.8), "tau": pytest.approx(4 / 6), "n": 4}
    assert stats.rank_agreement({"a": 1, "b": 2}, {"a": 1, "b": 2}) is None


def test_per_benchmark_estimates_combine_by_answer_share():
    a = stats.classical_mean([0.2, 0.4, 0.6, 0.8, 0.5, 0.3])
    b = stats.active_mean(y=[0.5, 1.0, 0.25, 0.75, 0.0], pi=[0.5, 1.0, 0.25, 0.5, 0.4], sampled=[True] * 5)
    combined = stats.stratified([(30, a), (10, b)])
    assert combined.estimate == pytest.approx(0.75 * a.estimate + 0.25 * b.estimate)
    se = math.sqrt((0.75 * a.se) ** 2 + (0.25 * b.se) ** 2)
    centre = 0.75 * a.centre + 0.25 * b.centre
    half = sps.t.ppf(0.975, min(a.df, b.df)) * se
    assert combined.ci == pytest.approx((centre - half, centre + half))
    assert (combined.method, combined.estimator) == ("stratified_t", "active+classical")
