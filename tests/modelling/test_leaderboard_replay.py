"""The fast replay of ``bench/leaderboard.py`` serves what the platform serves: one replay through the real
assignment, rating and routing services on a scratch database hands the annotators the same sequence of candidate
answers as :class:`modelling.leaderboard.replay.QueueReplay` for the same seed, under every routing policy, with
question-level keys and draws (a question's answers share its key and u; ties go by answer index = creation)."""
import numpy as np
import pytest

from annotation.models import Question
from annotation.services.assignment import assignment_next_for_annotator, assignment_skip
from annotation.services.rating import rating_submit
from modelling.leaderboard.replay import POLICIES, QueueReplay
from modelling.models import ActiveDraw, BenchmarkRouting, ModelVersion, Prediction, TrainingRun
from modelling.services.routing import RoutingRules, benchmark_routing_set, routing_policy_set, routing_refresh
from tests.factories import AnnotatorFactory, BenchmarkFactory, CandidateAnswerFactory, LALMFactory, QuestionFactory

pytestmark = pytest.mark.django_db

ANNOTATORS = 5


def _benchmark(rng):
    """Four LALMs answering twelve questions: 48 answers with 1–4 real ratings each and a prediction each."""
    bench = BenchmarkFactory(name="replay")
    lalms = [LALMFactory(name=f"L{i}") for i in range(4)]
    answers, ratings = [], []
    for question_key in rng.random(12):  # the key is the question's: its four answers take it at creation
        question = QuestionFactory(benchmark=bench)
        Question.objects.filter(pk=question.pk).update(random_key=float(question_key))
        for lalm in lalms:
            answers.append(CandidateAnswerFactory(question_version=question.current_version, lalm=lalm))
            ratings.append([int(s) for s in rng.integers(1, 6, size=rng.integers(1, 5))])
    keys = np.array([a.random_key for a in answers])
    assert len(set(keys)) == 12  # one key per question, shared by its answers
    mu = rng.uniform(0.05, 0.95, len(answers))
    variance = rng.uniform(0.005, 0.09, len(answers))
    return bench, answers, ratings, keys, mu, variance


def _serve_through_the_platform(answers, ratings, annotators, *, routed: bool, budget: int) -> list:
    """Annotators take turns on the real services until ``budget`` ratings; (answer index, annotator, action)."""
    index = {a.pk: i for i, a in enumerate(answers)}
    left = [list(r) for r in ratings]
    served, given, done = [], 0, [False] * len(annotators)
    turn = 0
    while given < budget and not all(done):
        a = turn % len(annotators)
        turn += 1
        if done[a]:
            continue
        while True:
            assignment = assignment_next_for_annotator(annotator=annotators[a])
            if assignment is None:
                done[a] = True
                break
            i = index[assignment.candidate_id]
            if not left[i]:
                assignment_skip(assignment=assignment, reason="no real rating left in the replay data")
                served.append((i, a, "skip"))
                continue
            rating_submit(candidate=assignment.candidate, annotator=annotators[a], score=left[i].pop(0), codes="",
                          assignment=assignment)
            served.append((i, a, "rate"))
            given += 1
            if routed:
                routing_refresh()  # what beat does after new ratings
            break
    return served


def _up_to_the_last_rating(served: list) -> list:
    last = max(i for i, (_, _, action) in enumerate(served) if action == "rate")
    return served[:last + 1]


@pytest.mark.parametrize("policy", POLICIES)
def test_one_replay_through_the_real_services_serves_the_fast_replays_sequence(policy, settings):
    settings.ANNOTATION_TARGET_RATINGS = 3
    settings.ROUTING_AUDIT_SHARE = 0.2
    settings.ROUTING_MODEL_VOTE = policy == "model_vote"
    rng = np.random.default_rng(108)
    bench, answers, ratings, keys, mu, variance = _benchmark(rng)
    annotators = [AnnotatorFactory(username=f"replay{i}") for i in range(ANNOTATORS)]
    budget = int(0.7 * sum(len(r) for r in ratings))
    routed = policy != "default"
    u = np.zeros(len(answers))
    if routed:
        run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x")
        version = ModelVersion.objects.create(training_run=run, name="replay", artifact_path="/x", is_active=True)
        Prediction.objects.bulk_create([Prediction(candidate=a, model_version=version, mu=m, variance=v, alpha=1,
                                                   beta=1) for a, m, v in zip(answers, mu, variance)])
        routing_policy_set(enabled=True)
        if policy == "leaderboard_precision":
            benchmark_routing_set(benchmark=bench, policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION, budget=0.5,
                                  floor=0.2)
            draws = dict(ActiveDraw.objects.values_list("candidate_id", "u"))
            u = np.array([draws[a.pk] for a in answers])
            assert len(set(u)) == 12  # one draw u per question, shared by its answers (π is each answer's)
    served = _serve_through_the_platform(answers, ratings, annotators, routed=routed, budget=budget)

    fast = QueueReplay(keys=keys, lalm=[a.lalm.name for a in answers], ratings=ratings, mu=mu, variance=variance,
                       policy=policy, annotators=ANNOTATORS, k=3, rules=RoutingRules.from_settings(),
                       audit_share=0.2, budget=0.5, floor=0.2, u=u)
    state = fast.run(ratings=budget)
    assert sum(action == "rate" for _, _, action in served) > 20
    assert _up_to_the_last_rating(state.served) == _up_to_the_last_rating(served)
    # the routing fields the platform ended with are the replay's
    for i, answer in enumerate(answers):
        answer.refresh_from_db()
        assert (answer.target_ratings, answer.priority) == (state.target[i], state.priority[i]), i
