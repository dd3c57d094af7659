"""Stage 2 work queue: which candidate answer an annotator rates next (ORCA paper, section 3.2).

Each candidate answer wants ``k`` ratings from distinct annotators (``CandidateAnswer.target_ratings``, else
``Benchmark.target_ratings``, else ``settings.ANNOTATION_TARGET_RATINGS``). An open, unexpired ``Assignment``
holds one of those ``k`` slots for ``settings.ANNOTATION_ASSIGNMENT_MINUTES`` minutes, so at every moment

    valid ratings + open unexpired assignments of other annotators <= k.

Every writer that takes a slot (this module, ``rating_submit``) first locks the candidate's row, so the counts it
re-reads after taking the lock are exact. On PostgreSQL, annotators asking at the same time skip rows locked by
others (``SKIP LOCKED``) instead of queueing behind them. SQLite has no row locks; it runs one write transaction
at a time, which serialises these functions just as well.
"""
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.crowd.queue import quality_assignment_take, quality_gate
from annotation.models import Assignment, Benchmark, CandidateAnswer, QualityItem, Question, Rating
from annotation.services import queue_sql
from annotation.services.audit import audit_record
from annotation.services.target_ratings import target_ratings_default, target_ratings_expression
from annotation.teams.scope import works_on_q

#: Candidate ids read per page at one valid-rating count (highest priority first, then by the question's
#: ``random_key``, then id), and pages per count before moving on to the next count. Concurrent annotators spread
#: out through ``SKIP LOCKED``.
_PAGE = 32
_PAGES = 4

T = TypeVar("T")

#: What the rating page shows of an assignment's candidate answer; loaded with the assignment in the same query.
RATING_PAGE_RELATED = (
    "candidate__question_version__question__benchmark",
    "candidate__question_version__question__audio",
)


def _slots_held_by_others(*, annotator, now: datetime) -> Coalesce:
    """Subquery expression: open, unexpired assignments on the outer candidate held by anyone but ``annotator``."""
    held = (
        Assignment.objects.filter(candidate=OuterRef("pk"), status=Assignment.Status.OPEN, expires_at__gt=now)
        .exclude(annotator=annotator)
        .order_by()
        .values("candidate")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(held, output_field=IntegerField()), Value(0))


def _open_for_annotator_conditions(*, annotator, benchmark: Benchmark | None) -> Q:
    """The per-row test of :func:`candidates_open_for_annotator` except the slot count, as one ``Q``.

    Current version of an active question (of ``benchmark`` when given), neither rated nor skipped by ``annotator``,
    and not a quality item (gold or attention check: ``annotation.crowd.queue`` hands those out).
    """
    own_rating = Rating.objects.filter(candidate=OuterRef("pk"), annotator=annotator)
    own_skip = Assignment.objects.filter(
        candidate=OuterRef("pk"), annotator=annotator, status=Assignment.Status.SKIPPED
    )
    quality_item = QualityItem.objects.filter(candidate=OuterRef("pk"))
    conditions = Q(
        question_version__question__current_version=F("question_version"),
        question_version__question__status=Question.Status.ACTIVE,
    ) & ~Exists(own_rating) & ~Exists(own_skip) & ~Exists(quality_item)
    if benchmark is not None:
        conditions &= Q(question_version__question__benchmark=benchmark)
    conditions &= works_on_q(user=annotator, path="question_version__question__benchmark")
    return conditions


def candidates_open_for_annotator(*, annotator, now: datetime, benchmark: Benchmark | None = None) -> QuerySet:
    """Candidate answers ``annotator`` may be given now, annotated with ``k`` and ``held`` (slots held by others).

    A candidate qualifies when its question version is the question's current one, the question is active and in
    a benchmark the annotator works on (:mod:`annotation.teams.scope`), the annotator has neither rated nor skipped
    it, and ``valid_rating_count + held < k``. Unordered and unlocked.
    """
    return (
        CandidateAnswer.objects.annotate(
            k=target_ratings_expression(), held=_slots_held_by_others(annotator=annotator, now=now)
        )
        .filter(_open_for_annotator_conditions(annotator=annotator, benchmark=benchmark))
        .filter(valid_rating_count__lt=F("k") - F("held"))
    )


