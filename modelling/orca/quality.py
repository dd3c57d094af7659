"""ORCA's quality per group of answers (per benchmark, per benchmark and answer type, ...): Spearman ρ with a 95 %
interval, Kendall τ-b, MAE_μ and MAE_σ² (ORCA paper, section 5.4), one implementation for ``modelling.orca``'s
training runs and ``evaluate`` and for the platform (``modelling.services.orca_evaluation`` re-exports it). No torch
or Django import.

The interval of ρ is Fisher's z with a jackknife standard error over questions (:func:`rho_interval_clustered`: a
question's answers are not independent); Bonett & Wright's √((1 + ρ²/2)/(n − 3)) for independent pairs
(:func:`rho_interval`) covers only 0.87–0.93 on held-out questions (bench/benchmark_quality.py). Conventions of
:mod:`modelling.orca.metrics`: unclamped μ and σ² against the mean and the sample variance (ddof 1) of the normalised
ratings y = (r − 1)/4.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from .data import OrcaItem, group_key, group_names, item_targets, question_cluster
from .metrics import json_finite, kendall_tau_b, spearman_or_none

#: Confidence of the interval of ρ.
CONFIDENCE = 0.95
#: At most this many blocks of questions in the jackknife of ρ's interval (:func:`rho_interval_clustered`).
JACKKNIFE_BLOCKS = 200

__all__ = ["CONFIDENCE", "JACKKNIFE_BLOCKS", "group_key", "group_metrics", "items_per_group", "per_group_metrics",
           "rho_interval", "rho_interval_clustered"]


def rho_interval(rho: float | None, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` interval of a Spearman ρ from ``n`` *independent* pairs: tanh(atanh ρ ± z·√((1 + ρ²/2)/(n −
    3))) (Fisher's z with the standard error of Bonett & Wright 2000, "Sample size requirements for estimating
    Pearson, Kendall and Spearman correlations", Psychometrika 65, 23–28). None for ρ None or n < 4. Both ends are in
    [−1, 1].

    Answers of one question are not independent: on held-out questions with about 4 answers each it covers only
    0.87–0.93 (bench/benchmark_quality.py); the platform shows :func:`rho_interval_clustered` instead."""
    if rho is None or not math.isfinite(rho) or n < 4:
        return None
    from scipy.stats import norm

    r = min(max(rho, -0.999999), 0.999999)
    half = float(norm.ppf(0.5 + confidence / 2)) * math.sqrt((1 + r * r / 2) / (n - 3))
    z = math.atanh(r)
    return math.tanh(z - half), math.tanh(z + half)


def rho_interval_clustered(x: Sequence[float], y: Sequence[float], clusters: Sequence, *, rho: float | None = None,
                           confidence: float = CONFIDENCE, max_blocks: int = JACKKNIFE_BLOCKS
                           ) -> tuple[float, float] | None:
    """The ``confidence`` interval of Spearman ρ(x, y) when the pairs come in clusters (the answers of one question):
    Fisher's z with a delete-one-cluster jackknife standard error and Student's t with B − 1 degrees of freedom,
    tanh(atanh ρ ± t·SE_jack), SE_jack = √((B − 1)/B · Σ (z₋b − z̄)²) over the B leave-one-out z = atanh ρ (Efron &
    Tibshirani 1993, *An Introduction to the Bootstrap*, ch. 11). With more than ``max_blocks`` clusters they are
    dealt (seeded shuffle) into ``max_blocks`` blocks and a block is left out at a time (the grouped jackknife).

    Args:
        x, y: the paired values (n,); clusters: the cluster of each pair (n,), any hashable ids.
        rho: ρ(x, y) when already computed.

    Returns:
        (low, high) in [−1, 1], or None with fewer than 4 clusters or an undefined ρ (full sample or a replicate).
        Coverage of the population ρ on AQEval val held-out questions (4 answers each), 10–100 questions: 0.95–0.98
        (bench/benchmark_quality.py).
    """
    from scipy.stats import t as student_t

    x, y = np.asarray(x, float), np.asarray(y, float)
    _, cluster = np.unique(np.asarray(clusters), return_inverse=True)
    groups = int(cluster.max()) + 1 if cluster.size else 0
    rho = spearman_or_none(x, y) if rho is None else rho
    if rho is None or groups < 4:
        return None
    if groups > max_blocks:
        cluster = np.random.default_rng(0).permutation(groups)[cluster] % max_blocks
        groups = max_blocks
    zs = []
    for b in range(groups):
        keep = cluster != b
        r = spearman_or_none(x[keep], y[keep])
        if r is None:
            return None
        zs.append(math.atanh(min(max(r, -0.999999), 0.999999)))
    z_left = np.asarray(zs)
    se = math.sqrt((groups - 1) / groups * float(np.sum((z_left - z_left.mean()) ** 2)))
    half = float(student_t.ppf(0.5 + confidence / 2, groups - 1)) * se
    z = math.atanh(min(max(rho, -0.999999), 0.999999))
    return math.tanh(z - half), math.tanh(z + half)


