"""Quality control in the work queue: pausing, study scope and quota, qualification gating, and the insertion of
gold items and attention checks at each benchmark's rates.

``assignment_next_for_annotator`` calls :func:`quality_gate` right after it locked the annotator's row, so a
pause (which takes the same lock, :func:`annotation.crowd.annotators.annotator_status_set`) stops new
assignments at once, also against requests in flight. Quality items are never offered by the regular queue
(its SQL excludes candidates with a ``QualityItem``); they are handed out only here.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import F, Q

from annotation.access import STAFF, has_role
from annotation.crowd.models import (
    AnnotatorQuality,
    BenchmarkQuality,
    QualificationAttempt,
    QualityItem,
    QualityPolicy,
    Study,
    StudyParticipant,
)
from annotation.models import Assignment, Benchmark, Question
from annotation.teams.scope import works_on_q

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


def insertion_kind(*, gold_rate: float, attention_rate: float, rng: random.Random = _rng) -> str | None:
    """Draw what the next item is: ``"gold"`` with probability ``gold_rate``, ``"attention"`` with probability
    ``attention_rate``, else None (a regular item). Rates are probabilities in [0, 1] with sum <= 1."""
    u = rng.random()
    if u < gold_rate:
        return QualityItem.Kind.GOLD
    if u < gold_rate + attention_rate:
        return QualityItem.Kind.ATTENTION
    return None


def _qualification_attempt(annotator) -> tuple[QualificationAttempt | None, str]:
    """The annotator's running attempt, starting a new one when allowed; (None, why) when qualification is over
    or impossible (failed every attempt, or too few unused qualification items for a new attempt)."""
    from annotation.crowd.items import quality_policy

    attempts = list(QualificationAttempt.objects.filter(annotator=annotator).order_by("number"))
    if attempts and attempts[-1].passed is None:
        return attempts[-1], ""
    policy = quality_policy()
    if len(attempts) >= policy.qualification_attempts:
        last = attempts[-1]
        return None, (f"You did not reach the qualification's pass mark ({last.passed_items} of {last.total} items "
                      "matched the experts). Thank you for your time.")
    unused = _eligible_items(annotator=annotator, qualification=True, kind=None, benchmark=None).count()
    if unused < policy.qualification_items:
        return None, "Qualification is not available yet; please come back later."
    attempt = QualificationAttempt.objects.create(annotator=annotator, number=len(attempts) + 1,
                                                  total=policy.qualification_items)
    return attempt, ""


@cache
def _gate_sql() -> str:
    """One statement reading everything :func:`quality_gate` needs (it runs on every "next item" request, where
    building four ORM queries cost more than running them). Parameters: the annotator's id twice, the requested
    benchmark id (or NULL) four times, the annotator's id. Columns: status, qualified, participant's study id, study
    benchmark id, study enabled, quota, completed, qualification required, gold rate, attention rate."""
    q = connection.ops.quote_name
    aq, sp, st = (q(m._meta.db_table) for m in (AnnotatorQuality, StudyParticipant, Study))
    pol, bq = q(QualityPolicy._meta.db_table), q(BenchmarkQuality._meta.db_table)
    scope = "COALESCE(p.benchmark_id, %s)"
    return (
        f"SELECT (SELECT status FROM {aq} WHERE annotator_id = %s), "
        f"(SELECT CASE WHEN qualified_at IS NULL THEN 0 ELSE 1 END FROM {aq} WHERE annotator_id = %s), "
        "p.study_id, p.benchmark_id, p.is_enabled, p.quota, p.completed, "
        f"(SELECT qualification_required FROM {pol} WHERE id = 1), "
        f"(SELECT MAX(gold_rate) FROM {bq} r WHERE {scope} IS NULL OR r.benchmark_id = {scope}), "
        f"(SELECT MAX(attention_rate) FROM {bq} r WHERE {scope} IS NULL OR r.benchmark_id = {scope}) "
        "FROM (SELECT 1 AS one) o LEFT JOIN ("
        f"SELECT sp.study_id, st.benchmark_id, st.is_enabled, st.quota, "
        f"CASE WHEN sp.completed_at IS NULL THEN 0 ELSE 1 END AS completed FROM {sp} sp "
        f"JOIN {st} st ON st.id = sp.study_id WHERE sp.user_id = %s ORDER BY sp.joined_at DESC LIMIT 1"
        ") p ON 1 = 1"
    )


def quality_gate(*, annotator, benchmark: Benchmark | None) -> QueueGate:
    """Decide what ``annotator`` may be given now (see :class:`QueueGate`). Call with the annotator's row locked
    (``queue_lease_transaction_begin``) so that the status read here cannot change before the commit.

    One statement (:func:`_gate_sql`); a study participant's items are counted, and qualification looked up,
    only when they apply."""
    gate = QueueGate(benchmark=benchmark)
    requested = benchmark.pk if benchmark is not None else None
    with connection.cursor() as cursor:
        cursor.execute(_gate_sql(), [annotator.pk, annotator.pk, requested, requested, requested, requested,
                                     annotator.pk])
        (status, qualified, study_id, study_benchmark_id, enabled, quota, completed, required, gold,
         attention) = cursor.fetchone()
    if status == AnnotatorQuality.Status.PAUSED:
        gate.closed, gate.why = True, "Your account is paused: an admin will look at your ratings before you continue."
        return gate
    if study_id is not None:
        if benchmark is None or benchmark.pk != study_benchmark_id:
            gate.benchmark = Benchmark.objects.get(pk=study_benchmark_id)
        if not enabled:
            gate.closed, gate.why = True, "This study is closed."
            return gate
        from annotation.crowd.studies import study_items_done_for

        if completed or study_items_done_for(user_id=annotator.pk, benchmark_id=study_benchmark_id) >= quota:
            gate.closed, gate.why = True, "You have completed this study."
            return gate
    if required and not qualified and not has_role(annotator, *STAFF):
        # Experts and admins write the checks; they are not screened by them.
        attempt, why = _qualification_attempt(annotator)
        if attempt is None:
            gate.closed, gate.why = True, why
        else:
            gate.qualifying = True
        return gate
    gate.gold_rate, gate.attention_rate = gold or 0.0, attention or 0.0
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
    else:
        # Teams: a gold item or attention check belongs to its benchmark and goes only to who works on it
        # (qualification items are the platform's entry test, for everyone).
        items = items.filter(works_on_q(user=annotator, path="candidate__question_version__question__benchmark"))
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
