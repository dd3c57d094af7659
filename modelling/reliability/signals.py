"""Per-annotator reliability signals over ordinal 1–5 ratings with genuine disagreement, and a combined risk.

Pure functions over flat arrays (one entry per rating), no Django import, so the benchmark (``bench/quality.py``)
and the platform (:mod:`modelling.reliability.services`) compute exactly the same numbers.

Signals of one annotator (all over their scored ratings unless said otherwise):

* ``loo_rho`` — Spearman ρ between their scores and the leave-one-out mean (the mean of the *other* annotators'
  scores of the same item, items with >= ``min_others`` others); ``loo_mae`` the mean absolute difference
  (points). The same definitions, and the same code (``annotation.agreement.leave_one_out_means``), as
  :func:`modelling.services.agreement.agreement_leave_one_out`.
* ``ds_accuracy`` — model-based reliability from crowd-kit's Dawid–Skene over the 5 categories:
  Σ_k prior_k · P(label k | true k) from the fitted confusion matrix (1 = always the consensus category). It
  treats the scale as nominal, so it is one signal among several, not the verdict (Dawid & Skene 1979).
* ``leniency`` — ordinal leniency in [-0.5, 0.5]: the mean over items of P(own > other) + ½ P(own = other) − ½
  against the other annotators' scores of the same item (a per-item Cliff's-delta/2; > 0 lenient, < 0 severe).
  Rank-based, so it does not assume the 1–5 steps are equal.
* ``straightline`` — share of their ratings that carry their most frequent score (1 = always the same score).
* ``random_share`` — the estimated share of their answers given at random (uniformly over 1–5), with its standard
  error ``random_share_se``: a method-of-moments fit of the mixture "(1 − p) like the crowd + p uniform". A *gross
  disagreement* is a score >= 2 points from the others' mean of the item, shifted by the annotator's own median
  offset from it (a lenient or severe annotator is not random). On item i a uniform answer is gross with the known
  probability g_i and a crowd member with the crowd's own rate b_i (each other annotator against the mean of the
  rest), so E[gross] = (1 − p)·b_i + p·g_i and p̂ = Σ(gross_i − b_i) / Σ(g_i − b_i), clipped to [0, 1]. So that the
  annotator and the crowd member face equally noisy references, the annotator is compared with the others' mean
  without one of them, each in turn (gross_i and g_i are averages over those n − 1-rating references). Items where
  the crowd agrees weigh most (g_i − b_i large); on items the crowd itself splits, a random answer looks like any
  other. The crowd here leaves out annotators whose agreement or straight-lining risk already reaches
  ``reference_risk`` (a random or reversed rater would otherwise raise b_i and hide the others), and needs
  >= ``RANDOM_MIN_OTHERS`` other ratings per item.
* ``ue_share`` — share of their ratings with code U or E (unable to judge); ``median_seconds`` on task (the
  platform passes the server's measure, the client's only for ratings stored without one:
  :mod:`modelling.reliability.services`).
* ``gold_accuracy`` (share of gold checks passed) and ``attention_failures`` come from the quality checks.

The combined risk (:func:`combined_risk`) joins these per-signal risks r_k ∈ [0, 1] as a noisy-OR, 1 − Π_k (1 − r_k):
each risk is read as the chance, on its own evidence, that the annotator is unreliable. One raised signal gives its
own risk (a single signal pauses exactly where it did alone); two moderate ones together reach more than either —
on the MUSHRA test, a rater who answers at random half the time typically shows ρ about half the crowd's *and* some
random-answer evidence, neither enough alone (``bench/quality.py``: alpha after pausing 0.477 against 0.473 with the
largest risk, clean 0.483; no real listener paused). The per-signal risks:

* agreement: how far the annotator's ``loo_rho`` falls below the crowd's median ρ toward 0 — 0 at or above the
  median, 1 at ρ <= 0 (random or reversed) and for a constant rater (ρ undefined). Relative to the crowd, so it
  works whatever the data's typical agreement is (ρ ≈ 0.75 in a MUSHRA test, ≈ 0.7 on ORCA seed-108);
* straight-lining: 0 up to 80 % identical scores, rising to 1 at 100 %;
* random answers: the one-sided 95 % lower bound p̂ − 1.645·SE of ``random_share``, 0 at <= 0, 1 at
  >= ``RANDOM_SHARE_FULL`` (25 %), so the default pause (0.7) needs evidence that >= 17.5 % of the answers are
  random and warning (0.4) that >= 10 % are. It is what finds a rater who answers at random only part of the time:
  their ρ is about half a good rater's, which real raters with genuine disagreement also reach, but their gross
  disagreements fall on items where everyone else agrees. The lower bound keeps it quiet where the data cannot
  tell (few ratings, or a crowd that disagrees on everything);
* gold: 0 at >= 90 % gold accuracy, 1 at <= 30 % (from 5 gold checks on);
* attention: failed checks / the policy's pause count.

Dawid–Skene accuracy, the leave-one-out MAE and leniency are shown beside it but left out of the combined risk:
on both benchmark data sets they separate injected bad raters from real ones less well than ρ and the random share
(``bench/quality.py``: on the MUSHRA test a rater who answers at random half the time keeps a Dawid–Skene accuracy
like a real one's, and leniency is a style, not a fault).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from annotation.agreement import leave_one_out_means
from modelling.orca.metrics import spearman_or_none

#: Straight-lining share at which its risk starts (0) and the gold accuracy bounds of the gold risk.
STRAIGHTLINE_START = 0.8
GOLD_GOOD, GOLD_BAD, GOLD_MIN_CHECKS = 0.9, 0.3, 5
#: Random answers: a gross disagreement is this many points from the (shifted) others' mean; an item needs this many
#: other ratings in the crowd; the risk is 1 from this lower bound of the random share on (z: one-sided 95 %).
RANDOM_GROSS_POINTS, RANDOM_MIN_OTHERS, RANDOM_SHARE_FULL, RANDOM_SHARE_Z = 2.0, 2, 0.25, 1.645
_VALUES = np.arange(1, 6, dtype=np.float64)


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
    random_share: float | None = None
    random_share_se: float | None = None
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


def _random_share(items: np.ndarray, workers: np.ndarray, scores: np.ndarray, *, crowd: np.ndarray,
                  ) -> dict[int, tuple[float, float]]:
    """{worker: (p̂, SE)} of the random-answer mixture (module docstring) from scored ratings; ``crowd`` (R,) bool
    marks the ratings that form the others' reference. Workers without an informative item are left out."""
    if scores.size == 0:
        return {}
    _, unit = np.unique(items, return_inverse=True)
    idx = scores.astype(np.int64) - 1
    hist = np.zeros((unit.max() + 1, 5))
    np.add.at(hist, (unit[crowd], idx[crowd]), 1)
    others = hist[unit]
    others[np.arange(scores.size), idx] -= crowd  # a rating is never its own reference
    n = others.sum(axis=1)
    total = others @ _VALUES
    usable = n >= RANDOM_MIN_OTHERS
    n_safe = np.maximum(n, 2)
    mean = total / n_safe
    # References of n − 1 ratings: the others' mean without one of them, each in turn (weights: the others'
    # histogram / n). A crowd member is compared with the mean of the rest of the others, so the annotator is
    # compared with equally large references: with 2 others a single rating is a noisier reference than their mean.
    share_of = others / n_safe[:, None]
    rest_mean = (total[:, None] - _VALUES[None, :]) / (n_safe[:, None] - 1)
    baseline = (share_of * (np.abs(_VALUES[None, :] - rest_mean) >= RANDOM_GROSS_POINTS)).sum(axis=1)
    out = {}
    for worker in np.unique(workers):
        mine = (workers == worker) & usable
        if not mine.any():
            continue
        own, b, w = scores[mine], baseline[mine], share_of[mine]
        centre = np.clip(rest_mean[mine] + np.median(own - mean[mine]), 1, 5)  # (m, 5): shifted references
        gross = (w * (np.abs(own[:, None] - centre) >= RANDOM_GROSS_POINTS)).sum(axis=1)
        g = (w * (np.abs(_VALUES[None, None, :] - centre[:, :, None]) >= RANDOM_GROSS_POINTS).mean(axis=2)).sum(axis=1)
        weight = (g - b).sum()
        if weight <= 0:
            continue
        share = float(np.clip((gross - b).sum() / weight, 0, 1))
        # Binomial variance of each item's gross indicator: an upper bound for the averaged one (a wider bound).
        rate = np.clip((1 - share) * b + share * g, 1e-6, 1 - 1e-6)
        out[int(worker)] = (share, float(np.sqrt((rate * (1 - rate)).sum()) / weight))
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
    min_items: int = 10,
    reference_risk: float = 0.7,
) -> dict[int, RaterSignals]:
    """Signals per annotator (module docstring) from one entry per rating.

    Args:
        item_ids: (R,) int unit ids (candidate answers).
        annotator_ids: (R,) int annotator ids.
        scores: (R,) float scores 1–5, NaN for a rating without a score (U or E).
        unable: (R,) bool, the rating carries code U or E (None: derived from NaN scores).
        seconds: (R,) float seconds on task (the server's measure where there is one), NaN when unmeasured (None:
            not available).
        min_others: other scored ratings an item needs to count toward ``loo_*`` and ``leniency``.
        min_items: scored ratings an annotator needs before their agreement risk can leave them out of the crowd.
        reference_risk: agreement or straight-lining risk (see :func:`combined_risk`) from which an annotator is
            left out of the crowd that ``random_share`` compares with (the policy's pause score).

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
    unit_count = np.bincount(unit)
    others = unit_count[unit] - 1
    others_mean = leave_one_out_means(unit_ids=s_items, scores=s_scores, min_others=min_others)
    keep = ~np.isnan(others_mean)
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
            sig.loo_rho = spearman_or_none(s_scores[counted], others_mean[counted])
            sig.loo_mae = float(np.abs(s_scores[counted] - others_mean[counted]).mean())
            sig.leniency = float(np.nanmean(superiority[counted]) - 0.5)
        sig.ds_accuracy = ds.get(int(ann))
        out[int(ann)] = sig
    # Second pass: the random share against a crowd without the annotators the ratings alone already condemn.
    rating_risks = _rating_risks(out, min_items=min_items)
    outside = [a for a, risks in rating_risks.items() if max(risks.values(), default=0) >= reference_risk]
    shares = _random_share(s_items, s_ann, s_scores, crowd=~np.isin(s_ann, outside))
    for ann, (share, se) in shares.items():
        out[ann].random_share, out[ann].random_share_se = share, se
    return out


def _relative_drop(value: float | None, reference: float | None) -> float | None:
    """0 at or above ``reference``, 1 at or below 0, linear between; 1 for a missing value (undefined ρ)."""
    if reference is None or reference <= 0:
        return None
    if value is None:
        return 1.0
    return float(np.clip((reference - value) / reference, 0.0, 1.0))


def _rating_risks(signals: dict[int, RaterSignals], *, min_items: int) -> dict[int, dict[str, float]]:
    """{annotator: {"agreement": .., "straightline": ..}} for annotators with >= ``min_items`` scored ratings (the
    risks that come from the ratings alone; module docstring). The crowd's median ρ is over those annotators."""
    enough = [s.loo_rho for s in signals.values() if s.n_scored >= min_items and s.loo_rho is not None]
    rho_ref = float(np.median(enough)) if enough else None
    out = {}
    for s in signals.values():
        if s.n_scored < min_items:
            continue
        risks = {"agreement": _relative_drop(s.loo_rho, rho_ref)}
        if s.straightline is not None:
            risks["straightline"] = float(np.clip((s.straightline - STRAIGHTLINE_START) / (1 - STRAIGHTLINE_START),
                                                  0, 1))
        out[s.annotator_id] = {k: v for k, v in risks.items() if v is not None}
    return out


