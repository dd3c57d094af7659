"""Flag rules and their evaluation (ORCA paper, sections 3.3 and 5.2)."""
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from annotation.models import Rating
from refinement.models import CorrectionItem, FlagWatermark, Queue
from refinement.services.flags import flags_refresh_for_questions, flags_refresh_recent
from refinement.services.queues import item_dismiss
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, RatingFactory

pytestmark = pytest.mark.django_db


def rate(candidate, score=3, codes=""):
    return RatingFactory(candidate=candidate, score=score, codes=codes)


def open_queues(question):
    return set(
        CorrectionItem.objects.filter(question=question, status=CorrectionItem.Status.OPEN).values_list(
            "queue", flat=True
        )
    )


def test_each_code_rule_fires_into_its_queue():
    cases = {"Q": {Queue.QUESTION}, "R": {Queue.REFERENCE}, "U": {Queue.EXPERT}, "E": {Queue.EXPERT}}
    for code, expected in cases.items():
        candidate = CandidateAnswerFactory()
        rate(candidate, score=None if code in "UE" else 3, codes=code)
        rate(candidate, score=3)
        rate(candidate, score=3)
        question = candidate.question_version.question
        flags_refresh_for_questions(question_ids=[question.pk])
        assert open_queues(question) == expected, code


def test_a_single_a_code_among_three_ratings_does_not_flag_the_rationale():
    candidate = CandidateAnswerFactory()
    rate(candidate, codes="A")
    rate(candidate)
    rate(candidate)
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == set()


def test_a_codes_on_two_ratings_flag_the_rationale():
    candidate = CandidateAnswerFactory()
    for codes in ("A", "A", "", "", ""):
        rate(candidate, codes=codes)
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    item = CorrectionItem.objects.get(question=question, queue=Queue.RATIONALE)
    assert item.flag_count == 2
    assert item.evidence["codes"] == {"A": 2}


def test_a_code_on_half_of_the_ratings_flags_the_rationale():
    candidate = CandidateAnswerFactory()
    rate(candidate, codes="A")
    rate(candidate)
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == {Queue.RATIONALE}


def test_sample_variance_of_one_candidate_at_one_flags_disagreement_and_below_does_not():
    # Scores 2, 3, 4: sample variance exactly 1.0 (the paper's threshold); 3, 3, 4: 0.33.
    disagreeing = CandidateAnswerFactory()
    for score in (2, 3, 4):
        rate(disagreeing, score=score)
    calm = CandidateAnswerFactory()
    for score in (3, 3, 4):
        rate(calm, score=score)
    q1, q2 = disagreeing.question_version.question, calm.question_version.question
    flags_refresh_for_questions(question_ids=[q1.pk, q2.pk])
    assert open_queues(q1) == {Queue.DISAGREEMENT}
    assert open_queues(q2) == set()
    item = CorrectionItem.objects.get(question=q1)
    assert item.evidence["candidates"][str(disagreeing.pk)]["variance"] == 1.0


def test_invalid_ratings_do_not_flag():
    candidate = CandidateAnswerFactory()
    RatingFactory(candidate=candidate, codes="R", is_valid=False, invalid_reason="corrected")
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == set()


def test_refresh_is_idempotent_and_updates_the_flag_count():
    candidate = CandidateAnswerFactory()
    rate(candidate, codes="Q")
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    flags_refresh_for_questions(question_ids=[question.pk])
    assert CorrectionItem.objects.filter(question=question).count() == 1
    rate(candidate, codes="Q")
    result = flags_refresh_for_questions(question_ids=[question.pk])
    assert result.updated == 1
    assert CorrectionItem.objects.get(question=question).flag_count == 2


def test_a_dismissed_flag_stays_closed_until_new_evidence_arrives():
    candidate = CandidateAnswerFactory()
    for score in (1, 5):
        rate(candidate, score=score)
    question = candidate.question_version.question
    flags_refresh_for_questions(question_ids=[question.pk])
    item = CorrectionItem.objects.get(question=question, queue=Queue.DISAGREEMENT)
    expert = AnnotatorFactory(roles=["expert"])
    item_dismiss(item=item, expert=expert, reason="genuine disagreement - keep")
    assert Rating.objects.filter(candidate=candidate, is_valid=True).count() == 2

    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == set()

    later = rate(candidate, score=1)
    Rating.objects.filter(pk=later.pk).update(created_at=timezone.now() + timedelta(seconds=5))
    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == {Queue.DISAGREEMENT}


def test_periodic_refresh_reads_only_ratings_newer_than_the_watermark(settings):
    settings.REFINEMENT_WATERMARK_OVERLAP_S = 0
    first = CandidateAnswerFactory()
    rate(first, codes="R")
    assert flags_refresh_recent().questions == 1
    watermark = FlagWatermark.objects.get()
    assert watermark.ratings_updated_before is not None

    second = CandidateAnswerFactory()
    rating = rate(second, codes="Q")
    Rating.objects.filter(pk=rating.pk).update(updated_at=timezone.now() + timedelta(seconds=1))
    result = flags_refresh_recent(now=timezone.now() + timedelta(seconds=2))
    assert result.questions == 1
    assert open_queues(second.question_version.question) == {Queue.QUESTION}


def test_a_burst_of_ratings_is_evaluated_once_not_on_every_later_refresh(settings):
    """All ratings of an import lie within the overlap of the newest; a refresh well after the last one must not
    evaluate them again (the queue page refreshes on every visit)."""
    settings.REFINEMENT_WATERMARK_OVERLAP_S = 30
    for _ in range(3):
        rate(CandidateAnswerFactory(), codes="R")
    now = timezone.now()
    assert flags_refresh_recent(now=now).questions == 3
    # Within the overlap, a rating committed late might have been missed: read again.
    assert flags_refresh_recent(now=now + timedelta(seconds=10)).questions == 3
    assert flags_refresh_recent(now=now + timedelta(minutes=2)).questions == 3
    # The last evaluation ran more than the overlap after the newest rating: it read all of them.
    assert flags_refresh_recent(now=now + timedelta(minutes=3)).questions == 0
    assert flags_refresh_recent(now=now + timedelta(minutes=4)).questions == 0
    late = rate(CandidateAnswerFactory(), codes="Q")
    Rating.objects.filter(pk=late.pk).update(updated_at=now + timedelta(minutes=4, seconds=5))
    assert flags_refresh_recent(now=now + timedelta(minutes=5)).questions == 1


def test_refinement_queues_command_refreshes_and_prints_every_queue_key(capsys):
    candidate = CandidateAnswerFactory()
    rate(candidate, codes="AR")
    call_command("refinement_queues", "--json")
    import json

    counts = json.loads(capsys.readouterr().out)
    assert counts == {
        "question": 0, "reference": 1, "rationale": 1, "transcript": 0, "expert": 0, "disagreement": 0,
    }


def test_question_without_ratings_is_not_flagged_by_rules():
    question = QuestionFactory()
    flags_refresh_for_questions(question_ids=[question.pk])
    assert open_queues(question) == set()
