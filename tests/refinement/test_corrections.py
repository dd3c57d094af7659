"""Corrections: new immutable version, invalidation that keeps ratings, re-entry, claims, dismissal."""
import pytest
from django.core.exceptions import ValidationError

from annotation.models import LALM, CandidateAnswer, Job, QuestionVersion, Rating
from refinement.models import Correction, CorrectionItem, Queue, ReviewClaim
from refinement.services.corrections import StaleVersionError, correction_plan, correction_save
from refinement.services.flags import flags_refresh_for_questions
from refinement.services.queues import ClaimedByAnotherExpert, item_dismiss, item_open, question_claim
from tests.factories import (
    AnnotatorFactory,
    AudioClipFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def expert():
    return AnnotatorFactory(username="expert-a", roles=["expert"])


@pytest.fixture
def rated_question():
    """A question with two candidate answers (imported LALMs), each rated twice, one rating with code R."""
    question = QuestionFactory()
    version = question.current_version
    candidates = [CandidateAnswerFactory(question_version=version) for _ in range(2)]
    RatingFactory(candidate=candidates[0], score=2, codes="R")
    RatingFactory(candidate=candidates[0], score=4)
    RatingFactory(candidate=candidates[1], score=5)
    RatingFactory(candidate=candidates[1], score=5)
    flags_refresh_for_questions(question_ids=[question.pk])
    return question


def test_correction_invalidates_exactly_the_old_versions_ratings_and_keeps_them(rated_question, expert):
    other = CandidateAnswerFactory()
    untouched = RatingFactory(candidate=other, score=3)
    old = rated_question.current_version
    result = correction_save(
        question=rated_question,
        base_version=old,
        texts={"reference_answer": "Two dogs barking"},
        expert=expert,
        reason="The clip has two dogs",
        queue=Queue.REFERENCE,
    )
    assert result.ratings_invalidated == 4
    old_ratings = Rating.objects.filter(question_version=old)
    assert old_ratings.count() == 4  # kept, never deleted
    assert not old_ratings.filter(is_valid=True).exists()
    assert all("corrected in v2" in r.invalid_reason for r in old_ratings)
    untouched.refresh_from_db()
    assert untouched.is_valid
    assert set(CandidateAnswer.objects.filter(question_version=old).values_list("valid_rating_count", flat=True)) == {0}


def test_correction_makes_a_new_immutable_version_with_author_reason_and_queue(rated_question, expert):
    old = rated_question.current_version
    result = correction_save(
        question=rated_question, base_version=old, texts={"reference_answer": "Two dogs barking"},
        expert=expert, reason="two dogs", queue=Queue.REFERENCE,
    )
    rated_question.refresh_from_db()
    assert rated_question.current_version == result.version
    assert result.version.number == 2
    assert result.version.source == QuestionVersion.Source.EXPERT
    assert result.version.created_by == expert
    assert result.version.reference_answer == "Two dogs barking"
    assert result.version.rationale == old.rationale
    assert "reference" in result.version.reason
    correction = Correction.objects.get()
    assert (
        correction.field, correction.queue, correction.old_text
    ) == ("reference_answer", "reference", "A dog barking")
    assert not CorrectionItem.objects.filter(question=rated_question, status="open").exists()
    # Both open flags (reference: code R; disagreement: scores 2 and 4) are closed by the correction.
    closed = CorrectionItem.objects.filter(question=rated_question)
    assert {(i.queue, i.status, i.closed_version_id) for i in closed} == {
        ("reference", "corrected", result.version.pk), ("disagreement", "corrected", result.version.pk)
    }
    old.refresh_from_db()
    assert old.reference_answer == "A dog barking"


def test_reference_change_with_import_only_lalms_copies_candidates_back_into_the_queue(rated_question, expert):
    old = rated_question.current_version
    result = correction_save(
        question=rated_question, base_version=old, texts={"reference_answer": "Two dogs"}, expert=expert, reason="r"
    )
    assert result.jobs == []
    copies = CandidateAnswer.objects.filter(question_version=result.version)
    assert copies.count() == 2
    assert set(copies.values_list("valid_rating_count", flat=True)) == {0}
    assert set(copies.values_list("text", flat=True)) == set(
        CandidateAnswer.objects.filter(question_version=old).values_list("text", flat=True)
    )


def test_rationale_change_copies_candidates_for_re_rating(rated_question, expert):
    result = correction_save(
        question=rated_question, base_version=rated_question.current_version,
        texts={"rationale": "Two dogs bark, one after the other."}, expert=expert, reason="rationale vague",
    )
    assert len(result.copied_candidates) == 2
    assert result.jobs == []


def test_question_change_starts_stage_1b_for_every_available_lalm(rated_question, expert, settings):
    settings.GEMINI_API_KEY = "test-key"
    rated_question.audio = AudioClipFactory()
    rated_question.save(update_fields=["audio"])
    generator = LALMFactory(name="gemini-lalm", provider=LALM.Provider.GEMINI)
    result = correction_save(
        question=rated_question, base_version=rated_question.current_version,
        texts={"question_text": "How many dogs bark?"}, expert=expert, reason="question was incomplete",
    )
    assert [job.kind for job in result.jobs] == [Job.Kind.CANDIDATES]
    job = result.jobs[0]
    assert job.lalm == generator
    assert job.status == Job.Status.QUEUED
    assert list(job.items.values_list("question_id", flat=True)) == [rated_question.pk]
    assert result.copied_candidates == []  # answers to the old question are not worth rating


def test_a_question_without_audio_cannot_go_back_to_stage_1b_and_keeps_its_answers(rated_question, expert, settings):
    settings.GEMINI_API_KEY = "test-key"
    LALMFactory(name="gemini-lalm", provider=LALM.Provider.GEMINI)
    plan = correction_plan(
        question=rated_question, base_version=rated_question.current_version,
        texts={"reference_answer": "Two dogs barking"},
    )
    assert plan.regenerate_lalms == []
    assert {reason for _, reason in plan.unavailable_lalms} == {"the question has no audio clip"}
    assert len(plan.copy_candidates) == 2


def test_plan_shows_the_effects_without_writing(rated_question):
    before = QuestionVersion.objects.count()
    plan = correction_plan(
        question=rated_question, base_version=rated_question.current_version,
        texts={"reference_answer": "Two dogs barking", "rationale": rated_question.current_version.rationale},
    )
    assert plan.changed_fields == ["reference_answer"]
    assert plan.ratings_to_invalidate == 4
    assert len(plan.copy_candidates) == 2
    diff = [(p.op, p.text) for p in plan.changes[0].diff]
    assert diff == [("delete", "A"), ("insert", "Two"), ("equal", " "), ("delete", "dog"), ("insert", "dogs"),
                    ("equal", " barking")]
    assert QuestionVersion.objects.count() == before
    assert Rating.objects.filter(is_valid=False).count() == 0


def test_saving_over_a_stale_version_is_refused_and_writes_nothing(rated_question, expert):
    old = rated_question.current_version
    correction_save(question=rated_question, base_version=old, texts={"rationale": "New."}, expert=expert, reason="x")
    with pytest.raises(StaleVersionError):
        correction_save(
            question=rated_question, base_version=old, texts={"rationale": "Other."}, expert=expert, reason="y"
        )
    assert QuestionVersion.objects.filter(question=rated_question).count() == 2


def test_unchanged_texts_or_missing_reason_are_refused(rated_question, expert):
    version = rated_question.current_version
    with pytest.raises(ValidationError):
        correction_save(
            question=rated_question, base_version=version, texts={"rationale": version.rationale + "\r\n"},
            expert=expert, reason="x",
        )
    with pytest.raises(ValidationError):
        correction_save(
            question=rated_question, base_version=version, texts={"rationale": "x"}, expert=expert, reason=" "
        )
    assert Rating.objects.filter(is_valid=False).count() == 0


def test_two_experts_cannot_claim_one_item(rated_question, expert):
    other = AnnotatorFactory(username="expert-b", roles=["expert"])
    question_claim(question=rated_question, expert=expert)
    question_claim(question=rated_question, expert=expert)  # idempotent for the holder
    with pytest.raises(ClaimedByAnotherExpert):
        question_claim(question=rated_question, expert=other)
    with pytest.raises(ClaimedByAnotherExpert):
        correction_save(
            question=rated_question, base_version=rated_question.current_version, texts={"rationale": "x"},
            expert=other, reason="x",
        )
    assert ReviewClaim.objects.get().expert == expert


def test_dismiss_closes_the_flag_with_a_reason_and_keeps_ratings_valid(rated_question, expert):
    item = CorrectionItem.objects.get(question=rated_question, queue=Queue.REFERENCE)
    item_dismiss(item=item, expert=expert, reason="reference is fine")
    item.refresh_from_db()
    assert item.status == CorrectionItem.Status.DISMISSED
    assert item.close_reason == "reference is fine"
    assert not Rating.objects.filter(is_valid=False).exists()
    assert ReviewClaim.objects.get().expert == expert  # the disagreement flag is still open
    disagreement = CorrectionItem.objects.get(question=rated_question, queue=Queue.DISAGREEMENT)
    item_dismiss(item=disagreement, expert=expert, reason="genuine disagreement - keep")
    assert not ReviewClaim.objects.exists()
    with pytest.raises(ValidationError):
        item_dismiss(item=item, expert=expert, reason="again")


def test_an_expert_sends_a_question_to_the_transcript_queue(rated_question, expert):
    item = item_open(
        question=rated_question, queue=Queue.TRANSCRIPT, opened_by=expert, note="comment: transcript wrong"
    )
    again = item_open(question=rated_question, queue=Queue.TRANSCRIPT, opened_by=expert, note="second report")
    assert again.pk == item.pk
    assert again.flag_count == 2
    assert item.origin == CorrectionItem.Origin.EXPERT
