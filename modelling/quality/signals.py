"""Per-annotator reliability signals over ordinal 1–5 ratings with genuine disagreement, and a combined risk.

Pure functions over flat arrays (one entry per rating), no Django import, so the benchmark (``bench/quality.py``)
and the platform (:mod:`modelling.quality.services`) compute exactly the same numbers.

Signals of one annotator (all over their scored ratings unless said otherwise):

* ``loo_rho`` — Spearman ρ between their scores and the leave-one-out mean (the mean of the *other* annotators'
  scores of the same item, items with >= ``min_others`` others); ``loo_mae`` the mean absolute difference
  (points). The same definitions as :func:`modelling.services.agreement.agreement_leave_one_out`.
* ``ds_accuracy`` — model-based reliability from crowd-kit's Dawid–Skene over the 5 categories:
  Σ_k prior_k · P(label k | true k) from the fitted confusion matrix (1 = always the consensus category). It
  treats the scale as nominal, so it is one signal among several, not the verdict (Dawid & Skene 1979).
* ``leniency`` — ordinal leniency in [-0.5, 0.5]: the mean over items of P(own > other) + ½ P(own = other) − ½
  against the other annotators' scores of the same item (a per-item Cliff's-delta/2; > 0 lenient, < 0 severe).
  Rank-based, so it does not assume the 1–5 steps are equal.
* ``straightline`` — share of their ratings that carry their most frequent score (1 = always the same score).
* ``ue_share`` — share of their ratings with code U or E (unable to judge); ``median_seconds`` on task.
* ``gold_accuracy`` (share of gold checks passed) and ``attention_failures`` come from the quality checks.

The combined risk (:func:`combined_risk`) is the largest of these per-signal risks in [0, 1]:

* agreement: how far the annotator's ``loo_rho`` falls below the crowd's median ρ toward 0 — 0 at or above the
  median, 1 at ρ <= 0 (random or reversed) and for a constant rater (ρ undefined). Relative to the crowd, so it
  works whatever the data's typical agreement is (ρ ≈ 0.75 in a MUSHRA test, ≈ 0.7 on ORCA seed-108);
* straight-lining: 0 up to 80 % identical scores, rising to 1 at 100 %;
* gold: 0 at >= 90 % gold accuracy, 1 at <= 30 % (from 5 gold checks on);
* attention: failed checks / the policy's pause count.

Dawid–Skene accuracy, the leave-one-out MAE and leniency are shown beside it but left out of the combined risk:
on both benchmark data sets they separate injected bad raters from real ones less well than ρ (``bench/quality.py``:
a rater who answers at random half the time keeps a Dawid–Skene accuracy like a real one's, and leniency is a
style, not a fault).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

#: Straight-lining share at which its risk starts (0) and the gold accuracy bounds of the gold risk.
STRAIGHTLINE_START = 0.8
GOLD_GOOD, GOLD_BAD, GOLD_MIN_CHECKS = 0.9, 0.3, 5


@dataclass
class RaterSignals:
    """One annotator's signals (see the module docstring); None where there is not enough data."""

    annotator_id: int
    n_ratings: int
    n_scored: int
    loo_items: int = 0
    loo_rho: float | None = None
    loo_mae: float | None = None
    ds_accuracy: float | None = None
    leniency: float | None = None
    straightline: float | None = None
    ue_share: float | None = None
    median_seconds: float | None = None
    gold_checks: int = 0
    gold_accuracy: float | None = None
    attention_checks: int = 0
    attention_failures: int = 0
    risks: dict = field(default_factory=dict)
    combined: float | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    from scipy.stats import spearmanr

    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


def _dawid_skene(items: np.ndarray, workers: np.ndarray, scores: np.ndarray, *, n_iter: int = 100) -> dict[int, float]:
    """{worker: Σ_k prior_k P(k | k)} from crowd-kit's ``DawidSkene`` over the 5 score categories."""
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    if scores.size == 0 or np.unique(workers).size < 2:
        return {}
    frame = pd.DataFrame({"task": items, "worker": workers, "label": scores.astype(np.int64)})
    model = DawidSkene(n_iter=n_iter).fit(frame)
    priors = model.priors_
    errors = model.errors_
    out = {}
    for worker in np.unique(workers):
        matrix = errors.loc[worker]
        out[int(worker)] = float(sum(priors.get(k, 0.0) * matrix.at[k, k]
                                     for k in priors.index if k in matrix.index and k in matrix.columns))
    return out


