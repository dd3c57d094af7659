"""The ORCA items page's list: questions with candidate answers on their current version, most uncertain first."""
import pytest

from annotation.services.versions import question_version_create
from modelling.models import ModelVersion, Prediction, TrainingRun
from modelling.selectors import item_question_list
from tests.factories import CandidateAnswerFactory, QuestionFactory

pytestmark = pytest.mark.django_db


def test_it_counts_current_candidates_and_orders_by_the_largest_predicted_variance():
    sure, unsure, unscored = QuestionFactory(), QuestionFactory(), QuestionFactory()
    corrected = QuestionFactory()
    version = ModelVersion.objects.create(training_run=TrainingRun.objects.create(), name="m", artifact_path="/x")
    for question, variances in ((sure, [0.01, 0.02]), (unsure, [0.01, 0.2]), (unscored, [None])):
        for variance in variances:
            candidate = CandidateAnswerFactory(question_version=question.current_version)
            if variance is not None:
                Prediction.objects.create(candidate=candidate, model_version=version, mu=0.5, variance=variance,
                                          alpha=1, beta=1)
    CandidateAnswerFactory(question_version=corrected.current_version)
    question_version_create(question=corrected, source="expert", reference_answer="Fixed.")  # no candidates yet

    rows = list(item_question_list(model_version=version))
    assert [q.pk for q in rows] == [unsure.pk, sure.pk, unscored.pk]
    assert [q.n_candidates for q in rows] == [2, 2, 1]
    assert [q.max_variance for q in rows] == [0.2, 0.02, None]
    assert {q.pk for q in item_question_list()} == {sure.pk, unsure.pk, unscored.pk}
