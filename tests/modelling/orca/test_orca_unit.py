"""Unit tests of modelling.orca: likelihoods, moments, clamping, metrics, input files and encoding.

Expected values are computed by hand or with scipy in the test, never with the function under test.
No Django, no database.
"""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from modelling.orca.data import InputFields, OrcaDataError, OrcaItem, build_text, item_targets, load_items
from modelling.orca.losses import (
    beta_log_prob,
    beta_moments,
    categorical_moments,
    moment_matched_beta,
    predict_moments,
    rating_nll,
    reduce_nll,
)
from modelling.orca.metrics import (
    clamp_mu,
    clamp_predictions,
    evaluate_predictions,
    kendall_tau_b,
    sharpen_variance,
    spearman,
    tune_clamp_threshold,
    tune_concentration_scale,
)

SHARED_DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
SEED108 = SHARED_DATA / "orca_seed108"


# ----------------------------------------------------------------------------- likelihoods and moments

def test_beta_log_prob_hand_value():
    # Beta(2, 2) density is 6 y (1 − y): at y = 0.5 it is 1.5.
    lp = beta_log_prob(torch.log(torch.tensor(2.0)), torch.log(torch.tensor(2.0)), torch.tensor(0.5))
    assert float(lp) == pytest.approx(math.log(1.5), abs=1e-6)
    # Beta(1, 1) is uniform: log density 0 everywhere.
    lp = beta_log_prob(torch.tensor(0.0), torch.tensor(0.0), torch.tensor([0.1, 0.7]))
    assert torch.allclose(lp, torch.zeros(2), atol=1e-6)


def test_beta_rating_nll_matches_scipy_with_clamp_and_padding():
    a, b = 2.5, 0.7
    out = torch.tensor([[math.log(a), math.log(b)]])
    ratings = torch.tensor([[1, 3, 5, 0]])  # 0 = padding
    nll = rating_nll(out, ratings, "beta", eps=0.01)
    ys = [0.01, 0.5, 0.99]  # (r−1)/4 clamped to [0.01, 0.99]
    expected = [-stats.beta.logpdf(y, a, b) for y in ys] + [0.0]
    assert nll.shape == (1, 4)
    np.testing.assert_allclose(nll[0].numpy(), expected, rtol=1e-5, atol=1e-5)


def test_multinomial_rating_nll_hand_value():
    logits = torch.tensor([[0.0, 1.0, 2.0, 0.5, -1.0]])
    ratings = torch.tensor([[2, 5, 0]])
    z = sum(math.exp(v) for v in [0.0, 1.0, 2.0, 0.5, -1.0])
    expected = [-(1.0 - math.log(z)), -(-1.0 - math.log(z)), 0.0]
    np.testing.assert_allclose(rating_nll(logits, ratings, "multinomial")[0].numpy(), expected, rtol=1e-5)


def test_rating_nll_rejects_wrong_width_and_unknown_head():
    with pytest.raises(ValueError, match="expects 2 outputs"):
        rating_nll(torch.zeros(1, 5), torch.tensor([[1]]), "beta")
    with pytest.raises(ValueError, match="unknown head"):
        rating_nll(torch.zeros(1, 2), torch.tensor([[1]]), "gaussian")
    with pytest.raises(ValueError, match="'bernoulli' is scored but not trained here"):
        rating_nll(torch.zeros(1, 2), torch.tensor([[1]]), "bernoulli")


def test_reduce_nll_rating_item_and_sum():
    nll = torch.tensor([[1.0, 3.0, 0.0], [4.0, 0.0, 0.0]])
    ratings = torch.tensor([[1, 2, 0], [5, 0, 0]])
    assert float(reduce_nll(nll, ratings, "rating")) == pytest.approx((1 + 3 + 4) / 3)
    assert float(reduce_nll(nll, ratings, "item")) == pytest.approx((2.0 + 4.0) / 2)
    assert float(reduce_nll(nll, ratings, "sum")) == pytest.approx(8.0)


def test_beta_moments_match_scipy():
    for a, b in [(2.0, 3.0), (0.5, 0.5), (10.0, 1.5)]:
        mu, var = beta_moments(torch.tensor(a), torch.tensor(b))
        assert float(mu) == pytest.approx(stats.beta(a, b).mean(), rel=1e-6)
        assert float(var) == pytest.approx(stats.beta(a, b).var(), rel=1e-5)
    # by hand: Beta(2, 3) has mean 2/5 and variance 6 / (25 · 6) = 0.04
    mu, var = beta_moments(torch.tensor(2.0), torch.tensor(3.0))
    assert float(mu) == pytest.approx(0.4) and float(var) == pytest.approx(0.04)


