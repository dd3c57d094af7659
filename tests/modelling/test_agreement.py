"""Krippendorff's alpha and the other agreement statistics (modelling.services.agreement)."""
import math
import time

import krippendorff
import numpy as np
import pytest

from modelling.selectors import valid_ratings_load
from modelling.services.agreement import (
    agreement_by_scope,
    agreement_compute,
    agreement_leave_one_out,
    agreement_pairwise,
    alpha_bootstrap_ci,
    krippendorff_alpha,
    rating_variance_share,
    value_counts_matrix,
)
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory

from .agreement_helpers import KRIPPENDORFF_2011, rate_in_db, ratings_from_matrix


def _counts(ratings):
    return value_counts_matrix(candidate_ids=ratings.candidate_ids, scores=ratings.scores)


def _as_float_matrix(matrix):
    return np.asarray([[np.nan if v is None else v for v in row] for row in matrix], dtype=float)


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_perfect_agreement_gives_alpha_one(level):
    matrix = [[1, 2, 3, 4, 5, 5], [1, 2, 3, 4, 5, 5], [1, 2, None, 4, 5, None]]
    result = agreement_compute(ratings=ratings_from_matrix(matrix), level=level, resamples=200)
    assert result.alpha == pytest.approx(1.0)
    assert result.ci_low == pytest.approx(1.0) and result.ci_high == pytest.approx(1.0)


@pytest.mark.parametrize("level, published", [("ordinal", 0.815), ("interval", 0.849)])
def test_it_reproduces_krippendorff_2011_worked_example(level, published):
    result = agreement_compute(ratings=ratings_from_matrix(KRIPPENDORFF_2011), level=level, resamples=0)
    direct = krippendorff.alpha(reliability_data=_as_float_matrix(KRIPPENDORFF_2011), level_of_measurement=level)
    assert result.alpha == pytest.approx(direct, abs=1e-12)
    assert result.alpha == pytest.approx(published, abs=0.0005)
    # 12 units rated, unit 12 has a single rating so 11 are pairable; 41 values in all.
    assert (result.n_items, result.n_pairable_items, result.n_ratings, result.n_annotators) == (12, 11, 41, 4)
    assert result.ci_low is None and result.ci_high is None


def test_alpha_is_undefined_when_every_rating_is_the_same_score():
    assert krippendorff_alpha(value_counts=np.array([[0, 0, 3, 0, 0], [0, 0, 2, 0, 0]])) is None
    assert krippendorff_alpha(value_counts=np.array([[1, 0, 0, 0, 0]])) is None  # nothing pairable
    result = agreement_compute(ratings=ratings_from_matrix([[3, 3], [3, 3]]))
    assert result.alpha is None and result.ci_low is None


def test_leave_one_out_means_are_the_others_mean_and_nan_below_min_others():
    from annotation.agreement import leave_one_out_means

    # unit 7: scores 5, 3, 1 → others' means 2, 3, 4; unit 9: two ratings, one other each (NaN at min_others 2)
    means = leave_one_out_means(unit_ids=np.array([7, 7, 9, 7, 9]), scores=np.array([5, 3, 4, 1, 2]))
    assert means[[0, 1, 3]].tolist() == [2.0, 3.0, 4.0] and np.isnan(means[[2, 4]]).all()
    assert leave_one_out_means(unit_ids=np.array([9, 9]), scores=np.array([4, 2]), min_others=1).tolist() == [2, 4]
    with pytest.raises(ValueError):
        leave_one_out_means(unit_ids=np.array([1]), scores=np.array([3]), min_others=0)


