"""Annotators crossed with answers: the raters' share of a leaderboard interval, Django-free.

The same few annotators rate many answers, so an annotator's severity (how much lower or higher than the pool she
rates) moves every answer she rated the same way: the ratings of one annotator are correlated across answers, and a
variance that treats answers as the only clusters misses that term. With 5 annotators and a severity sd of 0.2
rating points the question-clustered intervals covered 0.943 / 0.925 / 0.853 at 30 / 100 / 300 labels (issue #35):
the annotators' share does not shrink with more answers, so its omission matters most where intervals are narrow.

Two-way cluster-robust variance (Cameron, Gelbach & Miller, "Robust inference with multiway clustering", *J. Bus.
Econ. Stat.* 29(2), 2011, eq. 2.7): for a linear estimator θ̂ − θ ≈ Σ_r c_r e_r over ratings r (c_r its weight in
the estimate, e_r its residual), V = V_Q + V_A − V_QA with V_G = G/(G − 1) · Σ_g (Σ_{r∈g} c_r e_r)² for
clusterings G = questions (answers; one LALM answers a question once), annotators, and their intersection (one
rating per annotator and answer). The question part V_Q is each estimator's own interval variance (it already has its
pseudo-values and design weights); :func:`rater_excess` gives the rest, V_A − V_QA, the covariance of ratings that
share an annotator across answers, floored at 0 (a negative estimate means no detectable annotator effect).

Degrees of freedom. A variance from 5 annotators is itself uncertain: when the annotators' share is material (at
least :data:`MATERIAL_SHARE` of the question part) the interval is Student t with min(df, G_A − 1) degrees of
freedom, CGM's small-cluster recommendation (t with G − 1 df for the scarcer clustering); below that,
Satterthwaite's degrees of freedom for the sum of the two parts (Satterthwaite, *Biometrics Bulletin* 1946; the
annotators' part with G_A − 1), at most the answers' part's own, so a small chance share among 2–3 annotators does
not blow a small table's intervals up to t_1.
Pooled severity (what the leaderboard uses). The same annotators rate every LALM's answers on a benchmark, so their
severities are better estimated from all its ratings than from one row's (5 annotators and a row's unequal 1/π
weights made the per-row estimate noisy: under leaderboard precision rows where it came out small covered 0.6, and
the design's rows 0.88 in ``bench/leaderboard.py``). :func:`severity_of` fits the additive two-way model
y_ir = a_i + s_a + e_ir to the benchmark's ratings and estimates the variance component τ² of the s_a (method of
moments); a row's annotators' share is then τ̂² (Σ_a C_a² − Σ_(a,i) c_ai²) (:func:`pooled_excess`: C_a the total
weight of annotator a's ratings in the estimate — the variance of Σ_a C_a s_a for severities drawn from the pool —
less the per-answer diagonal already in the question part), with G_A − 1 degrees of freedom for τ̂², G_A the
benchmark's annotators (a mixed-model, variance-components reading of the same crossed design; Searle, Casella &
McCulloch, *Variance Components*, 1992, ch. 4). Seeded simulations of 100–200 replays (4 LALMs sharing 5
annotators, k = 3; ``tests/modelling/test_leaderboard_raters.py`` repeats the first): leaderboard precision's
unequal π with severity sd 0.2 / 0.4 rating points covered 0.96 / 0.97 (per-row two-way: 0.93 / 0.95) at
1.04–1.08× the width; uniform samples of 100 / 300 labels with sd 0.2 covered 0.96 / 0.965, with sd 0 0.99 at
0.98× the width. The degrees-of-freedom rule below stays: Satterthwaite's df alone with the pooled share (0.8× the
width) covered only 0.875 under leaderboard precision in ``bench/leaderboard.py``. Without a benchmark estimate
(an estimator called on its own) the per-row two-way share below is used.

Seeded simulation (5 annotators, k = 3, 300 replays; ``tests/modelling/test_leaderboard_raters.py`` repeats a part):
severity sd 0 / 0.1 / 0.2 rating points at 30, 100 and 300 labels covered 0.947–0.987 (0.953 at 300 labels and sd
0.2, width 0.126), where question-clustered intervals covered 0.97 / 0.89 / 0.83 at sd 0.2; Satterthwaite alone
covered 0.93 at 300 labels (its df is too high exactly when the share is underestimated), CGM's df alone 0.96–0.99
at up to 1.4× the width. Ratings whose annotator is unknown are each their own cluster (no cross-answer covariance is
assumed for them).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: The annotators' share counts as material from this fraction of the question part's variance on: then the
#: interval takes CGM's min(df, G_A − 1) degrees of freedom, below it Satterthwaite's (module docstring).
MATERIAL_SHARE = 0.25


def _cluster_sum_of_squares(values: np.ndarray, groups: np.ndarray) -> tuple[float, int]:
    """(Σ_g (Σ_{r∈g} values_r)², G) over the distinct ``groups``."""
    _, index = np.unique(groups, axis=0, return_inverse=True)
    index = np.asarray(index).reshape(-1)
    sums = np.bincount(index, weights=values)
    return float(np.sum(sums * sums)), int(sums.size)


def _rater_codes(raters: Sequence[int | None]) -> np.ndarray:
    """Integer codes of the annotators; each unknown (None) rating gets a code of its own."""
    codes, unknown = [], -1
    for r in raters:
        if r is None:
            codes.append(unknown)
            unknown -= 1
        else:
            codes.append(int(r))
    return np.asarray(codes, dtype=np.int64)


def rater_excess(
    *, residuals: Sequence[float], weights: Sequence[float], answers: Sequence[int], raters: Sequence[int | None],
) -> tuple[float, int]:
    """The annotators' share of the variance of a linear estimate, V_A − V_QA of Cameron, Gelbach & Miller (2011)
    (module docstring), and the number of annotators G_A.

    Args:
        residuals: (m,) each rating's residual e_r on the normalised scale (e.g. r − θ̂, or r − λμ − r̄).
        weights: (m,) each rating's weight c_r in the estimate (e.g. 1/(n k_i) for the mean of n answer means,
            k_i ratings on answer i): θ̂ − θ ≈ Σ c_r e_r.
        answers: (m,) the answer (question) each rating belongs to.
        raters: (m,) annotator ids, None where unknown (then that rating is a cluster of its own).

    Returns (excess ≥ 0 in squared normalised units, G_A); (0.0, G_A) with fewer than 2 annotators, since then no
    annotator-level variation can be estimated. Raises ValueError for mismatched lengths.
    """
    e = np.asarray(residuals, dtype=np.float64)
    c = np.asarray(weights, dtype=np.float64)
    q = np.asarray(answers, dtype=np.int64)
    if not (e.shape == c.shape == q.shape) or len(raters) != e.size:
        raise ValueError("residuals, weights, answers and raters must have the same length")
    if e.size == 0:
        return 0.0, 0
    a = _rater_codes(raters)
    ce = c * e
    v_a, g_a = _cluster_sum_of_squares(ce, a)
    v_qa, g_qa = _cluster_sum_of_squares(ce, np.stack([q, a], axis=1))
    known = int(np.unique(a[a >= 0]).size)
    if g_a < 2 or known < 2:
        return 0.0, known
    excess = v_a * g_a / (g_a - 1) - v_qa * (g_qa / (g_qa - 1) if g_qa > 1 else 1.0)
    return max(0.0, float(excess)), known


@dataclass(frozen=True)
class Severity:
    """The annotators' severity spread on one benchmark, estimated from all its ratings (:func:`severity_of`).

    Attributes:
        tau2: τ̂², the variance of an annotator's severity across the annotator pool, squared normalised units
            (≥ 0; 0 when no spread is detectable).
        annotators: G_A, annotators with at least one rating on an answer that another annotator also rated.
        ratings: m, the ratings the fit used.
    """

    tau2: float
    annotators: int
    ratings: int


def severity_of(
    scores: Mapping[int, Sequence[float]], raters: Mapping[int, Sequence[int | None]], *, iterations: int = 60,
) -> Severity:
    """τ̂² of the additive two-way model y_ir = a_i + s_a + e_ir over one benchmark's ratings (module docstring,
    "Pooled severity"): answers' and annotators' effects by alternating least squares (backfitting, ``iterations``
    sweeps), then τ̂² = the sample variance of the ŝ_a (G_A − 1 df) minus the mean of their estimation variances
    σ̂²/(n_a (1 − 1/k̄_a)) (σ̂² the residual variance, n_a the annotator's ratings, k̄_a the mean number of
    ratings of the answers she rated), floored at 0 — a method-of-moments estimate of the variance component.

    Args:
        scores: {answer: its normalised ratings y = (r − 1)/4}; raters: {answer: the aligned annotator ids, None
            where unknown}. Only ratings of known annotators on answers with ≥ 2 of them are used (a lone
            rating says nothing about its annotator's severity).

    Returns a :class:`Severity` (tau2 0 with fewer than 2 annotators or no residual degrees of freedom).
    """
    ys, qs, annotator_ids = [], [], []
    for answer, values in scores.items():
        who = list(raters.get(answer) or [])
        known = [(v, a) for v, a in zip(values, who) if a is not None] if len(who) == len(values) else []
        if len(known) >= 2:
            ys += [float(v) for v, _ in known]
            qs += [answer] * len(known)
            annotator_ids += [a for _, a in known]
    _, q = np.unique(np.asarray(qs, dtype=np.int64), return_inverse=True)
    codes, a = np.unique(np.asarray(annotator_ids, dtype=np.int64), return_inverse=True)
    y, n_q, n_a = np.asarray(ys, dtype=np.float64), int(q.max(initial=-1)) + 1, codes.size
    dof = y.size - n_q - n_a + 1
    if n_a < 2 or dof <= 0:
        return Severity(0.0, int(n_a), int(y.size))
    per_q, per_a = np.bincount(q, minlength=n_q), np.bincount(a, minlength=n_a)
    s = np.zeros(n_a)
    for _ in range(iterations):
        level = np.bincount(q, weights=y - s[a], minlength=n_q) / per_q
        s = np.bincount(a, weights=y - level[q], minlength=n_a) / per_a
        s -= s.mean()
    residual = y - level[q] - s[a]
    sigma2 = float(residual @ residual) / dof
    k_bar = np.bincount(a, weights=per_q[q].astype(np.float64), minlength=n_a) / per_a
    noise = sigma2 / (per_a * (1.0 - 1.0 / k_bar))
    return Severity(max(0.0, float(np.var(s, ddof=1) - noise.mean())), int(n_a), int(y.size))


def pooled_excess(
    *, weights: Sequence[float], answers: Sequence[int], raters: Sequence[int | None], tau2: float,
) -> tuple[float, int]:
    """The annotators' share of a linear estimate's variance under the pooled severity model (module docstring):
    τ̂² (Σ_a C_a² − Σ_(a,i) c_ai²), C_a the total weight of annotator a's ratings in the estimate and c_ai that of
    her ratings of answer i (the diagonal is already in the question part). Ratings of unknown annotators add
    nothing (each is its own cluster). Returns (excess ≥ 0, G_A the known annotators)."""
    c = np.asarray(weights, dtype=np.float64)
    q = np.asarray(answers, dtype=np.int64)
    if c.size == 0:
        return 0.0, 0
    a = _rater_codes(raters)
    known = a >= 0
    if not known.any():
        return 0.0, 0
    c, q, a = c[known], q[known], a[known]
    total, g_a = _cluster_sum_of_squares(c, a)
    diagonal, _ = _cluster_sum_of_squares(c, np.stack([q, a], axis=1))
    return max(0.0, tau2 * (total - diagonal)), g_a


def with_raters(
    *, se: float, df: float, residuals: Sequence[float], weights: Sequence[float], answers: Sequence[int],
    raters: Sequence[int | None] | None, severity: Severity | None = None,
) -> tuple[float, float, int]:
    """(se, df, G_A) of an interval whose question part is ``se`` with ``df`` degrees of freedom, widened by the
    annotators' share — :func:`pooled_excess` with the benchmark's ``severity`` when given, else the estimate's own
    :func:`rater_excess`; the degrees of freedom become min(df, G_A − 1) when that share is material, else
    Satterthwaite's (module docstring). Without ``raters`` (None) the inputs come back unchanged with G_A = 0."""
    if raters is None:
        return se, df, 0
    if severity is not None:  # τ̂² from the benchmark's G_A annotators: G_A − 1 df
        excess, g_a = pooled_excess(weights=weights, answers=answers, raters=raters, tau2=severity.tau2)
        df_a = float(severity.annotators - 1)
    else:
        excess, g_a = rater_excess(residuals=residuals, weights=weights, answers=answers, raters=raters)
        df_a = float(g_a - 1)
    if excess <= 0 or df_a < 1:
        return se, df, g_a
    var_q = se * se
    if excess >= MATERIAL_SHARE * var_q:
        return math.sqrt(var_q + excess), min(float(df), df_a), g_a
    df_sum = satterthwaite_df(var_q=var_q, df_q=df, var_a=excess, df_a=df_a)
    return math.sqrt(var_q + excess), min(float(df), df_sum), g_a  # never more df than the answers' part


def satterthwaite_df(*, var_q: float, df_q: float, var_a: float, df_a: float) -> float:
    """Satterthwaite's degrees of freedom of var_q + var_a estimated with df_q and df_a degrees of freedom
    (Satterthwaite, *Biometrics Bulletin* 1946): (var_q + var_a)² / (var_q²/df_q + var_a²/df_a)."""
    return float((var_q + var_a) ** 2 / (var_q * var_q / df_q + var_a * var_a / df_a))


def rating_layout(
    scores: Sequence[Sequence[float]], raters: Sequence[Sequence[int | None]] | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int | None]]:
    """Flatten per-answer ratings for :func:`rater_excess`.

    Args:
        scores: n lists, the normalised ratings of each labelled answer (each non-empty).
        raters: n lists aligned with ``scores`` (annotator id or None), or None (all unknown).

    Returns (values (m,), answer index (m,), k of the rating's answer (m,), rater ids (m,)).
    """
    values, answers, ks, who = [], [], [], []
    for i, ratings in enumerate(scores):
        ids = list(raters[i]) if raters is not None else [None] * len(ratings)
        if len(ids) != len(ratings):
            ids = [None] * len(ratings)
        values.extend(ratings)
        answers.extend([i] * len(ratings))
        ks.extend([len(ratings)] * len(ratings))
        who.extend(ids)
    return (np.asarray(values, dtype=np.float64), np.asarray(answers, dtype=np.int64),
            np.asarray(ks, dtype=np.float64), who)