def _own_open_assignment(*, annotator, now: datetime, benchmark: Benchmark | None) -> Assignment | None:
    """The annotator's oldest open, unexpired assignment that can still be rated, loaded for the rating page
    (:data:`RATING_PAGE_RELATED`).

    On the way, the annotator's open assignments that expired are marked expired (so the slot's unique
    constraint lets the item be handed out again), and those that can no longer be rated (the question was
    corrected or paused) are released.
    """
    rows = queue_sql.queue_own_open(annotator_id=annotator.pk, now=now,
                                    benchmark_id=benchmark.pk if benchmark is not None else None)
    release = [pk for pk, expired, in_scope, rateable in rows if expired or (in_scope and not rateable)]
    if release:
        Assignment.objects.filter(pk__in=release, status=Assignment.Status.OPEN).update(
            status=Assignment.Status.EXPIRED
        )
    for pk, expired, in_scope, rateable in rows:
        if not expired and in_scope and rateable:
            return queue_sql.queue_assignment_for_page(assignment_id=pk)
    return None


def insert_unless_raced(insert: Callable[[], T]) -> T | None:
    """Run ``insert()``, which writes one new row and returns what it made; None when a unique constraint shows
    that a concurrent request inserted the same row first.

    That race needs a database without row locks (SQLite), where the insert runs in a savepoint so the transaction
    survives it; with row locks (PostgreSQL) the caller's lock already excludes it, so the insert runs directly and
    an ``IntegrityError`` propagates.
    """
    if connection.features.has_select_for_update:
        return insert()
    try:
        with transaction.atomic():
            return insert()
    except IntegrityError:
        return None


def slot_is_free(*, valid_rating_count: int, k: int, held: int) -> bool:
    """True when one more annotator may take a slot: ``valid + held by others < k`` (all counts >= 0).

    Exact only when the counts were read under the candidate's row lock (``select_for_update``) in the current
    transaction, so they cannot change before it commits.
    """
    return valid_rating_count < k and valid_rating_count + held < k


@dataclass(frozen=True)
class NextItem:
    """What :func:`assignment_next` decided.

    Attributes:
        assignment: the assignment to work on now, or None.
        closed_why: why the queue is closed to this annotator, for them to read (paused, study closed or
            completed, qualification failed or not available yet); "" when it is open (then None means that
            nothing is left to rate).
    """

    assignment: Assignment | None
    closed_why: str = ""


def assignment_next_for_annotator(*, annotator, benchmark: Benchmark | None = None) -> Assignment | None:
    """:func:`assignment_next`'s assignment (None when nothing is left or the queue is closed to ``annotator``)."""
    return assignment_next(annotator=annotator, benchmark=benchmark).assignment


def assignment_next(*, annotator, benchmark: Benchmark | None = None) -> NextItem:
    """Return the assignment ``annotator`` should work on now, creating one if needed, or why there is none.

    1. The annotator's own open, unexpired assignment, if any (a reload or the back button shows the same item).
    2. Otherwise a new assignment on a candidate answer from :func:`candidates_open_for_annotator`, ordered
       closest to done first (most valid ratings), then highest ``priority``, then by the ``random_key`` of the
       candidate's question (drawn once per question: at any moment the questions started within a priority level
       are a uniform random sample of that level, which the leaderboard's estimates rely on), then by candidate id
       (a question's answers share its key). It expires after
       ``settings.ANNOTATION_ASSIGNMENT_MINUTES`` minutes.

    The assignment comes with what the rating page shows loaded (:data:`RATING_PAGE_RELATED`).

    Args:
        annotator: the user asking (access is checked by the caller, see ``annotation.selectors``).
        benchmark: only offer items of this benchmark; None for any benchmark.

    Safe under concurrency (ORCA paper, section 3.2: k distinct annotators per candidate answer): one transaction
    locks the annotator's user row (one request per annotator at a time), locks candidate rows with
    ``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, re-checks the counts under the lock and only then creates
    the assignment.
    """
    now = timezone.now()
    with transaction.atomic():
        # One request of this annotator at a time; only leases are written, so the commit need not wait for the
        # disk (ratings always do).
        queue_sql.queue_lease_transaction_begin(annotator_id=annotator.pk)
        # Pausing, a study's benchmark and quota, qualification, gold and attention items (annotation/crowd).
        gate = quality_gate(annotator=annotator, benchmark=benchmark)
        if gate.closed:
            return NextItem(None, gate.why)
        benchmark = gate.benchmark
        existing = _own_open_assignment(annotator=annotator, now=now, benchmark=None if gate.qualifying else benchmark)
        if existing is not None:
            return NextItem(existing)
        check = quality_assignment_take(annotator=annotator, now=now, gate=gate)
        if check is not None or gate.qualifying:
            return NextItem(check)
        return NextItem(_assignment_take_next(annotator=annotator, now=now, benchmark=benchmark))


