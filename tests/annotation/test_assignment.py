"""The Stage 2 work queue: who rates which candidate answer next (annotation.services.assignment)."""
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from annotation.crowd.items import gold_item_mark
from annotation.models import Assignment, CandidateAnswer, Question, QuestionVersion, Rating
from annotation.services.accounts import ROLES
from annotation.services.assignment import (
    assignment_expire_stale,
    assignment_next_for_annotator,
    assignment_skip,
)
from annotation.services.rating import rating_submit
from annotation.tasks import assignment_expire_task
from tests.factories import AnnotatorFactory, BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, rate

pytestmark = pytest.mark.django_db


def _rate(assignment: Assignment, score: int = 4) -> Rating:
    return rating_submit(
        candidate=assignment.candidate, annotator=assignment.annotator, score=score, codes="", assignment=assignment
    )


def _run_each_in_a_thread(work, annotators, *, timeout: float) -> None:
    """Run ``work(annotator)`` for every annotator at once, one thread each, and wait up to ``timeout`` s each."""
    threads = [threading.Thread(target=work, args=(a,)) for a in annotators]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)


def _expire(assignment: Assignment) -> None:
    Assignment.objects.filter(pk=assignment.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def test_it_returns_the_same_open_assignment_on_reload():
    CandidateAnswerFactory.create_batch(3)
    annotator = AnnotatorFactory()
    first = assignment_next_for_annotator(annotator=annotator)
    again = assignment_next_for_annotator(annotator=annotator)
    assert first is not None
    assert again.pk == first.pk
    assert Assignment.objects.filter(annotator=annotator).count() == 1


def test_a_new_assignment_expires_after_the_configured_minutes(settings):
    settings.ANNOTATION_ASSIGNMENT_MINUTES = 7
    CandidateAnswerFactory()
    before = timezone.now()
    assignment = assignment_next_for_annotator(annotator=AnnotatorFactory())
    assert timedelta(minutes=7) <= assignment.expires_at - before < timedelta(minutes=7, seconds=5)
    assert assignment.status == Assignment.Status.OPEN


def test_it_never_assigns_an_item_twice_to_one_annotator():
    candidates = CandidateAnswerFactory.create_batch(4)
    annotator = AnnotatorFactory()
    seen = []
    while (assignment := assignment_next_for_annotator(annotator=annotator)) is not None:
        seen.append(assignment.candidate_id)
        _rate(assignment)
    assert sorted(seen) == sorted(c.pk for c in candidates)
    assert assignment_next_for_annotator(annotator=annotator) is None


def test_it_never_gives_a_candidate_to_more_than_k_annotators_counting_open_assignments(settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    candidate = CandidateAnswerFactory()
    first, second, third = AnnotatorFactory.create_batch(3)
    assert assignment_next_for_annotator(annotator=first).candidate_id == candidate.pk
    assert assignment_next_for_annotator(annotator=second).candidate_id == candidate.pk
    # Nobody has rated yet, but both slots are held by open assignments.
    assert assignment_next_for_annotator(annotator=third) is None


def test_a_full_candidate_is_no_longer_offered(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    CandidateAnswerFactory()
    _rate(assignment_next_for_annotator(annotator=AnnotatorFactory()))
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()) is None


def test_it_offers_the_candidate_closest_to_done_first(settings):
    settings.ANNOTATION_TARGET_RATINGS = 3
    fresh = CandidateAnswerFactory(priority=5)
    nearly_done = CandidateAnswerFactory()
    for _ in range(2):
        annotator = AnnotatorFactory()
        rate(candidate=nearly_done, annotator=annotator, score=3, codes="")
    annotator = AnnotatorFactory()
    assert assignment_next_for_annotator(annotator=annotator).candidate_id == nearly_done.pk
    assert fresh.pk != nearly_done.pk


def test_among_equally_done_candidates_the_highest_priority_comes_first():
    CandidateAnswerFactory.create_batch(3, priority=0)
    urgent = CandidateAnswerFactory(priority=10)
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()).candidate_id == urgent.pk


def test_k_comes_from_the_candidate_then_the_benchmark_then_the_setting(settings):
    settings.ANNOTATION_TARGET_RATINGS = 3
    benchmark = BenchmarkFactory(target_ratings=1)
    on_benchmark = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    overridden = CandidateAnswerFactory(
        question_version=QuestionFactory(benchmark=benchmark).current_version, target_ratings=2
    )
    annotators = AnnotatorFactory.create_batch(4)
    taken = [assignment_next_for_annotator(annotator=a) for a in annotators]
    counts = {c: sum(1 for a in taken if a and a.candidate_id == c) for c in (on_benchmark.pk, overridden.pk)}
    assert counts == {on_benchmark.pk: 1, overridden.pk: 2}
    assert taken[3] is None


def test_an_expired_assignment_releases_its_slot(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    candidate = CandidateAnswerFactory()
    slow, other = AnnotatorFactory.create_batch(2)
    held = assignment_next_for_annotator(annotator=slow)
    assert assignment_next_for_annotator(annotator=other) is None
    _expire(held)
    taken = assignment_next_for_annotator(annotator=other)
    assert taken.candidate_id == candidate.pk


def test_an_expired_assignment_is_not_shown_again_and_its_owner_may_get_the_item_afresh():
    CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    _expire(held)
    again = assignment_next_for_annotator(annotator=annotator)
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED
    assert again.pk != held.pk and again.candidate_id == held.candidate_id


def test_assignment_expire_stale_marks_only_open_assignments_past_their_time():
    candidates = CandidateAnswerFactory.create_batch(3)
    a, b, c = (assignment_next_for_annotator(annotator=AnnotatorFactory()) for _ in candidates)
    _expire(a)
    _expire(b)
    Assignment.objects.filter(pk=b.pk).update(status=Assignment.Status.SKIPPED)
    assert assignment_expire_stale() == 1
    statuses = dict(Assignment.objects.values_list("pk", "status"))
    assert statuses == {a.pk: "expired", b.pk: "skipped", c.pk: "open"}
    assert assignment_expire_stale(now=timezone.now() + timedelta(days=1)) == 1


def test_the_beat_task_expires_stale_assignments():
    CandidateAnswerFactory()
    held = assignment_next_for_annotator(annotator=AnnotatorFactory())
    _expire(held)
    assert assignment_expire_task.delay().get() == 1
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED


def test_a_skipped_item_is_never_offered_again_to_that_annotator_and_frees_its_slot(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    candidate = CandidateAnswerFactory()
    annotator, other = AnnotatorFactory.create_batch(2)
    held = assignment_next_for_annotator(annotator=annotator)
    skipped = assignment_skip(assignment=held, reason="  The audio does not play ")
    assert skipped.status == Assignment.Status.SKIPPED
    assert skipped.skip_reason == "The audio does not play"
    assert assignment_next_for_annotator(annotator=annotator) is None
    assert assignment_next_for_annotator(annotator=other).candidate_id == candidate.pk


def test_skipping_needs_a_reason_and_a_submitted_item_cannot_be_skipped():
    CandidateAnswerFactory()
    held = assignment_next_for_annotator(annotator=AnnotatorFactory())
    with pytest.raises(ValidationError) as excinfo:
        assignment_skip(assignment=held, reason="   ")
    assert "reason" in excinfo.value.message_dict
    _rate(held)
    with pytest.raises(ValidationError) as excinfo:
        assignment_skip(assignment=held, reason="changed my mind")
    assert "assignment" in excinfo.value.message_dict


def test_only_current_versions_of_active_questions_are_offered():
    old = CandidateAnswerFactory()
    question = old.question_version.question
    v2 = QuestionVersion.objects.create(
        question=question, number=2, question_text="Fixed?", reference_answer="A cat", source="expert"
    )
    question.current_version = v2
    question.save(update_fields=["current_version"])
    paused = CandidateAnswerFactory()
    Question.objects.filter(pk=paused.question_version.question_id).update(status=Question.Status.UNDER_CORRECTION)
    gold_item_mark(candidate=CandidateAnswerFactory(), min_score=4, max_score=5)  # handed out by annotation.crowd
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()) is None
    current = CandidateAnswerFactory(question_version=v2)
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()).candidate_id == current.pk


def test_an_open_assignment_on_a_question_that_was_corrected_meanwhile_is_dropped():
    first, second = CandidateAnswerFactory.create_batch(2, priority=0)
    CandidateAnswer.objects.filter(pk=first.pk).update(priority=1)
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    assert held.candidate_id == first.pk
    Question.objects.filter(pk=first.question_version.question_id).update(status=Question.Status.RETIRED)
    assert assignment_next_for_annotator(annotator=annotator).candidate_id == second.pk
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED


def test_the_queue_can_be_narrowed_to_one_benchmark():
    wanted = BenchmarkFactory()
    CandidateAnswerFactory.create_batch(2, priority=9)
    inside = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=wanted).current_version)
    annotator = AnnotatorFactory()
    assert assignment_next_for_annotator(annotator=annotator, benchmark=wanted).candidate_id == inside.pk
    _rate(assignment_next_for_annotator(annotator=annotator, benchmark=wanted))
    assert assignment_next_for_annotator(annotator=annotator, benchmark=wanted) is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_annotators_never_exceed_k_nor_rate_twice(settings):
    """8 threads, each a different annotator, pull and rate until the queue is empty (PostgreSQL only)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks (SELECT ... FOR UPDATE SKIP LOCKED); SQLite has one writer at a time")
    for name in ROLES:  # other transactional tests may have flushed the groups migration 0002 created
        Group.objects.get_or_create(name=name)
    settings.ANNOTATION_TARGET_RATINGS = 3
    candidates = CandidateAnswerFactory.create_batch(30)
    annotators = AnnotatorFactory.create_batch(8)
    errors: list[BaseException] = []
    start = threading.Barrier(len(annotators))

    def work(annotator):
        try:
            start.wait()
            empty_in_a_row = 0
            # A None can be transient while others hold row locks (SKIP LOCKED); stop after three in a row.
            while empty_in_a_row < 3:
                assignment = assignment_next_for_annotator(annotator=annotator)
                if assignment is None:
                    empty_in_a_row += 1
                    threading.Event().wait(0.05)
                    continue
                empty_in_a_row = 0
                _rate(assignment, score=1 + assignment.candidate_id % 5)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    _run_each_in_a_thread(work, annotators, timeout=120)
    assert not errors, errors
    per_candidate = {c.pk: 0 for c in candidates}
    pairs = list(Rating.objects.values_list("candidate_id", "annotator_id"))
    for candidate_id, _ in pairs:
        per_candidate[candidate_id] += 1
    assert max(per_candidate.values()) <= 3
    assert len(pairs) == len(set(pairs))
    assert sum(per_candidate.values()) == 90  # every candidate got its k = 3 ratings
    assert dict(CandidateAnswer.objects.values_list("pk", "valid_rating_count")) == per_candidate
    assert not Assignment.objects.filter(status=Assignment.Status.OPEN).exists()


@pytest.mark.django_db(transaction=True)
def test_sixteen_annotators_for_a_few_seconds_never_exceed_k_never_rate_twice_and_lose_nothing(settings):
    """16 threads, each a different annotator, ask for and submit items for at most 8 s over 200 candidates
    with k = 3 (PostgreSQL only): afterwards no candidate has more than 3 ratings, no annotator rated an item
    twice, and every rating a thread was told was saved is in the database and counted."""
    import time

    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL row locks (SELECT ... FOR UPDATE SKIP LOCKED); SQLite has one writer at a time")
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    settings.ANNOTATION_TARGET_RATINGS = 3
    candidates = CandidateAnswerFactory.create_batch(200)
    annotators = AnnotatorFactory.create_batch(16)
    errors: list[BaseException] = []
    saved: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(annotators))
    deadline = time.monotonic() + 8.0

    def work(annotator):
        try:
            start.wait()
            empty_in_a_row = 0
            while empty_in_a_row < 3 and time.monotonic() < deadline:
                assignment = assignment_next_for_annotator(annotator=annotator)
                if assignment is None:
                    empty_in_a_row += 1
                    threading.Event().wait(0.02)
                    continue
                empty_in_a_row = 0
                rating = _rate(assignment, score=1 + assignment.candidate_id % 5)
                with lock:
                    saved.append(rating.pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    _run_each_in_a_thread(work, annotators, timeout=60)
    assert not errors, errors
    pairs = list(Rating.objects.values_list("candidate_id", "annotator_id"))
    per_candidate = {c.pk: 0 for c in candidates}
    for candidate_id, _ in pairs:
        per_candidate[candidate_id] += 1
    assert max(per_candidate.values()) <= 3
    assert len(pairs) == len(set(pairs))
    assert sorted(Rating.objects.values_list("pk", flat=True)) == sorted(saved)  # nothing lost, nothing extra
    # The queue really was worked under contention (96–206 ratings in 8 s on 2 cores shared with other jobs).
    assert len(saved) >= 30
    assert dict(CandidateAnswer.objects.values_list("pk", "valid_rating_count")) == per_candidate


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is a PostgreSQL setting")
@pytest.mark.django_db(transaction=True)
def test_lease_transactions_commit_without_waiting_for_the_disk_and_only_they_do():
    from django.db import transaction

    from annotation.services.queue_sql import queue_lease_transaction_begin

    def synchronous_commit() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SHOW synchronous_commit")
            return cursor.fetchone()[0]

    from django.contrib.auth import get_user_model

    annotator = get_user_model().objects.create(username="lease-test-annotator")
    before = synchronous_commit()
    with transaction.atomic():
        queue_lease_transaction_begin(annotator_id=annotator.pk)
        assert synchronous_commit() == "off"
    # SET LOCAL ends with the transaction: ratings written next are flushed before their commit returns.
    assert synchronous_commit() == before == "on"


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are used on PostgreSQL only")
@pytest.mark.parametrize("prepared", [True, False])
def test_the_queue_statements_are_prepared_once_per_connection_unless_turned_off(settings, prepared):
    settings.QUEUE_PREPARED_STATEMENTS = prepared
    CandidateAnswerFactory.create_batch(2)
    annotator = AnnotatorFactory()

    def prepared_executions() -> int:
        """Executions of this connection's prepared statements that read the queue's counts."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT coalesce(sum(generic_plans + custom_plans), 0) FROM pg_prepared_statements "
                           "WHERE statement LIKE '%%valid_rating_count%%'")
            return cursor.fetchone()[0]

    before = prepared_executions()
    first = assignment_next_for_annotator(annotator=annotator)
    _rate(first)
    second = assignment_next_for_annotator(annotator=annotator)
    assert second is not None and second.candidate_id != first.candidate_id
    executed = prepared_executions() - before
    assert executed > 0 if prepared else executed == 0


