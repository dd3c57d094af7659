"""Routing annotation by ORCA's predicted disagreement (ORCA paper, sections 4.2 and 6.1; issue #9).

ORCA predicts, from an item's content alone, the expected correctness μ and the human disagreement σ² of a
candidate answer (normalised scale y = (r − 1)/4). Routing spends human ratings where they are informative by
writing only annotation's own fields, ``CandidateAnswer.target_ratings`` (None = the benchmark's k) and
``CandidateAnswer.priority``, through ``annotation.services.routing_fields.candidate_routing_set``; the workbench
needs no knowledge of the model.

The policy (:func:`routing_decide`, pure; thresholds are settings, defaults in brackets). For one candidate answer
with prediction (μ, σ²) and its valid scores 1–5 in arrival order (n of them), the first rule that applies wins:

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

Why these defaults (``bench/routing.py``; ORCA seed-108 ratings). They were chosen on the *fit* half only, from
two-fold cross-fitted predictions of the model recipe the bench trains, as the largest saving whose Krippendorff's
alpha and ρ_to_full stay within 0.008 of fixed k = 3 (a 0.002 margin inside the issue's 0.01): early stops on every
candidate outside the top σ² quantile (not only on "confident" ones) with a 1-point tolerance save most;
spending 4–5 ratings on observed disagreement cost ratings and lowered alpha (more of the disagreement gets
observed) for a ρ gain under 0.001, so it stays at k by default;
the model vote adds little. Stopping at one human rating on candidates the model calls easy removes agreeing
units from alpha (items with one rating are not pairable): on the replay, stopping 62 unanimous candidates at one
rating lowers alpha by 0.011, so the vote is held to the model's most certain predictions. Without stopping any
candidate at one rating no policy saves more than 19.1 % there (every candidate at <= 2 ratings).

Questions with a candidate answer whose σ² is in the top ``ROUTING_EXPERT_QUANTILE`` [0.05] are "predicted
ambiguous"; refinement offers them to the expert review queue (``refinement.services.routing_offer``, which
reads :class:`~modelling.models.RoutingDecision` rows through the ORM: modelling never imports refinement).

Quantile cut-offs are taken over the active model's predictions of every candidate answer on its question's
current version (no ratings are used to set them). Decisions are logged (:class:`RoutingDecision`) only when they
change a candidate's fields, so the log reads "who got more or fewer raters and why".
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

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

    @classmethod
    def from_settings(cls) -> RoutingRules:
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
# ICML 2024). The draw is u < π with u a uniform number fixed per (candidate answer, model version)
# (:func:`active_draw`), so re-evaluating does not re-draw; π itself can move when answers are added, and every
# change of π is logged with the decision. Drawn answers get the default k and ``ACTIVE_PRIORITY``; the others
# get target 0 ("not to be rated") and priority −1.


def active_draw(*, candidate_id: int, model_version_id: int) -> float:
    """The fixed uniform number u ∈ [0, 1) of one candidate answer under one model version (seeded by both)."""
    import random

    return random.Random(f"leaderboard-precision:{model_version_id}:{candidate_id}").random()


def active_probabilities(
    *, groups: dict[int, object], variances: dict[int, float], budget: float, floor: float
) -> dict[int, float]:
    """{candidate id: π}: within each group (one LALM on one benchmark) π ∝ σ = √σ² mixed with a uniform floor,
    summing to ``budget`` × the group's size (``modelling.leaderboard.stats.inclusion_probabilities``)."""
    from modelling.leaderboard.stats import inclusion_probabilities

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


def benchmark_routing_set(*, benchmark, policy: str, budget: float = 0.3, floor: float = 0.2, user=None):
    """Choose ``benchmark``'s routing policy (``BenchmarkRouting.Policy``) and re-evaluate routing; returns the row.

    Raises ``ValidationError`` naming the field for an unknown policy or a budget / floor outside (0, 1].
    """
    from annotation.services.audit import audit_record
    from modelling.models import BenchmarkRouting

    with transaction.atomic():
        row = BenchmarkRouting.objects.filter(benchmark=benchmark).first() or BenchmarkRouting(benchmark=benchmark)
        old = {"policy": row.policy, "budget": row.budget, "floor": row.floor} if row.pk else None
        row.policy, row.budget, row.floor, row.updated_by = policy, budget, floor, user
        row.full_clean()
        row.save()
        audit_record(actor=user, action="routing.benchmark_policy", obj=row, old=old,
                     new={"policy": policy, "budget": budget, "floor": floor})
        routing_refresh(force=True)
    return row


