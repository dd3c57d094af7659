"""Statistics of the leaderboard, Django-free: per-LALM means with validated confidence intervals (human-only,
prediction-powered, active), verdicts between LALMs, system-level rank agreement and the budget planner.

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

Verdicts (:func:`pairwise_verdicts`): paired differences over the questions both LALMs answered and humans rated,
an exact (≤ 15 questions) or Monte-Carlo sign-flip permutation test of the mean difference (valid at small n and with
ties; a constant difference gives p = 2^(1 − n), never 0), Holm's correction over every pair (``statsmodels``), a
``t_adjusted`` interval of the difference (pseudo-values −1 and 1) that must exclude 0, and no verdict below
``min_shared`` shared questions. The budget planner (:func:`budget_plan`) gives the shared
questions for 80 % power of that test at the pair's Holm level (``statsmodels`` t-test power).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: Default confidence level of every interval.
CONFIDENCE = 0.95
#: Default share of the inclusion probability spread uniformly in the active policy (the rest ∝ σ).
UNIFORM_FLOOR = 0.2
#: Fewest rated questions (answers of one LALM) for any interval (``LEADERBOARD_MIN_QUESTIONS``).
MIN_QUESTIONS = 5
#: Fewest shared rated questions for a verdict between two LALMs (``LEADERBOARD_MIN_SHARED_QUESTIONS``).
MIN_SHARED_QUESTIONS = 10
#: Monte-Carlo sign flips of the permutation test above :data:`EXACT_SIGN_FLIPS_UP_TO` questions.
SIGN_FLIPS = 10_000
#: Up to this many questions the sign-flip test enumerates all 2^n sign patterns (exact p-values).
EXACT_SIGN_FLIPS_UP_TO = 15
#: Power the budget planner aims at.
PLANNER_POWER = 0.8

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
RATERS_TEXT = ("with annotators known: plus their share, two-way clustered over answers and annotators (Cameron, "
               "Gelbach & Miller 2011), Student t with at most annotators − 1 df when their share is material, else "
               "Satterthwaite's df")
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
) -> tuple[float, float, int]:
    """(se, df, annotators) with the annotators' share added (:func:`modelling.leaderboard.raters.with_raters`).

    ``ratings``: n lists of each label's normalised ratings; ``raters``: n aligned lists of annotator ids or None;
    ``answer_weights``: (n,) each label's share of the estimate (summing to 1); ``fitted``: (n,) the part of each
    label the estimator subtracts (λμ, 0 for the human-only mean); ``centre``: the estimate's residual mean."""
    from modelling.leaderboard.raters import rating_layout, with_raters

    if ratings is None or raters is None:
        return se, df, 0
    values, answers, ks, who = rating_layout(ratings, raters)
    residuals = values - fitted[answers] - centre
    return with_raters(se=se, df=df, residuals=residuals, weights=answer_weights[answers] / ks, answers=answers,
                       raters=who)


#: How many times each pseudo-label (y = 0 and y = 1) counts in the ``ppi_t`` interval: ORCA explains part of the
#: spread, so a full pseudo-label would widen PPI++ far more than it widens the human-only interval; a quarter
#: lifts its coverage with 9–15 labels from 0.94–0.95 to ≥ 0.97 at 1–7 % of width (``bench/leaderboard.py``).
PPI_PSEUDO_WEIGHT = 0.25