def test_value_counts_matrix_counts_scores_per_candidate_and_rejects_out_of_range():
    counts = value_counts_matrix(candidate_ids=np.array([7, 7, 9]), scores=np.array([1, 5, 5]))
    assert counts.tolist() == [[1, 0, 0, 0, 1], [0, 0, 0, 0, 1]]
    with pytest.raises(ValueError, match="1..5"):
        value_counts_matrix(candidate_ids=np.array([1]), scores=np.array([6]))


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_bootstrap_ci_is_ordered_contains_the_estimate_and_is_seeded(level):
    rng = np.random.default_rng(5)
    truth = rng.integers(1, 6, size=300)
    matrix = [np.clip(truth + rng.integers(-1, 2, size=300), 1, 5).tolist() for _ in range(3)]
    ratings = ratings_from_matrix(matrix)
    result = agreement_compute(ratings=ratings, level=level, resamples=1000, seed=3)
    assert result.ci_low < result.alpha < result.ci_high
    assert result.ci_high - result.ci_low < 0.2
    again = agreement_compute(ratings=ratings, level=level, resamples=1000, seed=3)
    assert (again.ci_low, again.ci_high) == (result.ci_low, result.ci_high)
    other = agreement_compute(ratings=ratings, level=level, resamples=1000, seed=4)
    assert (other.ci_low, other.ci_high) != (result.ci_low, result.ci_high)


@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_vectorised_bootstrap_matches_resampling_units_through_the_krippendorff_package(level):
    counts = _counts(ratings_from_matrix(KRIPPENDORFF_2011))
    pairable = counts[counts.sum(axis=1) >= 2]
    resamples, seed = 200, 11
    draws = np.random.default_rng(seed).integers(0, pairable.shape[0], size=(resamples, pairable.shape[0]))
    slow = []
    for row in draws:
        sample = pairable[row]
        if np.count_nonzero(sample.sum(axis=0)) >= 2:
            slow.append(
                krippendorff.alpha(value_counts=sample, value_domain=[1, 2, 3, 4, 5], level_of_measurement=level)
            )
    expected = np.percentile(slow, [2.5, 97.5])
    low, high = alpha_bootstrap_ci(value_counts=counts, level=level, resamples=resamples, seed=seed)
    assert (low, high) == pytest.approx(tuple(expected), abs=1e-9)


def test_bootstrap_of_two_thousand_items_takes_well_under_a_few_seconds():
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, size=2200)
    matrix = []
    for _ in range(5):  # five annotators, each rating ~60 % of 2,200 candidates within one point of the truth
        row = np.clip(truth + rng.integers(-1, 2, 2200), 1, 5)
        matrix.append([int(s) if keep else None for s, keep in zip(row, rng.random(2200) < 0.6)])
    counts = _counts(ratings_from_matrix(matrix))
    start = time.perf_counter()
    low, high = alpha_bootstrap_ci(value_counts=counts, resamples=1000, seed=0)
    assert time.perf_counter() - start < 3.0
    assert low <= high


def test_bad_arguments_are_rejected():
    counts = np.array([[1, 1, 0, 0, 0], [0, 0, 2, 0, 0]])
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha(value_counts=counts, level="nominal")
    with pytest.raises(ValueError, match="resamples"):
        alpha_bootstrap_ci(value_counts=counts, resamples=0)


def test_variance_share_counts_candidates_with_sample_variance_above_one():
    # Per candidate: [1,1] var 0; [1,3] var 2 (> 1); [2,3] var 0.5; [1,2,3] var exactly 1.0 (not above); [5] alone.
    matrix = [
        [1, 1, 2, 1, 5],
        [1, 3, 3, 2, None],
        [None, None, None, 3, None],
    ]
    share = rating_variance_share(ratings=ratings_from_matrix(matrix))
    assert (share.n_items, share.n_above, share.share, share.threshold) == (4, 1, 0.25, 1.0)
    assert rating_variance_share(ratings=ratings_from_matrix([[1, 2]])).share is None


def test_scope_table_has_overall_then_one_row_per_benchmark_modality_category_and_lalm():
    matrix = [[1, 2, 3, 4, 5, 1], [1, 2, 3, 5, 5, 2]]
    ratings = ratings_from_matrix(matrix, lalms=list("aabbab"), benchmarks=["MMAR"] * 3 + ["MMAU"] * 3)
    rows = agreement_by_scope(ratings=ratings, resamples=50)
    scopes = [r.scope for r in rows]
    assert scopes == [
        "all",
        "benchmark:MMAR",
        "benchmark:MMAU",
        "modality:sound",
        "category:(none)",
        "lalm:a",
        "lalm:b",
    ]
    by_scope = {r.scope: r for r in rows}
    assert by_scope["benchmark:MMAR"].alpha == pytest.approx(1.0)
    assert by_scope["benchmark:MMAR"].n_ratings == 6
    direct = krippendorff.alpha(reliability_data=np.asarray(matrix, float)[:, 3:], level_of_measurement="ordinal")
    assert by_scope["benchmark:MMAU"].alpha == pytest.approx(direct)
    assert (by_scope["lalm:a"].kind, by_scope["lalm:a"].name) == ("lalm", "a")