def _levels(*, benchmark: Benchmark | None) -> tuple[list[int], int]:
    """``(levels, k_shared)``: the valid-rating counts to visit, highest first, and the largest k a candidate
    without its own ``target_ratings`` can have (the setting or a benchmark's k). One query.

    Counts at or above ``k_shared`` only matter for candidates whose own ``target_ratings`` is higher (routing);
    those are few and found through the partial index ``candidate_open_routed``.
    """
    benchmark_ks, k_routed = queue_sql.queue_levels(benchmark_id=benchmark.pk if benchmark is not None else None)
    k_shared = max([target_ratings_default(), *benchmark_ks])
    top = max(k_shared, k_routed or 0)
    return list(range(top - 1, -1, -1)), k_shared


def _assignment_take_next(*, annotator, now: datetime, benchmark: Benchmark | None) -> Assignment | None:
    """Pick, lock and assign a new candidate answer (see :func:`assignment_next_for_annotator`).

    Walks the valid-rating counts from the highest open one down (closest to done first). At each count it reads
    pages of candidates in ``(priority DESC, random_key, id)`` order straight from the index
    ``candidate_queue_order`` on ``(valid_rating_count, priority DESC, random_key, id)`` — so
    PostgreSQL never sorts every open candidate — with the full eligibility test of
    :func:`candidates_open_for_annotator` computed for that page only. Eligible candidates are locked one at a
    time in that order with ``SKIP LOCKED``; one locked by another request, or filled meanwhile,
    is passed over. After ``_PAGES`` pages of a count without a taker it moves on; if every count came up empty
    that way, one exhaustive query makes sure nothing was missed.
    """
    levels, k_shared = _levels(benchmark=benchmark)
    tried: set[int] = set()
    capped = False
    for level in levels:
        for page in range(_PAGES):
            rows = queue_sql.queue_page(
                level=level, routed_only=level >= k_shared, offset=page * _PAGE, limit=_PAGE,
                annotator_id=annotator.pk, now=now, benchmark_id=benchmark.pk if benchmark is not None else None,
            )
            if not rows:
                break
            window = [(pk, priority) for pk, priority, eligible in rows if eligible and pk not in tried]
            assignment = _assignment_try(annotator=annotator, now=now, window=window, tried=tried)
            if assignment is not None:
                return assignment
        else:
            capped = True
    if not capped:
        return None
    rest = list(
        candidates_open_for_annotator(annotator=annotator, now=now, benchmark=benchmark)
        .exclude(pk__in=tried)
        .order_by("-valid_rating_count", "-priority", "random_key", "pk")
        .values_list("pk", "priority")[:_PAGE]
    )
    return _assignment_try(annotator=annotator, now=now, window=rest, tried=tried)


def _assignment_try(*, annotator, now: datetime, window: list[tuple[int, int]], tried: set[int]) -> Assignment | None:
    """Lock the first free candidate of ``window`` (``(pk, priority)`` rows in queue order: priority, then random
    key) with ``SKIP LOCKED``, re-check its counts under the lock and assign it; None when every one was taken.

    The returned assignment comes with what the rating page shows loaded (:data:`RATING_PAGE_RELATED`).
    """
    for candidate_pk, _priority in window:
        tried.add(candidate_pk)
        if not queue_sql.queue_lock(candidate_id=candidate_pk, skip_locked=True):
            continue  # another request holds it: pass it over
        # A second statement, so its snapshot is taken after the lock: the counts are exact until we commit.
        state = queue_sql.queue_slot_state(candidate_id=candidate_pk, annotator_id=annotator.pk, now=now)
        if state is None or not slot_is_free(valid_rating_count=state["valid_rating_count"], k=state["k"],
                                             held=state["held"]):
            continue  # filled or removed since the page was read: pass it over
        expires_at = now + timedelta(minutes=settings.ANNOTATION_ASSIGNMENT_MINUTES)
        # On PostgreSQL the annotator's row lock serialises their requests; on SQLite another request of this
        # annotator can win the race to the same candidate.
        assignment = insert_unless_raced(lambda pk=candidate_pk, until=expires_at: queue_sql.queue_assignment_create(
            candidate_id=pk, annotator_id=annotator.pk, now=now, expires_at=until
        ))
        if assignment is not None:
            return assignment
    return None


