"""A rating and a correction of the same question at the same time, in real concurrent PostgreSQL transactions.

Each side runs in its own thread with its own database connection. The interleaving is forced with row locks held
by the test's own connection (never sleeps): the test waits until a backend is blocked on a lock
(``pg_stat_activity.wait_event_type = 'Lock'``) before it lets the next step happen.
"""
import threading
import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F

from annotation.models import LALM, CandidateAnswer, Rating
from annotation.services.accounts import ROLES
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.rating import rating_submit
from refinement.services.corrections import correction_save
from tests.factories import AnnotatorFactory, CandidateAnswerFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks and pg_stat_activity"),
]


class _Side(threading.Thread):
    """Run ``work()`` in a thread on its own connection; keeps its backend pid, result and exception."""

    def __init__(self, work):
        super().__init__(daemon=True)
        self.work, self.pid, self.result, self.error = work, None, None, None
        self.pid_known = threading.Event()

    def run(self):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                self.pid = cursor.fetchone()[0]
            self.pid_known.set()
            self.result = self.work()
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            self.error = exc
        finally:
            self.pid_known.set()
            connection.close()


def _wait_until_blocked(side: _Side, *, timeout: float = 20.0) -> None:
    """Wait until ``side``'s backend waits for a row lock (read on the test's connection, inside its transaction)."""
    assert side.pid_known.wait(timeout)
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            assert side.is_alive(), f"the thread ended instead of waiting: {side.error!r}"
            # Activity is cached per transaction; clear it so each poll reads the backends' state now.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [side.pid])
            row = cursor.fetchone()
            if row and row[0] == "Lock":
                return
            time.sleep(0.02)
    raise AssertionError("the thread never blocked on a lock")


def _lock_row(table: str, pk: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {connection.ops.quote_name(table)} WHERE id = %s FOR UPDATE", [pk])


@pytest.fixture
def setup():
    for name in ROLES:  # transactional tests flush the groups migration 0002 created
        Group.objects.get_or_create(name=name)
    candidate = CandidateAnswerFactory(text="A dog barks.")
    annotator = AnnotatorFactory()
    expert = AnnotatorFactory(roles=["expert"])
    assignment = assignment_next_for_annotator(annotator=annotator)
    assert assignment.candidate_id == candidate.pk
    return candidate, annotator, expert, assignment


def _rate(candidate, annotator, assignment):
    return lambda: rating_submit(candidate=candidate, annotator=annotator, score=4, codes="", assignment=assignment)


def _correct(candidate, expert):
    question = candidate.question_version.question
    return lambda: correction_save(question=question, base_version=question.current_version,
                                   texts={"rationale": "Three barks, then a door."}, expert=expert,
                                   reason="The door is audible too")


def _no_valid_rating_on_a_superseded_version() -> None:
    stray = Rating.objects.filter(is_valid=True).exclude(
        question_version=F("question_version__question__current_version")
    )
    assert not stray.exists(), list(stray.values("pk", "question_version_id"))
    for candidate in CandidateAnswer.objects.all():
        assert candidate.valid_rating_count == candidate.ratings.filter(is_valid=True).count()


def test_a_rating_that_read_the_old_version_before_a_correction_ends_up_invalidated(setup):
    """The rating has locked the candidate and read version 1 as current; before it commits, a correction makes
    version 2. Whatever the order of the commits, the rating must not stay valid on version 1."""
    candidate, annotator, expert, assignment = setup
    rating_side = _Side(_rate(candidate, annotator, assignment))
    correction_side = _Side(_correct(candidate, expert))
    with transaction.atomic():
        # Holding the annotator's user row stops the rating at its foreign-key check, after it read the version
        # under the candidate's lock and while it still holds that lock.
        _lock_row(get_user_model()._meta.db_table, annotator.pk)
        rating_side.start()
        _wait_until_blocked(rating_side)
        correction_side.start()
        _wait_until_blocked(correction_side)  # the correction waits for the candidate the rating holds
    rating_side.join(30)
    correction_side.join(30)
    assert correction_side.error is None, correction_side.error
    assert rating_side.error is None, rating_side.error
    rating = Rating.objects.get(pk=rating_side.result.pk)
    assert rating.question_version_id == candidate.question_version_id  # made on version 1 ...
    assert not rating.is_valid and "corrected in v2" in rating.invalid_reason  # ... and no longer counting
    _no_valid_rating_on_a_superseded_version()


def test_a_rating_that_waits_for_a_correction_is_refused_as_stale(setup):
    """The correction holds the candidate (and is stopped by the test before it commits); the rating waits for
    the candidate's lock, then sees version 2 and is refused."""
    candidate, annotator, expert, assignment = setup
    correction_side = _Side(_correct(candidate, expert))
    rating_side = _Side(_rate(candidate, annotator, assignment))
    with transaction.atomic():
        # Holding the LALM row stops the correction when it copies the candidate answer onto version 2, after it
        # locked the candidates of version 1.
        _lock_row(LALM._meta.db_table, candidate.lalm_id)
        correction_side.start()
        _wait_until_blocked(correction_side)
        rating_side.start()
        _wait_until_blocked(rating_side)
    correction_side.join(30)
    rating_side.join(30)
    assert correction_side.error is None, correction_side.error
    assert isinstance(rating_side.error, ValidationError)
    assert rating_side.error.error_dict["candidate"][0].code == "stale_version"
    assert not Rating.objects.exists()
    _no_valid_rating_on_a_superseded_version()