def test_pairwise_table_lists_pairs_with_enough_shared_items():
    base = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    matrix = [
        base,
        base,  # identical to annotator1
        [min(s + 1, 5) for s in base],  # one point higher (except at 5)
        [1, 2, 3] + [None] * 7,  # only 3 shared items: below min_shared
    ]
    rows = agreement_pairwise(ratings=ratings_from_matrix(matrix), min_shared=5)
    pairs = {(r.annotator_a, r.annotator_b): r for r in rows}
    assert set(pairs) == {("annotator1", "annotator2"), ("annotator1", "annotator3"), ("annotator2", "annotator3")}
    same = pairs["annotator1", "annotator2"]
    assert (same.n_shared, same.alpha, same.exact, same.within_one, same.mean_abs_diff) == (10, 1.0, 1.0, 1.0, 0.0)
    shifted = pairs["annotator1", "annotator3"]
    assert shifted.exact == pytest.approx(0.2) and shifted.within_one == 1.0 and shifted.mean_abs_diff == 0.8
    direct = krippendorff.alpha(reliability_data=np.asarray(matrix[::2][:2], float), level_of_measurement="ordinal")
    assert shifted.alpha == pytest.approx(direct)


def test_leave_one_out_compares_each_annotator_with_the_mean_of_the_others():
    matrix = [
        [1, 2, 3, 4, 5],
        [1, 2, 3, 4, 5],
        [2, 3, 4, 5, 5],  # lenient by about one point
        [None, None, None, 1, None],  # items with fewer than 2 others don't count for anyone else
    ]
    rows = {r.annotator: r for r in agreement_leave_one_out(ratings=ratings_from_matrix(matrix))}
    lenient = rows["annotator3"]
    assert lenient.n_items == 5
    # Others' means: 1, 2, 3, (4+4+1)/3=3, 5 → differences 1, 1, 1, 2, 0.
    assert lenient.mae == pytest.approx(1.0) and lenient.bias == pytest.approx(1.0)
    # Ranks: own [2,3,4,5,5] → [1,2,3,4.5,4.5]; others [1,2,3,3,5] → [1,2,3.5,3.5,5]; Pearson of ranks 8.75/9.5.
    assert lenient.spearman == pytest.approx(8.75 / 9.5)
    assert rows["annotator4"].n_items == 1 and rows["annotator4"].spearman is None
    assert rows["annotator1"].mae == pytest.approx((0.5 + 0.5 + 0.5 + (4 - 10 / 3) + 0) / 5)


@pytest.mark.django_db
def test_invalid_and_unscored_ratings_are_excluded():
    annotators, candidates = rate_in_db([[1, 3, 5], [1, 3, 5]])
    intruder = AnnotatorFactory()
    for candidate in candidates:
        score = 1 if candidate == candidates[2] else 5
        RatingFactory(candidate=candidate, annotator=intruder, score=score, is_valid=False)
    RatingFactory(candidate=candidates[0], annotator=AnnotatorFactory(), score=None, codes="U")
    RatingFactory(candidate=CandidateAnswerFactory(), annotator=annotators[0], score=2, is_valid=False)

    result = agreement_compute(ratings=valid_ratings_load(), resamples=100)
    assert result.alpha == pytest.approx(1.0)
    assert (result.n_ratings, result.n_items, result.n_annotators) == (6, 3, 2)


@pytest.mark.django_db
def test_ratings_load_keeps_one_benchmark_when_asked():
    _, candidates = rate_in_db([[1, 2], [1, 3]])
    other = CandidateAnswerFactory()
    RatingFactory(candidate=other, score=4)
    name = candidates[0].question_version.question.benchmark.name
    loaded = valid_ratings_load(benchmark=name)
    assert len(loaded) == 2 and set(loaded.benchmark) == {name}
    assert len(valid_ratings_load()) == 5
    assert not math.isnan(float(loaded.scores.mean()))
