"""The queue serves equal priorities by each candidate answer's random key, so a partly rated benchmark is a
uniform random sample of its answers (README, Leaderboard: "Random order")."""
import random

import numpy as np
import pytest

from annotation.models import CandidateAnswer
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


def test_each_new_candidate_answer_gets_its_own_random_key():
    keys = [c.random_key for c in CandidateAnswerFactory.create_batch(20)]
    assert all(0.0 <= k < 1.0 for k in keys)
    assert len(set(keys)) == 20


def test_within_a_priority_the_queue_serves_by_random_key_not_by_creation_order(settings):
    settings.ANNOTATION_TARGET_RATINGS = 1
    low = CandidateAnswerFactory.create_batch(6, priority=0)
    high = CandidateAnswerFactory.create_batch(4, priority=5)
    served = _serve(AnnotatorFactory(), 10)
    by_key = [c.pk for c in sorted(high, key=lambda c: c.random_key)] + \
             [c.pk for c in sorted(low, key=lambda c: c.random_key)]
    assert served == by_key


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
        for c in answers:
            c.random_key = rng.random()
        CandidateAnswer.objects.bulk_update(answers, ["random_key"])
        served = _serve(AnnotatorFactory(), 10)
        assert len(served) == 10
        means.append(np.mean([correctness[pk] for pk in served]))
        CandidateAnswer.objects.filter(pk__in=served).update(valid_rating_count=0)  # the next draw starts afresh
    index_order = np.mean([correctness[c.pk] for c in answers[:10]])
    # 25 draws of 10 of 40: the standard error of the average is about 0.29 · √(30/39) / √10 / 5 ≈ 0.016.
    assert abs(np.mean(means) - truth) < 0.05
    assert abs(index_order - truth) > 0.35