@pytest.mark.parametrize("with_audio", [True, False])
def test_the_assignment_comes_loaded_for_the_page_exactly_as_the_orm_loads_it(with_audio):
    from annotation.services.assignment import RATING_PAGE_RELATED
    from tests.factories import AudioClipFactory

    question = QuestionFactory(choices=["a dog", "a cat"], extra={"source": {"split": "test-mini"}},
                               audio=AudioClipFactory() if with_audio else None)
    QuestionVersion.objects.filter(pk=question.current_version_id).update(
        transcript="Woof.", transcript_segments=[{"start": 0.0, "end": 0.5, "text": "Woof."}]
    )
    CandidateAnswerFactory(question_version=question.current_version)
    annotator = AnnotatorFactory()
    for shown in (assignment_next_for_annotator(annotator=annotator),  # created
                  assignment_next_for_annotator(annotator=annotator)):  # the same one, shown again
        loaded = Assignment.objects.select_related(*RATING_PAGE_RELATED).get(pk=shown.pk)
        pairs = [(shown, loaded), (shown.candidate, loaded.candidate),
                 (shown.candidate.question_version, loaded.candidate.question_version),
                 (shown.candidate.question_version.question, loaded.candidate.question_version.question),
                 (shown.candidate.question_version.question.benchmark,
                  loaded.candidate.question_version.question.benchmark)]
        if with_audio:
            pairs.append((shown.candidate.question_version.question.audio,
                          loaded.candidate.question_version.question.audio))
        else:
            assert shown.candidate.question_version.question.audio is None
        for ours, orm in pairs:
            for field in type(orm)._meta.concrete_fields:
                assert getattr(ours, field.attname) == getattr(orm, field.attname), (type(orm).__name__, field.name)
        assert shown.candidate.question_version.transcript_segments[0]["text"] == "Woof."
        assert shown.candidate.question_version.question.extra == {"source": {"split": "test-mini"}}
        assert shown.expires_at.tzinfo is not None


