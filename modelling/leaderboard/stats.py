"""Statistics of the leaderboard, Django-free: per-LALM means with validated confidence intervals (human-only,
prediction-powered, active) and system-level rank agreement.

Scale: every value here is on the normalised correctness scale y = (r − 1)/4 ∈ [0, 1] (ORCA paper, section 4.2);
an answer's human value is the mean of its valid ratings on that scale.

Estimand. An LALM's mean correctness on a benchmark: the mean over its N candidate answers of each answer's
expected normalised rating by an annotator of the pool (the mean an answer's ratings tend to with more raters). The
N answers are a finite population; only the choice of which answers humans rate (and which annotators rate them)
is random. Each estimator below assumes a sampling design and is valid only under it (README, Leaderboard):

* ``classical`` (:func:`classical_mean`) — the rated answers are a uniform random sample of the N (the queue's
  random-key order under the uniform policy; the audit share under routing);
* ``ppi++`` (:func:`ppi_mean`) — the same sample, plus ORCA's μ on all N answers from models that never trained on
  them (a cross-fit): prediction-powered inference with power tuning (Angelopoulos, Bates, Fannjiang, Jordan &
  Zrnic, *Science* 2023; PPI++: Angelopoulos, Duchi & Zrnic 2023, arXiv:2311.01453; point estimate by ``ppi_py``);
* ``active`` (:func:`active_mean`) — answers drawn independently with fixed probabilities π (Poisson sampling ∝
  ORCA's σ with a uniform floor, :func:`inclusion_probabilities`; Zrnic & Candès, ICML 2024), weighted 1/π
  (Hájek), with ORCA's μ as a control variate when cross-fitted predictions exist.

Intervals (``ci_method``), each validated by ``bench/leaderboard.py`` under the platform's real queue order and
routing policies, at the sample sizes users have:

* ``t_adjusted`` — Student t on the question means with one pseudo-question at 0 and one at 1 (Q + 2 values,
  Q + 1 degrees of freedom), the bounded-outcome analogue of Agresti & Coull's "add two successes and two failures"
  (Agresti & Coull, *Am. Stat.* 1998; Agresti & Caffo, *Am. Stat.* 2000). Plain t on few discrete ratings covers
  0.89 with 5 questions and 0.94 with 10 (ties at the ends of the scale give near-zero standard errors); the
  adjustment covers ≥ 0.96 from 5 questions on and is no wider than plain t from 10 on. Below ``min_questions``
  (default 5) no interval is given.
* ``ppi_t`` — PPI++'s rectifier standard error with the predictions' mean known exactly (ORCA's μ is computed for
  all N answers, so ``ppi_py``'s term Var(λμ)/N is 0: Cochran's regression estimator, *Sampling Techniques*, 1977,
  ch. 7), λ = Cov(y, μ)/Var(μ) clipped to [0, 1], with the same two pseudo-labels counted a quarter each, Student t
  with n − 2 degrees of freedom.
* ``design_t`` — the Hájek estimator's design variance under Poisson sampling, Σ (1 − π) w² e² / (Σ w)² with
  w = 1/π (Särndal, Swensson & Wretman, *Model Assisted Survey Sampling*, 1992), over the labels plus the same two
  pseudo-labels at 0 and 1, plus the raters' share Σ w v / (Σ w)² (v: the variance of an answer's mean rating;
  answers drawn with certainty still have their raters drawn at random), Student t with n − 2 degrees of freedom
  (n − 1 without ORCA) on the n + 2 values.

No finite-population correction enters the t intervals of uniform samples: they are conservative by up to
√(1 − n/N). Intervals are clipped to [0, 1].

Verdicts between LALMs (anytime-valid betting test of equal means, Holm over all pairs) are in
:mod:`modelling.leaderboard.verdicts`, the budget planner in :mod:`modelling.leaderboard.planner`.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: Default confidence level of every interval.
CONFIDENCE = 0.95
#: The leaderboard-precision design's default uniform floor: the share of the budget spread uniformly over a
#: benchmark's answers (the rest ∝ ORCA's σ). Pair verdicts count only questions drawn by this uniform part (about
#: floor × budget of them), rows gain from the σ-proportional rest. 0.5 (was 0.2): in the synthetic replay of
#: ``bench/leaderboard.py --floor`` (2,000 questions × 8 LALMs, ORCA ρ ≈ 0.7) the power for a difference of 0.10
#: at the 50 % budget rose from 0.53 to 0.97 while the rows' ORCA-assisted intervals got no wider (README,
#: "Statistics"). ``modelling.services.routing_policy`` re-exports it for the policy, its form and its model field.
DEFAULT_ACTIVE_FLOOR = 0.5
#: Fewest rated questions (answers of one LALM) for any interval (``LEADERBOARD_MIN_QUESTIONS``).
MIN_QUESTIONS = 5

#: Estimator names (``estimator`` of a leaderboard row).
CLASSICAL, PPI, ACTIVE = "classical", "ppi++", "active"
#: Interval methods (``ci_method`` of a leaderboard row) and what each is, in words.
T_ADJUSTED, PPI_T, DESIGN_T, STRATIFIED_T = "t_adjusted", "ppi_t", "design_t", "stratified_t"
CI_METHODS = {
    T_ADJUSTED: "Student t on question means with one pseudo-question at 0 and one at 1 (Q + 1 df)",
    PPI_T: "PPI++ rectifier standard error, ORCA's mean known, a quarter pseudo-label at 0 and at 1, Student t "
           "(n − 2 df)",
    DESIGN_T: "Hájek design variance with (1 − π), a pseudo-label at 0 and at 1, Student t (n df; n + 1 without "
              "ORCA)",
    STRATIFIED_T: "per-benchmark intervals combined by answer share, Student t with the smallest df",
}
#: Added to every interval when the annotators of the ratings are known (:mod:`modelling.leaderboard.raters`).
RATERS_TEXT = ("with annotators known: plus their share, from the severity variance of the benchmark's annotators "
               "fitted to all its ratings (crossed random effects, method of moments), Student t with at most "
               "annotators − 1 df when their share is material, else Satterthwaite's df")
CI_METHODS = {key: text if key == STRATIFIED_T else f"{text}; {RATERS_TEXT}" for key, text in CI_METHODS.items()}


@dataclass(frozen=True)
class Estimate:
    """A mean on the normalised scale with its confidence interval.

    Attributes:
        estimate: the point estimate, in [0, 1] for the estimators here (PPI's may leave it by a hair).
        ci: (low, high) clipped to [0, 1], or None when too few answers are labelled (``min_questions``).
        n: labelled (human-rated) answers used.
        method: the interval method, one of :data:`CI_METHODS`.
        estimator: :data:`CLASSICAL`, :data:`PPI` or :data:`ACTIVE`.
        centre, se, df: the interval is centre ± t_df · se before clipping (None without an interval); the centre
            differs from the estimate only for ``t_adjusted`` (the pseudo-values move it). With annotators known,
            se includes their share and df allows for their number (:mod:`modelling.leaderboard.raters`).
        raters: distinct annotators of the labels when known (0: unknown, each rating its own cluster).
    """

    estimate: float
    ci: tuple[float, float] | None
    n: int
    method: str
    estimator: str = CLASSICAL
    centre: float | None = None
    se: float | None = None
    df: float | None = None
    raters: int = 0

    @property
    def width(self) -> float | None:
        return None if self.ci is None else self.ci[1] - self.ci[0]

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "ci": list(self.ci) if self.ci is not None else None}


def _clip_ci(low: float, high: float) -> tuple[float, float]:
    return (float(min(max(low, 0.0), 1.0)), float(min(max(high, 0.0), 1.0)))


def _t(confidence: float, df: int) -> float:
    return float(sps.t.ppf(0.5 + confidence / 2, df=df))


def _raters_part(
    se: float, df: float, *, ratings, raters, answer_weights: np.ndarray, fitted: np.ndarray, centre: float,
    severity=None,
) -> tuple[float, float, int]:
    """(se, df, annotators) with the annotators' share added (:func:`modelling.leaderboard.raters.with_raters`).

    ``ratings``: n lists of each label's normalised ratings; ``raters``: n aligned lists of annotator ids or None;
    ``answer_weights``: (n,) each label's share of the estimate (summing to 1); ``fitted``: (n,) the part of each
    label the estimator subtracts (λμ, 0 for the human-only mean); ``centre``: the estimate's residual mean;
    ``severity``: the benchmark's pooled :class:`modelling.leaderboard.raters.Severity` (None: the estimate's own
    two-way clustered share)."""
    from modelling.leaderboard.raters import rating_layout, with_raters

    if ratings is None or raters is None:
        return se, df, 0
    values, answers, ks, who = rating_layout(ratings, raters)
    residuals = values - fitted[answers] - centre
    return with_raters(se=se, df=df, residuals=residuals, weights=answer_weights[answers] / ks, answers=answers,
                       raters=who, severity=severity)


#: How many times each pseudo-label (y = 0 and y = 1) counts in the ``ppi_t`` interval: ORCA explains part of the
#: spread, so a full pseudo-label would widen PPI++ far more than it widens the human-only interval; a quarter
#: lifts its coverage with 9–15 labels from 0.94–0.95 to ≥ 0.97 at 1–7 % of width (``bench/leaderboard.py``).
PPI_PSEUDO_WEIGHT = 0.25


def classical_mean(
    y: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE, min_questions: int = MIN_QUESTIONS,
    ratings: Sequence[Sequence[float]] | None = None, raters: Sequence[Sequence[int | None]] | None = None,
    severity=None,
) -> Estimate:
    """Human-only mean of ``y`` (n,), one value per question (an LALM answers a question once), with the
    ``t_adjusted`` interval (module docstring): the mean and standard deviation of y plus the two pseudo-values 0
    and 1, Student t with n + 1 degrees of freedom.

    The estimate is the plain mean of ``y``; ``ci`` is None below ``min_questions`` values (>= 2). Assumes ``y``
    is a uniform random sample of the LALM's answers. With ``ratings`` (n lists: each value's normalised ratings,
    y_i their mean) and ``raters`` (n aligned lists of annotator ids, None where unknown) the interval adds the
    annotators' share (:mod:`modelling.leaderboard.raters`): from the benchmark's pooled ``severity`` when given (what
    the leaderboard passes), else two-way clustered over answers and annotators. Raises ValueError when ``y`` is
    empty.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        raise ValueError("classical_mean needs at least one value")
    mean = float(y.mean())
    if y.size < max(2, min_questions):
        return Estimate(mean, None, int(y.size), T_ADJUSTED)
    centre, se, df = adjusted_t_parts(y, low=0.0, high=1.0)
    se, df, g = _raters_part(se, df, ratings=ratings, raters=raters, answer_weights=np.full(y.size, 1.0 / y.size),
                             fitted=np.zeros(y.size), centre=mean, severity=severity)
    half = _t(confidence, df) * se
    return Estimate(mean, _clip_ci(centre - half, centre + half), int(y.size), T_ADJUSTED, CLASSICAL, centre, se, df,
                    g)