def classical_mean(
    y: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE, min_questions: int = MIN_QUESTIONS,
    ratings: Sequence[Sequence[float]] | None = None, raters: Sequence[Sequence[int | None]] | None = None,
) -> Estimate:
    """Human-only mean of ``y`` (n,), one value per question (an LALM answers a question once), with the
    ``t_adjusted`` interval (module docstring): the mean and standard deviation of y plus the two pseudo-values 0
    and 1, Student t with n + 1 degrees of freedom.

    The estimate is the plain mean of ``y``; ``ci`` is None below ``min_questions`` values (>= 2). Assumes ``y``
    is a uniform random sample of the LALM's answers. With ``ratings`` (n lists: each value's normalised ratings,
    y_i their mean) and ``raters`` (n aligned lists of annotator ids, None where unknown) the interval adds the
    annotators' share, two-way clustered over answers and annotators (:mod:`modelling.leaderboard.raters`).
    Raises ValueError when ``y`` is empty.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        raise ValueError("classical_mean needs at least one value")
    mean = float(y.mean())
    if y.size < max(2, min_questions):
        return Estimate(mean, None, int(y.size), T_ADJUSTED)
    centre, se, df = adjusted_t_parts(y, low=0.0, high=1.0)
    se, df, g = _raters_part(se, df, ratings=ratings, raters=raters, answer_weights=np.full(y.size, 1.0 / y.size),
                             fitted=np.zeros(y.size), centre=mean)
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
                             fitted=lam * yhat, centre=float(np.mean(y - lam * yhat)))
    half = _t(confidence, df) * se
    return Estimate(estimate, _clip_ci(centre - half, centre + half), int(n), PPI_T, PPI, centre, se, df, g)


def inclusion_probabilities(
    sigma: Sequence[float], *, budget: float, floor: float = UNIFORM_FLOOR
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
    raters: Sequence[Sequence[int | None]] | None = None,
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
                             fitted=np.zeros(n) if f is None else lam * f[mask], centre=hajek)
    half = _t(confidence, df) * se
    return Estimate(estimate, _clip_ci(centre - half, centre + half), n, DESIGN_T, ACTIVE, centre, se, df, g)


# --- comparing LALMs ---------------------------------------------------------------------------------------------


def sign_flip_test(
    d: Sequence[float], *, w: Sequence[float] | None = None, n_flips: int = SIGN_FLIPS,
    seed: int | Sequence[int] = 0,
) -> float:
    """Two-sided sign-flip permutation test that the paired differences ``d`` are symmetric about 0 (the two LALMs
    are exchangeable on every question); returns the p-value.

    Args:
        d: (n,) paired differences, one per question (n >= 1).
        w: (n,) positive weights of the questions (None: equal); the statistic is the weighted mean Σ w d / Σ w.
        n_flips: Monte-Carlo sign patterns when n > :data:`EXACT_SIGN_FLIPS_UP_TO` (seeded by ``seed``).

    p = the share of sign patterns s whose statistic Σ w s d / Σ w is at least as far from 0 as the observed one:
    exact over all 2^n patterns up to :data:`EXACT_SIGN_FLIPS_UP_TO` questions (as
    ``scipy.stats.permutation_test`` with ``permutation_type="samples"`` computes it), else
    (1 + count)/(n_flips + 1), a valid Monte-Carlo p-value. Raises ValueError for an empty ``d``.
    """
    d = np.asarray(d, dtype=np.float64)
    if d.size == 0:
        raise ValueError("the sign-flip test needs at least one difference")
    weights = np.ones(d.size) if w is None else np.asarray(w, dtype=np.float64)
    weighted = weights * d / weights.sum()
    observed = abs(float(weighted.sum()))
    if d.size <= EXACT_SIGN_FLIPS_UP_TO:
        codes = np.arange(2 ** d.size, dtype=np.int64)[:, None]
        signs = ((codes >> np.arange(d.size)) & 1) * 2.0 - 1.0
        return float(np.count_nonzero(np.abs(signs @ weighted) >= observed - 1e-12) / signs.shape[0])
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, n_flips, 2000):  # bounded memory for long benchmarks
        signs = rng.choice([-1.0, 1.0], size=(min(2000, n_flips - start), d.size))
        extreme += int(np.count_nonzero(np.abs(signs @ weighted) >= observed - 1e-12))
    return (1 + extreme) / (n_flips + 1)


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


@dataclass(frozen=True)
class PairwiseVerdict:
    """Mean difference of two LALMs over the questions both answered and humans rated, a − b, and the verdict.

    Attributes:
        a, b: the two LALMs (a listed first: the better of the two in the table's order).
        n_questions: shared rated questions.
        diff: mean over them of (a's value − b's value) (weighted under the active design), in [−1, 1]; None with
            no shared question.
        ci: 95 % ``t_adjusted`` interval of the mean difference, pseudo-values −1 and 1 (not adjusted for
            multiplicity; None below ``min_shared``).
        p_value: the sign-flip test's two-sided p (None below ``min_shared``).
        p_holm: Holm-corrected over every pair tested.
        verdict: ``a>b`` or ``b>a`` where p_holm < 1 − confidence and ``ci`` excludes 0, else ``undecided``.
        note: why a pair is undecided without a test ('' otherwise).
    """

    a: object
    b: object
    n_questions: int
    diff: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None
    verdict: str
    note: str = ""

    def as_dict(self) -> dict:
        """{"a", "b", "n_questions", "diff", "ci", "p_holm", "verdict"} plus "p_value" and "note"."""
        return {"a": self.a, "b": self.b, "n_questions": self.n_questions, "diff": self.diff,
                "ci": list(self.ci) if self.ci else None, "p_holm": self.p_holm, "verdict": self.verdict,
                "p_value": self.p_value, "note": self.note}


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order), via ``statsmodels.stats.multitest.multipletests``."""
    if len(p_values) == 0:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]


