"""The routing policy, pure: no database and no Django import (ORCA paper, sections 4.2 and 6.1).

ORCA predicts, from an item's content alone, the expected correctness μ and the human disagreement σ² of a
candidate answer (normalised scale y = (r − 1)/4). The policy turns them, with the ratings so far, into a target
number of ratings (None = the benchmark's k) and a queue priority.

The policy (:func:`routing_decide`, pure; thresholds are settings, defaults in brackets). For one candidate answer
with prediction (μ, σ²) and its valid scores 1–5 in arrival order (n of them), the first rule that applies wins:

0. *audit* — the answer's question is in its benchmark's audit share (the question's ``random_key`` below the
   share, default ``ROUTING_AUDIT_SHARE`` [0.2]): the default k and ``ROUTING_AUDIT_PRIORITY`` [15], whatever its
   prediction and ratings (:func:`audit_decide`). The audit share is a uniform random sample of *questions* that
   never stops early, so the leaderboard's estimates stay unbiased under routing, and every LALM's answer to an
   audited question is audited: two LALMs share audited questions at the audit share, not its square (README,
   Leaderboard);

1. *observed disagreement / agreement* — once n >= ``ROUTING_OBSERVED_MIN_RATINGS`` [3], the observation
   overrides the prediction: sample variance (n − 1) >= ``ROUTING_OBSERVED_DISAGREEMENT_VARIANCE`` [1.0, the
   paper's threshold of genuine disagreement] → ``ROUTING_OBSERVED_DISAGREEMENT_TARGET`` [None: the default k]
   ratings and ``ROUTING_HIGH_PRIORITY`` [10]; otherwise the default (None, 0);
2. *predicted disagreement* — σ² in the top ``ROUTING_HIGH_QUANTILE`` [0.2] of the active model's predictions →
   ``ROUTING_HIGH_TARGET`` [5] ratings and ``ROUTING_HIGH_PRIORITY``; such a candidate never stops early;
3. *agreeing pair* — n >= 2 and the first two scores agree (|s1 − s2| <= ``ROUTING_AGREE_TOLERANCE`` [1]) →
   ``ROUTING_AGREE_TARGET`` [2]; they disagree → the default;
4. *the model as a rater* — with ``ROUTING_MODEL_VOTE`` [True], n == 1, σ² in the bottom
   ``ROUTING_MODEL_VOTE_QUANTILE`` [0.3] and the score within ``ROUTING_MODEL_VOTE_TOLERANCE`` [0.25] of the
   model's continuous rating 1 + 4μ, the model and the human form an agreeing pair → 1 rating;
5. otherwise the default (None, 0).

Why these defaults: ``bench/routing.py`` (its docstring holds the tuning report; ORCA seed-108 ratings).

Questions with a candidate answer whose σ² is in the top ``ROUTING_EXPERT_QUANTILE`` [0.05] are "predicted
ambiguous"; refinement offers them to the expert review queue (``refinement.services.routing_offer``, which
reads :class:`~modelling.models.RoutingDecision` rows through the ORM: modelling never imports refinement).

Quantile cut-offs are taken over the active model's predictions of every candidate answer on its question's
current version (no ratings are used to set them). The database side (evaluating the policy over the store, its
log, its triggers) is :mod:`modelling.services.routing`.
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelling.leaderboard.stats import DEFAULT_ACTIVE_FLOOR, inclusion_probabilities  # noqa: F401  (the floor is re-exported)

#: Reasons a decision can give (stored in ``RoutingDecision.reason``).
OBSERVED_DISAGREEMENT = "observed_disagreement"
OBSERVED_AGREEMENT = "observed_agreement"
PREDICTED_DISAGREEMENT = "predicted_disagreement"
CONFIDENT_AGREEING = "confident_agreeing"
CONFIDENT_MODEL_AGREES = "confident_model_agrees"
CONFIDENT_DISAGREEING = "confident_disagreeing"
DEFAULT = "default"
ROUTING_OFF = "routing_off"
ACTIVE_SELECTED = "active_selected"
ACTIVE_SKIPPED = "active_skipped"
AUDIT = "audit"
#: Queue priority of answers the leaderboard-precision policy drew (offered before everything else).
ACTIVE_PRIORITY = 20


@dataclass(frozen=True)
class RoutingRules:
    """Thresholds of the policy; :meth:`from_settings` reads the ``ROUTING_*`` settings (module docstring).

    Quantiles are shares in (0, 1]; targets are numbers of ratings (>= 1; None = the default k); priorities are
    integers (higher is offered first); variances are on the 1–5 scale for observed scores;
    ``model_vote_tolerance`` is in rating points on the 1–5 scale.
    """

    high_quantile: float = 0.2
    high_target: int = 5
    high_priority: int = 10
    agree_target: int = 2
    agree_tolerance: int = 1
    model_vote: bool = True
    model_vote_quantile: float = 0.3
    model_vote_tolerance: float = 0.25
    observed_min_ratings: int = 3
    observed_disagreement_variance: float = 1.0
    observed_disagreement_target: int | None = None
    expert_quantile: float = 0.05
    audit_priority: int = 15

    @classmethod
    def from_settings(cls, source: Any = None) -> RoutingRules:
        """The rules from the ``ROUTING_*`` attributes of ``source`` (default: Django's settings, imported only
        here, so this module loads without Django)."""
        if source is None:
            from django.conf import settings as source
        settings = source
        return cls(
            high_quantile=settings.ROUTING_HIGH_QUANTILE,
            high_target=settings.ROUTING_HIGH_TARGET,
            high_priority=settings.ROUTING_HIGH_PRIORITY,
            agree_target=settings.ROUTING_AGREE_TARGET,
            agree_tolerance=settings.ROUTING_AGREE_TOLERANCE,
            model_vote=settings.ROUTING_MODEL_VOTE,
            model_vote_quantile=settings.ROUTING_MODEL_VOTE_QUANTILE,
            model_vote_tolerance=settings.ROUTING_MODEL_VOTE_TOLERANCE,
            observed_min_ratings=settings.ROUTING_OBSERVED_MIN_RATINGS,
            observed_disagreement_variance=settings.ROUTING_OBSERVED_DISAGREEMENT_VARIANCE,
            observed_disagreement_target=settings.ROUTING_OBSERVED_DISAGREEMENT_TARGET,
            expert_quantile=settings.ROUTING_EXPERT_QUANTILE,
            audit_priority=settings.ROUTING_AUDIT_PRIORITY,
        )


@dataclass(frozen=True)
class RoutingThresholds:
    """Cut-offs of predicted σ² (normalised scale, 0–0.25) from the quantiles of one model's predictions.

    Attributes:
        high_variance: σ² at or above it is "predicted disagreement" (top ``high_quantile``).
        low_variance: σ² at or below it lets the model vote (bottom ``model_vote_quantile``).
        expert_variance: σ² at or above it is "predicted ambiguous" (top ``expert_quantile``).
    """

    high_variance: float
    low_variance: float
    expert_variance: float

    @classmethod
    def from_variances(cls, variances: Sequence[float], rules: RoutingRules) -> RoutingThresholds:
        """Quantile cut-offs of ``variances`` (any length >= 1). Raises ValueError when empty."""
        v = np.asarray(variances, dtype=np.float64)
        if v.size == 0:
            raise ValueError("routing thresholds need at least one prediction")
        return cls(
            high_variance=float(np.quantile(v, 1.0 - rules.high_quantile)),
            low_variance=float(np.quantile(v, rules.model_vote_quantile)),
            expert_variance=float(np.quantile(v, 1.0 - rules.expert_quantile)),
        )


@dataclass(frozen=True)
class RoutingChoice:
    """What the policy decides for one candidate answer.

    Attributes:
        target_ratings: ratings wanted, or None for the default (candidate → benchmark → settings k).
        priority: queue priority (0 = default; higher is offered to annotators first).
        reason: one of the module's reason constants.
        detail: a human-readable sentence with the numbers behind the reason.
        expert: True when the candidate is predicted ambiguous (offered to expert review).
    """

    target_ratings: int | None
    priority: int
    reason: str
    detail: str
    expert: bool = False
    inclusion_probability: float | None = None


def model_rating(mu: float) -> int:
    """The model's rating on the 1–5 scale: round(1 + 4μ), halves rounded up (μ in [0, 1])."""
    return int(math.floor(1.0 + 4.0 * min(1.0, max(0.0, mu)) + 0.5))


