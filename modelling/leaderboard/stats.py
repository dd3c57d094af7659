"""Statistics of the leaderboard, Django-free: per-LALM means with confidence intervals, prediction-powered and
active estimates, paired differences, system-level rank agreement and the budget planner.

Scale: every value here is on the normalised correctness scale y = (r − 1)/4 ∈ [0, 1] (ORCA paper, section 4.2);
an answer's human value is the mean of its valid ratings on that scale.

Sources:
* Prediction-powered inference: Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, *Science* 2023; PPI++ with power
  tuning: Angelopoulos, Duchi & Zrnic 2023 (arXiv:2311.01453). Computed by ``ppi_py`` (``ppi-python``), never
  re-derived here.
* Active statistical inference: Zrnic & Candès, ICML 2024 — label with probability π(x) driven by the model's
  uncertainty (here ∝ ORCA's σ, mixed with a uniform floor) and weight each label by 1/π.
* Holm 1979 (step-down multiple-testing correction), through ``statsmodels``.

Estimand and intervals. The leaderboard's estimand is a *finite* mean: the LALM's mean normalised human rating over
its N answers on this benchmark. ORCA's μ is computed for all N answers, so the mean of the predictions carries no
sampling error; only the choice of which n answers humans rate does. ``ppi_py`` builds its intervals for a larger
population from which the unlabelled answers were drawn, with a term Var(λ·μ)/N for the predictions' mean; here
that term is 0 (``ppi_py`` is called with the predictions' known mean in place of the N predictions, the point
estimate being unchanged). The rest is Cochran's regression estimator of a population mean (Cochran, *Sampling
Techniques*, 3rd ed. 1977, ch. 7): PPI++ with the power-tuning λ that minimises this variance, Cochran's regression
coefficient b = Cov(y, μ)/Var(μ) over the labelled answers (clipped to [0, 1] as ``ppi_py`` clips its own λ; λ = 0 is
the human-only mean, λ = 1 original PPI), and the residual variance of y − λμ with n − 2 degrees of freedom (two
quantities, the mean and λ, are estimated from the n labels). Every interval is a Student t interval (n − 1 df for
the human-only mean and for PPI with λ = 1, n − 2 with a tuned λ): ``ppi_py``'s normal-approximation intervals
cover only about 0.89–0.91 with 10–20 labelled answers per LALM (MODELLING-NOTES, 2026-11-24). No
finite-population correction √(1 − n/N) is applied, to any method: the intervals are conservative by up to that
factor (at 30 % of answers rated the replay's intervals cover 0.97–0.98), and with it the active interval fell to
0.928 coverage there (``bench/leaderboard.py``). Intervals are clipped to [0, 1], the range of the estimand.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

#: Default confidence level of every interval.
CONFIDENCE = 0.95
#: Default share of the inclusion probability spread uniformly in the active policy (the rest ∝ σ).
UNIFORM_FLOOR = 0.2


@dataclass(frozen=True)
class Estimate:
    """A mean on the normalised scale with its confidence interval.

    Attributes:
        estimate: the point estimate, in [0, 1] for the estimators here (PPI's may leave it by a hair).
        ci: (low, high) clipped to [0, 1], or None when it is undefined (fewer than two labelled answers).
        n: labelled (human-rated) answers used.
        method: ``t``, ``cluster_bootstrap``, ``ppi++``, ``active`` or ``orca`` (no interval).
    """

    estimate: float
    ci: tuple[float, float] | None
    n: int
    method: str

    @property
    def width(self) -> float | None:
        return None if self.ci is None else self.ci[1] - self.ci[0]

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "ci": list(self.ci) if self.ci is not None else None}


def _clip_ci(low: float, high: float) -> tuple[float, float]:
    return (float(min(max(low, 0.0), 1.0)), float(min(max(high, 0.0), 1.0)))


#: The level at which ``ppi_py``'s z interval is estimate ± 1 standard error (z_{1−α/2} = 1).
ONE_SE_ALPHA = float(2.0 * sps.norm.sf(1.0))


def regression_lambda(y: Sequence[float], yhat: Sequence[float], w: Sequence[float] | None = None) -> float:
    """The power-tuning λ of a finite-population PPI mean: Cochran's regression coefficient b = Cov(y, ŷ)/Var(ŷ),
    weighted by ``w`` when given, clipped to [0, 1] (module docstring).

    Args:
        y: (n,) human values of the labelled answers; yhat: (n,) ORCA's μ for them; w: (n,) sample weights (1/π of
            the active policy) or None.

    It minimises the variance of mean(λ·μ over all N) + weighted mean(y − λμ over the n labelled) when the mean of μ
    over all N is known. Returns 0 when ŷ is constant over the labelled answers (nothing to learn from it).
    """
    y, yhat = np.asarray(y, dtype=np.float64), np.asarray(yhat, dtype=np.float64)
    w = np.ones(y.size) if w is None else np.asarray(w, dtype=np.float64)
    w = w / w.sum()
    dy, dh = y - np.sum(w * y), yhat - np.sum(w * yhat)
    var = float(np.sum(w * dh * dh))
    if var <= 1e-12:
        return 0.0
    return float(np.clip(np.sum(w * dy * dh) / var, 0.0, 1.0))


def _finite_population_ppi(*, y, yhat, yhat_all, w, lam: float, tuned: bool, confidence: float,
                           method: str) -> Estimate:
    """``ppi_py``'s estimate and rectifier standard error with the predictions' mean over the N answers known
    (module docstring), as a Student t interval with n − 2 (``tuned``) or n − 1 degrees of freedom."""
    import ppi_py

    n = y.size
    ddof = 2 if tuned else 1
    estimate = _squeeze(ppi_py.ppi_mean_pointestimate(y, yhat, yhat_all, lam=lam, w=w))
    known_mean = np.full(yhat_all.size, float(yhat_all.mean()))  # no sampling error in the predictions' mean
    low, high = ppi_py.ppi_mean_ci(y, yhat, known_mean, alpha=ONE_SE_ALPHA, lam=lam, w=w)
    se = (_squeeze(high) - _squeeze(low)) / 2  # ppi_py: std(w·(y − λŷ), ddof 0)/√n
    half = sps.t.ppf(0.5 + confidence / 2, df=n - ddof) * se * math.sqrt(n / (n - ddof))
    return Estimate(estimate, _clip_ci(estimate - half, estimate + half), int(n), method)


def mean_ci(y: Sequence[float] | np.ndarray, *, confidence: float = CONFIDENCE) -> Estimate:
    """Human-only mean of ``y`` (n,) with its Student t interval (n − 1 df); ``ci`` None for n < 2.

    Raises ValueError when ``y`` is empty.
    """
    y = np.asarray(y, dtype=np.float64)
    if y.size == 0:
        raise ValueError("mean_ci needs at least one value")
    mean = float(y.mean())
    if y.size < 2:
        return Estimate(mean, None, int(y.size), "t")
    half = sps.t.ppf(0.5 + confidence / 2, df=y.size - 1) * y.std(ddof=1) / math.sqrt(y.size)
    return Estimate(mean, _clip_ci(mean - half, mean + half), int(y.size), "t")


def cluster_bootstrap_means(
    *, values: Sequence[float], clusters: Sequence, groups: Sequence, resamples: int = 2000,
    confidence: float = CONFIDENCE, seed: int = 0,
) -> dict:
    """Mean of ``values`` per group with a percentile 95 % CI from a bootstrap that resamples *clusters*.

    Args:
        values: (A,) one value per answer (its mean normalised rating).
        clusters: (A,) the answer's question (answers to one question are not independent: same audio, same
            reference, same annotators).
        groups: (A,) the answer's LALM.
        resamples: bootstrap resamples B (>= 1).
        seed: seed of numpy's generator (results are reproducible).

    Every resample draws Q questions with replacement from the Q questions (one joint draw for all groups, so
    the groups' intervals come from the same resampled benchmarks) and takes each group's mean over the answers
    to the drawn questions, a question drawn m times counting m times. The interval is the (α/2, 1 − α/2)
    percentiles of the resampled means (resamples where a group has no answer are skipped).

    Returns:
        {group: Estimate(method="cluster_bootstrap")}; ``ci`` is None for a group with answers to fewer than
        two questions.
    """
    v = np.asarray(values, dtype=np.float64)
    if not (len(clusters) == len(groups) == v.size):
        raise ValueError("values, clusters and groups must have the same length")
    if v.size == 0:
        return {}
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    cluster_ids, ci_ = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    group_ids, gi = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    # keep the caller's group objects as keys
    keys = {}
    for g, idx in zip(groups, gi):
        keys.setdefault(int(idx), g)
    n_q, n_g = cluster_ids.size, group_ids.size
    sums = np.zeros((n_q, n_g))
    counts = np.zeros((n_q, n_g))
    np.add.at(sums, (ci_, gi), v)
    np.add.at(counts, (ci_, gi), 1.0)
    rng = np.random.default_rng(seed)
    means = np.empty((resamples, n_g))
    for start in range(0, resamples, 500):
        b = min(500, resamples - start)
        draw = rng.multinomial(n_q, np.full(n_q, 1.0 / n_q), size=b).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            means[start:start + b] = (draw @ sums) / (draw @ counts)
    tail = (1.0 - confidence) / 2 * 100
    result = {}
    for j in range(n_g):
        point = float(sums[:, j].sum() / counts[:, j].sum())
        n_answers = int(counts[:, j].sum())
        ci = None
        if np.count_nonzero(counts[:, j]) >= 2:
            col = means[:, j][np.isfinite(means[:, j])]
            low, high = np.percentile(col, [tail, 100 - tail])
            ci = _clip_ci(low, high)
        result[keys[j]] = Estimate(point, ci, n_answers, "cluster_bootstrap")
    return result


def _squeeze(x) -> float:
    return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])


def ppi_mean(
    *, y: Sequence[float], yhat: Sequence[float], yhat_all: Sequence[float], confidence: float = CONFIDENCE,
    power_tuning: bool = True,
) -> Estimate:
    """Prediction-powered mean over the N answers of ``yhat_all`` (PPI++ with power tuning by default): the
    estimate by ``ppi_py``, the interval for that finite mean (module docstring).

    Args:
        y: (n,) human values of the labelled answers, a uniform sample of the N (n >= 3; n >= 2 without tuning).
        yhat: (n,) the model's predictions (ORCA's μ) for the same answers — from a model that never trained on
            them (cross-fitted), or the estimate is biased.
        yhat_all: (N,) the model's predictions for *all* answers whose mean is the estimand (labelled ones too).
        power_tuning: True: λ = :func:`regression_lambda` (λ = 0 is the human-only mean, so the interval is no
            wider than human-only in expectation, up to the one degree of freedom λ costs); False: λ = 1
            (original PPI).

    Estimate: mean(λ·μ over N) + mean(y − λμ over n) (``ppi_py.ppi_mean_pointestimate``). Interval: estimate ±
    t_{n−2}·sd(y − λμ; n − 2 df)/√n (t_{n−1} and n − 1 df for λ = 1), clipped to [0, 1]. Raises ValueError for too
    few labels or mismatched lengths.
    """
    y, yhat, yhat_all = (np.asarray(a, dtype=np.float64) for a in (y, yhat, yhat_all))
    if y.shape != yhat.shape:
        raise ValueError(f"y and yhat differ in length ({y.size} vs {yhat.size})")
    least = 3 if power_tuning else 2
    if y.size < least:
        raise ValueError(f"a prediction-powered interval needs at least {least} labelled answers, got {y.size}")
    if yhat_all.size == 0:
        raise ValueError("yhat_all is empty")
    lam = regression_lambda(y, yhat) if power_tuning else 1.0
    return _finite_population_ppi(y=y, yhat=yhat, yhat_all=yhat_all, w=None, lam=lam, tuned=power_tuning,
                                  confidence=confidence, method="ppi++" if power_tuning else "ppi")


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
    *, y: Sequence[float], yhat: Sequence[float], pi: Sequence[float], sampled: Sequence[bool],
    confidence: float = CONFIDENCE,
) -> Estimate:
    """Active estimate of the mean over N answers: labels drawn with probabilities π, weighted by 1/π, plus ORCA.

    Args:
        y: (N,) human values; only entries where ``sampled`` is true are read (others may be NaN).
        yhat: (N,) ORCA's μ for every answer.
        pi: (N,) the inclusion probabilities the labels were drawn with (:func:`inclusion_probabilities`).
        sampled: (N,) bool, which answers were labelled (at least 3).

    The estimate is ``ppi_py``'s PPI mean with sample weights w = 1/π on the labelled answers and ORCA's μ on all
    N answers: mean(λ·μ) + Σ w (y − λμ) / Σ w — the inverse-probability-weighted (Hájek) rectifier of Zrnic &
    Candès 2024, λ = the weighted :func:`regression_lambda`. Interval: ``ppi_py``'s weighted rectifier standard
    error with the predictions' mean known (module docstring), Student t with n − 2 degrees of freedom.
    """
    y, yhat, pi = (np.asarray(a, dtype=np.float64) for a in (y, yhat, pi))
    mask = np.asarray(sampled, dtype=bool)
    if not (y.shape == yhat.shape == pi.shape == mask.shape):
        raise ValueError("y, yhat, pi and sampled must have the same length")
    n = int(mask.sum())
    if n < 3:
        raise ValueError(f"an active estimate needs at least 3 labelled answers, got {n}")
    w = inverse_probability_weights(pi[mask])
    lam = regression_lambda(y[mask], yhat[mask], w)
    return _finite_population_ppi(y=y[mask], yhat=yhat[mask], yhat_all=yhat, w=w, lam=lam, tuned=True,
                                  confidence=confidence, method="active")


# --- comparing LALMs ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairwiseDifference:
    """Mean difference of two LALMs over the questions both answered (and humans rated), a − b.

    Attributes:
        a, b: the two LALMs (a listed first: the higher mean over its own rated answers).
        n: shared rated questions.
        mean_diff: mean over them of (a's value − b's value), normalised scale, in [−1, 1].
        ci: paired Student t 95 % interval of the mean difference (None for n < 2).
        p_value: two-sided paired t-test p-value (None for n < 2); 0 or 1 when every difference is the same.
        p_holm: Holm-corrected p-value over all pairs of the table (None where ``p_value`` is None).
        verdict: ``a>b`` or ``a<b`` when the interval excludes 0 and p_holm < 1 − confidence, else ``tie``.
    """

    a: object
    b: object
    n: int
    mean_diff: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None
    verdict: str

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "n": self.n, "mean_diff": self.mean_diff,
                "ci": list(self.ci) if self.ci else None, "p_value": self.p_value, "p_holm": self.p_holm,
                "verdict": self.verdict}


def _paired(d: np.ndarray, confidence: float) -> tuple[float, tuple[float, float] | None, float | None]:
    mean = float(d.mean())
    if d.size < 2:
        return mean, None, None
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return mean, (mean, mean), (1.0 if mean == 0.0 else 0.0)
    half = sps.t.ppf(0.5 + confidence / 2, df=d.size - 1) * sd / math.sqrt(d.size)
    p = float(sps.ttest_1samp(d, 0.0).pvalue)
    return mean, (mean - half, mean + half), p


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order), via ``statsmodels.stats.multitest.multipletests``."""
    if len(p_values) == 0:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]


