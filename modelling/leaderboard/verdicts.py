"""Verdicts between LALMs that stay valid however often anyone looks: an anytime-valid test of equal means by
betting, with its confidence sequence, Holm's correction over every pair. Django-free (numpy only).

Estimand. For two LALMs a and b: the difference of their mean human value over questions both answered, in the
superpopulation the benchmark's questions are drawn from, δ = E[y_a − y_b] ∈ [−1, 1] (y: an answer's mean
normalised rating (r − 1)/4). Hypothesis tested: δ = 0 (equal means) — not symmetry of the differences.

Sampling under which it is valid. The pair's *counted* questions are those humans rated for both that were chosen
independently of their ratings: every rated question under the uniform policy (the queue's random question key);
the audit share under routing (question key < the audit share); under the active design (leaderboard precision)
the questions whose draw u is below the benchmark's smallest inclusion probability π — drawn whatever ORCA
predicted, so a uniform random share of the questions (the *draw share*; the rest were drawn ∝ ORCA's σ and would
tilt the mean). The counted questions enter the sequence in the order their pair difference became complete (the
later of the two answers' last ratings, ``rated_at``; without times, by question key), so a later look extends
the sequence of an earlier one; their differences are then i.i.d. draws from the superpopulation.

Method (:func:`betting_process`). Each difference d_i ∈ [−1, 1] becomes x_i = (d_i + 1)/2 ∈ [0, 1], and δ = 0 is
E[x] = 1/2. For a candidate mean m the hedged capital process (Waudby-Smith & Ramdas, "Estimating means of bounded
random variables by betting", JRSS-B 86(1), 2024, arXiv:2010.09686: their "hedged capital process", θ = 1/2)

    K_t(m) = ½ ∏_{i≤t} (1 + λ⁺_i (x_i − m)) + ½ ∏_{i≤t} (1 − λ⁻_i (x_i − m))

is a non-negative martingale with K_0 = 1 when E[x] = m, for any *predictable* bets λ± ≥ 0 (functions of x_<i
only) with λ⁺ ≤ c/m and λ⁻ ≤ c/(1 − m). The bets are their approximate-GRAPA plug-in of the Kelly-optimal bet
("aGRAPA", same paper), split by sign: λ_i = (μ̂_{i−1} − m)/(σ̂²_{i−1} + (μ̂_{i−1} − m)²),
λ⁺ = clip(λ, 0, c/m), λ⁻ = clip(−λ, 0, c/(1 − m)), c = 3/4, with their regularised running estimates
μ̂_t = (1/2 + Σ_{i≤t} x_i)/(t + 1) and σ̂²_t = (1/4 + Σ_{i≤t} (x_i − μ̂_i)²)/(t + 1). By Ville's inequality
P(sup_t K_t(m) ≥ 1/α) ≤ α under E[x] = m, so

* the **e-value** of the pair at this look is K_t(1/2) and the **anytime p-value** p_t = min(1, 1/max_{s≤t}
  K_s(1/2)): valid at any look, chosen however (a stopping time), and it never rises, so looking again never helps;
* the **confidence sequence** at level 1 − α is {m : max_{s≤t} K_s(m) < 1/α} (the paper's betting confidence sequence
  with the running intersection), shown for δ = 2m − 1 and computed on a grid of m refined by bisection at
  each end (:func:`confidence_sequence`).

Multiplicity: Holm's step-down over the anytime p-values of all pairs of rated LALMs (valid under any dependence
between pairs, at any stopping time: each p_t is a valid p-value there). Anytime p-values never rise, so Holm's
rejections only grow as ratings come in: for a fixed set of LALMs a false verdict at some look is a false verdict at
the last one, and P(any false verdict at any look) ≤ α. (A newly rated LALM adds pairs and lowers Holm's levels from
then on; an answer rated again after it counted moves to its new completion time.) A verdict ``a>b`` needs Holm's
rejection (p_t ≤ the level of its Holm step) *and* the confidence sequence at that level entirely above 0
(``b>a``: below), and at least ``min_shared`` counted questions; no Monte Carlo, so no p-value floor (40 LALMs,
780 pairs, are decidable).

Where the design leaves questions out of the count for good (routing, the active design) and a cross-fitted ORCA
predicts them, a pair's test is the prediction-powered version of the same test
(:mod:`modelling.leaderboard.verdicts_ppi`): same estimand, hypothesis, Holm step and verdict rule.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from modelling.leaderboard import verdicts_ppi
from modelling.leaderboard.betting import BET_CAP, betting_process  # noqa: F401 (part of this module's interface)

#: Default confidence level (family-wise, over all pairs).
CONFIDENCE = 0.95
#: Fewest counted shared questions for a verdict (``LEADERBOARD_MIN_SHARED_QUESTIONS``).
MIN_SHARED_QUESTIONS = 10
#: The method's name (``PairwiseVerdict.method``) and what it is, in words.
METHOD = "betting_holm"
METHOD_TEXT = ("anytime-valid betting test of equal means (hedged aGRAPA capital process, Waudby-Smith & Ramdas "
               "2024), Holm over all pairs")
#: Grids of candidate means m (x scale) for the confidence sequence.
_COARSE = np.linspace(0.025, 0.975, 20)
_GRID = np.linspace(0.0025, 0.9975, 399)


def _log_sup(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """(g,) max_{0≤s≤t} log K_s(m) (K_0 = 1) of the observations ``x`` for each candidate mean in ``m``."""
    return np.maximum(betting_process(x, m).max(axis=0), 0.0)


def confidence_sequence(x: Sequence[float], level: float, *, refine: int = 10) -> tuple[float, float]:
    """The confidence sequence for δ = 2m − 1 at this look, {m : max_{s≤t} K_s(m) < 1/α} (module docstring).

    Args:
        x: (n,) observations in [0, 1] in arrival order (n >= 1).
        level: α of the sequence (0 < α < 1).
        refine: bisection steps at each end.

    Computed on a grid of m (step 1/20 on the x scale; 1/400 when no grid point is kept), then each end is
    bisected between its last kept and first rejected grid point ``refine`` times and reported at the rejected side
    of the final bracket (the true boundary lies inside). The result is the hull of the kept set, so it can only
    be wider than the set itself. Returns (low, high) in [−1, 1].
    """
    x = np.asarray(x, dtype=np.float64)
    threshold = -math.log(level)
    grid = _COARSE
    kept = np.flatnonzero(_log_sup(x, grid) < threshold)
    if kept.size == 0:  # narrower than a coarse step
        grid = _GRID
        kept = np.flatnonzero(_log_sup(x, grid) < threshold)
        if kept.size == 0:  # every mean rejected: an event of probability below α; show the fine grid's argmin
            kept = np.array([int(np.argmin(_log_sup(x, grid)))])
    # brackets [inside, outside] at each end; None where the grid's end is kept (the sequence reaches 0 or 1)
    lo = [grid[kept[0]], grid[kept[0] - 1]] if kept[0] > 0 else None
    hi = [grid[kept[-1]], grid[kept[-1] + 1]] if kept[-1] < grid.size - 1 else None
    for _ in range(refine if lo or hi else 0):
        mids = np.array([(b[0] + b[1]) / 2 for b in (lo, hi) if b])
        rejected = _log_sup(x, mids) >= threshold
        for bracket, r in zip([b for b in (lo, hi) if b], rejected):
            bracket[1 if r else 0] = (bracket[0] + bracket[1]) / 2
    low = 0.0 if lo is None else lo[1]
    high = 1.0 if hi is None else hi[1]
    return float(2.0 * low - 1.0), float(2.0 * high - 1.0)


def _sup_chunk(x: np.ndarray, valid: np.ndarray, m: np.ndarray, cap: float) -> np.ndarray:
    """:func:`batch_log_sup` on one chunk of sequences (the arithmetic of :func:`betting_process` in float32)."""
    x, m = x.astype(np.float32), m.astype(np.float32)
    t = np.arange(1, x.shape[1] + 1, dtype=np.float32)[None, :]
    mu_after = (0.5 + np.cumsum(np.where(valid, x, 0.0), axis=1)) / (t + 1)
    var_after = (0.25 + np.cumsum(np.where(valid, (x - mu_after) ** 2, 0.0), axis=1)) / (t + 1)
    first = np.ones((x.shape[0], 1), dtype=np.float32)
    mu_prev = np.concatenate([0.5 * first, mu_after[:, :-1]], axis=1)[:, :, None]
    var_prev = np.concatenate([0.25 * first, var_after[:, :-1]], axis=1)[:, :, None]
    delta = mu_prev - m[:, None, :]
    lam = delta / (var_prev + delta * delta)
    lam_up = np.minimum(np.maximum(lam, 0.0), (cap / m)[:, None, :])
    lam_down = np.minimum(np.maximum(-lam, 0.0), (cap / (1.0 - m))[:, None, :])
    step = np.where(valid[:, :, None], x[:, :, None] - m[:, None, :], np.float32(0))  # padding: a factor of 1
    log_k = np.logaddexp(np.cumsum(np.log1p(lam_up * step), axis=1),
                         np.cumsum(np.log1p(-lam_down * step), axis=1)) - np.float32(math.log(2.0))
    return np.maximum(log_k.max(axis=1), 0.0).astype(np.float64)


def batch_log_sup(x: np.ndarray, valid: np.ndarray, m: np.ndarray, *, cap: float = BET_CAP) -> np.ndarray:
    """max_{0≤s≤n_p} log K_s(m) of P sequences at once, for each sequence's own candidate means.

    Args:
        x: (P, n) observations in [0, 1], sequence p in row p, padded after its n_p values.
        valid: (P, n) bool, True on each row's first n_p entries.
        m: (P, g) candidate means in (0, 1) per sequence.

    Returns (P, g); :func:`betting_process`'s running maximum (and ≥ 0: K_0 = 1) row by row, computed in float32
    (about 1e-5 relative) for speed. Chunked so no intermediate array exceeds about two million values.
    """
    out = np.empty(m.shape)
    chunk = max(1, 2_000_000 // max(1, x.shape[1] * m.shape[1]))
    for start in range(0, x.shape[0], chunk):
        part = slice(start, start + chunk)
        out[part] = _sup_chunk(x[part], valid[part], m[part], cap)
    return out


def confidence_sequences(xs: Sequence[np.ndarray], levels: Sequence[float], *, refine: int = 10) -> list:
    """:func:`confidence_sequence` of several sequences at once (each at its own level), vectorised over them:
    the same grid, brackets and bisection (in float32, so the ends agree to about 1e-4). ``xs``: non-empty (n_p,)
    arrays."""
    if not xs:
        return []
    n = max(x.size for x in xs)
    x = np.zeros((len(xs), n))
    valid = np.zeros((len(xs), n), dtype=bool)
    for i, row in enumerate(xs):
        x[i, :row.size], valid[i, :row.size] = row, True
    threshold = -np.log(np.asarray(levels, dtype=np.float64))
    g = _COARSE.size
    kept = batch_log_sup(x, valid, np.tile(_COARSE, (len(xs), 1))) < threshold[:, None]
    first, last = np.argmax(kept, axis=1), g - 1 - np.argmax(kept[:, ::-1], axis=1)
    has_lo, has_hi = first > 0, last < g - 1
    lo_in, lo_out = _COARSE[first], _COARSE[np.maximum(first - 1, 0)]
    hi_in, hi_out = _COARSE[last], _COARSE[np.minimum(last + 1, g - 1)]
    for _ in range(refine):
        mids = np.stack([(lo_in + lo_out) / 2, (hi_in + hi_out) / 2], axis=1)
        rejected = batch_log_sup(x, valid, mids) >= threshold[:, None]
        lo_out, lo_in = np.where(rejected[:, 0], mids[:, 0], lo_out), np.where(rejected[:, 0], lo_in, mids[:, 0])
        hi_out, hi_in = np.where(rejected[:, 1], mids[:, 1], hi_out), np.where(rejected[:, 1], hi_in, mids[:, 1])
    low, high = np.where(has_lo, lo_out, 0.0), np.where(has_hi, hi_out, 1.0)
    out = [(float(2.0 * lo - 1.0), float(2.0 * hi - 1.0)) for lo, hi in zip(low, high)]
    for i in np.flatnonzero(~kept.any(axis=1)):  # narrower than a coarse step: the single sequence's fine grid
        out[i] = confidence_sequence(xs[i], float(levels[i]), refine=refine)
    return out


def holm_levels(p_values: Sequence[float], *, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holm's step-down procedure (Holm, *Scand. J. Stat.* 1979).

    Args:
        p_values: (m,) p-values in [0, 1].
        alpha: family-wise level.

    Returns:
        (adjusted, rejected, levels): adjusted p-values (as ``statsmodels``' ``multipletests(method="holm")``),
        whether each hypothesis is rejected (adjusted ≤ α), and the level each one's test is judged at: α/(m − j)
        for the j-th smallest (0-based) when rejected, else the level of Holm's next step α/(m − R) with R
        rejections.
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = p.size
    if m == 0:
        return np.zeros(0), np.zeros(0, dtype=bool), np.zeros(0)
    order = np.argsort(p, kind="stable")
    factors = m - np.arange(m)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(p[order] * factors))
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted
    rejected = adjusted <= alpha
    decided = int(rejected.sum())
    levels = np.full(m, alpha / (m - decided) if decided < m else alpha)
    step_levels = alpha / factors
    levels[order[:decided]] = step_levels[:decided]
    return adjusted, rejected, levels


@dataclass(frozen=True)
class PairwiseVerdict:
    """The mean difference a − b over the pair's counted shared questions and the anytime-valid verdict.

    Attributes:
        a, b: the two LALMs (a first: the better in the table's order).
        n_questions: counted shared questions (rated for both, chosen at random: module docstring).
        diff: mean of a's value − b's value over them, in [−1, 1] (the prediction-powered estimate for a
            ``betting_ppi_holm`` pair: :class:`modelling.leaderboard.verdicts_ppi.PpiPair`); None with none.
        ci: the confidence sequence for the difference at this look at the pair's Holm level (``level``), in
            [−1, 1]; None below ``min_shared`` counted questions (not shown where no verdict can be).
        level: α of ``ci``: the level of the pair's Holm step (rejected) or of Holm's next step (not rejected).
        e_value: K_t(1/2), the capital of the test of equal means now (≥ 0; 1 before any question).
        p_anytime: min(1, 1/max_{s≤t} K_s(1/2)), valid at any look.
        p_holm: Holm-adjusted p_anytime over every pair.
        verdict: ``a>b`` / ``b>a`` where Holm rejects (p_anytime at most the pair's level, which is exactly when
            ``ci`` excludes 0) and ``ci`` lies above / below 0 (and n_questions ≥ min_shared), else ``undecided``.
        note: why a pair is undecided ('' when it is not, or only not yet significant).
        method: :data:`METHOD` (human-only) or ``betting_ppi_holm`` (prediction-powered,
            :mod:`modelling.leaderboard.verdicts_ppi`).
        pairs: how many pairs Holm's correction ran over.
    """

    a: object
    b: object
    n_questions: int
    diff: float | None
    ci: tuple[float, float] | None
    level: float
    e_value: float
    p_anytime: float
    p_holm: float
    verdict: str
    note: str = ""
    method: str = METHOD
    pairs: int = 1

    @property
    def powered(self) -> bool:
        """True for a prediction-powered verdict (:mod:`modelling.leaderboard.verdicts_ppi`)."""
        return self.method == verdicts_ppi.METHOD

    def as_dict(self) -> dict:
        """{"a", "b", "n_questions", "diff", "ci", "level", "e_value", "p_anytime", "p_holm", "verdict", "note",
        "method", "pairs"}."""
        return {"a": self.a, "b": self.b, "n_questions": self.n_questions, "diff": self.diff,
                "ci": list(self.ci) if self.ci else None, "level": self.level, "e_value": self.e_value,
                "p_anytime": self.p_anytime, "p_holm": self.p_holm, "verdict": self.verdict, "note": self.note,
                "method": self.method, "pairs": self.pairs}


def pair_questions(values: Mapping[object, Mapping[object, float]], order: Mapping | None, a, b) -> list:
    """The two LALMs' shared counted questions in verdict order: by completion max(order[a][q], order[b][q])
    (``rated_at`` times or question keys), ties and ``order=None`` by the question's string."""
    shared = set(values[a]) & set(values[b])
    if order is None:
        return sorted(shared, key=str)
    oa, ob = order.get(a, {}), order.get(b, {})
    return sorted(shared, key=lambda q: (max(oa.get(q, 0.0), ob.get(q, 0.0)), str(q)))


def pair_sequence(values: Mapping[object, Mapping[object, float]], order: Mapping | None, a, b) -> np.ndarray:
    """(n,) the differences a − b over the two LALMs' shared questions in verdict order (:func:`pair_questions`)."""
    return np.array([values[a][q] - values[b][q] for q in pair_questions(values, order, a, b)], dtype=np.float64)


def ppi_evidence(a, b, questions: list, predictions: Mapping | None, held: Mapping | None):
    """The pair's :class:`modelling.leaderboard.verdicts_ppi.PhiEvidence` and (n,) predicted differences of its
    counted ``questions`` when a prediction-powered verdict applies (every counted question predicted for both, at
    least ``MIN_HELD`` held-out questions predicted for both), else None."""
    if not predictions or not held:
        return None
    mu_a, mu_b = predictions.get(a) or {}, predictions.get(b) or {}
    population = sorted((set(held.get(a, ())) & set(held.get(b, ()))) & set(mu_a) & set(mu_b), key=str)
    if len(population) < verdicts_ppi.MIN_HELD or any(q not in mu_a or q not in mu_b for q in questions):
        return None
    f = np.array([mu_a[q] - mu_b[q] for q in questions], dtype=np.float64)
    return verdicts_ppi.phi_evidence([mu_a[q] - mu_b[q] for q in population]), f


def _pair_state(d: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(e_value, p_anytime, x) of one pair's differences d (x = (d + 1)/2)."""
    x = np.clip((d + 1.0) / 2.0, 0.0, 1.0)
    if d.size == 0:
        return 1.0, 1.0, x
    log_k = betting_process(x, 0.5)[:, 0]
    return float(np.exp(log_k[-1])), float(min(1.0, np.exp(-max(0.0, log_k.max())))), x


def pairwise_verdicts(
    values: Mapping[object, Mapping[object, float]], *, order: Mapping[object, Mapping[object, float]] | None = None,
    confidence: float = CONFIDENCE, min_shared: int = MIN_SHARED_QUESTIONS, predictions: Mapping | None = None,
    held: Mapping | None = None,
) -> list[PairwiseVerdict]:
    """Every pair of LALMs: the anytime-valid betting test of equal means over the counted shared questions,
    Holm over all pairs, the confidence sequence at each pair's Holm level (module docstring); prediction-powered
    (:mod:`modelling.leaderboard.verdicts_ppi`) for the pairs whose held-out questions allow it.

    Args:
        values: {LALM: {question: the answer's human value in [0, 1]}} of counted questions only; LALMs in the
            table's order (a pair's ``a`` is the one listed first).
        order: {LALM: {question: when the answer's value became complete (POSIX seconds) or its question key}};
            None: by question.
        confidence: 1 − the family-wise error rate over all pairs and all looks.
        min_shared: fewest counted shared questions for a verdict.
        predictions: {LALM: {question: cross-fitted ORCA μ in [0, 1]}} (None: human-only verdicts).
        held: {LALM: {question}} the questions the design never counts (:attr:`VerdictInputs.held`).

    Returns:
        [PairwiseVerdict] in pair order (a before b as listed); ``method`` names each pair's test. Raises
        ValueError for values outside [0, 1].
    """
    names = list(values)
    alpha = 1.0 - confidence
    raw = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            questions = pair_questions(values, order, a, b)
            d = np.array([values[a][q] - values[b][q] for q in questions], dtype=np.float64)
            if d.size and (np.abs(d) > 1 + 1e-9).any():
                raise ValueError(f"values of {a!r} or {b!r} lie outside [0, 1]")
            ppi = ppi_evidence(a, b, questions, predictions, held)
            if ppi is None:
                raw.append((a, b, d, *_pair_state(d)))
                continue
            state = verdicts_ppi.ppi_pair(d, ppi[1], ppi[0])
            raw.append((a, b, d, state.e_value, state.p_anytime, state))
    adjusted, rejected, levels = holm_levels([r[4] for r in raw], alpha=alpha)
    shown = [i for i, r in enumerate(raw) if r[2].size >= min_shared]
    plain = [i for i in shown if not isinstance(raw[i][5], verdicts_ppi.PpiPair)]
    powered = [i for i in shown if isinstance(raw[i][5], verdicts_ppi.PpiPair)]
    sequences = dict(zip(plain, confidence_sequences([raw[i][5] for i in plain], [levels[i] for i in plain])))
    sequences.update(zip(powered, verdicts_ppi.ppi_confidence_sequences([raw[i][5] for i in powered],
                                                                         [levels[i] for i in powered])))
    out = []
    for i, ((a, b, d, e_value, p_any, state), p_holm, reject, level) in enumerate(
            zip(raw, adjusted, rejected, levels)):
        n = int(d.size)
        ci = sequences.get(i)
        verdict, note = "undecided", ""
        if n < min_shared:
            note = f"{n} counted shared questions (a verdict needs {min_shared})"
        elif reject and ci is not None:
            # Holm rejects exactly when the confidence sequence at the pair's level excludes 0 (one capital
            # process); its ends come from a bisection good to about 1e-4, so the side it lies on gives the verdict
            # and the end nearest 0 is put at 0 when the bisection left it a hair across.
            verdict = "a>b" if ci[0] + ci[1] > 0 else "b>a"
            ci = (max(ci[0], 0.0), ci[1]) if verdict == "a>b" else (ci[0], min(ci[1], 0.0))
        powered_pair = isinstance(state, verdicts_ppi.PpiPair)
        diff = state.estimate if powered_pair else (float(d.mean()) if n else None)
        out.append(PairwiseVerdict(a, b, n, diff, ci, float(level), e_value, p_any, float(p_holm), verdict, note,
                                   verdicts_ppi.METHOD if powered_pair else METHOD, len(raw)))
    return out


@dataclass
class VerdictInputs:
    """What the verdicts and the planner use from a leaderboard's data (:func:`verdict_inputs`).

    Attributes:
        values: {LALM: {question: human value in [0, 1]}} of counted answers (rated, chosen at random).
        order: {LALM: {question: when the value became complete (latest ``rated_at``) or the answer's key}}.
        countable: {LALM: {question}} questions whose answer counts once rated (rated or not).
        counted_share: share of the questions the queue serves next that count (planner), in (0, 1].
        answers_per_question: mean answers per question in scope (the queue serves a question's answers together).
        ratings_per_answer: mean valid ratings per rated answer.
        predictions: {LALM: {question: cross-fitted ORCA μ}} of every answer in scope ({} without cross-fitted
            predictions: human-only verdicts).
        held: {LALM: {question}} questions the design never counts, whatever their ratings — question key ≥ the
            audit share under routing, draw u ≥ the smallest π under the active design (none under the uniform
            policy): a random sample of the questions independent of the counted ones, which bounds the mean
            predicted difference of the prediction-powered verdicts. Empty when the scope spans several
            benchmarks (their held-out shares differ, so together they are no random sample of the scope).
    """

    values: dict = field(default_factory=dict)
    order: dict = field(default_factory=dict)
    countable: dict = field(default_factory=dict)
    predictions: dict = field(default_factory=dict)
    held: dict = field(default_factory=dict)
    counted_share: float = 1.0
    answers_per_question: float = 1.0
    ratings_per_answer: float = 1.0


def _countable_rule(data, ids: Sequence[int], *, audit_first: bool, designs: Mapping | None) -> tuple[dict, dict]:
    """({benchmark pk: predicate(candidate id) -> counts}, {benchmark pk: share of served questions that count}).
    A benchmark's sampling and audit share come from its design (``designs``) when given, else from ``data``."""
    rules, shares = {}, {}
    for bench in {data.answers[c]["benchmark_id"] for c in ids}:
        design = (designs or {}).get(bench)
        sampling = design.sampling if design is not None else data.sampling.get(bench, "uniform")
        if sampling == "routed":
            share = design.share if design is not None else data.audit_share.get(bench, 0.0)
            rules[bench] = lambda c, s=share: data.answers[c]["key"] < s
            shares[bench] = 1.0 if audit_first else share
        elif sampling == "active":
            pis = [data.design[c][0] for c in ids if c in data.design and data.answers[c]["benchmark_id"] == bench]
            floor = min(pis) if pis else 0.0
            rules[bench] = lambda c, f=floor: c in data.design and data.design[c][1] < f
            drawn = sum(1 for c in ids if c in data.design and data.design[c][1] < data.design[c][0]
                        and data.answers[c]["benchmark_id"] == bench)
            counted = sum(1 for c in ids if data.answers[c]["benchmark_id"] == bench and rules[bench](c))
            shares[bench] = counted / drawn if drawn else 0.0
        else:
            rules[bench] = lambda c: True
            shares[bench] = 1.0
    return rules, shares


def rated_in_another_design(data, c: int, design) -> bool:
    """True when a valid rating of answer ``c`` was given in a design epoch that ``design`` (the benchmark's
    ``modelling.leaderboard.designs.Design``, or None: every epoch) leaves out: the answer counts for neither the
    row nor the verdicts. Reads ``data.scores`` and ``data.rating_epoch`` (aligned lists; without epochs, False)."""
    scores = data.scores.get(c) or []
    if design is None or design.epochs is None or not scores:
        return False
    marks = (getattr(data, "rating_epoch", None) or {}).get(c) or []
    return len(marks) == len(scores) and any(int(e) not in design.epochs for e in marks)


def verdict_inputs(data, ids: Sequence[int], *, audit_first: bool = True, designs: Mapping | None = None,
                   predictions: Mapping[int, float] | None = None) -> VerdictInputs:
    """The counted answers of ``ids`` in ``data`` (a ``modelling.leaderboard.selectors.LeaderboardData``; read
    only through its attributes, no database): under the uniform policy every rated answer; under routing those
    with question key < the benchmark's audit share; under the active design those whose draw u is below the
    benchmark's smallest π (drawn whatever ORCA predicted: a uniform random share). Values are the mean of the
    answer's normalised ratings (r − 1)/4. ``audit_first``: audit answers have the queue's top priority (the
    routing rules' ``audit_priority`` above the others), so the audit is served before other questions.
    Optional ``data.rated_at`` ({candidate id: [POSIX seconds]}) orders the sequence; else the answer's key.
    ``designs``: {benchmark pk: the design its estimates use} (``modelling.leaderboard.designs.Design``: sampling,
    audit share, the design epochs whose ratings count), so verdicts count what the rows count: an answer rated in
    a left-out epoch (another policy, a smaller audit share) does not count; None: ``data.sampling`` and every
    rating. ``predictions``: {candidate id: cross-fitted ORCA μ} (None: human-only verdicts), kept with the
    held-out questions (:class:`VerdictInputs`) for the prediction-powered verdicts."""
    rules, shares = _countable_rule(data, ids, audit_first=audit_first, designs=designs)
    rated_at = getattr(data, "rated_at", None) or {}
    out = VerdictInputs()
    questions, scores = set(), []
    for c in ids:
        answer = data.answers[c]
        questions.add(answer["question"])
        if data.scores.get(c):
            scores.append(len(data.scores[c]))
        lalm, q = answer["lalm"], answer["question"]
        if predictions and c in predictions:
            out.predictions.setdefault(lalm, {})[q] = float(predictions[c])
        if not rules[answer["benchmark_id"]](c):  # never counted under this design (uniform: every answer counts)
            out.held.setdefault(lalm, set()).add(q)
            continue
        if rated_in_another_design(data, c, (designs or {}).get(answer["benchmark_id"])):
            continue
        out.countable.setdefault(lalm, set()).add(q)
        if data.scores.get(c):
            out.values.setdefault(lalm, {})[q] = float(np.mean([(s - 1) / 4.0 for s in data.scores[c]]))
            times = rated_at.get(c)
            out.order.setdefault(lalm, {})[q] = float(max(times)) if times else float(answer["key"])
    counts = {}
    for c in ids:
        b = data.answers[c]["benchmark_id"]
        counts[b] = counts.get(b, 0) + 1
    if len(counts) > 1:  # held-out questions of some benchmarks are no sample of the whole scope's questions
        out.held = {}
    total = sum(counts.values())
    out.counted_share = sum(shares[b] * n for b, n in counts.items()) / total if total else 1.0
    out.answers_per_question = len(ids) / len(questions) if questions else 1.0
    out.ratings_per_answer = float(np.mean(scores)) if scores else 1.0
    return out