def test_categorical_moments_hand_values():
    probs = torch.tensor([[0.2] * 5, [0.5, 0.0, 0.0, 0.0, 0.5], [0.0, 0.0, 1.0, 0.0, 0.0]])
    mu, var = categorical_moments(probs)
    # uniform over 0, .25, .5, .75, 1: mean .5, variance (.25 + .0625 + 0 + .0625 + .25)/5 = .125
    np.testing.assert_allclose(mu.numpy(), [0.5, 0.5, 0.5], atol=1e-6)
    np.testing.assert_allclose(var.numpy(), [0.125, 0.25, 0.0], atol=1e-6)


def test_predict_moments_outputs_are_valid_for_both_heads():
    torch.manual_seed(0)
    b = predict_moments(torch.randn(6, 2) * 3, "beta")
    m = predict_moments(torch.randn(6, 5) * 3, "multinomial")
    for p in (b, m):
        assert (p["alpha"] > 0).all() and (p["beta"] > 0).all()
        assert ((p["mu"] >= 0) & (p["mu"] <= 1)).all() and (p["var"] >= 0).all()
    # moment-matched Beta of the multinomial head reproduces its mean and variance
    mu2, var2 = beta_moments(m["alpha"], m["beta"])
    np.testing.assert_allclose(mu2.numpy(), m["mu"].numpy(), atol=1e-5)
    np.testing.assert_allclose(var2.numpy(), m["var"].numpy(), rtol=1e-3, atol=1e-6)


def test_moment_matched_beta_hand_value():
    # mean 0.4, variance 0.04 is Beta(2, 3)
    a, b = moment_matched_beta(torch.tensor(0.4), torch.tensor(0.04))
    assert float(a) == pytest.approx(2.0, rel=1e-5) and float(b) == pytest.approx(3.0, rel=1e-5)


# ----------------------------------------------------------------------------------- clamping, metrics

def test_clamp_mu_hand_cases():
    mu = [0.05, 0.05, 0.95, 0.95, 0.5, 0.125, 0.875]
    var = [0.001, 0.1, 0.001, 0.1, 0.0, 0.0, 0.0]
    # clamp only when within 0.125 of 0/1 (strictly) and var ≤ threshold
    np.testing.assert_array_equal(clamp_mu(mu, var, 0.01), [0.0, 0.05, 1.0, 0.95, 0.5, 0.125, 0.875])
    np.testing.assert_array_equal(clamp_mu(mu, var, None), mu)


def test_clamped_items_get_zero_variance_and_others_keep_theirs():
    mu = [0.05, 0.05, 0.95, 0.95, 0.5]
    var = [0.001, 0.1, 0.002, 0.1, 0.0005]
    mu_c, var_c = clamp_predictions(mu, var, 0.01)
    np.testing.assert_array_equal(mu_c, [0.0, 0.05, 1.0, 0.95, 0.5])
    np.testing.assert_array_equal(var_c, [0.0, 0.1, 0.0, 0.1, 0.0005])  # only the two clamped items change
    mu_n, var_n = clamp_predictions(mu, var, None)
    np.testing.assert_array_equal(mu_n, mu) and np.testing.assert_array_equal(var_n, var)


def test_tune_clamp_threshold_finds_helpful_threshold():
    # humans: two unanimous zeros, two unanimous ones, a middle item; predictions near the ends with low var
    hm = [0.0, 0.0, 1.0, 1.0, 0.5, 0.25]
    hv = [0.0, 0.0, 0.0, 0.0, 0.1, 0.05]
    mu = [0.05, 0.1, 0.9, 0.95, 0.5, 0.3]
    var = [0.002, 0.003, 0.004, 0.001, 0.05, 0.03]
    thr, m = tune_clamp_threshold(mu, var, hm, hv)
    assert thr == pytest.approx(0.004)  # clamps all four extremes; the smallest such threshold
    assert m["mae_mu"] == pytest.approx(abs(0.3 - 0.25) / 6)
    # the clamped four predict σ² = 0 (their humans agree), so only the two unclamped items err in σ²
    assert m["mae_var"] == pytest.approx((abs(0.05 - 0.1) + abs(0.03 - 0.05)) / 6)
    # clamping that cannot help (nothing is extreme) gives None
    thr, _ = tune_clamp_threshold([0.4, 0.5, 0.6], [0.01] * 3, [0.4, 0.5, 0.6], [0.0] * 3)
    assert thr is None