def rater_signals_compute(
    *,
    item_ids: np.ndarray,
    annotator_ids: np.ndarray,
    scores: np.ndarray,
    unable: np.ndarray | None = None,
    seconds: np.ndarray | None = None,
    min_others: int = 2,
    ds_iterations: int = 100,
) -> dict[int, RaterSignals]:
    """Signals per annotator (module docstring) from one entry per rating.

    Args:
        item_ids: (R,) int unit ids (candidate answers).
        annotator_ids: (R,) int annotator ids.
        scores: (R,) float scores 1–5, NaN for a rating without a score (U or E).
        unable: (R,) bool, the rating carries code U or E (None: derived from NaN scores).
        seconds: (R,) float seconds on task, NaN when unmeasured (None: not available).
        min_others: other scored ratings an item needs to count toward ``loo_*`` and ``leniency``.

    Returns:
        {annotator id: RaterSignals} with ``risks``/``combined`` still empty (see :func:`combined_risk`).
    """
    item_ids = np.asarray(item_ids, dtype=np.int64)
    annotator_ids = np.asarray(annotator_ids, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float64)
    unable = np.isnan(scores) if unable is None else np.asarray(unable, dtype=bool)
    scored = ~np.isnan(scores)

    s_items, s_ann, s_scores = item_ids[scored], annotator_ids[scored], scores[scored]
    _, unit = np.unique(s_items, return_inverse=True)
    unit_sum = np.bincount(unit, weights=s_scores)
    unit_count = np.bincount(unit)
    others = unit_count[unit] - 1
    keep = others >= min_others
    others_mean = np.where(keep, (unit_sum[unit] - s_scores) / np.maximum(others, 1), np.nan)
    # Ordinal leniency: for each rating, P(own > other) + P(own = other)/2 over the item's other ratings.
    per_value = np.zeros((unit_count.size, 5))
    np.add.at(per_value, (unit, s_scores.astype(np.int64) - 1), 1)
    below = np.cumsum(per_value, axis=1) - per_value  # ratings of the item strictly below each value
    idx = s_scores.astype(np.int64) - 1
    lower = below[unit, idx]
    equal = per_value[unit, idx] - 1  # the others with the same score (not counting this rating)
    superiority = np.where(others > 0, (lower + 0.5 * equal) / np.maximum(others, 1), np.nan)

    ds = _dawid_skene(s_items, s_ann, s_scores, n_iter=ds_iterations)
    out: dict[int, RaterSignals] = {}
    for ann in np.unique(annotator_ids):
        mine_all = annotator_ids == ann
        mine = s_ann == ann
        sig = RaterSignals(annotator_id=int(ann), n_ratings=int(mine_all.sum()), n_scored=int(mine.sum()))
        sig.ue_share = float(unable[mine_all].mean()) if sig.n_ratings else None
        if seconds is not None:
            secs = np.asarray(seconds, dtype=np.float64)[mine_all]
            secs = secs[~np.isnan(secs)]
            sig.median_seconds = float(np.median(secs)) if secs.size else None
        own = s_scores[mine]
        if own.size:
            sig.straightline = float(np.bincount(own.astype(np.int64)).max() / own.size)
        counted = mine & keep
        if counted.any():
            sig.loo_items = int(counted.sum())
            sig.loo_rho = _spearman(s_scores[counted], others_mean[counted])
            sig.loo_mae = float(np.abs(s_scores[counted] - others_mean[counted]).mean())
            sig.leniency = float(np.nanmean(superiority[counted]) - 0.5)
        sig.ds_accuracy = ds.get(int(ann))
        out[int(ann)] = sig
    return out


def _relative_drop(value: float | None, reference: float | None) -> float | None:
    """0 at or above ``reference``, 1 at or below 0, linear between; 1 for a missing value (undefined ρ)."""
    if reference is None or reference <= 0:
        return None
    if value is None:
        return 1.0
    return float(np.clip((reference - value) / reference, 0.0, 1.0))


def combined_risk(signals: dict[int, RaterSignals], *, min_items: int = 10, max_attention_failures: int = 2) -> None:
    """Fill ``risks`` and ``combined`` (0 = like the typical annotator, 1 = certainly unreliable) of every
    annotator in ``signals`` in place (module docstring). The agreement and straight-lining risks need at least
    ``min_items`` scored ratings; the crowd's median ρ is taken over annotators with that many."""
    enough = [s.loo_rho for s in signals.values() if s.n_scored >= min_items and s.loo_rho is not None]
    rho_ref = float(np.median(enough)) if enough else None
    for s in signals.values():
        risks = {}
        if s.n_scored >= min_items:
            risks["agreement"] = _relative_drop(s.loo_rho, rho_ref)
            if s.straightline is not None:
                risks["straightline"] = float(np.clip((s.straightline - STRAIGHTLINE_START)
                                                      / (1 - STRAIGHTLINE_START), 0, 1))
        if s.gold_checks >= GOLD_MIN_CHECKS and s.gold_accuracy is not None:
            risks["gold"] = float(np.clip((GOLD_GOOD - s.gold_accuracy) / (GOLD_GOOD - GOLD_BAD), 0, 1))
        if s.attention_checks:
            risks["attention"] = min(1.0, s.attention_failures / max(max_attention_failures, 1))
        s.risks = {k: v for k, v in risks.items() if v is not None}
        s.combined = max(s.risks.values()) if s.risks else None
