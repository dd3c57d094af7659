"""Quality control in the work queue: pausing, study scope and quota, qualification gating, and the insertion of
gold items and attention checks at each benchmark's rates.

``assignment_next_for_annotator`` calls :func:`quality_gate` right after it locked the annotator's row, so a
pause (which takes the same lock, :func:`annotation.quality.annotators.annotator_status_set`) stops new
assignments at once, also against requests in flight. Quality items are never offered by the regular queue
(its SQL excludes candidates with a ``QualityItem``); they are handed out only here.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Max, Q

from annotation.models import Assignment, Benchmark, Question
from annotation.quality.models import (
    AnnotatorQuality, BenchmarkQuality, QualificationAttempt, QualityItem, StudyParticipant,
)

_rng = random.Random()


@dataclass
class QueueGate:
    """What the quality rules allow ``annotator`` now.

    Attributes:
        closed: no item at all (paused, quota reached, qualification failed or impossible); ``why`` says which.
        benchmark: the benchmark to serve (a study participant's study benchmark replaces the request's).
        qualifying: only qualification items (the annotator has a running qualification attempt).
        gold_rate, attention_rate: insertion probabilities for the next regular item (0–1).
    """

    closed: bool = False
    why: str = ""
    benchmark: Benchmark | None = None
    qualifying: bool = False
    gold_rate: float = 0.0
    attention_rate: float = 0.0
    participant: StudyParticipant | None = field(default=None, repr=False)


def insertion_kind(*, gold_rate: float, attention_rate: float, rng: random.Random = _rng) -> str | None:
    """Draw what the next item is: ``"gold"`` with probability ``gold_rate``, ``"attention"`` with probability
    ``attention_rate``, else None (a regular item). Rates are probabilities in [0, 1] with sum <= 1."""
    u = rng.random()
    if u < gold_rate:
        return QualityItem.Kind.GOLD
    if u < gold_rate + attention_rate:
        return QualityItem.Kind.ATTENTION
    return None


def study_participation_for(*, user) -> StudyParticipant | None:
    """The user's latest study participation (with its study), or None for an ordinary annotator."""
    return (StudyParticipant.objects.select_related("study", "study__benchmark").filter(user=user)
            .order_by("-joined_at").first())


def _needs_qualification(annotator, status: AnnotatorQuality | None) -> bool:
    from annotation.quality.items import quality_policy

    if annotator.is_staff or annotator.is_superuser:
        return False  # experts and admins write the checks; they are not screened by them
    if status is not None and status.qualified_at is not None:
        return False
    return quality_policy().qualification_required


def _qualification_attempt(annotator) -> tuple[QualificationAttempt | None, str]:
    """The annotator's running attempt, starting a new one when allowed; (None, why) when qualification is over
    or impossible (failed every attempt, or too few unused qualification items for a new attempt)."""
    from annotation.quality.items import quality_policy

    attempts = list(QualificationAttempt.objects.filter(annotator=annotator).order_by("number"))
    if attempts and attempts[-1].passed is None:
        return attempts[-1], ""
    policy = quality_policy()
    if len(attempts) >= policy.qualification_attempts:
        return None, "You did not pass the qualification; thank you for your time."
    unused = _eligible_items(annotator=annotator, qualification=True, kind=None, benchmark=None).count()
    if unused < policy.qualification_items:
        return None, "Qualification is not available yet; please come back later."
    attempt = QualificationAttempt.objects.create(annotator=annotator, number=len(attempts) + 1,
                                                  total=policy.qualification_items)
    return attempt, ""


def quality_gate(*, annotator, benchmark: Benchmark | None) -> QueueGate:
    """Decide what ``annotator`` may be given now (see :class:`QueueGate`). Call with the annotator's row locked
    (``queue_lease_transaction_begin``) so that the status read here cannot change before the commit."""
    gate = QueueGate(benchmark=benchmark)
    status = AnnotatorQuality.objects.filter(annotator=annotator).first()
    if status is not None and status.status == AnnotatorQuality.Status.PAUSED:
        gate.closed, gate.why = True, "Your account is paused; an admin will look at your ratings."
        return gate
    participant = study_participation_for(user=annotator)
    if participant is not None:
        study = participant.study
        gate.participant, gate.benchmark = participant, study.benchmark
        if not study.is_enabled:
            gate.closed, gate.why = True, "This study is closed."
            return gate
        from annotation.quality.studies import study_items_done

        if participant.completed_at is not None or study_items_done(participant=participant) >= study.quota:
            gate.closed, gate.why = True, "You have completed this study."
            return gate
    if _needs_qualification(annotator, status):
        attempt, why = _qualification_attempt(annotator)
        if attempt is None:
            gate.closed, gate.why = True, why
        else:
            gate.qualifying = True
        return gate
    rates = BenchmarkQuality.objects.all()
    if gate.benchmark is not None:
        rates = rates.filter(benchmark=gate.benchmark)
    found = rates.aggregate(gold=Max("gold_rate"), attention=Max("attention_rate"))
    gate.gold_rate, gate.attention_rate = found["gold"] or 0.0, found["attention"] or 0.0
    return gate


def _eligible_items(*, annotator, qualification: bool, kind: str | None, benchmark: Benchmark | None):
    """Active quality items ``annotator`` may be given: current version of an active question, neither rated nor
    skipped nor held by them (of ``kind`` and ``benchmark`` when given; qualification items only if asked)."""
    items = QualityItem.objects.filter(
        is_active=True,
        candidate__question_version__question__current_version=F("candidate__question_version"),
        candidate__question_version__question__status=Question.Status.ACTIVE,
    ).exclude(candidate__ratings__annotator=annotator).exclude(
        Q(candidate__assignments__annotator=annotator)
        & Q(candidate__assignments__status__in=[Assignment.Status.SKIPPED, Assignment.Status.OPEN])
    )
    if qualification:
        items = items.filter(in_qualification=True)
    if kind is not None:
        items = items.filter(kind=kind)
    if benchmark is not None:
        items = items.filter(candidate__question_version__question__benchmark=benchmark)
    return items


def quality_assignment_take(*, annotator, now: datetime, gate: QueueGate, rng: random.Random = _rng):
    """A new assignment on a quality item for ``annotator`` (loaded for the rating page), or None.

    While qualifying: the next unused qualification item. Otherwise a gold item or attention check with the
    gate's probabilities (None when the draw says a regular item, or no item of the drawn kind is left).
    """
    from annotation.services import queue_sql

    if gate.qualifying:
        items = _eligible_items(annotator=annotator, qualification=True, kind=None, benchmark=None)
    else:
        kind = insertion_kind(gold_rate=gate.gold_rate, attention_rate=gate.attention_rate, rng=rng)
        if kind is None:
            return None
        items = _eligible_items(annotator=annotator, qualification=False, kind=kind, benchmark=gate.benchmark)
    candidate_ids = list(items.values_list("candidate_id", flat=True)[:200])
    if not candidate_ids:
        return None
    expires_at = now + timedelta(minutes=settings.ANNOTATION_ASSIGNMENT_MINUTES)
    return queue_sql.queue_assignment_create(candidate_id=rng.choice(candidate_ids), annotator_id=annotator.pk,
                                             now=now, expires_at=expires_at)
