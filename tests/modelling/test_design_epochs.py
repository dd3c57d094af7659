"""Question-level design and design epochs (issue #35): audit membership and the active draw u are the question's,
a policy switch or an audit-share change starts a new epoch, answers created later still get their draw, and the
leaderboard's data carry each rating's rater, time and epoch."""
import importlib

import numpy as np
import pytest
from django.apps import apps
from django.urls import reverse

from annotation.models import CandidateAnswer, Question
from modelling.leaderboard.selectors import leaderboard_data_load
from modelling.models import (
    ActiveDraw,
    DesignEpoch,
    ModelVersion,
    Prediction,
    QuestionDraw,
    RoutingDecision,
    TrainingRun,
)
from modelling.services.routing import benchmark_routing_set, routing_policy_set, routing_refresh
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def bench():
    """One benchmark, 40 questions × 3 LALMs, each answer with a prediction of the active model."""
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x")
    model = ModelVersion.objects.create(training_run=run, name="orca-design", artifact_path="/x", is_active=True)
    benchmark = BenchmarkFactory(name="design")
    lalms = [LALMFactory(name=f"L{i}") for i in range(3)]
    rng = np.random.default_rng(35)
    for _ in range(40):
        version = QuestionFactory(benchmark=benchmark).current_version
        for lalm in lalms:
            c = CandidateAnswerFactory(question_version=version, lalm=lalm)
            Prediction.objects.create(candidate=c, model_version=model, mu=0.5,
                                      variance=float(rng.uniform(0.001, 0.06)), alpha=1, beta=1)
    return benchmark


def _by_question(pairs) -> dict[int, set]:
    out: dict[int, set] = {}
    for question, value in pairs:
        out.setdefault(question, set()).add(value)
    return out


def _epochs(benchmark) -> list[tuple]:
    return list(DesignEpoch.objects.filter(benchmark=benchmark).order_by("number").values_list(
        "number", "policy", "audit_share"))


def test_every_answer_to_a_question_is_audited_or_none_is(bench, settings):
    settings.ROUTING_AUDIT_SHARE = 0.5
    routing_policy_set(enabled=True)
    audited = set(RoutingDecision.objects.filter(reason="audit").values_list("candidate_id", flat=True))
    rows = CandidateAnswer.objects.filter(question_version__question__benchmark=bench).values_list(
        "pk", "question_version__question_id", "question_version__question__random_key")
    membership = _by_question((q, pk in audited) for pk, q, _ in rows)
    assert all(len(v) == 1 for v in membership.values())  # all of a question's answers, or none
    keys = {q: key for _, q, key in rows}
    assert {q for q, v in membership.items() if True in v} == {q for q, key in keys.items() if key < 0.5}
    assert 0 < len(audited) < len(rows)


def test_the_active_draw_u_is_the_questions_and_pi_the_answers(bench, settings):
    settings.ROUTING_AUDIT_SHARE = 0.0
    routing_policy_set(enabled=True)
    benchmark_routing_set(benchmark=bench, policy="leaderboard_precision", budget=0.4, floor=0.2)
    draws = list(ActiveDraw.objects.values_list("candidate__question_version__question_id", "u", "pi"))
    assert len(draws) == 120
    by_question = _by_question((q, u) for q, u, _ in draws)
    assert all(len(us) == 1 for us in by_question.values())
    assert {q: us.pop() for q, us in by_question.items()} == dict(QuestionDraw.objects.values_list("question_id", "u"))
    assert len({pi for _, _, pi in draws}) > 40  # π stays the answer's own (∝ its σ)


def test_switches_and_audit_share_changes_start_design_epochs(bench, settings):
    settings.ROUTING_AUDIT_SHARE = 0.2
    user = UserFactory()
    routing_policy_set(enabled=True, user=user)
    assert _epochs(bench) == [(1, "uniform", None), (2, "routed", 0.2)]
    first = DesignEpoch.objects.get(benchmark=bench, number=1)
    assert first.started == bench.created_at and DesignEpoch.objects.get(benchmark=bench, number=2).started_by == user
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=0.2)  # nothing changes
    assert len(_epochs(bench)) == 2
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=0.3)
    benchmark_routing_set(benchmark=bench, policy="leaderboard_precision", audit_share=0.3)
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=0.3)
    routing_policy_set(enabled=False)
    assert _epochs(bench)[2:] == [(3, "routed", 0.3), (4, "active", None), (5, "routed", 0.3), (6, "uniform", None)]
    # a changed setting is found by routing's next refresh
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=None)
    routing_policy_set(enabled=True)
    settings.ROUTING_AUDIT_SHARE = 0.25
    routing_refresh()
    assert _epochs(bench)[-2:] == [(7, "routed", 0.2), (8, "routed", 0.25)]