def _active_benchmarks() -> dict[int, tuple[float, float]]:
    from modelling.models import BenchmarkRouting

    return {b: (budget, floor) for b, budget, floor in BenchmarkRouting.objects.filter(
        policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION).values_list("benchmark_id", "budget", "floor")}


# --- the platform: evaluating the policy over the store -----------------------------------------------------------


@dataclass
class RoutingEvaluation:
    """What one evaluation did.

    Attributes:
        evaluated: candidate answers with a prediction that the policy looked at.
        changed: candidates whose target_ratings/priority changed (one ``RoutingDecision`` each).
        by_reason: changed candidates per reason.
        thresholds: the quantile cut-offs used (None when there was nothing to evaluate).
    """

    evaluated: int = 0
    changed: int = 0
    by_reason: dict[str, int] = field(default_factory=dict)
    thresholds: RoutingThresholds | None = None


def routing_policy_load():
    """The routing policy row (created switched off on first use)."""
    from modelling.models import RoutingPolicy

    policy, _ = RoutingPolicy.objects.get_or_create(pk=1)
    return policy


def _current_predictions(model_version) -> dict[int, tuple[float, float]]:
    """{candidate id: (μ, σ²)} of ``model_version`` for candidate answers on their question's current version."""
    from modelling.models import Prediction

    rows = Prediction.objects.filter(
        model_version=model_version,
        candidate__question_version=F("candidate__question_version__question__current_version"),
    ).values_list("candidate_id", "mu", "variance")
    return {cid: (mu, var) for cid, mu, var in rows.iterator(chunk_size=5000)}


def _scores_in_arrival_order(candidate_ids: Sequence[int]) -> dict[int, list[int]]:
    from annotation.selectors import rating_counting_queryset

    scores: dict[int, list[int]] = defaultdict(list)
    for start in range(0, len(candidate_ids), 5000):
        rows = (
            rating_counting_queryset().filter(candidate_id__in=candidate_ids[start:start + 5000],
                                              score__isnull=False)
            .order_by("created_at", "id")
            .values_list("candidate_id", "score")
        )
        for cid, score in rows:
            scores[cid].append(score)
    return scores


def routing_evaluate(*, candidate_ids: Iterable[int] | None = None, rules: RoutingRules | None = None,
                     ) -> RoutingEvaluation:
    """Apply the policy to candidate answers with a prediction of the active model and write what changed.

    Args:
        candidate_ids: the candidates to re-decide (None: every current candidate the active model scored).
            Quantile cut-offs are always taken over all the active model's current predictions.
        rules: thresholds (default: the ``ROUTING_*`` settings).

    Changed candidates get their fields written through
    ``annotation.services.routing_fields.candidate_routing_set`` and one ``RoutingDecision`` each, in one
    transaction. Does nothing (empty result) when routing is off or no model is active. Idempotent.
    """
    from annotation.models import CandidateAnswer
    from annotation.services.routing_fields import candidate_routing_set
    from modelling.models import RoutingDecision
    from modelling.selectors import model_version_active

    rules = rules or RoutingRules.from_settings()
    result = RoutingEvaluation()
    policy = routing_policy_load()
    active = model_version_active()
    if not policy.enabled or active is None:
        return result
    predictions = _current_predictions(active)
    if not predictions:
        return result
    thresholds = RoutingThresholds.from_variances([v for _, v in predictions.values()], rules)
    result.thresholds = thresholds
    ids = sorted(predictions if candidate_ids is None else set(candidate_ids) & predictions.keys())
    active_pi = _active_inclusion(predictions)
    latest_pi: dict[int, float | None] = {}  # the latest logged π per candidate (later rows overwrite)
    if active_pi:
        latest_pi = dict(RoutingDecision.objects.filter(candidate_id__in=list(active_pi)).order_by("id")
                         .values_list("candidate_id", "inclusion_probability"))
    with transaction.atomic():
        current = {
            c.pk: c for c in CandidateAnswer.objects.select_for_update().filter(pk__in=ids)
            .only("pk", "target_ratings", "priority")
        }
        scores = _scores_in_arrival_order(ids)
        groups: dict[tuple[int | None, int], list[int]] = defaultdict(list)
        log = []
        for cid in ids:
            candidate = current.get(cid)
            if candidate is None:
                continue
            mu, variance = predictions[cid]
            seen = scores.get(cid, [])
            if cid in active_pi:
                choice = active_decide(pi=active_pi[cid], u=active_draw(candidate_id=cid, model_version_id=active.pk))
            else:
                choice = routing_decide(mu=mu, variance=variance, scores=seen, thresholds=thresholds, rules=rules)
            result.evaluated += 1
            same_pi = choice.inclusion_probability is None or (
                latest_pi.get(cid) is not None and abs(latest_pi[cid] - choice.inclusion_probability) < 1e-9)
            if (candidate.target_ratings, candidate.priority) == (choice.target_ratings, choice.priority) and same_pi:
                continue
            groups[(choice.target_ratings, choice.priority)].append(cid)
            log.append(RoutingDecision(
                candidate_id=cid, model_version=active, reason=choice.reason, detail=choice.detail,
                old_target_ratings=candidate.target_ratings, target_ratings=choice.target_ratings,
                old_priority=candidate.priority, priority=choice.priority, mu=mu, variance=variance,
                n_ratings=len(seen), expert=choice.expert, inclusion_probability=choice.inclusion_probability,
            ))
            result.by_reason[choice.reason] = result.by_reason.get(choice.reason, 0) + 1
        for (target, priority), group in groups.items():
            candidate_routing_set(candidate_ids=group, target_ratings=target, priority=priority)
        RoutingDecision.objects.bulk_create(log, batch_size=1000)
        result.changed = len(log)
        _mark_expert(active=active, predictions=predictions, thresholds=thresholds, ids=ids)
    return result