def regression_lambda(y: Sequence[float], yhat: Sequence[float], w: Sequence[float] | None = None) -> float:
    """The power-tuning λ of a finite-population PPI mean: Cochran's regression coefficient b = Cov(y, ŷ)/Var(ŷ),
    weighted by ``w`` when given, clipped to [0, 1] (module docstring).

    Args:
        y: (n,) human values of the labelled answers; yhat: (n,) ORCA's μ for them; w: (n,) non-negative weights
            (the active estimator's design weights) or None.

    It minimises the (weighted) variance of y − λμ. Returns 0 when ŷ is constant over the labelled answers.
    """
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    w = np.ones(y.size) if w is None else np.asarray(w, dtype=np.float64)
    if w.sum() <= 0:
        return 0.0
    w = w / w.sum()
    dy, dh = y - np.sum(w * y), yhat - np.sum(w * yhat)
    var = float(np.sum(w * dh * dh))
    if var <= 1e-12:
        return 0.0
    return float(np.clip(np.sum(w * dy * dh) / var, 0.0, 1.0))


def ppi_mean(
    *, y: Sequence[float], yhat: Sequence[float], yhat_all: Sequence[float], confidence: float = CONFIDENCE,
    power_tuning: bool = True, min_questions: int = MIN_QUESTIONS,
    ratings: Sequence[Sequence[float]] | None = None, raters: Sequence[Sequence[int | None]] | None = None,
    severity=None,
) -> Estimate:
    """Prediction-powered mean over the N answers of ``yhat_all`` (PPI++ with power tuning by default).

    Args:
        y: (n,) human values of the labelled answers, a uniform sample of the N.
        yhat: (n,) the model's predictions (ORCA's μ) for the same answers — from a model that never trained on
            them (cross-fitted), or the estimate is biased.
        yhat_all: (N,) the model's predictions for *all* answers whose mean is the estimand (labelled ones too).
        power_tuning: True: λ = :func:`regression_lambda` (λ = 0 is the human-only mean); False: λ = 1.
        min_questions: fewest labelled answers for an estimate (at least 3 with tuning, 2 without).

    Estimate: mean(λ·μ over N) + mean(y − λμ over n) (``ppi_py.ppi_mean_pointestimate``). Interval ``ppi_t``:
    the residuals r = y − λμ plus two pseudo-labels (y = 0 and y = 1 at the labels' mean μ) counted
    :data:`PPI_PSEUDO_WEIGHT` each, centre = mean(λμ over N) + their weighted mean r̄, standard error
    √(Σ f (r − r̄)² / (Σ f − d) / Σ f) with f the counts and d = 2 (1 for λ = 1) — ``ppi_py``'s rectifier standard
    error with the predictions' mean known, padded — and Student t with n − d degrees of freedom, clipped to [0, 1].
    ``ratings`` and ``raters`` (as for :func:`classical_mean`) add the annotators' share of the rectifier's
    variance. Raises ValueError for too few labels or mismatched lengths.
    """
    import ppi_py

    y, yhat, yhat_all = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_all))
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat differ in length ({y.size} vs {yhat.size})")
    least = max(3 if power_tuning else 2, min_questions)
    if y.size < least:
        raise ValueError(f"a prediction-powered interval needs at least {least} labelled answers, got {y.size}")
    if yhat_all.size == 0:
        raise ValueError("yhat_all is empty")
    lam = regression_lambda(y, yhat) if power_tuning else 1.0
    n, ddof = y.size, (2 if power_tuning else 1)
    estimate = float(np.asarray(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_all, lam=lam)).reshape(-1)[0])
    # The rectifier's residuals y − λμ plus the two pseudo-labels y = 0 and y = 1 at the labels' mean μ, each
    # counted PPI_PSEUDO_WEIGHT times (frequency weights); the predictions' mean over all N is known exactly.
    mu_bar = float(yhat.mean())
    r = np.concatenate([y - lam * yhat, [0.0 - lam * mu_bar, 1.0 - lam * mu_bar]])
    f = np.concatenate([np.ones(n), [PPI_PSEUDO_WEIGHT, PPI_PSEUDO_WEIGHT]])
    centre_r = float(np.sum(f * r) / f.sum())
    se = math.sqrt(float(np.sum(f * (r - centre_r) ** 2)) / (f.sum() - ddof) / f.sum())
    centre = lam * float(yhat_all.mean()) + centre_r
    se, df, g = _raters_part(se, n - ddof, ratings=ratings, raters=raters, answer_weights=np.full(n, 1.0 / n),
                             fitted=lam * yhat, centre=float(np.mean(y - lam * yhat)), severity=severity)
    half = _t(confidence, df) * se
    return Estimate(estimate, _clip_ci(centre - half, centre + half), int(n), PPI_T, PPI, centre, se, df, g)