def test_answers_created_after_the_policy_switched_still_get_their_draw(bench, settings):
    """Leaderboard precision, then back to routing by disagreement; a new LALM's answers imported afterwards (no
    prediction) are drawn when the leaderboard reads them: u their question's, π = the budget."""
    settings.ROUTING_AUDIT_SHARE = 0.0
    routing_policy_set(enabled=True)
    benchmark_routing_set(benchmark=bench, policy="leaderboard_precision", budget=0.4, floor=0.2)
    benchmark_routing_set(benchmark=bench, policy="disagreement")
    late_lalm = LALMFactory(name="late")
    late = CandidateAnswer.objects.bulk_create([
        CandidateAnswer(question_version_id=q.current_version_id, lalm=late_lalm)
        for q in Question.objects.filter(benchmark=bench)])
    assert not ActiveDraw.objects.filter(candidate__in=late).exists()
    data = leaderboard_data_load(benchmark=bench.name)
    assert set(data.design) == set(data.answers)  # every answer has its (π, u): an estimate is possible
    u = dict(QuestionDraw.objects.values_list("question_id", "u"))
    for c in late:
        pi, draw_u = data.design[c.pk]
        assert (pi, draw_u) == (pytest.approx(0.4), u[data.answers[c.pk]["question"]])
    assert len(ActiveDraw.objects.filter(candidate__in=late)) == 40  # stored: read again, the same draw
    assert leaderboard_data_load(benchmark=bench.name).design == data.design


def test_leaderboard_data_carry_the_question_key_and_each_ratings_rater_time_and_epoch(bench, settings):
    settings.ROUTING_AUDIT_SHARE = 0.2
    answers = list(CandidateAnswer.objects.filter(question_version__question__benchmark=bench).order_by("pk")[:6])
    before = [RatingFactory(candidate=c, score=4) for c in answers]
    routing_policy_set(enabled=True)
    after = [RatingFactory(candidate=c, score=2) for c in answers[:3]]
    data = leaderboard_data_load(benchmark=bench.name)
    for answer in data.answers.values():
        assert answer["key"] == Question.objects.get(pk=answer["question"]).random_key
    assert [e["number"] for e in data.epochs[bench.pk]] == [1, 2]
    assert data.epochs[bench.pk][-1]["policy"] == "routed" and data.epochs[bench.pk][-1]["audit_share"] == 0.2
    for i, c in enumerate(answers):
        n = 2 if i < 3 else 1
        assert len(data.scores[c.pk]) == len(data.raters[c.pk]) == len(data.rated_at[c.pk]) == n
        assert data.rating_epoch[c.pk] == [1, 2][:n]
        assert data.raters[c.pk][0] == before[i].annotator_id
        if n == 2:
            assert data.raters[c.pk][1] == after[i].annotator_id
            assert data.rated_at[c.pk][0] <= data.rated_at[c.pk][1]


def test_migration_0014_shares_draws_by_question_and_records_the_first_epochs(bench, settings):
    settings.ROUTING_AUDIT_SHARE = 0.2
    uniform_bench = BenchmarkFactory(name="plain")
    plain = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=uniform_bench).current_version)
    Question.objects.filter(versions=plain.question_version_id).update(random_key=0.9)  # not audited: not routed
    CandidateAnswer.objects.filter(pk=plain.pk).update(random_key=0.9)
    Prediction.objects.create(candidate=plain, model_version=ModelVersion.objects.get(is_active=True), mu=0.5,
                              variance=0.01, alpha=1, beta=1)
    routing_policy_set(enabled=True)
    benchmark_routing_set(benchmark=bench, policy="leaderboard_precision", budget=0.4, floor=0.2)
    draws = list(ActiveDraw.objects.order_by("candidate_id"))
    assert len(draws) == 120
    for i, d in enumerate(draws):  # the old design: a u per answer
        d.u = (i + 0.5) / len(draws)
    ActiveDraw.objects.bulk_update(draws, ["u"])
    QuestionDraw.objects.all().delete()
    DesignEpoch.objects.all().delete()
    migration = importlib.import_module("modelling.migrations.0014_design_epochs_question_draws")
    migration.share_draws(apps, None)
    migration.first_epochs(apps, None)
    u = dict(QuestionDraw.objects.values_list("question_id", "u"))
    oldest = {}
    for d in draws:
        oldest.setdefault(d.candidate.question_version.question_id, d.u)
    assert u == oldest
    assert all(q_u == u[q] for q, q_u in ActiveDraw.objects.values_list(
        "candidate__question_version__question_id", "u"))
    assert _epochs(bench) == [(1, "active", None), (2, "active", None)]  # re-drawn: a new epoch
    assert _epochs(uniform_bench) == [(1, "uniform", None), (2, "routed", 0.2)]  # routing is on now


def test_the_routing_page_shows_each_benchmarks_current_design_epoch(bench, settings, client):
    settings.ROUTING_AUDIT_SHARE = 0.2
    admin = UserFactory(is_superuser=True, is_staff=True)
    routing_policy_set(enabled=True, user=admin)
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=0.3, user=admin)
    client.force_login(admin)
    page = client.get(reverse("modelling:routing")).content.decode()
    assert "Design epoch" in page and "3: routed, audit 0.30" in page
    assert "design: policy disagreement, audit share 0.3" in page