def combined_risk(signals: dict[int, RaterSignals], *, min_items: int = 10, max_attention_failures: int = 2) -> None:
    """Fill ``risks`` and ``combined`` (0 = like the typical annotator, 1 = certainly unreliable) of every
    annotator in ``signals`` in place (module docstring). The agreement, straight-lining and random-answer risks
    need at least ``min_items`` scored ratings; the crowd's median ρ is taken over annotators with that many.
    ``combined`` = 1 − Π (1 − risk) over ``risks`` (noisy-OR, module docstring), None without any risk."""
    rating_risks = _rating_risks(signals, min_items=min_items)
    for s in signals.values():
        risks = dict(rating_risks.get(s.annotator_id, {}))
        if s.n_scored >= min_items and s.random_share is not None:
            lower = s.random_share - RANDOM_SHARE_Z * (s.random_share_se or 0.0)
            risks["random"] = float(np.clip(lower / RANDOM_SHARE_FULL, 0, 1))
        if s.gold_checks >= GOLD_MIN_CHECKS and s.gold_accuracy is not None:
            risks["gold"] = float(np.clip((GOLD_GOOD - s.gold_accuracy) / (GOLD_GOOD - GOLD_BAD), 0, 1))
        if s.attention_checks:
            risks["attention"] = min(1.0, s.attention_failures / max(max_attention_failures, 1))
        s.risks = {k: v for k, v in risks.items() if v is not None}
        s.combined = float(1 - np.prod([1 - v for v in s.risks.values()])) if s.risks else None