def assignment_skip(*, assignment: Assignment, reason: str) -> Assignment:
    """Mark ``assignment`` skipped with ``reason``; the annotator is never offered that candidate answer again.

    Releases the slot at once. Skipping an assignment that already expired still records the skip. Skipping a
    skipped assignment again returns it unchanged.

    Raises:
        ValidationError: ``{"reason": ...}`` when the reason is empty or longer than 1000 characters;
            ``{"assignment": ...}`` when it was already submitted.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say briefly why you skip this item."})
    if len(reason) > 1000:
        raise ValidationError({"reason": "Keep the reason under 1000 characters."})
    with transaction.atomic():
        locked = Assignment.objects.select_for_update().get(pk=assignment.pk)
        if locked.status == Assignment.Status.SKIPPED:
            return locked
        if locked.status == Assignment.Status.SUBMITTED:
            raise ValidationError({"assignment": "This item was already rated; it cannot be skipped."})
        old_status = locked.status
        locked.status = Assignment.Status.SKIPPED
        locked.skip_reason = reason
        locked.save(update_fields=["status", "skip_reason"])
        audit_record(actor=locked.annotator, action="assignment.skip", obj=locked, old={"status": old_status},
                     new={"status": locked.status, "skip_reason": reason})
        return locked


def assignment_expire_stale(*, now: datetime | None = None) -> int:
    """Mark open assignments whose ``expires_at`` is at or before ``now`` (default: now) as expired.

    Returns the number of assignments expired. Their slots are free again (the queue already ignores expired
    assignments; this keeps the rows honest). Run every 60 s by ``annotation.tasks.assignment_expire_task``.
    """
    now = now or timezone.now()
    return Assignment.objects.filter(status=Assignment.Status.OPEN, expires_at__lte=now).update(
        status=Assignment.Status.EXPIRED
    )


def assignments_release_outside_teams(*, benchmark: Benchmark, user_ids) -> int:
    """Release (mark expired) the open assignments a change of ``benchmark``'s team took away; returns how many.

    Those are the open assignments on ``benchmark`` of everyone who no longer works on it (a removed member; anyone
    without a team when it got its first members), and the open assignments on any benchmark of ``user_ids`` (the
    members added or removed) that they no longer work on (a first membership closes the open benchmarks to them).
    Qualification items stay: they are for everyone (``annotation.crowd.queue``). Call inside the team change's
    transaction (``annotation.teams.services.membership_set``), after the memberships are written, so the rule
    (:mod:`annotation.teams.scope`) reads the new teams. The released slots go back to the queue at once, and the
    rating service refuses a submit of such an item (code ``not_member``).
    """
    held = (
        Assignment.objects.filter(status=Assignment.Status.OPEN)
        .filter(Q(candidate__question_version__question__benchmark=benchmark) | Q(annotator_id__in=list(user_ids)))
        .exclude(candidate__quality_item__in_qualification=True)
    )
    release: list[int] = []
    for annotator_id in sorted(set(held.values_list("annotator_id", flat=True))):
        mine = held.filter(annotator_id=annotator_id)
        kept = mine.filter(works_on_q(user=annotator_id, path="candidate__question_version__question__benchmark"))
        release += mine.exclude(pk__in=kept.values("pk")).values_list("pk", flat=True)
    if not release:
        return 0
    return Assignment.objects.filter(pk__in=release, status=Assignment.Status.OPEN).update(
        status=Assignment.Status.EXPIRED)
