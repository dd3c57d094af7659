"""Database constraints of the core rows hold for every writer."""
import pytest
from django.db import IntegrityError, transaction

from annotation.codes import ALL_CODE_STRINGS, UnknownCodeError, normalize_codes
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory

pytestmark = pytest.mark.django_db


def test_the_database_refuses_a_second_rating_by_one_annotator():
    rating = RatingFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        RatingFactory(candidate=rating.candidate, annotator=rating.annotator)


@pytest.mark.parametrize("score", [0, 6, 7])
def test_the_database_refuses_a_score_outside_1_to_5(score):
    with pytest.raises(IntegrityError), transaction.atomic():
        RatingFactory(score=score)


def test_a_null_score_needs_an_unable_to_judge_code():
    with pytest.raises(IntegrityError), transaction.atomic():
        RatingFactory(score=None, codes="AR")
    assert RatingFactory(score=None, codes="U").score is None
    assert RatingFactory(score=None, codes="RE").codes == "RE"


@pytest.mark.parametrize("codes", ["X", "RA", "QQ", "q"])
def test_the_database_refuses_codes_outside_qarue_or_out_of_order(codes):
    with pytest.raises(IntegrityError), transaction.atomic():
        RatingFactory(codes=codes)


def test_two_annotators_may_rate_one_candidate():
    candidate = CandidateAnswerFactory()
    RatingFactory(candidate=candidate, annotator=AnnotatorFactory())
    RatingFactory(candidate=candidate, annotator=AnnotatorFactory())
    assert candidate.ratings.count() == 2


def test_question_versions_are_immutable():
    version = CandidateAnswerFactory().question_version
    version.rationale = "changed"
    with pytest.raises(ValueError, match="immutable"):
        version.save()


def test_normalize_codes_gives_the_canonical_order():
    assert normalize_codes(["r", "a", "R"]) == "AR"
    assert normalize_codes("euq") == "QUE"
    assert len(ALL_CODE_STRINGS) == 32
    with pytest.raises(UnknownCodeError, match="'x'"):
        normalize_codes(["x"])


def test_the_run_status_is_declared_once_and_its_variants_share_its_states():
    import pickle

    from annotation.models import Job, JobItem, RunStatus
    from modelling.models import TrainingRun
    from refinement.models import Suggestion

    assert Job.Status is RunStatus and TrainingRun.Status is RunStatus
    for variant in (JobItem.Status, Suggestion.Status):
        shared = set(variant.names) & set(RunStatus.names)
        assert {"RUNNING", "DONE", "FAILED"} <= shared
        assert all(variant[name].value == RunStatus[name].value for name in shared)
        assert pickle.loads(pickle.dumps(variant.RUNNING)) is variant.RUNNING
    # The states of their own, and the database values the migrations know (no migration churn).
    assert JobItem.Status.values == ["pending", "running", "done", "skipped", "failed", "cancelled"]
    assert Suggestion.Status.values == ["queued", "running", "done", "failed", "accepted", "rejected"]
    assert Suggestion.Status.DONE.label == "Ready for review"
