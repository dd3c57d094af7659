"""Submitting a rating (annotation.services.rating): ORCA paper, section 3.2 and Appendix A."""
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from annotation.models import Assignment, CandidateAnswer, Question, QuestionVersion, Rating
from annotation.services.assignment import assignment_next_for_annotator, assignment_skip
from annotation.services.rating import rating_submit
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, UserFactory, rate

pytestmark = pytest.mark.django_db


def _errors(excinfo) -> dict:
    return excinfo.value.message_dict


def test_a_submitted_rating_is_stored_on_the_current_version_and_counted():
    annotator = AnnotatorFactory()
    candidate = CandidateAnswerFactory()
    assignment = assignment_next_for_annotator(annotator=annotator)
    rating = rating_submit(
        candidate=candidate,
        annotator=annotator,
        score=4,
        codes=["r", "A"],
        comment="  Close, but adds detail. ",
        seconds_on_task=12.5,
        audio_seconds_played=3.0,
        assignment=assignment,
    )
    assert rating.question_version_id == candidate.question_version_id
    assert (rating.score, rating.codes, rating.comment) == (4, "AR", "Close, but adds detail.")
    assert (rating.seconds_on_task, rating.audio_seconds_played) == (12.5, 3.0)
    assert rating.source == Rating.Source.WEB and rating.is_valid
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 1
    assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.SUBMITTED


def test_a_double_submit_returns_the_same_rating_unchanged():
    annotator = AnnotatorFactory()
    candidate = CandidateAnswerFactory()
    first = rate(candidate=candidate, annotator=annotator, score=2, codes="", comment="first")
    second = rate(candidate=candidate, annotator=annotator, score=5, codes="Q", comment="second")
    assert second.pk == first.pk
    assert (second.score, second.codes, second.comment) == (2, "", "first")
    assert Rating.objects.filter(candidate=candidate).count() == 1
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 1


def test_a_null_score_needs_u_or_e():
    candidate = CandidateAnswerFactory()
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=AnnotatorFactory(), score=None, codes="AR")
    assert "score" in _errors(excinfo)
    assert not Rating.objects.exists()
    rating = rate(candidate=candidate, annotator=AnnotatorFactory(), score=None, codes="e")
    assert rating.score is None and rating.codes == "E"


@pytest.mark.parametrize("score", [0, 6, True, 3.5, "4"])
def test_a_score_outside_1_to_5_is_refused_with_its_field_name(score):
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=CandidateAnswerFactory(), annotator=AnnotatorFactory(), score=score, codes="")
    assert list(_errors(excinfo)) == ["score"]


def test_an_unknown_code_is_refused_with_its_field_name():
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=CandidateAnswerFactory(), annotator=AnnotatorFactory(), score=3, codes=["X"])
    assert "'X'" in _errors(excinfo)["codes"][0]


@pytest.mark.parametrize("field", ["seconds_on_task", "audio_seconds_played"])
def test_negative_or_infinite_timings_are_refused(field):
    for bad in (-1.0, float("inf")):
        with pytest.raises(ValidationError) as excinfo:
            rating_submit(
                candidate=CandidateAnswerFactory(), annotator=AnnotatorFactory(), score=3, codes="", **{field: bad}
            )
        assert list(_errors(excinfo)) == [field]


def test_rating_a_version_that_is_no_longer_current_is_refused_and_writes_nothing():
    candidate = CandidateAnswerFactory()
    question = candidate.question_version.question
    question.current_version = QuestionVersion.objects.create(
        question=question, number=2, question_text="Corrected?", reference_answer="A cat", source="expert"
    )
    question.save(update_fields=["current_version"])
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=AnnotatorFactory(), score=3, codes="")
    assert "corrected" in _errors(excinfo)["candidate"][0]
    assert excinfo.value.error_dict["candidate"][0].code == "stale_version"
    assert not Rating.objects.exists()
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 0


def test_a_question_under_correction_cannot_be_rated():
    candidate = CandidateAnswerFactory()
    Question.objects.filter(pk=candidate.question_version.question_id).update(status=Question.Status.UNDER_CORRECTION)
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=AnnotatorFactory(), score=3, codes="")
    assert "under correction" in _errors(excinfo)["candidate"][0]


def test_a_late_submit_after_the_slot_went_to_someone_else_is_refused(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    candidate = CandidateAnswerFactory()
    slow, quick = AnnotatorFactory.create_batch(2)
    held = assignment_next_for_annotator(annotator=slow)
    Assignment.objects.filter(pk=held.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    taken = assignment_next_for_annotator(annotator=quick)
    assert taken.candidate_id == candidate.pk
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=slow, score=3, codes="", assignment=held)
    assert excinfo.value.error_dict["assignment"][0].code == "expired"
    rating_submit(candidate=candidate, annotator=quick, score=3, codes="", assignment=taken)
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 1


@pytest.mark.parametrize("marked_expired", [False, True])
def test_an_expired_assignment_cannot_be_rated_even_while_the_slot_is_free(marked_expired):
    """Expired by the clock alone (the beat task has not run yet) or already marked expired: refused with a
    message that says the time ran out, and nothing is written."""
    candidate = CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    Assignment.objects.filter(pk=held.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1),
        status=Assignment.Status.EXPIRED if marked_expired else Assignment.Status.OPEN,
    )
    held.refresh_from_db()
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=annotator, score=5, codes="", assignment=held)
    error = excinfo.value.error_dict["assignment"][0]
    assert error.code == "expired" and "time on this item ran out" in error.message
    assert not Rating.objects.exists()
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 0


def test_a_skipped_assignment_cannot_be_rated():
    candidate = CandidateAnswerFactory()
    annotator = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=annotator)
    skipped = assignment_skip(assignment=held, reason="Audio does not play")
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=annotator, score=4, codes="", assignment=skipped)
    error = excinfo.value.error_dict["assignment"][0]
    assert error.code == "skipped" and "skipped" in error.message
    assert not Rating.objects.exists()


@pytest.mark.parametrize("role", ["annotator", "expert", "admin"])
def test_no_one_rates_without_an_assignment_the_queue_handed_out(role):
    """Experts and admins can see predictions, judge scores and others' ratings: they too rate only what the
    blind queue hands them, never a candidate they picked."""
    candidate = CandidateAnswerFactory()
    user = UserFactory(roles=[role])
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=user, score=4, codes="")
    assert excinfo.value.error_dict["assignment"][0].code == "no_assignment"
    assert not Rating.objects.exists()
    held = assignment_next_for_annotator(annotator=user)
    assert rating_submit(candidate=candidate, annotator=user, score=4, codes="", assignment=held).is_valid


def test_someone_elses_assignment_is_refused():
    candidate = CandidateAnswerFactory()
    owner, other = AnnotatorFactory.create_batch(2)
    held = assignment_next_for_annotator(annotator=owner)
    with pytest.raises(ValidationError) as excinfo:
        rating_submit(candidate=candidate, annotator=other, score=3, codes="", assignment=held)
    assert "assignment" in _errors(excinfo)