def pairwise_differences(
    values: Mapping[object, Mapping[object, float]], *, confidence: float = CONFIDENCE
) -> list[PairwiseDifference]:
    """Every pair of LALMs: paired mean difference over shared questions, t interval, Holm-corrected p-value.

    Args:
        values: {LALM: {question: the answer's mean normalised human rating}}; one value per LALM and question.

    Pairs are ordered by the LALMs' order in ``values`` (put the best first); within a pair, ``a`` precedes
    ``b`` in that order. The Holm correction runs over every pair with a p-value. A verdict other than ``tie``
    needs both the interval to exclude 0 and the Holm-corrected p-value to be below 1 − confidence.
    """
    names = list(values)
    raw = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(values[a]) & set(values[b]), key=str)
            if not shared:
                raw.append((a, b, 0, None, None, None))
                continue
            d = np.array([values[a][q] - values[b][q] for q in shared], dtype=np.float64)
            mean, ci, p = _paired(d, confidence)
            raw.append((a, b, len(shared), mean, ci, p))
    adjusted = iter(holm([r[5] for r in raw if r[5] is not None]))
    out = []
    for a, b, n, mean, ci, p in raw:
        p_holm = next(adjusted) if p is not None else None
        verdict = "tie"
        if ci is not None and p_holm is not None and p_holm < 1 - confidence:
            if ci[0] > 0:
                verdict = "a>b"
            elif ci[1] < 0:
                verdict = "a<b"
        out.append(PairwiseDifference(a, b, n, mean, ci, p, p_holm, verdict))
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


