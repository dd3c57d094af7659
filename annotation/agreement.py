"""Krippendorff's alpha of 1–5 correctness scores: the one implementation the apps share (no Django import).

Used by the dataset exports (alpha in the datasheet, streamed), modelling's agreement statistics (alpha, its
bootstrap interval) and refinement's report (alpha of all / valid / invalidated ratings). ``annotation`` is the
app the others may import, so the rule lives here.

Terms (Krippendorff, K. (2011) "Computing Krippendorff's Alpha-Reliability"). *Units* are candidate answers,
*values* the scores 1..5; a units × values count matrix (U, 5) says how many ratings of each unit gave each score.
Only *pairable* units (at least two scores) count. Alpha depends on the data only through the 5 × 5 coincidence
matrix, a sum of per-unit matrices, which is what lets an export accumulate it in constant memory and the bootstrap
resample items with one matrix product.

Alpha itself comes from the ``krippendorff`` package (:func:`krippendorff_alpha`); the coincidence-matrix form
(:func:`alpha_from_coincidences`) serves where only the matrix is kept, and matches the package to 1e-9.
"""
from __future__ import annotations

from collections.abc import Iterable

import krippendorff
import numpy as np

#: The correctness scale (ORCA paper, Appendix A): 1 = completely wrong ... 5 = completely correct.
SCORE_DOMAIN: tuple[int, ...] = (1, 2, 3, 4, 5)
#: Levels of measurement alpha is computed at.
ALPHA_LEVELS: tuple[str, ...] = ("ordinal", "interval")

_DOMAIN = np.asarray(SCORE_DOMAIN, dtype=np.float64)
_V = len(SCORE_DOMAIN)


def alpha_level_check(level: str) -> None:
    """Raise ValueError unless ``level`` is one of :data:`ALPHA_LEVELS`."""
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level must be one of {', '.join(ALPHA_LEVELS)}, not {level!r}")