def pairwise_verdicts(
    values: Mapping[object, Mapping[object, float]], *, weights: Mapping[object, Mapping[object, float]] | None = None,
    confidence: float = CONFIDENCE, min_shared: int = MIN_SHARED_QUESTIONS, n_flips: int = SIGN_FLIPS,
    seed: int = 0,
) -> list[PairwiseVerdict]:
    """Every pair of LALMs: paired mean difference over shared questions, sign-flip test, Holm over all pairs.

    Args:
        values: {LALM: {question: the answer's human value}}, the labels only; LALMs in the table's order.
        weights: {LALM: {question: design weight 1/π}} under the active design (a question's weight in a pair is
            the product of the two answers' weights: both were drawn independently); None: equal weights.
        min_shared: fewest shared questions for a test; pairs with fewer are ``undecided`` with a note.
        n_flips, seed: Monte-Carlo sign flips above :data:`EXACT_SIGN_FLIPS_UP_TO` shared questions (pair i uses
            the seed (seed, i), so results do not depend on which other pairs exist).

    A verdict needs the Holm-corrected p below 1 − confidence and the difference's interval to exclude 0; a
    constant difference over n questions gets p = 2^(1 − n) and an interval as wide as its pseudo-values make it,
    so zero variance never decides by itself.
    """
    names = list(values)
    alpha = 1.0 - confidence
    raw = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(values[a]) & set(values[b]), key=str)
            n = len(shared)
            d = np.array([values[a][q] - values[b][q] for q in shared], dtype=np.float64)
            w = None if weights is None else np.array([weights[a][q] * weights[b][q] for q in shared])
            diff = None if n == 0 else float(np.average(d, weights=w))
            if n < min_shared:
                raw.append([a, b, n, diff, None, None, f"{n} shared rated questions (a verdict needs {min_shared})"])
                continue
            centre, se, df = adjusted_t_parts(d, low=-1.0, high=1.0, weights=w)
            half = _t(confidence, df) * se
            ci = (max(centre - half, -1.0), min(centre + half, 1.0))
            raw.append([a, b, n, diff, ci, sign_flip_test(d, w=w, n_flips=n_flips, seed=[seed, len(raw)]), ""])
    adjusted = iter(holm([r[5] for r in raw if r[5] is not None]))
    out = []
    for a, b, n, diff, ci, p, note in raw:
        p_holm = next(adjusted) if p is not None else None
        verdict = "undecided"
        if p_holm is not None and p_holm < alpha and (ci[0] > 0 or ci[1] < 0):
            verdict = "a>b" if ci[0] > 0 else "b>a"
        out.append(PairwiseVerdict(a, b, n, diff, ci, p, p_holm, verdict, note))
    return out


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


# --- the budget planner ----------------------------------------------------------------------------------------


def holm_level(*, pairs: int, decided: int, confidence: float = CONFIDENCE) -> float:
    """The level at which Holm's step-down procedure over ``pairs`` tests judges its next pair once ``decided``
    pairs already have a verdict: (1 − confidence)/(pairs − decided) (Holm 1979)."""
    if pairs < 1 or not 0 <= decided < pairs:
        raise ValueError(f"need 0 <= decided < pairs, got decided={decided}, pairs={pairs}")
    return (1.0 - confidence) / (pairs - decided)


def sign_flip_min_questions(level: float) -> int:
    """Fewest questions for which the exact sign-flip test can reach ``level`` at all: 2^(1 − n) <= level."""
    return max(1, int(math.ceil(1.0 + math.log2(1.0 / level) - 1e-12)))


