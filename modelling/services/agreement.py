"""Inter-annotator agreement of the correctness ratings: Krippendorff's alpha and friends.

Source: Krippendorff, K. (2011) "Computing Krippendorff's Alpha-Reliability"; ORCA paper, section 5.2 (alpha 0.82
on the valid ratings after Stage 3 filtering, 17.7 % of question–answer pairs with rating variance > 1.0).

Terms. The *units* of alpha are candidate answers; the *coders* are annotators; the *values* are the valid
correctness scores 1..5 (``Rating.is_valid=True`` and a score; null scores, i.e. codes U/E, are excluded). The
reliability matrix is annotators × candidate answers, with a gap wherever an annotator did not rate a candidate.
Alpha only uses *pairable* units (candidate answers with at least two valid ratings).

Every function here is pure computation over :class:`modelling.selectors.ValidRatings`; loading the ratings is
the selector's job (``valid_ratings_load``). Alpha and the coincidence matrix are computed by
:mod:`annotation.agreement`, the one implementation exports, modelling and refinement share.

Bootstrap confidence interval (:func:`alpha_bootstrap_ci`). A percentile bootstrap over items: each of
``resamples`` replicates draws the pairable candidate answers with replacement (as many as there are), keeps all
ratings of each drawn candidate together (so within-item dependence is preserved), recomputes alpha, and the
95 % interval is the 2.5th and 97.5th percentiles of the replicates (replicates where alpha is undefined, i.e.
a single observed score, are dropped). It is vectorised: alpha depends on the data only through the coincidence
matrix, which is a sum of per-item coincidence matrices, so a replicate's matrix is ``counts @ per_item`` where
``counts`` (replicates × items) says how often each item was drawn. 1,000 replicates over ~2,000 items take well
under a second. The random generator is ``numpy.random.default_rng(seed)``, so a given seed gives the same CI.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from annotation.agreement import (
    SCORE_DOMAIN,
    alpha_from_coincidences,
    alpha_level_check,
    krippendorff_alpha,
    leave_one_out_means,
    pairable_units,
    unit_coincidences,
    value_counts_matrix,
)
from modelling.models import AgreementLevel
from modelling.orca.metrics import spearman_or_none
from modelling.selectors import ValidRatings

#: Krippendorff (2004): alpha >= 0.800 reliable; 0.667 <= alpha < 0.800 only for tentative conclusions.
RELIABLE_ALPHA = 0.80
TENTATIVE_ALPHA = 0.67
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
CI_LEVEL = 0.95
#: ORCA paper, section 5.2: share of pairs whose rating variance exceeds 1.0 (17.7 % there).
VARIANCE_THRESHOLD = 1.0
LEVELS = tuple(AgreementLevel.values)

_DOMAIN = np.asarray(SCORE_DOMAIN, dtype=np.float64)
_V = len(SCORE_DOMAIN)


# --- results --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreementResult:
    """Krippendorff's alpha of one scope of valid ratings, with a bootstrap 95 % CI over items.

    Attributes:
        scope: 'all' or '<kind>:<name>' (kinds: benchmark, modality, category, lalm).
        level: 'ordinal' or 'interval'.
        alpha: Krippendorff's alpha, <= 1.0 (1 perfect agreement, 0 chance-level, < 0 systematic disagreement);
            None when undefined (no pairable ratings, or every pairable rating has the same score).
        ci_low, ci_high: percentile bootstrap 95 % interval (ci_low <= ci_high); None when alpha is None or
            resamples is 0.
        n_items: candidate answers with at least one valid scored rating.
        n_pairable_items: candidate answers with at least two (the units alpha actually uses).
        n_ratings: valid scored ratings.
        n_annotators: distinct annotators among those ratings.
        resamples, seed: bootstrap settings used.

    Source: Krippendorff 2011; ORCA paper section 5.2.
    """

    scope: str
    level: str
    alpha: float | None
    ci_low: float | None
    ci_high: float | None
    n_items: int
    n_pairable_items: int
    n_ratings: int
    n_annotators: int
    resamples: int
    seed: int

    @property
    def kind(self) -> str:
        """The scope's kind: 'all', 'benchmark', 'modality', 'category' or 'lalm'."""
        return self.scope.split(":", 1)[0]

    @property
    def name(self) -> str:
        """The scope's name after the kind ('all' for the overall scope)."""
        return self.scope.split(":", 1)[-1]

    def as_json(self) -> dict:
        """The ``manage.py agreement --json`` object: alpha, ci [low, high], n_items, n_ratings, level."""
        return {
            "alpha": self.alpha,
            "ci": [self.ci_low, self.ci_high],
            "n_items": self.n_items,
            "n_ratings": self.n_ratings,
            "level": self.level,
        }