def value_counts_matrix(*, candidate_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Units × values count matrix (U, 5): how many valid ratings of each candidate answer gave each score 1..5.

    Rows follow ``np.unique(candidate_ids)`` order. Raises ValueError for a score outside 1..5.
    """
    if scores.size and (scores.min() < SCORE_DOMAIN[0] or scores.max() > SCORE_DOMAIN[-1]):
        raise ValueError(f"scores must lie in {SCORE_DOMAIN[0]}..{SCORE_DOMAIN[-1]}")
    _, unit_index = np.unique(candidate_ids, return_inverse=True)
    n_units = int(unit_index.max()) + 1 if unit_index.size else 0
    counts = np.zeros((n_units, _V), dtype=np.int64)
    np.add.at(counts, (unit_index, scores.astype(np.int64) - SCORE_DOMAIN[0]), 1)
    return counts


def pairable_units(counts: np.ndarray) -> np.ndarray:
    """The rows of a (U, 5) count matrix with at least two scores (the units alpha uses)."""
    return counts[counts.sum(axis=1) >= 2]


def krippendorff_alpha(*, value_counts: np.ndarray, level: str = "ordinal") -> float | None:
    """Krippendorff's alpha of a units × values count matrix (U, 5) over the 1..5 domain.

    Computed by the ``krippendorff`` package. Returns None when alpha is undefined: fewer than two pairable
    ratings, or only one distinct score among the pairable ratings (expected disagreement is 0).
    Raises ValueError for an unknown level.
    """
    alpha_level_check(level)
    pairable = pairable_units(np.asarray(value_counts))
    if pairable.shape[0] == 0 or np.count_nonzero(pairable.sum(axis=0)) < 2:
        return None
    return float(
        krippendorff.alpha(value_counts=pairable, value_domain=list(SCORE_DOMAIN), level_of_measurement=level)
    )


def unit_coincidences(pairable: np.ndarray) -> np.ndarray:
    """Per-unit coincidence matrices (U, 5, 5): (n_uc n_uk − [c=k] n_uc) / (m_u − 1) (Krippendorff 2011, eq. 2).

    ``pairable``: a (U, 5) count matrix whose units all have at least two scores.
    """
    n = pairable.astype(np.float64)
    m = n.sum(axis=1)
    outer = n[:, :, None] * n[:, None, :]
    outer[:, np.arange(_V), np.arange(_V)] -= n
    return outer / (m - 1)[:, None, None]


def alpha_from_coincidences(o: np.ndarray, level: str) -> np.ndarray:
    """Alpha for a stack of coincidence matrices (B, 5, 5) → (B,); NaN where expected disagreement is 0."""
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    if level == "interval":
        delta = np.broadcast_to((_DOMAIN[:, None] - _DOMAIN[None, :]) ** 2, o.shape)
    else:
        # Ordinal metric: (sum of n_g for g from c to k − (n_c + n_k) / 2)^2, from the matrix's own marginals.
        cum = np.concatenate([np.zeros((n_c.shape[0], 1)), np.cumsum(n_c, axis=1)], axis=1)
        idx = np.arange(_V)
        lo = np.minimum(idx[:, None], idx[None, :])
        hi = np.maximum(idx[:, None], idx[None, :])
        between = cum[:, hi + 1] - cum[:, lo]
        delta = (between - (n_c[:, :, None] + n_c[:, None, :]) / 2) ** 2
    observed = (o * delta).sum(axis=(1, 2))
    expected = (n_c[:, :, None] * n_c[:, None, :] * delta).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1) * observed / expected
    return np.where(expected > 0, alpha, np.nan)


class AlphaAccumulator:
    """Krippendorff's alpha (interval and ordinal) over 1–5 scores, accumulated unit by unit in constant memory.

    Keeps only the 5 × 5 coincidence matrix (plus a bounded buffer of pending units), so a streaming export can
    report alpha without holding its ratings. Null scores are dropped; units with fewer than two scores are not
    pairable and are ignored, as in the ``krippendorff`` package.
    """

    #: Pending units folded into the matrix at a time.
    BUFFER = 4096

    def __init__(self) -> None:
        self.coincidence = np.zeros((_V, _V), dtype=np.float64)
        self._pending: list[list[int]] = []

    def add(self, scores: Iterable[int | None]) -> None:
        """Add one unit's scores (1..5 or None)."""
        counts = [0] * _V
        m = 0
        for score in scores:
            if score is not None:
                counts[score - SCORE_DOMAIN[0]] += 1
                m += 1
        if m < 2:
            return
        self._pending.append(counts)
        if len(self._pending) >= self.BUFFER:
            self._fold()

    def _fold(self) -> None:
        if self._pending:
            self.coincidence += unit_coincidences(np.asarray(self._pending, dtype=np.int64)).sum(axis=0)
            self._pending = []

    def alpha(self, level: str) -> float | None:
        """Alpha at ``level`` ("interval" or "ordinal"); None when there is no pairable value or no variation
        (:meth:`why_undefined` says which)."""
        alpha_level_check(level)
        self._fold()
        value = alpha_from_coincidences(self.coincidence[None], level)[0]
        return None if np.isnan(value) else float(value)

    def why_undefined(self) -> str:
        """Why :meth:`alpha` is None, in words for a page or a datasheet; "" while it is defined.

        Alpha compares the scores of one unit with each other: with at most one scored rating per candidate answer
        there is no pair to compare, and when every paired score is the same the expected disagreement is 0
        (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"; the same at every level).
        """
        self._fold()
        if not self.coincidence.sum():
            return "not defined: one rating per item (alpha needs two or more scored ratings of a candidate answer)"
        if np.count_nonzero(self.coincidence.sum(axis=0)) < 2:
            return "not defined: every paired rating gives the same score (no variation)"
        return ""


def leave_one_out_means(*, unit_ids: np.ndarray, scores: np.ndarray, min_others: int = 2) -> np.ndarray:
    """The mean of the *other* ratings of the same unit, for every rating.

    Args:
        unit_ids: (R,) the unit (candidate answer) of each rating; scores: (R,) its score (1–5, no NaN).
        min_others: other ratings a unit needs (>= 1); ratings of units with fewer get NaN.

    Returns:
        (R,) float: (sum of the unit's scores − this score) / (ratings of the unit − 1), NaN where the unit has
        fewer than ``min_others`` other ratings. The reference of each annotator's leave-one-out agreement
        (ORCA paper, section 5.2) and of the rater-quality signals.

    Raises:
        ValueError: ``min_others`` < 1 or lengths differ.
    """
    if min_others < 1:
        raise ValueError("min_others must be at least 1")
    scores = np.asarray(scores, dtype=np.float64)
    if np.shape(unit_ids) != scores.shape:
        raise ValueError("unit_ids and scores must have the same length")
    _, unit = np.unique(unit_ids, return_inverse=True)
    unit_sum = np.bincount(unit, weights=scores)
    others = np.bincount(unit)[unit] - 1
    return np.where(others >= min_others, (unit_sum[unit] - scores) / np.maximum(others, 1), np.nan)