@dataclass(frozen=True)
class BudgetPlan:
    """About how many more human ratings give a verdict between two LALMs with 80 % power.

    Attributes:
        n_shared: questions both LALMs answered that are rated for both now.
        mean_diff: the observed mean difference (normalised scale).
        sd_diff: standard deviation of the paired differences.
        level: the pair's Holm level (:func:`holm_level`) the test must reach.
        power: the power planned for (0.8).
        ratings_per_answer: mean valid ratings per rated answer (k).
        needed_if_exact: shared rated questions for that power at that level if the observed difference and spread
            were exact: the one-sample t-test's sample size (``statsmodels`` ``TTestPower``) for effect |mean|/sd, at
            least :func:`sign_flip_min_questions` and the verdict's minimum of shared questions; None when the
            observed difference is 0.
        needed_questions: the same allowing for the uncertainty of the observed difference and spread (the power
            averaged over their posterior from ``n_shared`` questions, "assurance"); None below ``min_shared``
            shared questions (or effective ones, under design weights) or when no number of questions reaches the
            power: ``note`` says why.
        more_ratings: 2 · k · max(0, needed_questions − n_shared): two answers per question, k ratings each.
        available_questions: questions both LALMs answered (rated or not): the most a study can use.
        reachable: needed_questions is known and at most ``available_questions``.
        note: why there is no plan ('' when there is one).
    """

    n_shared: int
    mean_diff: float
    sd_diff: float
    level: float
    power: float
    ratings_per_answer: float
    needed_if_exact: int | None
    needed_questions: int | None
    more_ratings: int | None
    available_questions: int
    reachable: bool
    note: str = ""


#: Quantile nodes of the posterior the assured power averages over (a 48 × 48 grid of the difference and its sd).
_ASSURANCE_NODES = (np.arange(48) + 0.5) / 48


def _interval_excludes_zero_n(*, mean: float, sd: float, start: int, power: float, confidence: float = CONFIDENCE,
                              limit: int = 100_000) -> int:
    """The smallest n >= ``start`` at which the verdict's other condition, the ``t_adjusted`` interval of the
    difference (pseudo-values −1 and 1) excluding 0, also has ``power``: the t-test power of the padded values'
    expected centre n·mean/(n + 2) and spread at 1 − ``confidence`` (it binds with few pairs and few questions)."""
    from statsmodels.stats.power import TTestPower

    n = start
    while n < limit:
        centre = n * mean / (n + 2)
        spread = ((n - 1) * sd * sd + n * (mean - centre) ** 2 + (1 + centre) ** 2 + (1 - centre) ** 2) / (n + 1)
        if TTestPower().power(effect_size=abs(centre) / math.sqrt(spread), nobs=n + 2, alpha=1 - confidence) >= power:
            return n
        n = max(n + 1, int(n * 1.05))
    return limit


def _exact_plan_n(*, mean: float, sd: float, level: float, power: float, floor: int) -> int:
    """Shared questions for ``power`` at ``level`` if ``mean`` and ``sd`` were the truth (see :class:`BudgetPlan`)."""
    from statsmodels.stats.power import TTestPower

    needed = floor
    effect = math.inf if sd == 0 else abs(mean) / sd
    if sd > 0 and TTestPower().power(effect_size=effect, nobs=floor, alpha=level) < power:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # statsmodels' root finder warns before it returns NaN
            n_t = float(np.asarray(TTestPower().solve_power(
                effect_size=effect, alpha=level, power=power, alternative="two-sided")).reshape(-1)[0])
        if not math.isfinite(n_t):  # the normal approximation, which the t-test's n exceeds by a little
            n_t = ((sps.norm.isf(level / 2) + sps.norm.ppf(power)) / effect) ** 2 + 2
        needed = max(floor, int(math.ceil(n_t)))
    return _interval_excludes_zero_n(mean=mean, sd=sd, start=needed, power=power)


def _assured_power(n: int, *, mean: float, sd: float, n0: int, level: float, prior_sd: float | None = None) -> float:
    """The t-test's power at n questions to find the difference in the observed direction, averaged over the
    posterior of the true difference and spread given n0 observed differences (mean, sd): σ² ~ sd²·(n0 − 1)/
    χ²_{n0−1}, and δ | σ ~ N(mean, σ²/n0) under a flat prior, or shrunk towards 0 under a N(0, prior_sd²) prior on
    the difference of two LALMs — "assurance" (O'Hagan, Stevens & Campbell, *Pharmaceutical Statistics* 2005)."""
    sigmas = sd * np.sqrt((n0 - 1) / sps.chi2.ppf(_ASSURANCE_NODES, n0 - 1))
    if prior_sd is None:
        centres, spreads = np.full(sigmas.size, abs(mean)), sigmas / math.sqrt(n0)
    else:  # the normal prior's posterior: precision-weighted towards 0
        precision = 1.0 / prior_sd ** 2 + n0 / sigmas ** 2
        centres, spreads = abs(mean) * (n0 / sigmas ** 2) / precision, 1.0 / np.sqrt(precision)
    deltas = centres[:, None] + spreads[:, None] * sps.norm.ppf(_ASSURANCE_NODES)[None, :]
    critical = sps.t.isf(level / 2, n - 1)
    return float(np.mean(sps.nct.sf(critical, n - 1, deltas / sigmas[:, None] * math.sqrt(n))))