def group_metrics(mu: Sequence[float], var: Sequence[float], human_mean: Sequence[float],
                  human_var: Sequence[float], clusters: Sequence | None = None) -> dict:
    """{n, rho, rho_ci, tau, mae_mu, mae_var} of one group of answers (normalised scale).

    ``rho`` and ``tau`` are None below 3 answers or when either side is constant; ``rho_ci`` is
    :func:`rho_interval_clustered` over ``clusters`` (the answers' questions; None below 4 questions), or without
    clusters :func:`rho_interval` (independent answers; None below 4); ``mae_var`` is None when no answer has 2
    ratings (``human_var`` nan: sample variance, ddof 1).
    """
    mu, var = np.asarray(mu, float), np.asarray(var, float)
    hm, hv = np.asarray(human_mean, float), np.asarray(human_var, float)
    n = int(mu.size)
    rho = spearman_or_none(mu, hm) if n >= 3 else None
    tau = kendall_tau_b(mu, hm) if rho is not None else None
    ok = np.isfinite(hv)
    ci = rho_interval(rho, n) if clusters is None else rho_interval_clustered(mu, hm, clusters, rho=rho)
    return json_finite({
        "n": n, "rho": rho, "rho_ci": list(ci) if ci else None, "tau": tau,
        "mae_mu": float(np.abs(mu - hm).mean()) if n else None,
        "mae_var": float(np.abs(var[ok] - hv[ok]).mean()) if ok.any() else None,
    })


def per_group_metrics(groups: Sequence[Mapping[str, str]], mu: Sequence[float], var: Sequence[float],
                      human_mean: Sequence[float], human_var: Sequence[float], clusters: Sequence | None = None
                      ) -> dict[str, dict]:
    """ORCA's figures per benchmark and per (benchmark, group) pair.

    Args:
        groups: one ``{"benchmark": NAME, "modality": ..., ...}`` per answer (the platform's ``item_groups``);
            answers without a benchmark are left out.
        mu, var: predicted μ in [0, 1] and σ² per answer; human_mean: mean normalised rating per answer;
        human_var: sample variance (ddof 1) of its normalised ratings, nan with one rating.
        clusters: the question of each answer (the interval of ρ treats a question's answers as one cluster); None:
            independent answers.

    Returns:
        ``{"benchmark=NAME": {n, rho, rho_ci, tau, mae_mu, mae_var}, "benchmark=NAME|modality=sound": {...}, ...}``
        (:func:`group_metrics`), keys sorted.

    Raises:
        ValueError: the sequences differ in length.
    """
    if not (len(groups) == len(mu) == len(var) == len(human_mean) == len(human_var)) or (
            clusters is not None and len(clusters) != len(mu)):
        raise ValueError("groups, mu, var, human_mean, human_var and clusters must have the same length")
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        for name in group_names(g):
            members[name].append(i)
    arrays = [np.asarray(a, float) for a in (mu, var, human_mean, human_var)]
    cl = None if clusters is None else np.asarray(clusters)
    return {name: group_metrics(*(a[idx] for a in arrays), clusters=None if cl is None else cl[idx])
            for name, idx in sorted(members.items())}


def items_per_group(items: Sequence[OrcaItem], mu: Sequence[float], var: Sequence[float]) -> dict[str, dict]:
    """:func:`per_group_metrics` of predictions (μ, σ² per item, unclamped) on labelled items by their ``groups``,
    a question's answers one cluster (:func:`~modelling.orca.data.question_cluster`). {} when no item has a
    benchmark group. Raises ValueError for an item without ratings or lengths that differ."""
    if not any(dict(it.groups).get("benchmark") for it in items):
        return {}
    hm, hv = item_targets(items)
    return per_group_metrics([dict(it.groups) for it in items], mu, var, hm, hv,
                             clusters=[question_cluster(it) for it in items])
