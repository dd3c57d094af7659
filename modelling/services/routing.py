"""Routing annotation by ORCA's predicted disagreement, over the store (ORCA paper, sections 4.2 and 6.1).

ORCA predicts, from an item's content alone, the expected correctness μ and the human disagreement σ² of a
candidate answer (normalised scale y = (r − 1)/4). Routing spends human ratings where they are informative by
writing only annotation's own fields, ``CandidateAnswer.target_ratings`` (None = the benchmark's k) and
``CandidateAnswer.priority``, through ``annotation.services.routing_fields.candidate_routing_set``; the workbench
needs no knowledge of the model.

The policy itself (which target and priority for which prediction and scores) is the pure
:mod:`modelling.services.routing_policy`, whose names are re-exported here; this module applies it to the store:
quantile cut-offs over the active model's predictions, the candidates' fields, the :class:`RoutingDecision` log
(written only when a decision changes a candidate's fields, so the log reads "who got more or fewer raters and
why"), the triggers, the per-benchmark leaderboard-precision policy and the reads of the admin page.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F, Max, OuterRef, Subquery
from django.utils import timezone

from annotation.services.target_ratings import target_ratings_expression
from modelling.services.orca_quality import refused_choice, routing_refusals
from modelling.services.routing_policy import (  # noqa: F401  (re-exported: the policy's names callers use)
    ACTIVE_PRIORITY,
    ACTIVE_SELECTED,
    ACTIVE_SKIPPED,
    AUDIT,
    CONFIDENT_AGREEING,
    CONFIDENT_DISAGREEING,
    CONFIDENT_MODEL_AGREES,
    DEFAULT,
    DEFAULT_ACTIVE_FLOOR,
    OBSERVED_AGREEMENT,
    OBSERVED_DISAGREEMENT,
    PREDICTED_DISAGREEMENT,
    ROUTING_OFF,
    RoutingChoice,
    RoutingRules,
    RoutingThresholds,
    active_decide,
    active_probabilities,
    audit_decide,
    audit_member,
    model_continuous_rating,
    model_rating,
    routing_decide,
    routing_replay,
)


def benchmark_routing_set(*, benchmark, policy: str, budget: float = 0.3, floor: float = DEFAULT_ACTIVE_FLOOR,
                          audit_share: float | None = None, user=None):
    """Choose ``benchmark``'s routing policy (``BenchmarkRouting.Policy``), its leaderboard-precision budget and
    floor and its audit share (None: ``ROUTING_AUDIT_SHARE``), and re-evaluate routing; returns the row.

    Budget and floor apply to answers drawn from now on: a drawn answer keeps its π (``ActiveDraw``).
    Raises ``ValidationError`` naming the field for an unknown policy, a budget / floor outside (0, 1] or an audit
    share outside [0, 1].
    """
    from annotation.services.audit import audit_record
    from modelling.models import BenchmarkRouting
    from modelling.services.design import design_epochs_sync

    with transaction.atomic():
        design_epochs_sync(reason="the design before this change", user=user)  # a first epoch records it
        row = BenchmarkRouting.objects.filter(benchmark=benchmark).first() or BenchmarkRouting(benchmark=benchmark)
        old = ({"policy": row.policy, "budget": row.budget, "floor": row.floor, "audit_share": row.audit_share}
               if row.pk else None)
        row.policy, row.budget, row.floor, row.audit_share, row.updated_by = policy, budget, floor, audit_share, user
        row.full_clean()
        row.save()
        audit_record(actor=user, action="routing.benchmark_policy", obj=row, old=old,
                     new={"policy": policy, "budget": budget, "floor": floor, "audit_share": audit_share})
        design_epochs_sync(reason=f"{benchmark}: policy {policy}, audit share "
                                  f"{'the default' if audit_share is None else f'{audit_share:g}'}", user=user)
        routing_refresh(force=True)
    return row


def audit_shares() -> dict[int, float]:
    """{benchmark pk: its audit share} for every benchmark (its own, else ``ROUTING_AUDIT_SHARE``)."""
    from django.conf import settings

    from annotation.models import Benchmark
    from modelling.models import BenchmarkRouting

    own = dict(BenchmarkRouting.objects.filter(audit_share__isnull=False).values_list("benchmark_id", "audit_share"))
    return {pk: own.get(pk, settings.ROUTING_AUDIT_SHARE) for pk in Benchmark.objects.values_list("pk", flat=True)}


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
    shares = audit_shares()
    with transaction.atomic():
        current = {
            c.pk: c for c in CandidateAnswer.objects.select_for_update(of=("self",)).filter(pk__in=ids)
            .select_related("question_version__question").only(
                "pk", "target_ratings", "priority", "question_version__question__random_key",
                "question_version__question__benchmark_id")
        }
        bench_of = {pk: c.question_version.question.benchmark_id for pk, c in current.items()}
        # ORCA only where it helps (modelling.services.orca_quality): benchmarks below the quality thresholds keep
        # the defaults (no routing) or lose the model's vote as a rater.
        refused, no_vote = routing_refusals()
        no_vote_rules = dataclasses.replace(rules, model_vote=False)
        routed = [cid for cid in ids if bench_of.get(cid) not in refused]
        undo, unflag = _refused_undo(set(ids) - set(routed))
        design = _active_design(predictions=predictions, ids=routed, active=active)
        scores = _scores_in_arrival_order(ids)
        groups: dict[tuple[int | None, int], list[int]] = defaultdict(list)
        log = []
        for cid in ids:
            candidate = current.get(cid)
            if candidate is None or (bench_of[cid] in refused and cid not in undo):
                continue
            mu, variance = predictions[cid]
            seen = scores.get(cid, [])
            share = shares.get(bench_of[cid], 0.0)
            if bench_of[cid] in refused:
                choice = refused_choice(refused[bench_of[cid]])
            elif cid in design:
                choice = active_decide(pi=design[cid].pi, u=design[cid].u)
            elif audit_member(random_key=candidate.question_version.question.random_key, share=share):
                choice = audit_decide(rules=rules, share=share)
            else:
                choice = routing_decide(mu=mu, variance=variance, scores=seen, thresholds=thresholds,
                                        rules=no_vote_rules if bench_of[cid] in no_vote else rules)
            result.evaluated += 1
            if (candidate.target_ratings, candidate.priority) == (choice.target_ratings, choice.priority) and (
                    cid not in unflag):
                continue
            groups[(choice.target_ratings, choice.priority)].append(cid)
            log.append(_decision(candidate, choice, active=active, mu=mu, variance=variance, n_ratings=len(seen)))
            result.by_reason[choice.reason] = result.by_reason.get(choice.reason, 0) + 1
        for (target, priority), group in groups.items():
            candidate_routing_set(candidate_ids=group, target_ratings=target, priority=priority)
        RoutingDecision.objects.bulk_create(log, batch_size=1000)
        result.changed = len(log)
        _mark_expert(active=active, predictions=predictions, thresholds=thresholds, ids=routed)
    return result


def _decision(candidate, choice: RoutingChoice, *, active, mu: float, variance: float, n_ratings: int):
    """The ``RoutingDecision`` row (unsaved) of ``choice`` for ``candidate``, its old fields kept beside the new."""
    from modelling.models import RoutingDecision

    return RoutingDecision(
        candidate_id=candidate.pk, model_version=active, reason=choice.reason, detail=choice.detail,
        old_target_ratings=candidate.target_ratings, target_ratings=choice.target_ratings,
        old_priority=candidate.priority, priority=choice.priority, mu=mu, variance=variance,
        n_ratings=n_ratings, expert=choice.expert, inclusion_probability=choice.inclusion_probability,
    )


def _refused_undo(ids: set[int]) -> tuple[set[int], set[int]]:
    """Of candidates ``ids`` on benchmarks where routing by ORCA is refused: (those routing changed, which go back
    to the defaults; those whose latest decision offered them to expert review, which leave it)."""
    from annotation.models import CandidateAnswer
    from modelling.models import RoutingDecision

    undo = set(RoutingDecision.objects.filter(candidate_id__in=ids).values_list("candidate_id", flat=True))
    latest_expert = RoutingDecision.objects.filter(candidate=OuterRef("pk")).order_by("-id").values("expert")[:1]
    unflag = set(CandidateAnswer.objects.filter(pk__in=undo).annotate(e=Subquery(latest_expert)).filter(e=True)
                 .values_list("pk", flat=True))
    return undo, unflag


def _active_design(*, predictions: dict[int, tuple[float, float]], ids: Sequence[int], active) -> dict:
    """{candidate id: its ``ActiveDraw``} for the candidates among ``ids`` on a benchmark under the
    leaderboard-precision policy now; a candidate without a draw gets one now (its first decision), with its
    question's u and π from the current predictions (``modelling.services.design.active_draws_ensure``); an
    existing draw is never changed. Call inside the evaluation's transaction."""
    from modelling.services.design import active_benchmarks, active_draws_ensure

    return active_draws_ensure(candidate_ids=ids, benchmarks=active_benchmarks(), predictions=predictions,
                               active=active)


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
    from modelling.services.design import design_epochs_sync

    with transaction.atomic():
        policy = RoutingPolicy.objects.select_for_update().filter(pk=routing_policy_load().pk).get()
        design_epochs_sync(reason="the design before this change", user=user)  # a first epoch records it
        policy.enabled = enabled
        policy.updated_by = user
        policy.save(update_fields=["enabled", "updated_by", "updated_at"])
        design_epochs_sync(reason=f"routing switched {'on' if enabled else 'off'}", user=user)
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
    from modelling.services.design import design_epochs_sync
    from modelling.services.predictions import predictions_pending_for_active

    design_epochs_sync(reason="the design changed outside the switches (the ROUTING_AUDIT_SHARE setting)")
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
    default_k = target_ratings_expression(own=False)
    routed = current.filter(target_ratings__isnull=False).annotate(k=default_k)
    latest = RoutingDecision.objects.filter(candidate=OuterRef("pk")).order_by("-id").values("expert")[:1]
    return {
        "more": routed.filter(target_ratings__gt=F("k")).count(),
        "fewer": routed.filter(target_ratings__lt=F("k")).count(),
        "priority": current.filter(priority__gt=0).count(),
        "expert": current.annotate(expert=Subquery(latest)).filter(expert=True).count(),
    }