@dataclass(frozen=True)
class BudgetPlan:
    """About how many more human ratings make the difference of two LALMs significant.

    Attributes:
        n_shared: questions both LALMs answered that are rated for both now.
        mean_diff: the observed mean difference (normalised scale).
        sd_diff: standard deviation of the paired differences.
        ratings_per_answer: mean valid ratings per rated answer (k).
        needed_pairs_uniform: rated shared questions a human-only uniform study needs, (z·sd/|diff|)².
        more_ratings_uniform: 2 · k · max(0, needed − n_shared): two answers per question, k ratings each.
        orca_factor: variance factor of the active estimate with ORCA (≤ 1): (1 − r²) from ORCA's correlation r
            with the observed differences, times the design effect of σ-proportional sampling (≤ 1); None
            without predictions.
        needed_pairs_active, more_ratings_active: the same with the variance scaled by ``orca_factor``.
        reachable_uniform, reachable_active: False when more shared questions would be needed than the LALMs
            have answered in common (``available_pairs``).
    """

    n_shared: int
    mean_diff: float
    sd_diff: float
    ratings_per_answer: float
    needed_pairs_uniform: int | None
    more_ratings_uniform: int | None
    orca_factor: float | None
    needed_pairs_active: int | None
    more_ratings_active: int | None
    available_pairs: int
    reachable_uniform: bool
    reachable_active: bool | None


