"""The leaderboard's statistics (Django-free): hand-computed fixtures, ppi_py called directly, coverage on
synthetic data with a known mean, the active policy's probabilities and weights."""
import math

import numpy as np
import ppi_py
import pytest
from scipy import stats as sps

from modelling.leaderboard import stats


def test_the_cluster_bootstrap_resamples_questions_as_hand_computed():
    # LALM X: question A has two answers (0 and 0.5), question B one (1.0). Resampling two questions gives
    # AA (p 1/4, mean 0.25), AB (p 1/2, mean 0.5), BB (p 1/4, mean 1.0): the 2.5 % and 97.5 % percentiles are
    # 0.25 and 1.0; the point estimate is the mean over answers, 0.5.
    result = stats.cluster_bootstrap_means(
        values=[0.0, 0.5, 1.0, 0.75], clusters=["A", "A", "B", "A"], groups=["X", "X", "X", "Y"],
        resamples=4000, seed=1,
    )
    assert result["X"].estimate == pytest.approx(0.5)
    assert result["X"].ci == (0.25, 1.0)
    assert result["X"].n == 3
    # Y answered one question only: no interval.
    assert result["Y"].estimate == 0.75 and result["Y"].ci is None


def test_the_cluster_bootstrap_is_reproducible_and_wider_than_treating_answers_as_independent():
    rng = np.random.default_rng(0)
    questions = np.repeat(np.arange(40), 5)
    # answers to one question share its difficulty: strong clustering
    values = np.clip(rng.normal(0.5, 0.3, 40)[questions] + rng.normal(0, 0.05, questions.size), 0, 1)
    kwargs = dict(values=values, groups=["X"] * values.size, resamples=1000, seed=3)
    clustered = stats.cluster_bootstrap_means(clusters=questions, **kwargs)["X"]
    again = stats.cluster_bootstrap_means(clusters=questions, **kwargs)["X"]
    naive = stats.cluster_bootstrap_means(clusters=np.arange(values.size), **kwargs)["X"]
    assert clustered.ci == again.ci
    assert clustered.width > 1.8 * naive.width


def test_the_student_t_interval_matches_hand_computed_numbers():
    # mean 0.5, sd 0.204124, se 0.102062, t(3, 0.975) 3.182446 → half-width 0.324807
    result = stats.mean_ci([0.25, 0.5, 0.75, 0.5])
    assert result.estimate == 0.5
    assert result.ci == pytest.approx((0.175193, 0.824807), abs=2e-6)
    assert stats.mean_ci([0.4]).ci is None
    with pytest.raises(ValueError):
        stats.mean_ci([])


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
        # Cochran's regression estimator: t_{n−ddof} · sd(y − λŷ; ddof) / √n, no term for the predictions' mean
        half = sps.t.ppf(0.975, 40 - ddof) * np.std(y - lam * f, ddof=ddof) / math.sqrt(40)
        assert ours.ci == pytest.approx((ours.estimate - half, ours.estimate + half))
        assert ours.n == 40
        # ppi_py's own interval (a larger population's mean, with Var(λŷ)/N) is wider at the same λ and level
        low, high = ppi_py.ppi_mean_ci(y, f, f_all, alpha=0.05, lam=lam)
        assert float(high[0] - low[0]) > 2 * sps.norm.isf(0.025) * np.std(y - lam * f) / math.sqrt(40)
    assert 0 < stats.regression_lambda(y, f) < 1
    with pytest.raises(ValueError, match="at least 3"):
        stats.ppi_mean(y=[0.5, 0.7], yhat=[0.5, 0.6], yhat_all=[0.5, 0.4, 0.6])
    with pytest.raises(ValueError, match="at least 2"):
        stats.ppi_mean(y=[0.5], yhat=[0.5], yhat_all=[0.5, 0.4], power_tuning=False)


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
        return stats.mean_ci(y[rng.choice(y.size, 15, replace=False)]), y.mean()

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


def test_the_active_estimate_is_unbiased_and_covers_a_known_finite_population_mean():
    rng = np.random.default_rng(5)
    y = rng.beta(2, 3, 400)
    f = np.clip(y + rng.normal(0, 0.12, 400), 0, 1)
    sigma = np.abs(y - f) + 0.02  # an uncertainty that tracks the model's error
    pi = stats.inclusion_probabilities(sigma, budget=40)
    truth = y.mean()
    estimates, hits = [], 0
    for _ in range(600):
        sampled = rng.random(400) < pi
        result = stats.active_mean(y=np.where(sampled, y, np.nan), yhat=f, pi=pi, sampled=sampled)
        estimates.append(result.estimate)
        hits += result.ci[0] <= truth <= result.ci[1]
    assert abs(np.mean(estimates) - truth) < 0.003
    assert hits / 600 >= 0.93


