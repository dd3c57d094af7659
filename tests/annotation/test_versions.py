"""Question versions: a change is a new row; ratings on the old version can be invalidated but are kept."""
import pytest

from annotation.models import QuestionVersion, Rating
from annotation.services.versions import question_version_create, ratings_invalidate_for_version
from tests.factories import CandidateAnswerFactory, QuestionFactory, RatingFactory

pytestmark = pytest.mark.django_db


def test_a_new_version_copies_unchanged_fields_and_becomes_current():
    question = QuestionFactory(version__rationale="old rationale")
    first = question.current_version
    second = question_version_create(
        question=question, source=QuestionVersion.Source.EXPERT, reason="fix", reference_answer="A cat meowing"
    )
    question.refresh_from_db()
    assert question.current_version == second
    assert (second.number, second.reference_answer, second.rationale) == (2, "A cat meowing", "old rationale")
    first.refresh_from_db()
    assert first.reference_answer == "A dog barking"


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError, match="not versioned"):
        question_version_create(question=QuestionFactory(), source="expert", category="x")


def test_invalidation_keeps_the_ratings_and_refreshes_the_counts():
    candidate = CandidateAnswerFactory()
    RatingFactory(candidate=candidate)
    RatingFactory(candidate=candidate)
    candidate.valid_rating_count = 2
    candidate.save()
    other = RatingFactory()

    assert ratings_invalidate_for_version(version=candidate.question_version, reason="reference corrected") == 2

    candidate.refresh_from_db()
    assert candidate.valid_rating_count == 0
    assert list(Rating.objects.filter(candidate=candidate).values_list("is_valid", "invalid_reason")) == [
        (False, "reference corrected")
    ] * 2
    other.refresh_from_db()
    assert other.is_valid