def budget_plan(
    *, diffs: Sequence[float], ratings_per_answer: float, available_pairs: int,
    predicted_diffs: Sequence[float] | None = None, sigma_unrated: Sequence[float] | None = None,
    confidence: float = CONFIDENCE, floor: float = UNIFORM_FLOOR,
) -> BudgetPlan:
    """Plan the ratings that would make a paired difference significant (normal approximation, "about").

    Args:
        diffs: (n,) observed paired differences a − b over the shared rated questions (n >= 2).
        ratings_per_answer: k, mean valid ratings per rated answer (> 0).
        available_pairs: questions both LALMs answered (rated or not): the most a study can use.
        predicted_diffs: (n,) ORCA's μ_a − μ_b on the same questions (cross-fitted), for the active plan.
        sigma_unrated: ORCA's σ of the still unrated answers of the two LALMs: the design effect of sampling
            ∝ σ with a uniform floor, Σ(σ²/p)/(N·Σσ²) with p the sampling shares (Zrnic & Candès 2024, eq. for
            the variance of the IPW estimator; σ² stands in for the squared residual).

    The needed number of pairs is n* = ⌈(z·sd/|mean|)²⌉ (z the normal quantile of ``confidence``); with a
    mean of exactly 0 nothing is reachable (n* None).
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.size < 2:
        raise ValueError("the budget planner needs at least 2 shared rated questions")
    if ratings_per_answer <= 0:
        raise ValueError("ratings_per_answer must be positive")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    z = float(sps.norm.ppf(0.5 + confidence / 2))

    def needed(variance_factor: float) -> int | None:
        if mean == 0.0:
            return None
        return max(2, int(math.ceil((z * sd * math.sqrt(variance_factor) / abs(mean)) ** 2)))

    def more(n_needed: int | None) -> int | None:
        return None if n_needed is None else int(round(2 * ratings_per_answer * max(0, n_needed - d.size)))

    uniform = needed(1.0)
    factor = None
    if predicted_diffs is not None:
        dh = np.asarray(predicted_diffs, dtype=np.float64)
        if dh.shape != d.shape:
            raise ValueError("predicted_diffs must match diffs")
        r = 0.0 if dh.std() == 0 or sd == 0 else float(np.corrcoef(d, dh)[0, 1])
        factor = 1.0 - max(0.0, r) ** 2
        if sigma_unrated is not None and len(sigma_unrated) > 0:
            s = np.clip(np.asarray(sigma_unrated, dtype=np.float64), 1e-6, None)
            share = (1 - floor) * s / s.sum() + floor / s.size
            factor *= float(np.sum(s ** 2 / share) / (s.size * np.sum(s ** 2)))
    active = needed(factor) if factor is not None else None
    return BudgetPlan(
        n_shared=int(d.size), mean_diff=mean, sd_diff=sd, ratings_per_answer=float(ratings_per_answer),
        needed_pairs_uniform=uniform, more_ratings_uniform=more(uniform), orca_factor=factor,
        needed_pairs_active=active, more_ratings_active=more(active), available_pairs=int(available_pairs),
        reachable_uniform=uniform is not None and uniform <= available_pairs,
        reachable_active=None if factor is None else (active is not None and active <= available_pairs),
    )