def _active_inclusion(predictions: dict[int, tuple[float, float]]) -> dict[int, float]:
    """π of every predicted candidate answer on a benchmark under the leaderboard-precision policy (by LALM)."""
    from annotation.models import CandidateAnswer

    benchmarks = _active_benchmarks()
    if not benchmarks:
        return {}
    rows = CandidateAnswer.objects.filter(
        pk__in=list(predictions), question_version__question__benchmark_id__in=list(benchmarks)
    ).values_list("pk", "question_version__question__benchmark_id", "lalm_id")
    by_benchmark: dict[int, dict[int, object]] = defaultdict(dict)
    for cid, bench, lalm in rows:
        by_benchmark[bench][cid] = lalm
    out: dict[int, float] = {}
    for bench, groups in by_benchmark.items():
        budget, floor = benchmarks[bench]
        out.update(active_probabilities(groups=groups, variances={c: predictions[c][1] for c in groups},
                                        budget=budget, floor=floor))
    return out


def _mark_expert(*, active, predictions, thresholds: RoutingThresholds, ids: Sequence[int]) -> None:
    """Log predicted-ambiguous candidates whose latest decision does not say so yet (reason kept, fields as they
    are), so refinement can read ``expert=True`` from the latest rows."""
    from annotation.models import CandidateAnswer
    from modelling.models import RoutingDecision

    ambiguous = [cid for cid in ids if predictions[cid][1] >= thresholds.expert_variance]
    if not ambiguous:
        return
    flagged = set(
        RoutingDecision.objects.filter(candidate_id__in=ambiguous, expert=True, model_version=active)
        .values_list("candidate_id", flat=True)
    )
    rows = []
    for c in CandidateAnswer.objects.filter(pk__in=[cid for cid in ambiguous if cid not in flagged]):
        mu, variance = predictions[c.pk]
        rows.append(RoutingDecision(
            candidate=c, model_version=active, reason=RoutingDecision.Reason.PREDICTED_DISAGREEMENT,
            detail=f"predicted ambiguous: σ²={variance:.4f} ≥ {thresholds.expert_variance:.4f} (expert quantile); "
                   "offered to expert review",
            old_target_ratings=c.target_ratings, target_ratings=c.target_ratings, old_priority=c.priority,
            priority=c.priority, mu=mu, variance=variance, expert=True,
        ))
    RoutingDecision.objects.bulk_create(rows, batch_size=1000)