def test_pairwise_differences_are_paired_with_holm_corrected_p_values():
    values = {
        "A": {1: 1.0, 2: 0.75, 3: 1.0, 4: 0.75, 5: 1.0},
        "B": {1: 0.25, 2: 0.0, 3: 0.25, 4: 0.25, 5: 0.0},
        "C": {1: 0.5, 2: 0.5, 3: 0.5, 6: 1.0},
    }
    pairs = {(p.a, p.b): p for p in stats.pairwise_differences(values)}
    ab = pairs[("A", "B")]
    d = np.array([0.75, 0.75, 0.75, 0.5, 1.0])
    assert ab.n == 5 and ab.mean_diff == pytest.approx(0.75)
    half = sps.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert ab.ci == pytest.approx((0.75 - half, 0.75 + half))
    raw = [pairs[k].p_value for k in (("A", "B"), ("A", "C"), ("B", "C"))]
    assert raw[0] == pytest.approx(sps.ttest_1samp(d, 0).pvalue)
    # Holm by hand: sort p ascending, multiply by (m − rank), running maximum, cap 1
    order = np.argsort(raw)
    adjusted = np.empty(3)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, raw[i] * (3 - rank)))
        adjusted[i] = running
    assert [pairs[k].p_holm for k in (("A", "B"), ("A", "C"), ("B", "C"))] == pytest.approx(adjusted)
    assert ab.verdict == "a>b"
    # A − C over questions 1–3: 0.5, 0.25, 0.5 — "beats" only where the CI excludes 0 and Holm p < 0.05
    ac = pairs[("A", "C")]
    assert ac.verdict == ("a>b" if ac.ci[0] > 0 and ac.p_holm < 0.05 else "tie")


def test_rank_agreement_is_spearman_and_kendall_over_shared_lalms():
    result = stats.rank_agreement({"a": 1, "b": 2, "c": 3, "d": 4, "e": 9}, {"a": 1, "b": 3, "c": 2, "d": 4})
    # one swapped pair of 4: ρ = 1 − 6·2/(4·15) = 0.8; τ = (5 − 1)/6
    assert result == {"rho": pytest.approx(0.8), "tau": pytest.approx(4 / 6), "n": 4}
    assert stats.rank_agreement({"a": 1, "b": 2}, {"a": 1, "b": 2}) is None


def test_the_budget_planner_matches_hand_computed_numbers():
    diffs = [0.1, 0.3, -0.1, 0.3]  # mean 0.15, sd 0.191485
    plan = stats.budget_plan(diffs=diffs, ratings_per_answer=3, available_pairs=100)
    z = sps.norm.ppf(0.975)
    needed = math.ceil((z * np.std(diffs, ddof=1) / 0.15) ** 2)
    assert plan.needed_pairs_uniform == needed == 7
    assert plan.more_ratings_uniform == 2 * 3 * (7 - 4)
    assert plan.reachable_uniform and plan.orca_factor is None and plan.reachable_active is None
    # perfectly predicted differences and uniform σ: factor 0, so the active plan needs the minimum of 2 pairs
    plan = stats.budget_plan(diffs=diffs, ratings_per_answer=3, available_pairs=5, predicted_diffs=diffs,
                             sigma_unrated=[0.2] * 10)
    assert plan.orca_factor == pytest.approx(0.0, abs=1e-12)
    assert plan.needed_pairs_active == 2 and plan.more_ratings_active == 0
    assert not plan.reachable_uniform and plan.reachable_active


def test_three_labels_give_a_finite_interval_and_two_are_refused():
    # with λ estimated, three labels leave one degree of freedom (t_1): finite, here clipped to [0, 1]
    result = stats.active_mean(y=[0.5, 0.75, 0.25, np.nan], yhat=[0.4, 0.7, 0.3, 0.5], pi=[0.5] * 4,
                               sampled=[True, True, True, False])
    assert all(np.isfinite(result.ci)) and result.ci[0] <= result.estimate <= result.ci[1]
    result = stats.ppi_mean(y=[0.5, 0.75, 0.25], yhat=[0.4, 0.7, 0.3], yhat_all=[0.4, 0.7, 0.3, 0.5])
    assert all(np.isfinite(result.ci))
    with pytest.raises(ValueError, match="at least 3"):
        stats.active_mean(y=[0.5, 0.75, np.nan], yhat=[0.4, 0.7, 0.5], pi=[0.5] * 3, sampled=[True, True, False])