@dataclass(frozen=True)
class VarianceShare:
    """Share of candidate answers whose valid ratings have sample variance above a threshold.

    Attributes:
        threshold: variance threshold on the 1–5 scale (1.0 in the ORCA paper).
        n_items: candidate answers with at least two valid scored ratings (variance needs two).
        n_above: how many of them have sample variance (ddof=1, as ``statistics.variance``) > threshold.
        share: n_above / n_items in [0, 1]; None when n_items is 0.

    Source: ORCA paper section 5.2 (17.7 % of the 2,459 valid pairs, all three splits).
    """

    threshold: float
    n_items: int
    n_above: int
    share: float | None


@dataclass(frozen=True)
class PairAgreement:
    """Agreement of two annotators on the candidate answers both rated.

    Attributes:
        annotator_a, annotator_b: usernames (a < b by primary key).
        n_shared: candidate answers both rated validly (>= the table's min_shared).
        alpha: Krippendorff's alpha of the 2 × n_shared reliability matrix at the table's level; None when
            undefined (all shared scores identical).
        exact: share of shared items with identical scores, in [0, 1].
        within_one: share of shared items whose scores differ by at most 1 point, in [0, 1].
        mean_abs_diff: mean absolute score difference in points, in [0, 4].

    Source: Krippendorff 2011; ORCA paper section 5.2.
    """

    annotator_a: str
    annotator_b: str
    n_shared: int
    alpha: float | None
    exact: float
    within_one: float
    mean_abs_diff: float


@dataclass(frozen=True)
class AnnotatorLeaveOneOut:
    """One annotator against the leave-one-out mean: the mean of the *other* annotators' scores on an item.

    Only items with at least ``min_others`` (default 2) other valid ratings count.

    Attributes:
        annotator: username.
        n_items: items counted.
        mae: mean |own score − mean of the others| in points, in [0, 4].
        bias: mean (own score − mean of the others) in points, in [-4, 4]; > 0 means more lenient than the rest.
        spearman: Spearman's rho between own scores and the others' means, in [-1, 1]; None when fewer than 3
            items or either side is constant.

    Source: ORCA paper section 5.2 (annotator reliability); leave-one-out as in rater-vs-rest analyses.
    """

    annotator: str
    n_items: int
    mae: float
    bias: float
    spearman: float | None


@dataclass(frozen=True)
class AgreementReport:
    """Everything the agreement page shows for one level.

    Attributes:
        overall: alpha of all valid ratings.
        scopes: overall first, then per benchmark, modality, category and LALM (each sorted by name).
        variance: share of candidate answers with rating variance > 1.0.
        pairwise: pairs with >= min_shared shared items, most shared first (at most ``top``).
        leave_one_out: annotators with most counted items first (at most ``top``).
    """

    overall: AgreementResult
    scopes: list[AgreementResult]
    variance: VarianceShare
    pairwise: list[PairAgreement] = field(default_factory=list)
    leave_one_out: list[AnnotatorLeaveOneOut] = field(default_factory=list)


# --- core computation -----------------------------------------------------------------------------------------