def test_sharpen_variance_is_the_variance_of_the_beta_with_scaled_concentration():
    a, b = np.array([0.5, 2.0, 9.0, 1.0]), np.array([1.5, 3.0, 0.4, 1.0])
    mu, var = a / (a + b), stats.beta.var(a, b)
    for kappa in (0.25, 1.0, 3.0, 40.0):
        np.testing.assert_allclose(sharpen_variance(mu, var, kappa), stats.beta.var(kappa * a, kappa * b), rtol=1e-9)
    # μ = 0.5, σ² = 0.05: α + β = 0.25/0.05 − 1 = 4; κ = 2 gives 0.25 / (8 + 1)
    assert sharpen_variance([0.5], [0.05], 2.0)[0] == pytest.approx(0.25 / 9)
    # degenerate predictions keep their σ²: zero variance, and σ² ≥ μ(1−μ)
    np.testing.assert_array_equal(sharpen_variance([0.3, 0.5], [0.0, 0.3], 4.0), [0.0, 0.3])
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="concentration scale"):
            sharpen_variance([0.5], [0.05], bad)


def test_clamp_predictions_sharpens_unclamped_variance_and_zeroes_clamped():
    mu, var = [0.05, 0.5, 0.95], [0.001, 0.05, 0.2]
    mu_c, var_c = clamp_predictions(mu, var, 0.01, concentration_scale=2.0)
    np.testing.assert_array_equal(mu_c, [0.0, 0.5, 0.95])
    # clamped: 0; μ 0.5: 0.25/9; μ 0.95 (σ² above the threshold, not clamped): α+β = 0.0475/0.2 − 1 < 0 is
    # degenerate (σ² ≥ μ(1−μ)), so it keeps its σ²
    np.testing.assert_allclose(var_c, [0.0, 0.25 / 9, 0.2])


def test_tune_concentration_scale_lowers_mae_var_without_touching_mu():
    # six items, four unanimous (s² = 0) and two with s² 0.03; the model spreads σ² 0.02–0.06 over all six
    mu = np.array([0.2, 0.4, 0.5, 0.6, 0.7, 0.8])
    var = np.array([0.03, 0.05, 0.06, 0.05, 0.04, 0.02])
    hm = [0.25, 0.5, 0.5, 0.5, 0.75, 0.75]
    hv = [0.0, 0.0, 0.03, 0.03, 0.0, 0.0]
    kappa, m = tune_concentration_scale(mu, var, hm, hv)
    raw = evaluate_predictions(mu, var, hm, hv)
    assert kappa > 1.0  # the humans agree more than the Betas say: sharpen
    assert m["mae_var"] < raw["mae_var"]
    assert (m["rho"], m["tau"], m["mae_mu"]) == (raw["rho"], raw["tau"], raw["mae_mu"])
    _, var_k = clamp_predictions(mu, var, None, concentration_scale=kappa)
    assert m["mae_var"] == pytest.approx(float(np.abs(var_k - np.array(hv)).mean()))
    # σ² already equal to the human variance: κ = 1 is kept (ties go to 1)
    exact = np.array([0.03, 0.05, 0.06, 0.05, 0.04, 0.02])
    assert tune_concentration_scale(mu, exact, hm, exact)[0] == 1.0
    # no item with 2 ratings: nothing to tune
    assert tune_concentration_scale(mu, var, hm, [math.nan] * 6)[0] == 1.0
    with pytest.raises(ValueError, match="concentration scales"):
        tune_concentration_scale(mu, var, hm, hv, scales=[0.0, 2.0])


