"""The queue serves equal priorities by the random key of each answer's *question* (a question's answers one after
another, by id), so a partly rated benchmark is a uniform random sample of its questions (README, Leaderboard:
"Random order")."""
import random

import numpy as np
import pytest

from annotation.models import CandidateAnswer, Question
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.rating import rating_submit
from tests.factories import AnnotatorFactory, BenchmarkFactory, CandidateAnswerFactory, LALMFactory, QuestionFactory

pytestmark = pytest.mark.django_db


def _serve(annotator, n: int) -> list[int]:
    """Candidate pks the real queue hands ``annotator``, rating each at once (k = 1)."""
    served = []
    for _ in range(n):
        assignment = assignment_next_for_annotator(annotator=annotator)
        if assignment is None:
            break
        rating_submit(candidate=assignment.candidate, annotator=annotator, score=3, codes="", assignment=assignment)
        served.append(assignment.candidate_id)
    return served


def test_each_new_question_gets_its_own_random_key_and_its_answers_share_it():
    questions = [QuestionFactory() for _ in range(20)]
    keys = [q.random_key for q in questions]
    assert all(0.0 <= k < 1.0 for k in keys) and len(set(keys)) == 20
    lalms = [LALMFactory() for _ in range(3)]
    for q in questions[:5]:
        answers = [CandidateAnswerFactory(question_version=q.current_version, lalm=lalm) for lalm in lalms]
        answers += CandidateAnswer.objects.bulk_create([CandidateAnswer(question_version=q.current_version,
                                                                        lalm=LALMFactory())])
        assert {CandidateAnswer.objects.get(pk=a.pk).random_key for a in answers} == {q.random_key}


def test_within_a_priority_the_queue_serves_by_question_key_then_answer_not_by_creation_order(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    bench = BenchmarkFactory()
    lalms = [LALMFactory() for _ in range(3)]
    answers = []
    for priority in (0, 0, 0, 5, 5):
        version = QuestionFactory(benchmark=bench).current_version
        answers += [CandidateAnswerFactory(question_version=version, lalm=lalm, priority=priority) for lalm in lalms]
    served = _serve(AnnotatorFactory(), len(answers))
    expected = [c.pk for c in sorted(answers, key=lambda c: (-c.priority, c.random_key, c.pk))]
    assert served == expected
    # a question's answers come one after another: the served order changes question only every 3 answers
    questions = [CandidateAnswer.objects.get(pk=pk).question_version.question_id for pk in served]
    assert sum(a != b for a, b in zip(questions, questions[1:])) == 4


def test_a_partly_rated_benchmark_is_an_unbiased_sample_when_creation_order_follows_correctness(settings):
    """Forty answers whose correctness rises with their creation order (as when an import lists the best LALM
    last): the first ten the queue serves, over 25 fresh draws of the keys, average the benchmark's mean; the first
    ten in creation (index) order, the old tie order, are far below it."""
    settings.ANNOTATION_TARGET_RATINGS = 1
    bench = BenchmarkFactory()
    lalm = LALMFactory()
    answers = [CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version, lalm=lalm)
               for _ in range(40)]
    correctness = {c.pk: i / 39 for i, c in enumerate(answers)}  # index order correlates perfectly
    truth = float(np.mean(list(correctness.values())))
    rng = random.Random(7)
    means = []
    for _ in range(25):
        for c in answers:  # one answer per question: a fresh draw of the question's key, copied to its answer
            c.random_key = rng.random()
            Question.objects.filter(versions=c.question_version_id).update(random_key=c.random_key)
        CandidateAnswer.objects.bulk_update(answers, ["random_key"])
        served = _serve(AnnotatorFactory(), 10)
        assert len(served) == 10
        means.append(np.mean([correctness[pk] for pk in served]))
        CandidateAnswer.objects.filter(pk__in=served).update(valid_rating_count=0)  # the next draw starts afresh
    index_order = np.mean([correctness[c.pk] for c in answers[:10]])
    # 25 draws of 10 of 40: the standard error of the average is about 0.29 · √(30/39) / √10 / 5 ≈ 0.016.
    assert abs(np.mean(means) - truth) < 0.05
    assert abs(index_order - truth) > 0.35