def inclusion_probabilities(
    sigma: Sequence[float], *, budget: float, floor: float = DEFAULT_ACTIVE_FLOOR
) -> np.ndarray:
    """Inclusion probabilities π (N,) of the active policy: ∝ σ mixed with a uniform floor, summing to ``budget``.

    Args:
        sigma: (N,) ORCA's predicted standard deviation σ = √σ² of each answer's rating (normalised scale, >= 0).
        budget: expected number of answers to label, 0 < budget <= N.
        floor: share of the budget spread uniformly, in (0, 1]; it keeps every π >= floor · budget / N > 0, so
            every answer can be drawn and every weight 1/π is bounded (unbiasedness needs π > 0 everywhere).

    π_i = budget · ((1 − floor) · σ_i / Σσ + floor / N), then any π above 1 is set to 1 and the excess is
    redistributed over the others in proportion to their shares, until none exceeds 1 (so Σπ = budget). With
    Σσ = 0 the policy is uniform. Zrnic & Candès 2024, section 3 (uncertainty-proportional sampling).
    """
    s = np.clip(np.asarray(sigma, dtype=np.float64), 0.0, None)
    n = s.size
    if n == 0:
        raise ValueError("inclusion_probabilities needs at least one answer")
    if not 0 < budget <= n:
        raise ValueError(f"budget must be in (0, {n}], got {budget}")
    if not 0 < floor <= 1:
        raise ValueError(f"floor must be in (0, 1], got {floor}")
    share = np.full(n, 1.0 / n) if s.sum() <= 0 else (1 - floor) * s / s.sum() + floor / n
    pi = np.zeros(n)
    capped = np.zeros(n, dtype=bool)
    for _ in range(n):
        left = budget - capped.sum()
        free = ~capped
        pi[free] = left * share[free] / share[free].sum()
        pi[capped] = 1.0
        over = free & (pi > 1.0)
        if not over.any():
            break
        capped |= over
    return np.minimum(pi, 1.0)