def model_continuous_rating(mu: float) -> float:
    """The model's expected rating on the 1–5 scale, 1 + 4μ (μ clipped to [0, 1]; ORCA paper, section 4.2)."""
    return 1.0 + 4.0 * min(1.0, max(0.0, mu))


def _sample_variance(scores: Sequence[int]) -> float:
    n = len(scores)
    mean = sum(scores) / n
    return sum((s - mean) ** 2 for s in scores) / (n - 1)


def routing_decide(
    *, mu: float, variance: float, scores: Sequence[int], thresholds: RoutingThresholds, rules: RoutingRules
) -> RoutingChoice:
    """Apply the routing policy (module docstring) to one candidate answer; pure (no database).

    Args:
        mu: predicted μ in [0, 1]; variance: predicted σ² (normalised scale).
        scores: the candidate's valid scores 1–5 in arrival order (null scores excluded).
        thresholds: the quantile cut-offs of the same model's predictions.
        rules: the policy's settings.

    Returns:
        :class:`RoutingChoice`.
    """
    n = len(scores)
    expert = variance >= thresholds.expert_variance
    if n >= rules.observed_min_ratings:
        observed = _sample_variance(scores)
        if observed >= rules.observed_disagreement_variance:
            return RoutingChoice(
                rules.observed_disagreement_target, rules.high_priority, OBSERVED_DISAGREEMENT,
                f"{n} ratings {list(scores)} disagree (variance {observed:.2f} ≥ "
                f"{rules.observed_disagreement_variance:g}); overrides the prediction σ²={variance:.4f}",
                expert,
            )
        return RoutingChoice(
            None, 0, OBSERVED_AGREEMENT,
            f"{n} ratings {list(scores)} agree (variance {observed:.2f} < {rules.observed_disagreement_variance:g}); "
            f"overrides the prediction σ²={variance:.4f}",
            expert,
        )
    if variance >= thresholds.high_variance:
        return RoutingChoice(
            rules.high_target, rules.high_priority, PREDICTED_DISAGREEMENT,
            f"predicted σ²={variance:.4f} in the top {rules.high_quantile:.0%} (≥ {thresholds.high_variance:.4f})",
            expert,
        )
    if n >= 2:
        pair = list(scores[:2])
        if abs(pair[0] - pair[1]) <= rules.agree_tolerance:
            return RoutingChoice(rules.agree_target, 0, CONFIDENT_AGREEING,
                                 f"the first two ratings {pair} agree (|difference| ≤ {rules.agree_tolerance}) and "
                                 f"σ²={variance:.4f} is not in the top {rules.high_quantile:.0%}", expert)
        return RoutingChoice(None, 0, CONFIDENT_DISAGREEING,
                             f"the first two ratings {pair} disagree (|difference| > {rules.agree_tolerance})",
                             expert)
    if (n == 1 and rules.model_vote and variance <= thresholds.low_variance
            and abs(scores[0] - model_continuous_rating(mu)) <= rules.model_vote_tolerance):
        return RoutingChoice(
            1, 0, CONFIDENT_MODEL_AGREES,
            f"the first rating {scores[0]} is within {rules.model_vote_tolerance:g} of the model's "
            f"1 + 4μ = {model_continuous_rating(mu):.2f}, and σ²={variance:.4f} is in the bottom "
            f"{rules.model_vote_quantile:.0%} (≤ {thresholds.low_variance:.4f})", expert)
    return RoutingChoice(None, 0, DEFAULT, f"no rule applies (μ={mu:.3f}, σ²={variance:.4f}, {n} ratings)", expert)