@pytest.mark.parametrize("scoped", [False, True])
def test_the_queue_sql_and_the_orm_agree_on_which_candidates_are_open(settings, scoped):
    """The eligibility rule is written twice (plain SQL for the hot path, the ORM for progress counts and the
    exhaustive fallback): on a mix of every case the two must pick the same candidates."""
    from annotation.services.assignment import candidates_open_for_annotator
    from annotation.services.queue_sql import queue_page

    settings.ANNOTATION_TARGET_RATINGS = 2
    annotator, other, third = AnnotatorFactory.create_batch(3)
    benchmark = BenchmarkFactory(target_ratings=3)
    plain = CandidateAnswerFactory.create_batch(3)
    on_benchmark = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    routed = CandidateAnswerFactory(target_ratings=4)
    rated, skipped, held_full, stale, paused = CandidateAnswerFactory.create_batch(5)
    rate(candidate=rated, annotator=annotator, score=3, codes="")
    rate(candidate=routed, annotator=other, score=3, codes="")
    rate(candidate=routed, annotator=third, score=4, codes="")
    Assignment.objects.create(candidate=skipped, annotator=annotator, status=Assignment.Status.SKIPPED,
                              expires_at=timezone.now())
    rate(candidate=held_full, annotator=other, score=3, codes="")
    Assignment.objects.create(candidate=held_full, annotator=third, expires_at=timezone.now() + timedelta(hours=1))
    question = stale.question_version.question
    question.current_version = QuestionVersion.objects.create(
        question=question, number=2, question_text="Fixed?", reference_answer="A cat", source="expert"
    )
    question.save(update_fields=["current_version"])
    Question.objects.filter(pk=paused.question_version.question_id).update(status=Question.Status.UNDER_CORRECTION)
    gold_item_mark(candidate=CandidateAnswerFactory(), min_score=4, max_score=5)  # handed out by annotation.crowd

    now = timezone.now()
    scope = benchmark if scoped else None
    orm = set(candidates_open_for_annotator(annotator=annotator, now=now, benchmark=scope).values_list("pk", flat=True))
    sql = {
        pk
        for level in range(5)
        for pk, _priority, eligible in queue_page(level=level, routed_only=False, offset=0, limit=100,
                                                 annotator_id=annotator.pk, now=now,
                                                 benchmark_id=scope.pk if scope else None)
        if eligible
    }
    expected = {on_benchmark.pk} if scoped else {c.pk for c in plain} | {on_benchmark.pk, routed.pk}
    assert orm == sql == expected