def inverse_probability_weights(pi: Sequence[float]) -> np.ndarray:
    """Weights 1/π (N,) of labelled answers (Horvitz–Thompson); raises ValueError for any π outside (0, 1]."""
    p = np.asarray(pi, dtype=np.float64)
    if (p <= 0).any() or (p > 1).any():
        raise ValueError("inclusion probabilities must lie in (0, 1]")
    return 1.0 / p


def active_mean(
    *, y: Sequence[float], pi: Sequence[float], sampled: Sequence[bool], yhat: Sequence[float] | None = None,
    drawn: Sequence[bool] | None = None, within: Sequence[float] | None = None, confidence: float = CONFIDENCE,
    min_questions: int = MIN_QUESTIONS, ratings: Sequence[Sequence[float]] | None = None,
    raters: Sequence[Sequence[int | None]] | None = None, severity=None,
) -> Estimate:
    """Active estimate of the mean over N answers drawn by a fixed Poisson design (module docstring).

    Args:
        y: (N,) human values; only entries where ``sampled`` is true are read (others may be NaN).
        pi: (N,) the inclusion probabilities the answers were drawn with, fixed at their first decision.
        sampled: (N,) bool, drawn answers that humans rated (the labels).
        yhat: (N,) cross-fitted ORCA μ of every answer, or None (then λ = 0: the weighted human mean).
        drawn: (N,) bool, every drawn answer (rated or still waiting; default ``sampled``). The queue rates the
            drawn answers in random-key order, independent of the draw, so while a draw is partly rated the rated
            ones are a random subsample of it: each label's effective probability is π · (rated / drawn).
        within: (N,) the variance of each labelled answer's value from its raters (its ratings' sample variance ÷
            their number), or None (0). An answer drawn with certainty still has raters drawn at random: the
            design variance's (1 − π) leaves that out, so it is added (two-stage sampling: answers, then raters).
        min_questions: fewest labels for an interval (``ci`` None below it, as for λ's and the mean's degrees of
            freedom).
        ratings, raters: n lists (one per label, in the order of the labels in ``y``) of the normalised ratings and
            their annotator ids (None where unknown): the annotators' share is added to the variance, two-way
            clustered over answers and annotators (:mod:`modelling.leaderboard.raters`), weights w/Σw per label.

    Estimate (Hájek, λ-adjusted): mean(λ·μ over N) + Σ w (y − λμ) / Σ w over the labels, w = 1/π_eff, λ the
    :func:`regression_lambda` of y on μ with the design-variance weights (1 − π_eff)/π_eff². Interval ``design_t``:
    the labels plus one pseudo-label at y = 0 and one at y = 1 (with the labels' mean weight and π, and their
    weighted mean μ; as ``t_adjusted`` pads the human-only mean), e = y − λμ over the m = n + 2 values,
    V = Σ (1 − π_eff) w² (e − ē_w)² / (Σ w)² · m/(m − d) + Σ w v / (Σ w)² (v: ``within``), d = 2 with ORCA and
    1 without, and centre ± t_{m−d} √V,
    centre = mean(λμ over N) + ē_w, clipped to [0, 1]. Without the pseudo-labels the interval covered 0.93 with
    10–20 labels per LALM (``bench/leaderboard.py``). Raises ValueError for mismatched lengths or no label.
    """
    y, pi = np.asarray(y, dtype=np.float64), np.asarray(pi, dtype=np.float64)
    mask = np.asarray(sampled, dtype=bool)
    drawn_mask = mask if drawn is None else np.asarray(drawn, dtype=bool) | mask
    f = None if yhat is None else np.asarray(yhat, dtype=np.float64)
    if not (y.shape == pi.shape == mask.shape == drawn_mask.shape) or (f is not None and f.shape != y.shape):
        raise ValueError("y, pi, sampled, drawn and yhat must have the same length")
    n = int(mask.sum())
    ddof = 1 if f is None else 2
    if n == 0:
        raise ValueError("an active estimate needs at least one label")
    response = n / int(drawn_mask.sum())
    p = pi[mask] * response
    w = inverse_probability_weights(p)
    ys = y[mask]
    lam = 0.0 if f is None else regression_lambda(ys, f[mask], (1.0 - p) * w * w)
    e = ys - (0.0 if f is None else lam * f[mask])
    hajek = float(np.sum(w * e) / np.sum(w))
    estimate = (0.0 if f is None else lam * float(f.mean())) + hajek
    if n < max(ddof + 1, min_questions):
        return Estimate(estimate, None, n, DESIGN_T, ACTIVE)
    # One pseudo-label at 0 and one at 1 (the labels' mean weight, π and weighted μ), as t_adjusted pads the
    # human-only mean: with few labels of a discrete rating the residuals' spread is underestimated.
    mu_bar = 0.0 if f is None else float(np.sum(w * f[mask]) / np.sum(w))
    e_pad = np.concatenate([e, [0.0 - lam * mu_bar, 1.0 - lam * mu_bar]])
    w_pad = np.concatenate([w, [w.mean(), w.mean()]])
    p_pad = np.concatenate([p, [p.mean(), p.mean()]])
    centre_e = float(np.sum(w_pad * e_pad) / np.sum(w_pad))
    m = e_pad.size
    var = float(np.sum((1.0 - p_pad) * w_pad * w_pad * (e_pad - centre_e) ** 2) / np.sum(w_pad) ** 2) * m / (m - ddof)
    if within is not None:  # the raters' share: Σ π w² v = Σ w v over the labels (Särndal et al. 1992, ch. 4)
        var += float(np.sum(w * np.asarray(within, dtype=np.float64)[mask]) / np.sum(w_pad) ** 2)
    se = math.sqrt(max(var, 0.0))
    centre = (0.0 if f is None else lam * float(f.mean())) + centre_e
    se, df, g = _raters_part(se, m - ddof, ratings=ratings, raters=raters, answer_weights=w / w.sum(),
                             fitted=np.zeros(n) if f is None else lam * f[mask], centre=hajek,
                             severity=severity)
    half = _t(confidence, df) * se
    return Estimate(estimate, _clip_ci(centre - half, centre + half), n, DESIGN_T, ACTIVE, centre, se, df, g)