def audit_member(*, random_key: float, share: float) -> bool:
    """True when a candidate answer whose question has this ``random_key`` (uniform in [0, 1), drawn once per
    question and shared by all its answers) is in an audit share of ``share`` (0–1): key < share. Raising the share
    keeps every earlier member (and starts a new design epoch: ``modelling.services.design``)."""
    return random_key < share


def audit_decide(*, rules: RoutingRules, share: float) -> RoutingChoice:
    """An audit-share answer: the default k (never stopped early, never more) and ``rules.audit_priority``."""
    return RoutingChoice(None, rules.audit_priority, AUDIT,
                         f"in the audit share ({share:.0%} of the benchmark's answers, drawn by random key): "
                         "always the default k ratings, whatever the prediction")


def routing_replay(
    *, mu: float, variance: float, arrivals: Sequence[int], thresholds: RoutingThresholds, rules: RoutingRules,
    default_target: int,
) -> list[int]:
    """The ratings a routed candidate answer collects when ``arrivals`` (its scores, in arrival order) come one by
    one: after each arrival the target is re-decided; rating stops when the target is reached or the arrivals
    run out. Returns the prefix of ``arrivals`` that was used (used by ``bench/routing.py``).
    """
    used: list[int] = []
    while len(used) < len(arrivals):
        choice = routing_decide(mu=mu, variance=variance, scores=used, thresholds=thresholds, rules=rules)
        target = choice.target_ratings if choice.target_ratings is not None else default_target
        if len(used) >= target:
            break
        used.append(arrivals[len(used)])
    return used


