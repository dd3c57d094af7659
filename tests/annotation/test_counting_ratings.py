"""What counts as a rating for the statistics: valid and on the question's current version.

A valid rating left on a superseded version (what a lost race with a correction would leave; the services no longer
let it happen, see test_version_races.py) must still never reach alpha, ORCA training, judge correlations or the
overview.
"""
import io
import json

import pytest

from annotation.models import QuestionVersion
from annotation.selectors import rating_counting_queryset
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.judge_comparison import human_means
from modelling.selectors import valid_rating_count, valid_ratings_load
from tests.factories import CandidateAnswerFactory, RatingFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def stray_and_counted():
    """Two valid ratings on a candidate whose question then got version 2 without invalidating them, and two on
    a candidate of an untouched question."""
    stale = CandidateAnswerFactory()
    stray = [RatingFactory(candidate=stale, score=s) for s in (1, 2)]
    question = stale.question_version.question
    question.current_version = QuestionVersion.objects.create(
        question=question, number=2, question_text="Corrected?", reference_answer="A cat", source="expert"
    )
    question.save(update_fields=["current_version"])
    fresh = CandidateAnswerFactory()
    counted = [RatingFactory(candidate=fresh, score=s) for s in (4, 5)]
    return stray, counted


def test_only_valid_ratings_on_current_versions_count(stray_and_counted):
    stray, counted = stray_and_counted
    assert set(rating_counting_queryset().values_list("pk", flat=True)) == {r.pk for r in counted}


def test_alpha_judge_correlations_and_training_data_leave_out_ratings_on_superseded_versions(stray_and_counted):
    stray, counted = stray_and_counted
    loaded = valid_ratings_load()
    assert sorted(loaded.scores.tolist()) == [4, 5]
    assert valid_rating_count() == 2
    assert human_means() == {counted[0].candidate_id: 4.5}
    out = io.StringIO()
    dataset_export_orca_jsonl(out=out)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [row["ratings"] for row in rows] == [[4, 5]]