def alpha_bootstrap_ci(
    *,
    value_counts: np.ndarray,
    level: str = AgreementLevel.ORDINAL,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    ci: float = CI_LEVEL,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of Krippendorff's alpha, resampling pairable candidate answers.

    Args:
        value_counts: (U, 5) counts of scores 1..5 per candidate answer (see :func:`value_counts_matrix`).
        level: 'ordinal' or 'interval'.
        resamples: number of bootstrap replicates (>= 1).
        seed: seed of ``numpy.random.default_rng``; the same seed gives the same interval.
        ci: coverage in (0, 1), 0.95 by default.

    Returns:
        (low, high) with low <= high, or None when alpha is undefined on the data or on every replicate.

    The method is described in the module docstring. Raises ValueError for bad level, resamples or ci.
    """
    alpha_level_check(level)
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0 < ci < 1:
        raise ValueError("ci must lie strictly between 0 and 1")
    pairable = pairable_units(np.asarray(value_counts))
    n_units = pairable.shape[0]
    if krippendorff_alpha(value_counts=pairable, level=level) is None:
        return None
    per_unit = unit_coincidences(pairable).reshape(n_units, _V * _V)
    rng = np.random.default_rng(seed)
    # Chunk the replicates so the (chunk × units) draw-count matrix stays around 16 MB.
    chunk = max(1, min(resamples, 2_000_000 // n_units))
    alphas = []
    for start in range(0, resamples, chunk):
        b = min(chunk, resamples - start)
        draws = rng.integers(0, n_units, size=(b, n_units))
        flat = (draws + np.arange(b)[:, None] * n_units).ravel()
        counts = np.bincount(flat, minlength=b * n_units).reshape(b, n_units).astype(np.float64)
        alphas.append(alpha_from_coincidences((counts @ per_unit).reshape(b, _V, _V), level))
    values = np.concatenate(alphas)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    tail = (1 - ci) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def agreement_compute(
    *,
    ratings: ValidRatings,
    level: str = AgreementLevel.ORDINAL,
    scope: str = "all",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> AgreementResult:
    """Krippendorff's alpha of ``ratings`` (annotators × candidate answers) with a bootstrap 95 % CI over items.

    ``resamples=0`` skips the bootstrap (ci_low/ci_high None). Raises ValueError for an unknown level.
    Source: Krippendorff 2011; ORCA paper section 5.2.
    """
    alpha_level_check(level)
    counts = value_counts_matrix(candidate_ids=ratings.candidate_ids, scores=ratings.scores)
    alpha = krippendorff_alpha(value_counts=counts, level=level)
    interval = None
    if alpha is not None and resamples > 0:
        interval = alpha_bootstrap_ci(value_counts=counts, level=level, resamples=resamples, seed=seed)
    return AgreementResult(
        scope=scope,
        level=str(level),
        alpha=alpha,
        ci_low=interval[0] if interval else None,
        ci_high=interval[1] if interval else None,
        n_items=int(counts.shape[0]),
        n_pairable_items=int((counts.sum(axis=1) >= 2).sum()),
        n_ratings=len(ratings),
        n_annotators=int(np.unique(ratings.annotator_ids).size),
        resamples=resamples,
        seed=seed,
    )


#: Scope kinds of :func:`agreement_by_scope`, with the ``ValidRatings`` column each groups by.
SCOPE_KINDS: tuple[tuple[str, str], ...] = (
    ("benchmark", "benchmark"),
    ("modality", "modality"),
    ("category", "category"),
    ("lalm", "lalm"),
)


def agreement_by_scope(
    *,
    ratings: ValidRatings,
    level: str = AgreementLevel.ORDINAL,
    kinds: Iterable[str] = ("benchmark", "modality", "category", "lalm"),
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> list[AgreementResult]:
    """Alpha overall and per benchmark, modality, category and LALM: a table of :class:`AgreementResult`.

    Rows: 'all' first, then for each kind in ``kinds`` one row per distinct value, sorted by name (scope
    '<kind>:<value>'; an empty category is shown as '(none)'). Every row uses the same bootstrap seed.
    Raises ValueError for an unknown level or kind.
    """
    columns = dict(SCOPE_KINDS)
    rows = [agreement_compute(ratings=ratings, level=level, scope="all", resamples=resamples, seed=seed)]
    for kind in kinds:
        if kind not in columns:
            raise ValueError(f"unknown scope kind {kind!r}; expected one of {', '.join(columns)}")
        column = getattr(ratings, columns[kind])
        for value in sorted({str(v) for v in column}):
            mask = column.astype(str) == value
            rows.append(
                agreement_compute(
                    ratings=ratings.subset(mask),
                    level=level,
                    scope=f"{kind}:{value or '(none)'}",
                    resamples=resamples,
                    seed=seed,
                )
            )
    return rows


def rating_variance_share(*, ratings: ValidRatings, threshold: float = VARIANCE_THRESHOLD) -> VarianceShare:
    """Share of candidate answers (with >= 2 valid ratings) whose sample variance of scores exceeds ``threshold``.

    Sample variance uses ddof=1 (``statistics.variance``). Source: ORCA paper section 5.2 (17.7 % > 1.0).
    """
    counts = value_counts_matrix(candidate_ids=ratings.candidate_ids, scores=ratings.scores).astype(np.float64)
    counts = counts[counts.sum(axis=1) >= 2]
    if counts.shape[0] == 0:
        return VarianceShare(threshold=threshold, n_items=0, n_above=0, share=None)
    m = counts.sum(axis=1)
    mean = counts @ _DOMAIN / m
    variance = (counts * (_DOMAIN[None, :] - mean[:, None]) ** 2).sum(axis=1) / (m - 1)
    # Scores are integers, so the variance is rational; a tolerance keeps exactly-1.0 items out of "above".
    above = int((variance > threshold + 1e-9).sum())
    return VarianceShare(threshold=threshold, n_items=int(m.size), n_above=above, share=above / m.size)


def _annotator_matrix(ratings: ValidRatings) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(annotator ids sorted, their names, scores matrix (A, U) float with NaN gaps)."""
    ann_ids, first, ann_index = np.unique(ratings.annotator_ids, return_index=True, return_inverse=True)
    _, unit_index = np.unique(ratings.candidate_ids, return_inverse=True)
    matrix = np.full((ann_ids.size, int(unit_index.max()) + 1 if unit_index.size else 0), np.nan)
    matrix[ann_index, unit_index] = ratings.scores
    return ann_ids, [str(name) for name in ratings.annotator_names[first]], matrix


def agreement_pairwise(
    *,
    ratings: ValidRatings,
    level: str = AgreementLevel.ORDINAL,
    min_shared: int = 10,
) -> list[PairAgreement]:
    """Agreement of every pair of annotators who share at least ``min_shared`` validly rated candidate answers.

    For each pair: the number of shared items, Krippendorff's alpha of their 2 × n reliability matrix (at
    ``level``, via the ``krippendorff`` package), exact agreement, agreement within ±1 point and the mean
    absolute difference. Sorted by n_shared (descending), then by names. Raises ValueError for a bad level.
    Source: Krippendorff 2011; ORCA paper section 5.2.
    """
    alpha_level_check(level)
    _, names, matrix = _annotator_matrix(ratings)
    present = ~np.isnan(matrix)
    shared = present.astype(np.int64) @ present.T.astype(np.int64)
    rows = []
    for a, b in zip(*np.nonzero(np.triu(shared >= max(min_shared, 1), k=1))):
        both = present[a] & present[b]
        x, y = matrix[a, both], matrix[b, both]
        counts = np.zeros((x.size, _V), dtype=np.int64)
        np.add.at(counts, (np.arange(x.size), x.astype(np.int64) - 1), 1)
        np.add.at(counts, (np.arange(y.size), y.astype(np.int64) - 1), 1)
        diff = np.abs(x - y)
        rows.append(
            PairAgreement(
                annotator_a=names[a],
                annotator_b=names[b],
                n_shared=int(x.size),
                alpha=krippendorff_alpha(value_counts=counts, level=level),
                exact=float((diff == 0).mean()),
                within_one=float((diff <= 1).mean()),
                mean_abs_diff=float(diff.mean()),
            )
        )
    rows.sort(key=lambda r: (-r.n_shared, r.annotator_a, r.annotator_b))
    return rows


def agreement_leave_one_out(*, ratings: ValidRatings, min_others: int = 2) -> list[AnnotatorLeaveOneOut]:
    """Each annotator's scores against the mean of the other annotators' scores on the same candidate answers.

    Items count when they have at least ``min_others`` (>= 1) other valid ratings. Sorted by n_items
    (descending), then name; annotators with no counted item are left out.
    Source: ORCA paper section 5.2 (annotator reliability).
    """
    scores = ratings.scores.astype(np.float64)
    others_mean = leave_one_out_means(unit_ids=ratings.candidate_ids, scores=scores, min_others=min_others)
    keep = ~np.isnan(others_mean)
    rows = []
    for ann_id in np.unique(ratings.annotator_ids[keep]):
        mine = keep & (ratings.annotator_ids == ann_id)
        own, rest = scores[mine], others_mean[mine]
        rho = spearman_or_none(own, rest)
        rows.append(
            AnnotatorLeaveOneOut(
                annotator=str(ratings.annotator_names[mine][0]),
                n_items=int(own.size),
                mae=float(np.abs(own - rest).mean()),
                bias=float((own - rest).mean()),
                spearman=rho,
            )
        )
    rows.sort(key=lambda r: (-r.n_items, r.annotator))
    return rows


def agreement_report(
    *,
    ratings: ValidRatings,
    level: str = AgreementLevel.ORDINAL,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    min_shared: int = 10,
    top: int = 20,
) -> AgreementReport:
    """Everything the agreement page shows: alpha per scope, variance share, pairwise and leave-one-out tables."""
    scopes = agreement_by_scope(ratings=ratings, level=level, resamples=resamples, seed=seed)
    return AgreementReport(
        overall=scopes[0],
        scopes=scopes,
        variance=rating_variance_share(ratings=ratings),
        pairwise=agreement_pairwise(ratings=ratings, level=level, min_shared=min_shared)[:top],
        leave_one_out=agreement_leave_one_out(ratings=ratings)[:top],
    )