def adjusted_t_parts(
    values: Sequence[float], *, low: float, high: float, weights: Sequence[float] | None = None,
) -> tuple[float, float, int]:
    """(centre, se, df) of the ``t_adjusted`` interval of a mean of values bounded by [``low``, ``high``] (module
    docstring): the n values plus one pseudo-value at each end.

    Args:
        values: (n,) one value per question (n >= 1).
        weights: (n,) positive weights (None: equal); the pseudo-values get the mean weight.

    centre = the weighted mean of the n + 2 values; se = √(Σ w² (v − centre)² / (Σ w)² · (n + 2)/(n + 1)), which
    with equal weights is s/√(n + 2); df = n + 1. The interval is centre ± t_df · se.
    """
    v = np.concatenate([np.asarray(values, dtype=np.float64), [low, high]])
    w = np.ones(v.size - 2) if weights is None else np.asarray(weights, dtype=np.float64)
    w = np.concatenate([w, [w.mean(), w.mean()]])
    centre = float(np.sum(w * v) / np.sum(w))
    var = float(np.sum(w * w * (v - centre) ** 2) / np.sum(w) ** 2) * v.size / (v.size - 1)
    return centre, math.sqrt(var), v.size - 1


def stratified(parts: Sequence[tuple[int, Estimate]], *, confidence: float = CONFIDENCE) -> Estimate:
    """Combine per-stratum estimates (one LALM on several benchmarks, each with its own sampling) into the estimate
    of the mean over all its answers: Σ (N_b/N) · estimate_b, interval Σ (N_b/N) · centre_b ± t_df · √Σ (N_b/N)² se_b²
    with df the smallest stratum's (conservative). ``parts``: [(N_b answers, Estimate with an interval)].
    The method is ``stratified_t``; the estimator names every stratum's (``classical+active`` …)."""
    if not parts or any(e.ci is None for _, e in parts):
        raise ValueError("every stratum needs an interval")
    total = sum(n for n, _ in parts)
    shares = [n / total for n, _ in parts]
    estimate = sum(s * e.estimate for s, (_, e) in zip(shares, parts))
    centre = sum(s * e.centre for s, (_, e) in zip(shares, parts))
    se = math.sqrt(sum((s * e.se) ** 2 for s, (_, e) in zip(shares, parts)))
    df = min(e.df for _, e in parts)
    half = _t(confidence, df) * se
    names = "+".join(sorted({e.estimator for _, e in parts}))
    return Estimate(estimate, _clip_ci(centre - half, centre + half), sum(e.n for _, e in parts), STRATIFIED_T,
                    names, centre, se, df, max(e.raters for _, e in parts))


def rank_agreement(reference: Mapping[object, float], other: Mapping[object, float]) -> dict | None:
    """System-level agreement of two rankings of LALMs: Spearman ρ and Kendall τ-b (``scipy.stats``).

    Args:
        reference: {LALM: score} (e.g. mean human correctness); other: {LALM: score} (ORCA's mean μ, a judge's
            mean). Only LALMs in both count.

    Returns:
        {"rho", "tau", "n"} or None with fewer than 3 shared LALMs (a ranking of two says nothing); ρ or τ is
        None when undefined (all scores tied on one side).
    """
    shared = [k for k in reference if k in other]
    if len(shared) < 3:
        return None
    a = np.array([reference[k] for k in shared], dtype=np.float64)
    b = np.array([other[k] for k in shared], dtype=np.float64)
    rho = sps.spearmanr(a, b).statistic
    tau = sps.kendalltau(a, b).statistic

    def clean(x):
        return None if x is None or not np.isfinite(x) else float(x)

    return {"rho": clean(rho), "tau": clean(tau), "n": len(shared)}