def test_rank_correlations_hand_cases():
    # one swapped pair: ρ = 1 − 6·Σd²/(n(n²−1)) = 1 − 12/60; τ = (5 concordant − 1 discordant) / 6
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # ties: one pair tied in x, another in y, the other 4 concordant: τ-b = 4 / sqrt((6 − 1)(6 − 1))
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    assert spearman([3, 2, 1], [1, 2, 3]) == pytest.approx(-1.0)
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3])) and math.isnan(kendall_tau_b([1, 2, 3], [2, 2, 2]))
    with pytest.raises(ValueError, match="equal length"):
        spearman([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="equal length"):
        kendall_tau_b([1], [1])


def test_evaluate_predictions_mae_var_skips_single_rating_items():
    mu, var = [0.1, 0.5, 0.9], [0.01, 0.2, 0.3]
    hm, hv = [0.0, 0.5, 1.0], [0.0, 0.1, math.nan]
    m = evaluate_predictions(mu, var, hm, hv)
    assert m["mae_mu"] == pytest.approx((0.1 + 0.0 + 0.1) / 3)
    assert m["mae_var"] == pytest.approx((0.01 + 0.1) / 2)
    assert m["rho"] == pytest.approx(1.0) and m["tau"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------ input files

ITEM = {"question": "How many?", "reference": "Three", "rationale": "Three voices.", "transcription": None,
        "candidate": "Two.", "ratings": [3, None, 1]}


def test_load_jsonl_and_dict_formats(tmp_path):
    jl = tmp_path / "a.jsonl"
    jl.write_text(json.dumps({"id": "x1", **ITEM}) + "\n\n" + json.dumps({"id": "x2", **ITEM, "ratings": [5]}) + "\n")
    dj = tmp_path / "b.json"
    dj.write_text(json.dumps({"x1": ITEM, "x2": {**ITEM, "ratings": [5]}}))
    for p in (jl, dj):
        items = load_items(p)
        assert [i.id for i in items] == ["x1", "x2"]
        assert items[0].ratings == (3, 1) and items[0].transcription == ""
        assert items[0].normalised_ratings == [0.5, 0.0]


def test_item_targets_sample_variance():
    items = [OrcaItem("a", "q", "r", "c", ratings=(3, 1)), OrcaItem("b", "q", "r", "c", ratings=(5,))]
    means, variances = item_targets(items)
    assert means == pytest.approx([0.25, 1.0])
    assert variances[0] == pytest.approx(((0.5 - 0.25) ** 2 + (0 - 0.25) ** 2) / 1)  # ddof = 1
    assert math.isnan(variances[1])


@pytest.mark.parametrize(
    "content, pattern",
    [
        (json.dumps({"id": "x1", **ITEM}) + "\n" + json.dumps({"id": "x2", **ITEM, "ratings": [7]}),
         r"line 2: field 'ratings'\[0\] = 7 is outside 1-5"),
        (json.dumps({"id": "x1", **{k: v for k, v in ITEM.items() if k != "candidate"}}),
         r"line 1: field 'candidate' is missing"),
        (json.dumps({"id": "x1", **ITEM, "question": 3}), r"line 1: field 'question' must be a string"),
        (json.dumps({"id": "x1", **ITEM}) + "\n{oops", r"line 2: invalid JSON"),
        (json.dumps({"k1": ITEM, "k2": {**ITEM, "ratings": [None]}}),
         r"key 'k2': field 'ratings' has no non-null rating"),
        (json.dumps({"k1": {**ITEM, "ratings": "5"}}), r"key 'k1': field 'ratings' must be a list"),
    ],
)
def test_bad_input_names_file_location_and_field(tmp_path, content, pattern):
    p = tmp_path / "bad.jsonl"
    p.write_text(content)
    with pytest.raises(OrcaDataError, match=pattern) as exc:
        load_items(p)
    assert str(p) in str(exc.value)


def test_unlabelled_items_allowed_for_scoring(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps({"id": "x", **{k: v for k, v in ITEM.items() if k != "ratings"}}) + "\n")
    assert load_items(p, require_ratings=False)[0].ratings == ()
    with pytest.raises(OrcaDataError, match="field 'ratings' is missing"):
        load_items(p)


def test_build_text_field_flags():
    it = OrcaItem("a", "Q?", "R", "C", rationale="A", transcription="T")
    assert build_text(it) == "|context: A |question: Q? |correct answer: R |candidate answer: C"
    assert build_text(it, InputFields(rationale=False, question=False, transcript=True)) == (
        "|transcript: T |correct answer: R |candidate answer: C"
    )


# ---------------------------------------------------------------------------------- real data (skips)

def test_seed108_dev_always_zero_variance_baseline():
    dev = SEED108 / "seed_108_dev.json"
    if not dev.exists():
        pytest.skip(f"{dev} is absent (../shared/data sits beside the repository; a fresh clone lacks it)")
    items = load_items(dev)
    hm, hv = item_targets(items)
    m = evaluate_predictions([0.5] * len(items), [0.0] * len(items), hm, hv)
    assert len(items) == 269
    assert m["mae_var"] == pytest.approx(0.031, abs=5e-4)  # the always-zero baseline (bench/orca_experiments.md)


def test_json_finite_makes_metrics_strict_json():
    from modelling.orca.metrics import json_finite

    raw = {"rho": np.float32(0.5), "mae_var": float("nan"), "by_lalm": [float("inf"), (1, np.int64(2))], "n": 3}
    clean = json_finite(raw)
    assert clean == {"rho": 0.5, "mae_var": None, "by_lalm": [None, [1, 2]], "n": 3}
    assert type(clean["rho"]) is float and type(clean["by_lalm"][1][1]) is int
    json.dumps(clean, allow_nan=False)  # raises on NaN or a numpy scalar
