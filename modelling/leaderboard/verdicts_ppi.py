"""Verdicts that use ORCA: the anytime-valid betting test of equal means on prediction-powered paired differences,
for benchmarks whose design leaves some questions out of the count for good (routing's audit share, the active
design's draw share). Django-free (numpy only).

Estimand and hypothesis: those of :mod:`modelling.leaderboard.verdicts` — δ = E[y_a − y_b], the difference of two
LALMs' mean human value over the superpopulation of questions both answered; the test is of δ = 0.

Idea (prediction-powered inference: Angelopoulos et al., "Prediction-powered inference", *Science* 382, 2023; the
power-tuned PPI++, Angelopoulos, Duchi & Zrnic, arXiv:2311.01453, 2023). ORCA predicts every answer, so each
question has a predicted difference f = μ_a − μ_b, and δ = λφ + E[d − λf] with φ = E[f] for any weight λ. The
counted questions (rated for both, chosen at random, in the order they became complete) give human differences
d_i; the *held-out* questions — those the design never counts (question key ≥ the audit share under routing; draw
u ≥ the smallest π under the active design) — are an independent random sample of the same questions, fixed once
the design and the benchmark's questions are, and their f bound φ (answers added later change φ's evidence: the
guarantee across looks is for a fixed set of questions, as the human-only test's is for a fixed set of LALMs).
Where ORCA's differences track the humans', d − λf varies less than d, so fewer counted questions decide the pair.

Method (an e-process for a composite null, Ramdas et al., "Game-theoretic statistics and safe anytime-valid
inference", *Statistical Science* 38(4), 2023, section 6: the infimum over the nuisance of valid e-processes).

* **λ_i is predictable**: the regression slope Cov(d, f)/Var(f) of the pair's *earlier* counted questions (0 before
  :data:`LAMBDA_HISTORY` of them), clipped to [0, 1]; r_i = d_i − λ_i f_i ∈ [−1 − λ_i, 1 + λ_i] is scaled to
  x_i = (r_i + 1 + λ_i)/(2 + 2λ_i) ∈ [0, 1], whose mean given the past is m_i(δ, φ) = (δ − λ_iφ + 1 + λ_i)/(2 + 2λ_i).
* **φ's e-value** E(φ): the hedged betting capital (:func:`modelling.leaderboard.betting.betting_process`,
  Waudby-Smith & Ramdas, *JRSS-B* 86(1), 2024) of the held-out questions' (f + 1)/2 at the end of their fixed
  sequence (by question), so E[E(φ)] ≤ 1 at the true φ; computed on a grid of φ (:func:`phi_evidence`).
* **One-sided capital processes** on the counted questions, with aGRAPA bets on z_i = x_i − m_i split by sign and
  capped at c/m_i and c/(1 − m_i) (c = :data:`modelling.leaderboard.betting.BET_CAP`): K⁺ bets that δ exceeds the
  hypothesis, K⁻ that it falls short. If δ ≤ 0, at the true φ the product ½K⁺_t(0, φ)·E(φ) is a non-negative
  supermartingale starting at ½E(φ) (E(φ) is fixed before the first counted question; the two samples are
  independent), so by Ville's inequality P(sup_t M⁺_t ≥ 1/α) ≤ α/2 for M⁺_t = min_φ ½K⁺_t(0, φ)·E(φ) ≤ that
  product; likewise M⁻ with K⁻ when δ ≥ 0. The **anytime p-value** is min(1, 1/max_{s≤t} max(M⁺_s, M⁻_s)) and the
  **e-value** shown max(M⁺_t, M⁻_t) now.
* The **confidence sequence** for δ at a pair's Holm level α: its lower end is the largest δ at which
  max_s min_φ ½K⁺_s(δ, φ)·E(φ) reaches 1/α, its upper end the smallest at which the K⁻ version does (bisection);
  Holm and the verdict rule are :mod:`modelling.leaderboard.verdicts`'.

The minimum over φ is taken over the grid of :func:`phi_evidence` (41 points within ±6 standard errors of the
held-out mean, 10 more on each side out to ±0.999), an approximation between grid points. Valid for cross-fitted
predictions (a question's prediction from a model that never trained on its ratings): the leaderboard uses this
test only then, and only for pairs with at least :data:`MIN_HELD` held-out questions; other pairs get the human-only
test. Seeded simulations (``tests/modelling/test_leaderboard_verdicts_ppi.py``; 400 counted of 2,000 questions, the
rest held out, ORCA-like predictions with ρ ≈ 0.6 on differences; 400 runs): a 0.10 difference decided at level 0.005
in 0.79 of runs against 0.69 for the human-only test (0.70 against 0.59 at 0.05/28), no skewed mean-zero pair decided.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from modelling.leaderboard.betting import BET_CAP, betting_process

#: Counted questions before the power-tuning weight λ leaves 0.
LAMBDA_HISTORY = 5
#: Fewest held-out questions with predictions for a prediction-powered verdict.
MIN_HELD = 30
#: The method's name (``PairwiseVerdict.method``) and what it is, in words.
METHOD = "betting_ppi_holm"
METHOD_TEXT = ("anytime-valid betting test of equal means on prediction-powered differences (cross-fitted ORCA on "
               "the held-out questions; Waudby-Smith & Ramdas 2024, PPI++), Holm over all pairs")
_BISECTIONS = 12
_FINE = np.linspace(-6.0, 6.0, 41)
_TAIL = np.geomspace(1.0, 1e-3, 10)


@dataclass(frozen=True)
class PhiEvidence:
    """φ's e-value on a grid (:func:`phi_evidence`): ``grid`` (g,) candidate φ ∈ (−1, 1), ``log_e`` (g,) log E(φ),
    ``mean`` the held-out mean predicted difference, ``n`` how many held-out questions."""

    grid: np.ndarray
    log_e: np.ndarray
    mean: float
    n: int


@dataclass
class PpiPair:
    """One pair's prediction-powered sequence (:func:`ppi_pair`).

    Attributes:
        x: (n,) the scaled corrected differences x_i ∈ [0, 1] in arrival order; lam: (n,) the weights λ_i ∈ [0, 1].
        phi: φ's evidence from the held-out questions.
        estimate: δ̂ = mean(d − λf) + mean(λ)·(held-out mean of f), in [−1, 1]; None with no counted question.
        e_value, p_anytime: module docstring (1.0, 1.0 with no counted question).
    """

    x: np.ndarray
    lam: np.ndarray
    phi: PhiEvidence
    estimate: float | None
    e_value: float = 1.0
    p_anytime: float = 1.0


def predictable_lambdas(d: np.ndarray, f: np.ndarray) -> np.ndarray:
    """λ_i = clip(Cov(d, f)/Var(f) over the first i − 1 counted questions, 0, 1); 0 while fewer than
    :data:`LAMBDA_HISTORY` came before or their Var(f) is 0. ``d``, ``f``: (..., n) human and predicted differences
    (the last axis is the arrival order; the planner passes (S, n) simulated sequences); returns the same shape."""
    d, f = np.asarray(d, dtype=np.float64), np.asarray(f, dtype=np.float64)
    n = d.shape[-1]
    if n == 0:
        return np.zeros(d.shape)

    def before(v):
        return np.concatenate([np.zeros(v.shape[:-1] + (1,)), np.cumsum(v, axis=-1)[..., :-1]], axis=-1)

    k = np.arange(n, dtype=np.float64)
    s_d, s_f, s_df, s_ff = before(d), before(f), before(d * f), before(f * f)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = s_df - s_d * s_f / k
        var = s_ff - s_f * s_f / k
        lam = cov / var
    ok = (k >= LAMBDA_HISTORY) & (var > 1e-12) & np.isfinite(lam)
    return np.where(ok, np.clip(lam, 0.0, 1.0), 0.0)


def phi_evidence(held_f: Sequence[float]) -> PhiEvidence:
    """log E(φ) of the held-out questions' predicted differences (in a fixed order independent of their values,
    e.g. by question) on a grid of φ: 41 points within ±6 standard errors of their mean (at least ±0.06) and 10 on
    each side towards ±0.999. Raises ValueError for no values or values outside [−1, 1]."""
    f = np.asarray(held_f, dtype=np.float64)
    if f.size == 0:
        raise ValueError("prediction-powered verdicts need held-out questions with predictions")
    if np.abs(f).max() > 1 + 1e-9:
        raise ValueError("predicted differences must lie in [-1, 1]")
    mean = float(f.mean())
    se = max(float(f.std()) / math.sqrt(f.size), 0.01)
    fine = mean + se * _FINE
    low, high = float(fine[0]), float(fine[-1])
    tails = np.concatenate([-0.999 + (low + 0.999) * _TAIL, high + (0.999 - high) * (1 - _TAIL)])
    grid = np.unique(np.clip(np.concatenate([fine, tails]), -0.999, 0.999))
    log_e = betting_process(np.clip((f + 1.0) / 2.0, 0.0, 1.0), (grid + 1.0) / 2.0)[-1]
    return PhiEvidence(grid, log_e, mean, int(f.size))


def _log_capital(x: np.ndarray, valid: np.ndarray, m: np.ndarray, sign: int) -> np.ndarray:
    """(P, n, g) log ½K^±_t of P padded sequences for per-step null means m (P, n, g) (module docstring): aGRAPA
    bets on z = x − m from earlier steps (running mean with a prior 0, variance with a prior 1/4), clipped to
    [0, c/m] (K⁺) or [0, c/(1 − m)] (K⁻); padding steps leave the capital unchanged."""
    zero = x.dtype.type(0)
    z = np.where(valid[:, :, None], x[:, :, None] - m, zero)
    t = np.arange(1, x.shape[1] + 1, dtype=x.dtype)[None, :, None]
    mu_after = np.cumsum(z, axis=1) / (t + 1)
    var_after = (x.dtype.type(0.25) + np.cumsum(np.where(valid[:, :, None], (z - mu_after) ** 2, zero), axis=1)) / (
        t + 1)
    mu_prev = np.concatenate([np.zeros_like(mu_after[:, :1]), mu_after[:, :-1]], axis=1)
    var_prev = np.concatenate([np.full_like(var_after[:, :1], 0.25), var_after[:, :-1]], axis=1)
    kelly = mu_prev / (var_prev + mu_prev * mu_prev)
    half = x.dtype.type(math.log(2.0))
    if sign > 0:
        bet = np.minimum(np.maximum(kelly, 0), BET_CAP / m)
        return np.cumsum(np.log1p(bet * z), axis=1) - half
    bet = np.minimum(np.maximum(-kelly, 0), BET_CAP / (1 - m))
    return np.cumsum(np.log1p(-bet * z), axis=1) - half


def _log_evidence_path(x, valid, lam, delta, grid, log_e, sign: int) -> np.ndarray:
    """(P, n) log M^±_t at every step t of P padded sequences at the hypothesis δ (P,): the minimum over each pair's
    φ grid (P, g) of ½K^±_t(δ, φ)·E(φ) (module docstring)."""
    delta = delta.astype(x.dtype)
    m = (delta[:, None, None] - lam[:, :, None] * grid[:, None, :] + 1 + lam[:, :, None]) / (2 + 2 * lam[:, :, None])
    m = np.clip(m, 1e-6, 1 - 1e-6)  # an impossible mean: clipped towards the middle, only more conservative
    return (_log_capital(x, valid, m, sign) + log_e[:, None, :]).min(axis=2)


def _evidence(x, valid, lam, delta, grid, log_e, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """((P,) max_t log M^±_t, (P,) log M^±_t at each sequence's end) at the hypothesis δ (P,), with M the minimum
    over each pair's φ grid (P, g) of ½K^±_t(δ, φ)·E(φ) (module docstring)."""
    log_m = _log_evidence_path(x, valid, lam, delta, grid, log_e, sign)
    last = np.maximum(valid.sum(axis=1) - 1, 0)
    return log_m.max(axis=1), log_m[np.arange(log_m.shape[0]), last]


def null_evidence_paths(d: np.ndarray, f: np.ndarray, phi: PhiEvidence) -> np.ndarray:
    """(S, n) log max(M⁺_t, M⁻_t) at δ = 0 after each counted question t of S sequences of one pair (module
    docstring): the pair's anytime p after t questions is min(1, exp(−max_{s≤t} of it)). ``d``, ``f``: (S, n)
    human and predicted differences in [−1, 1] in arrival order (the planner's simulated continuations); ``phi``:
    the pair's held-out evidence, shared by all S. Float32 arithmetic (as the confidence sequences')."""
    d, f = np.atleast_2d(np.asarray(d, dtype=np.float64)), np.atleast_2d(np.asarray(f, dtype=np.float64))
    lam = predictable_lambdas(d, f)
    x = np.clip((d - lam * f + 1.0 + lam) / (2.0 + 2.0 * lam), 0.0, 1.0).astype(np.float32)
    lam = lam.astype(np.float32)
    valid = np.ones(x.shape, dtype=bool)
    s = x.shape[0]
    grid = np.broadcast_to(phi.grid.astype(np.float32), (s, phi.grid.size))
    log_e = np.broadcast_to(phi.log_e.astype(np.float32), (s, phi.log_e.size))
    zero = np.zeros(s, dtype=np.float32)
    return np.maximum(_log_evidence_path(x, valid, lam, zero, grid, log_e, +1),
                      _log_evidence_path(x, valid, lam, zero, grid, log_e, -1))


def _pad(rows: Sequence[np.ndarray], width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    n = max([r.size for r in rows] + [1]) if width is None else width
    out = np.zeros((len(rows), n))
    valid = np.zeros(out.shape, dtype=bool)
    for i, r in enumerate(rows):
        out[i, :r.size], valid[i, :r.size] = r, True
    return out, valid


def _stack(pairs: Sequence[PpiPair]):
    x, valid = _pad([p.x for p in pairs])
    lam, _ = _pad([p.lam for p in pairs], x.shape[1])
    g = max(p.phi.grid.size for p in pairs)
    grid = np.array([np.pad(p.phi.grid, (0, g - p.phi.grid.size), mode="edge") for p in pairs])
    log_e = np.array([np.pad(p.phi.log_e, (0, g - p.phi.log_e.size), mode="edge") for p in pairs])
    return x, valid, lam, grid, log_e


def ppi_pair(d: Sequence[float], f: Sequence[float], phi: PhiEvidence) -> PpiPair:
    """The prediction-powered sequence of one pair with its e-value and anytime p-value (module docstring).

    Args:
        d: (n,) human differences a − b of the counted questions in arrival order, in [−1, 1].
        f: (n,) ORCA's predicted differences μ_a − μ_b of the same questions, in [−1, 1].
        phi: :func:`phi_evidence` of the pair's held-out questions.

    Raises ValueError for mismatched lengths or values outside [−1, 1].
    """
    d, f = np.asarray(d, dtype=np.float64), np.asarray(f, dtype=np.float64)
    if d.shape != f.shape:
        raise ValueError("human and predicted differences must have the same length")
    for v in (d, f):
        if v.size and np.abs(v).max() > 1 + 1e-9:
            raise ValueError("differences must lie in [-1, 1]")
    lam = predictable_lambdas(d, f)
    x = np.clip((d - lam * f + 1.0 + lam) / (2.0 + 2.0 * lam), 0.0, 1.0)
    if d.size == 0:
        return PpiPair(x, lam, phi, None)
    out = PpiPair(x, lam, phi, float(np.clip(np.mean(d - lam * f) + np.mean(lam) * phi.mean, -1.0, 1.0)))
    x2, valid, lam2, grid, log_e = _stack([out])
    up_max, up_now = _evidence(x2, valid, lam2, np.zeros(1), grid, log_e, sign=+1)
    down_max, down_now = _evidence(x2, valid, lam2, np.zeros(1), grid, log_e, sign=-1)
    out.p_anytime = float(min(1.0, math.exp(-max(float(up_max[0]), float(down_max[0])))))
    out.e_value = float(math.exp(max(float(up_now[0]), float(down_now[0]))))
    return out


def ppi_confidence_sequences(pairs: Sequence[PpiPair], levels: Sequence[float]) -> list[tuple[float, float]]:
    """The confidence sequence for δ of each pair at its level (module docstring), vectorised over pairs: the
    lower end bisected between −1 and the estimate on K⁺, the upper end between the estimate and 1 on K⁻,
    :data:`_BISECTIONS` steps, each end reported on its rejected side (so the sequence can only be wider). Pairs
    need ≥ 1 counted question. Returns [(low, high)] in [−1, 1]."""
    if not pairs:
        return []
    x, valid, lam, grid, log_e = (a if a.dtype == bool else a.astype(np.float32) for a in _stack(pairs))
    threshold = -np.log(np.asarray(levels, dtype=np.float64))  # float32 arithmetic: ends agree to about 1e-4
    est = np.array([p.estimate for p in pairs], dtype=np.float64)

    def rejected(delta, sign):
        return _evidence(x, valid, lam, delta, grid, log_e, sign)[0] >= threshold

    lo_out, lo_in = np.full(len(pairs), -1.0), est.copy()
    hi_in, hi_out = est.copy(), np.full(len(pairs), 1.0)
    reaches_lo, reaches_hi = ~rejected(lo_out, +1), ~rejected(hi_out, -1)
    for _ in range(_BISECTIONS):
        mid_lo, mid_hi = (lo_out + lo_in) / 2, (hi_in + hi_out) / 2
        rej_lo, rej_hi = rejected(mid_lo, +1), rejected(mid_hi, -1)
        lo_out, lo_in = np.where(rej_lo, mid_lo, lo_out), np.where(rej_lo, lo_in, mid_lo)
        hi_out, hi_in = np.where(rej_hi, mid_hi, hi_out), np.where(rej_hi, hi_in, mid_hi)
    low = np.where(reaches_lo, -1.0, lo_out)
    high = np.where(reaches_hi, 1.0, hi_out)
    return [(float(a), float(b)) for a, b in zip(low, high)]