# --- the leaderboard-precision policy (active statistical inference) -----------------------------------------------
#
# A benchmark switched to this policy (``BenchmarkRouting``) does not route by disagreement: each LALM's candidate
# answers are drawn for rating with probability π ∝ ORCA's σ mixed with a uniform floor
# (``modelling.leaderboard.stats.inclusion_probabilities``; expected share ``budget`` of the LALM's answers), and a
# drawn answer's ratings weigh 1/π in the leaderboard's active estimate, which keeps it unbiased (Zrnic & Candès,
# ICML 2024). The design is fixed: u (a uniform number, the question's: shared by all its answers) and π (the
# answer's) of a candidate are set at its first decision and stored (``modelling.models.ActiveDraw``, written by
# ``modelling.services.design``); later model versions, new answers or a new budget never re-draw it. Drawn answers
# (u < π) get the default k and ``ACTIVE_PRIORITY``; the others get target 0 ("not to be rated") and priority −1.


def active_probabilities(
    *, groups: dict[int, object], variances: dict[int, float], budget: float, floor: float
) -> dict[int, float]:
    """{candidate id: π}: within each group (one LALM on one benchmark) π ∝ σ = √σ² mixed with a uniform floor,
    summing to ``budget`` × the group's size (``modelling.leaderboard.stats.inclusion_probabilities``)."""
    members: dict[object, list[int]] = defaultdict(list)
    for cid, key in groups.items():
        members[key].append(cid)
    out: dict[int, float] = {}
    for ids in members.values():
        ids.sort()
        sigma = [math.sqrt(max(0.0, variances[c])) for c in ids]
        for cid, pi in zip(ids, inclusion_probabilities(sigma, budget=budget * len(ids), floor=floor)):
            out[cid] = float(pi)
    return out


def active_decide(*, pi: float, u: float) -> RoutingChoice:
    """Drawn (u < π): the default k and ``ACTIVE_PRIORITY``; not drawn: target 0 (not to be rated), priority −1."""
    if u < pi:
        return RoutingChoice(None, ACTIVE_PRIORITY, ACTIVE_SELECTED,
                             f"drawn for the leaderboard: u={u:.4f} < π={pi:.4f}; its ratings weigh 1/π = {1 / pi:.2f}",
                             inclusion_probability=pi)
    return RoutingChoice(0, -1, ACTIVE_SKIPPED, f"not drawn: u={u:.4f} ≥ π={pi:.4f}; not to be rated",
                         inclusion_probability=pi)