def routing_policy_set(*, enabled: bool, user=None) -> RoutingEvaluation:
    """Switch routing on (then evaluate every scored candidate) or off (then restore the default target and
    priority of every candidate routing changed, logging ``routing_off`` decisions). Returns what was changed."""
    from annotation.models import CandidateAnswer
    from annotation.services.routing_fields import candidate_routing_set
    from modelling.models import RoutingDecision, RoutingPolicy

    with transaction.atomic():
        policy = RoutingPolicy.objects.select_for_update().filter(pk=routing_policy_load().pk).get()
        policy.enabled = enabled
        policy.updated_by = user
        policy.save(update_fields=["enabled", "updated_by", "updated_at"])
        if enabled:
            return routing_refresh(force=True) or RoutingEvaluation()
        routed = set(RoutingDecision.objects.values_list("candidate_id", flat=True))
        changed = list(
            CandidateAnswer.objects.filter(pk__in=routed).exclude(target_ratings__isnull=True, priority=0)
            .only("pk", "target_ratings", "priority")
        )
        candidate_routing_set(candidate_ids=[c.pk for c in changed], target_ratings=None, priority=0)
        RoutingDecision.objects.bulk_create([
            RoutingDecision(
                candidate_id=c.pk, reason=RoutingDecision.Reason.ROUTING_OFF, detail="routing switched off",
                old_target_ratings=c.target_ratings, target_ratings=None, old_priority=c.priority, priority=0,
            )
            for c in changed
        ], batch_size=1000)
        policy.model_version = None
        policy.n_predictions = 0
        policy.save(update_fields=["model_version", "n_predictions"])
        return RoutingEvaluation(changed=len(changed), by_reason={ROUTING_OFF: len(changed)} if changed else {})


def routing_refresh(*, force: bool = False) -> RoutingEvaluation | None:
    """Re-evaluate what needs it (the beat task and ``routing_policy_set`` call this).

    * A new active model version, or new predictions of it (new candidate answers scored), or ``force``:
      every scored candidate — but only once the active model has scored every current candidate answer
      (activation scores in a batch job; thresholds over half the predictions would be wrong).
    * Otherwise: the candidates with ratings newer than the policy's watermark (new ratings, observed
      disagreement).

    Returns None when routing is off, no model is active, or its scoring is still pending.
    """
    from annotation.models import Rating
    from modelling.models import Prediction, RoutingPolicy
    from modelling.selectors import model_version_active
    from modelling.services.predictions import predictions_pending_for_active

    policy = routing_policy_load()
    active = model_version_active()
    if not policy.enabled or active is None or predictions_pending_for_active() is not None:
        return None
    watermark = Rating.objects.aggregate(m=Max("id"))["m"] or 0
    n_predictions = Prediction.objects.filter(model_version=active).count()
    full = force or policy.model_version_id != active.pk or policy.n_predictions != n_predictions
    if full:
        result = routing_evaluate()
    else:
        new = set(Rating.objects.filter(id__gt=policy.rating_watermark).values_list("candidate_id", flat=True))
        result = routing_evaluate(candidate_ids=new) if new else RoutingEvaluation()
    RoutingPolicy.objects.filter(pk=policy.pk).update(
        model_version=active, n_predictions=n_predictions, rating_watermark=watermark, evaluated_at=timezone.now()
    )
    return result


# --- reads for the admin page -------------------------------------------------------------------------------------


def routing_decision_list(*, reason: str | None = None):
    """Routing decisions, newest first, with candidate, question, LALM and model version loaded; optionally of one
    reason."""
    from modelling.models import RoutingDecision

    qs = RoutingDecision.objects.select_related(
        "candidate__lalm", "candidate__question_version__question__benchmark", "model_version"
    ).order_by("-id")
    return qs.filter(reason=reason) if reason else qs


def routing_summary() -> dict[str, int]:
    """Current candidate answers by routing state: ``more`` (target above its benchmark/settings default),
    ``fewer`` (below), ``priority`` (priority > 0) and ``expert`` (latest decision offers them to expert review)."""
    from annotation.models import CandidateAnswer
    from modelling.models import RoutingDecision

    current = CandidateAnswer.objects.filter(question_version=F("question_version__question__current_version"))
    default_k = Coalesce(F("question_version__question__benchmark__target_ratings"),
                         Value(settings.ANNOTATION_TARGET_RATINGS))
    routed = current.filter(target_ratings__isnull=False).annotate(k=default_k)
    latest = RoutingDecision.objects.filter(candidate=OuterRef("pk")).order_by("-id").values("expert")[:1]
    return {
        "more": routed.filter(target_ratings__gt=F("k")).count(),
        "fewer": routed.filter(target_ratings__lt=F("k")).count(),
        "priority": current.filter(priority__gt=0).count(),
        "expert": current.annotate(expert=Subquery(latest)).filter(expert=True).count(),
    }
