"""Evaluation metrics and the variance-gated clamp (ORCA paper, Sections 5.4–5.5).

All quantities live on the normalised scale y = (r−1)/4 ∈ [0, 1].

* ρ (Spearman) and τ (Kendall τ-b) between predicted μ and the human mean rating.
* MAE_μ: mean |μ − human mean| over all items.
* MAE_σ²: mean |σ² − human variance| over items with ≥ 2 ratings, where the human variance is the
  **sample** variance (ddof = 1) of the item's normalised ratings. Items with a single rating have no
  sample variance and are left out. This convention gives the always-zero baseline of
  bench/orca_experiments.md (0.031 on seed-108 dev; population variance would give 0.020).
* MAE_σ² under the ORCA authors' definitions (:func:`mae_var_by_definition`): against the Bessel-corrected sample
  variance with 0 for single-rating items (their release, "upstream") and against the population variance (ddof 0),
  both over every item. ``evaluate`` prints both beside ours, and the always-zero baseline under each.
* Clamped ("post-processed") metrics use :func:`clamp_predictions`: the paper's clamp of μ, σ² = 0 for the
  clamped items, and σ² of the other items from the Beta with its concentration α + β scaled by a factor κ
  tuned on dev (:func:`tune_concentration_scale`). The last two are our extensions, not the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

#: Distance from 0 / 1 within which a low-variance μ is clamped (ORCA paper, Section 5.5).
CLAMP_MARGIN = 0.125


def _paired(name: str, x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"{name} needs two 1-D sequences of equal length ≥ 2")
    return x, y


def json_finite(obj):
    """``obj`` as strict JSON can hold it: NaN and ±inf become None (e.g. MAE_σ² with no multi-rated item;
    PostgreSQL's jsonb and ``json.dumps(allow_nan=False)`` reject them), numpy scalars Python numbers, tuples lists;
    dicts and lists recursively. Other values are returned unchanged."""
    if isinstance(obj, dict):
        return {k: json_finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_finite(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman ρ (``scipy.stats.spearmanr``: Pearson correlation of average ranks). Range [−1, 1]; nan if either
    input is constant.

    Raises:
        ValueError: lengths differ or fewer than 2 values.
    """
    x, y = _paired("spearman", x, y)
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def spearman_or_none(x: Sequence[float], y: Sequence[float], *, min_n: int = 3) -> float | None:
    """Spearman ρ as :func:`spearman`, or None where it says nothing: fewer than ``min_n`` pairs or a constant input
    (for per-annotator and per-model agreement figures shown beside their counts)."""
    if len(x) < min_n or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return spearman(x, y)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall τ-b, tie-corrected (``scipy.stats.kendalltau``'s default). Range [−1, 1]; nan if either input is
    constant.

    Raises:
        ValueError: lengths differ or fewer than 2 values.
    """
    x, y = _paired("kendall_tau_b", x, y)
    if np.all(x == x[0]) or np.all(y == y[0]):
        return math.nan
    return float(stats.kendalltau(x, y).statistic)


def evaluate_predictions(
    mu: Sequence[float], var: Sequence[float], human_mean: Sequence[float], human_var: Sequence[float]
) -> dict[str, float]:
    """ρ, τ, MAE_μ and MAE_σ² (ORCA paper, Section 5.4; conventions in the module docstring).

    Args:
        mu, var: predicted mean in [0, 1] and variance (normalised scale), one per item.
        human_mean: mean normalised human rating per item.
        human_var: sample variance of the normalised ratings per item, nan where undefined (1 rating).

    Returns:
        {"rho", "tau", "mae_mu", "mae_var"} as floats; ``mae_var`` is nan when no item has 2 ratings.

    Raises:
        ValueError: the four sequences differ in length or hold fewer than 2 items.
    """
    mu, var = np.asarray(mu, float), np.asarray(var, float)
    hm, hv = np.asarray(human_mean, float), np.asarray(human_var, float)
    if not (len(mu) == len(var) == len(hm) == len(hv)):
        raise ValueError("mu, var, human_mean and human_var must have the same length")
    ok = np.isfinite(hv)
    return {
        "rho": spearman(mu, hm),
        "tau": kendall_tau_b(mu, hm),
        "mae_mu": float(np.abs(mu - hm).mean()),
        "mae_var": float(np.abs(var[ok] - hv[ok]).mean()) if ok.any() else math.nan,
    }


def mae_var_by_definition(var: Sequence[float], targets: dict[str, Sequence[float]]) -> dict[str, float]:
    """MAE_σ² against each variance definition of :func:`~modelling.orca.data.item_variance_targets`, in its order
    (upstream's Bessel-corrected sample variance first, then the population variance), over every item.

    Args:
        var: predicted variance per item (normalised scale); targets: definition name → per-item variance.

    Returns:
        {definition: mean |σ² − target|}, same keys and order as ``targets``.

    Raises:
        ValueError: a target list differs in length from ``var``.
    """
    v = np.asarray(var, float)
    out = {}
    for name, t in targets.items():
        t = np.asarray(t, float)
        if t.shape != v.shape:
            raise ValueError(f"variance targets {name!r} have {len(t)} items, predictions {len(v)}")
        out[name] = float(np.abs(v - t).mean()) if len(v) else math.nan
    return out


def clamp_mu(
    mu: Sequence[float], var: Sequence[float], threshold: float | None, margin: float = CLAMP_MARGIN
) -> np.ndarray:
    """Variance-gated clamping (ORCA paper, Section 5.5).

    μ is set to 0 when μ < margin, and to 1 when μ > 1 − margin, provided σ² ≤ threshold; other items
    are unchanged. ``threshold=None`` disables clamping.

    Returns:
        float array, same length as ``mu``.
    """
    mu = np.asarray(mu, float).copy()
    if threshold is None:
        return mu
    low_var = np.asarray(var, float) <= threshold
    mu[low_var & (mu < margin)] = 0.0
    mu[low_var & (mu > 1.0 - margin)] = 1.0
    return mu


def sharpen_variance(mu: Sequence[float], var: Sequence[float], scale: float) -> np.ndarray:
    """σ² of Beta(κα, κβ): the predicted Beta with its concentration α + β multiplied by ``scale`` = κ.

    μ = α/(α+β) is unchanged; with s = α + β = μ(1−μ)/σ² − 1 (ORCA paper, Eq. 2–3), the new variance is
    μ(1−μ) / (κ·s + 1). κ > 1 sharpens the distribution (less predicted disagreement), κ < 1 widens it, κ = 1
    returns ``var`` unchanged. Items with σ² ≤ 0 or μ(1−μ) ≤ σ² (degenerate Betas) keep their σ².

    Args:
        mu, var: predicted mean in [0, 1] and variance (normalised scale), one per item.
        scale: κ > 0.

    Returns:
        float array of variances, same length as ``mu``, each in [0, μ(1−μ)).

    Raises:
        ValueError: ``scale`` is not a positive finite number, or the lengths differ.
    """
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"concentration scale must be a positive number, got {scale!r}")
    mu_a, var_a = np.asarray(mu, float), np.asarray(var, float)
    if mu_a.shape != var_a.shape:
        raise ValueError("mu and var must have the same length")
    out = var_a.copy()
    if scale == 1.0:
        return out
    spread = mu_a * (1.0 - mu_a)
    ok = (var_a > 0) & (spread > var_a)
    concentration = spread[ok] / var_a[ok] - 1.0
    out[ok] = spread[ok] / (scale * concentration + 1.0)
    return out


def clamp_predictions(
    mu: Sequence[float],
    var: Sequence[float],
    threshold: float | None,
    margin: float = CLAMP_MARGIN,
    concentration_scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """The dev-tuned post-processing: the variance-gated clamp of μ (:func:`clamp_mu`, ORCA paper Section 5.5)
    plus **two extensions of ours** for σ²:

    * σ² = 0 wherever μ was clamped. A clamped μ of exactly 0 or 1 says that every annotator gives the extreme
      rating, i.e. the ratings do not vary; keeping the model's (small but positive) σ² would contradict it.
    * every other σ² is the variance of the Beta with its concentration scaled by ``concentration_scale``
      (:func:`sharpen_variance`; κ tuned on dev by :func:`tune_concentration_scale`). The Beta NLL calibrates the
      whole distribution of ratings; MAE_σ² is minimised by the *median* of an item's observed variance, which
      is 0 for most items because about half are unanimous. κ > 1 moves σ² towards that median.

    The clamp decision uses the raw σ² (``threshold`` is in raw σ² units). The paper clamps μ only; it says
    nothing about σ². ``threshold=None`` and ``concentration_scale=1`` change nothing.

    Returns:
        (mu, var) float arrays, same length as the inputs.
    """
    mu_c = clamp_mu(mu, var, threshold, margin)
    var_c = sharpen_variance(mu, var, concentration_scale)
    var_c[mu_c != np.asarray(mu, float)] = 0.0
    return mu_c, var_c


def clamp_objective(metrics: dict[str, float]) -> float:
    """ρ + τ − MAE_μ, the quantity the clamp threshold maximises on dev (ORCA paper, Section 5.5)."""
    return metrics["rho"] + metrics["tau"] - metrics["mae_mu"]


def tune_clamp_threshold(
    mu: Sequence[float],
    var: Sequence[float],
    human_mean: Sequence[float],
    human_var: Sequence[float],
    max_candidates: int = 400,
) -> tuple[float | None, dict[str, float]]:
    """Pick the clamp threshold maximising ρ + τ − MAE_μ on a dev split (ORCA paper, Section 5.5).

    The objective only changes where the threshold crosses the predicted variance of an extreme item
    (μ < margin or μ > 1 − margin), so those variances (at most ``max_candidates`` of them, by quantile)
    are the candidates; "no clamping" is a candidate too and wins ties, then the smallest threshold wins.

    Returns:
        (threshold, metrics): threshold in variance units (None = clamping does not help) and the dev
        metrics after clamping with it (:func:`clamp_predictions`: σ² of clamped items is 0; same keys as
        :func:`evaluate_predictions`). The choice of threshold does not depend on σ² of clamped items.
    """
    mu_a, var_a = np.asarray(mu, float), np.asarray(var, float)
    best_t: float | None = None
    best_m = evaluate_predictions(mu_a, var_a, human_mean, human_var)
    best_obj = clamp_objective(best_m)
    extreme = (mu_a < CLAMP_MARGIN) | (mu_a > 1 - CLAMP_MARGIN)
    cands = np.unique(var_a[extreme])
    if len(cands) > max_candidates:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, max_candidates)))
    for t in cands:
        m = evaluate_predictions(*clamp_predictions(mu_a, var_a, float(t)), human_mean, human_var)
        obj = clamp_objective(m)
        if obj > best_obj + 1e-12:
            best_t, best_m, best_obj = float(t), m, obj
    return best_t, best_m


#: Candidate concentration scales κ: 2^(i/4) for i = −8 … 24, i.e. 0.25 … 64 (κ = 1 included).
CONCENTRATION_SCALES = tuple(2.0 ** (i / 4) for i in range(-8, 25))


def tune_concentration_scale(
    mu: Sequence[float],
    var: Sequence[float],
    human_mean: Sequence[float],
    human_var: Sequence[float],
    threshold: float | None = None,
    scales: Sequence[float] = CONCENTRATION_SCALES,
) -> tuple[float, dict[str, float]]:
    """Pick the concentration scale κ that minimises MAE_σ² on a dev split, after the clamp with ``threshold``.

    A one-parameter calibration of σ² (our extension, in the spirit of the paper's dev-tuned clamp, Section 5.5):
    μ, and so ρ, τ and MAE_μ, do not change. κ = 1 (no change) is tried first and wins ties; among equal MAE_σ²
    the κ closest to 1 (in log scale) wins. Items with fewer than 2 ratings do not count (no sample variance).

    Args:
        mu, var: predicted mean and variance (normalised scale), one per item.
        human_mean, human_var: per-item targets as for :func:`evaluate_predictions`.
        threshold: the clamp threshold already tuned (:func:`tune_clamp_threshold`), None = no clamp.
        scales: candidate κ values, each > 0.

    Returns:
        (κ, metrics): κ ≥ the smallest candidate, and the metrics of :func:`clamp_predictions` with it (same
        keys as :func:`evaluate_predictions`). κ = 1.0 when no item has 2 ratings.

    Raises:
        ValueError: a candidate κ is not positive, or the lengths differ.
    """
    if any(not (math.isfinite(k) and k > 0) for k in scales):
        raise ValueError(f"concentration scales must be positive numbers, got {list(scales)!r}")
    best_k = 1.0
    best_m = evaluate_predictions(*clamp_predictions(mu, var, threshold), human_mean, human_var)
    if not math.isfinite(best_m["mae_var"]):
        return best_k, best_m
    for k in sorted(scales, key=lambda k: abs(math.log(k))):
        m = evaluate_predictions(*clamp_predictions(mu, var, threshold, concentration_scale=k), human_mean, human_var)
        if m["mae_var"] < best_m["mae_var"] - 1e-12:
            best_k, best_m = float(k), m
    return best_k, best_m