def budget_plan(
    *, diffs: Sequence[float], ratings_per_answer: float, available_questions: int, level: float,
    weights: Sequence[float] | None = None, prior_sd: float | None = None, power: float = PLANNER_POWER,
    min_shared: int = MIN_SHARED_QUESTIONS, limit: int = 100_000,
) -> BudgetPlan:
    """Plan the shared rated questions (and ratings) that give the verdict between two LALMs ``power`` at
    ``level`` (the pair's Holm level).

    Args:
        diffs: (n,) observed paired differences a − b over the shared rated questions (n >= 2).
        ratings_per_answer: k, mean valid ratings per rated answer (> 0).
        available_questions: questions both LALMs answered (rated or not).
        level: the significance level the pair must reach (0 < level < 1).
        weights: (n,) design weights of the questions (the active design's 1/(π_a π_b)) or None: the difference and
            spread are then the weighted ones, and the assurance counts Kish's effective number of questions
            (Σ w)²/Σ w².
        prior_sd: the spread of true differences between LALMs (e.g. from the leaderboard's estimates; None: a flat
            prior): most pairs of LALMs differ little, so a large difference seen on few questions is partly luck,
            and the assurance shrinks it towards 0 (empirical Bayes).
        limit: plans above this many questions count as not reachable.

    The sign-flip test of the mean has the power of the t-test asymptotically (Lehmann & Romano, *Testing
    Statistical Hypotheses*), so the t-test's power is used. ``needed_if_exact`` takes the observed difference and
    spread as the truth (a difference with sd 0 needs only the test's smallest attainable p); the verdict's interval
    (pseudo-values −1 and 1) must exclude 0 with the same power (:func:`_interval_excludes_zero_n`).
    ``needed_questions`` averages the power over the uncertainty of the observed difference and spread
    (:func:`_assured_power`), and needs ``min_shared`` shared questions to plan on: from a handful the observed
    difference says too little (planned from 2–4, the realised power was 0.04–0.19 in ``bench/leaderboard.py``).
    Raises ValueError for bad arguments.
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.size < 2:
        raise ValueError("the budget planner needs at least 2 shared rated questions")
    if ratings_per_answer <= 0:
        raise ValueError("ratings_per_answer must be positive")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    w = np.ones(d.size) if weights is None else np.asarray(weights, dtype=np.float64)
    mean = float(np.sum(w * d) / np.sum(w))
    sd = float(math.sqrt(np.sum(w * (d - mean) ** 2) / np.sum(w) * d.size / (d.size - 1)))
    n0 = max(2, int(round(float(np.sum(w) ** 2 / np.sum(w * w)))))
    exact = needed = None
    note = ""
    if mean == 0.0:
        note = "the observed difference is 0"
    else:
        floor = max(sign_flip_min_questions(level), min_shared, 2)
        exact = _exact_plan_n(mean=mean, sd=sd, level=level, power=power, floor=floor)
        if d.size < min_shared:
            note = (f"{d.size} shared rated questions are too few to plan on: rate at least {min_shared} shared "
                    "questions first")
        elif n0 < min_shared:
            note = (f"the design weights leave the {d.size} shared rated questions worth {n0} (Kish's effective "
                    f"number): too few to plan on; rate more shared questions first")
        elif sd == 0:
            needed = exact
        elif _assured_power(limit, mean=mean, sd=sd, n0=n0, level=level, prior_sd=prior_sd) < power:
            note = (f"with {d.size} shared rated questions the difference is too uncertain for {power:.0%} power at "
                    "any size: rate more shared questions first")
        else:
            low, high = exact, exact
            while _assured_power(high, mean=mean, sd=sd, n0=n0, level=level, prior_sd=prior_sd) < power:
                low, high = high, min(limit, high * 2)
            while low < high:  # smallest n with the assured power
                mid = (low + high) // 2
                if _assured_power(mid, mean=mean, sd=sd, n0=n0, level=level, prior_sd=prior_sd) >= power:
                    high = mid
                else:
                    low = mid + 1
            needed = high
    more = None if needed is None else int(round(2 * ratings_per_answer * max(0, needed - d.size)))
    return BudgetPlan(
        n_shared=int(d.size), mean_diff=mean, sd_diff=sd, level=float(level), power=float(power),
        ratings_per_answer=float(ratings_per_answer), needed_if_exact=exact, needed_questions=needed,
        more_ratings=more, available_questions=int(available_questions),
        reachable=needed is not None and needed <= available_questions, note=note,
    )
