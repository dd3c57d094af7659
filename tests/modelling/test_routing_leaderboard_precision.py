"""The "leaderboard precision" routing policy: inclusion probabilities ∝ σ with a uniform floor per LALM, a fixed
design (u and π stored at the first decision, kept across model versions), inverse-probability weights in the
log, per-benchmark selection beside the disagreement policy."""
import numpy as np
import pytest
from django.core.exceptions import ValidationError

from annotation.models import CandidateAnswer
from modelling.models import (
    ActiveDraw,
    BenchmarkRouting,
    ModelVersion,
    Prediction,
    RoutingDecision,
    TrainingRun,
)
from modelling.services import routing
from modelling.services.routing import (
    active_decide,
    active_probabilities,
    benchmark_routing_set,
    routing_evaluate,
    routing_policy_set,
    routing_refresh,
)
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    UserFactory,
)


def test_probabilities_are_proportional_to_sigma_with_a_floor_within_each_lalm():
    groups = {1: "A", 2: "A", 3: "A", 4: "A", 5: "B", 6: "B"}
    variances = {1: 0.0, 2: 0.01, 3: 0.01, 4: 0.04, 5: 0.09, 6: 0.0}
    pi = active_probabilities(groups=groups, variances=variances, budget=0.5, floor=0.2)
    # A: σ = 0, .1, .1, .2; shares 0.8·σ/0.4 + 0.05 = .05, .25, .25, .45; × budget 2 → .1, .5, .5, .9
    assert [pi[c] for c in (1, 2, 3, 4)] == pytest.approx([0.1, 0.5, 0.5, 0.9])
    # B: σ = .3, 0; shares .9, .1 → × 1 → .9, .1
    assert [pi[5], pi[6]] == pytest.approx([0.9, 0.1])
    # the weights a rating carries are 1/π
    assert [1 / pi[c] for c in (1, 4)] == pytest.approx([10.0, 1 / 0.9])


def test_a_draw_below_pi_selects_and_above_skips():
    chosen = active_decide(pi=0.4, u=0.39)
    assert (chosen.target_ratings, chosen.priority, chosen.reason) == (None, routing.ACTIVE_PRIORITY,
                                                                       routing.ACTIVE_SELECTED)
    assert chosen.inclusion_probability == 0.4 and "1/π = 2.50" in chosen.detail
    skipped = active_decide(pi=0.4, u=0.4)
    assert (skipped.target_ratings, skipped.priority, skipped.reason) == (0, -1, routing.ACTIVE_SKIPPED)


@pytest.fixture(autouse=True)
def _no_audit(settings):
    settings.ROUTING_AUDIT_SHARE = 0.0  # the disagreement benchmark's answers are routed, none audited


@pytest.fixture
def two_benchmarks(db):
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x")
    version = ModelVersion.objects.create(training_run=run, name="orca-lp", artifact_path="/x", is_active=True)
    active_bench, other_bench = BenchmarkFactory(name="LP"), BenchmarkFactory(name="DIS")
    lalms = [LALMFactory(name="a"), LALMFactory(name="b")]
    rng = np.random.default_rng(0)
    cands = {"LP": [], "DIS": []}
    for bench in (active_bench, other_bench):
        for _ in range(150):
            version_row = QuestionFactory(benchmark=bench).current_version
            for lalm in lalms:
                c = CandidateAnswerFactory(question_version=version_row, lalm=lalm)
                Prediction.objects.create(candidate=c, model_version=version, mu=0.5,
                                          variance=float(rng.uniform(0.001, 0.06)), alpha=1, beta=1)
                cands[bench.name].append(c)
    return version, active_bench, cands


@pytest.mark.django_db
def test_the_policy_draws_about_the_budget_logs_pi_and_leaves_other_benchmarks_alone(two_benchmarks):
    version, bench, cands = two_benchmarks
    routing_policy_set(enabled=True)
    row = benchmark_routing_set(benchmark=bench, policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION, budget=0.3,
                                floor=0.2, user=UserFactory())
    assert row.policy == "leaderboard_precision"
    decisions = {d.candidate_id: d for d in RoutingDecision.objects.filter(
        reason__in=[routing.ACTIVE_SELECTED, routing.ACTIVE_SKIPPED]).order_by("id")}
    lp = cands["LP"]
    assert set(decisions) == {c.pk for c in lp}  # every answer of the benchmark is decided and logged, with π
    pis = np.array([decisions[c.pk].inclusion_probability for c in lp])
    assert pis.sum() == pytest.approx(0.3 * len(lp))  # 0.3 of each LALM's 150 answers in expectation
    drawn = [c for c in lp if decisions[c.pk].reason == routing.ACTIVE_SELECTED]
    assert abs(len(drawn) - 90) < 3 * np.sqrt((pis * (1 - pis)).sum())
    draws = {d.candidate_id: d for d in ActiveDraw.objects.all()}
    assert set(draws) == {c.pk for c in lp}
    u_all = np.array([d.u for d in draws.values()])
    assert ((u_all >= 0) & (u_all < 1)).all()
    for c in lp:
        c.refresh_from_db()
        d = decisions[c.pk]
        assert d.model_version == version
        u = draws[c.pk].u
        assert draws[c.pk].pi == d.inclusion_probability and draws[c.pk].model_version == version
        assert (d.reason == routing.ACTIVE_SELECTED) == (u < d.inclusion_probability)
        assert (c.target_ratings, c.priority) == ((None, routing.ACTIVE_PRIORITY) if u < d.inclusion_probability
                                                  else (0, -1))
    # higher σ, higher π
    variances = dict(Prediction.objects.filter(candidate__in=lp).values_list("candidate_id", "variance"))
    order = sorted(lp, key=lambda c: variances[c.pk])
    assert decisions[order[-1].pk].inclusion_probability > decisions[order[0].pk].inclusion_probability
    # the other benchmark stays with the disagreement policy
    assert not RoutingDecision.objects.filter(candidate__in=cands["DIS"],
                                              reason__in=[routing.ACTIVE_SELECTED, routing.ACTIVE_SKIPPED]).exists()
    # re-evaluating does not re-draw
    assert routing_evaluate().changed == 0


@pytest.mark.django_db
def test_without_a_floor_the_default_half_of_the_budget_is_spread_uniformly(two_benchmarks):
    """The default floor (0.5, bench/leaderboard.py --floor): every answer's π is at least floor × budget, so pair
    verdicts count about that share of the questions; the σ-proportional rest still favours uncertain answers."""
    version, bench, cands = two_benchmarks
    routing_policy_set(enabled=True)
    row = benchmark_routing_set(benchmark=bench, policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION, budget=0.3)
    assert row.floor == 0.5
    pis = np.array([d.pi for d in ActiveDraw.objects.filter(candidate__in=cands["LP"])])
    assert pis.min() >= 0.5 * 0.3 - 1e-9
    assert pis.max() > 0.3 and pis.sum() == pytest.approx(0.3 * len(pis))


@pytest.mark.django_db
def test_a_new_active_model_changes_no_draw_no_weight_and_no_target(two_benchmarks):
    """Beat activates a new model after every ORCA_RETRAIN_EVERY ratings: the design must not move with it."""
    version, bench, cands = two_benchmarks
    routing_policy_set(enabled=True)
    benchmark_routing_set(benchmark=bench, policy=BenchmarkRouting.Policy.LEADERBOARD_PRECISION, budget=0.3)
    before = {d.candidate_id: (d.u, d.pi, d.drawn) for d in ActiveDraw.objects.all()}
    targets = dict((pk, (t, p)) for pk, t, p in CandidateAnswer.objects.filter(
        pk__in=[c.pk for c in cands["LP"]]).values_list("pk", "target_ratings", "priority"))
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/y")
    ModelVersion.objects.filter(pk=version.pk).update(is_active=False)
    newer = ModelVersion.objects.create(training_run=run, name="orca-lp-2", artifact_path="/y", is_active=True)
    rng = np.random.default_rng(9)
    for c in cands["LP"] + cands["DIS"]:  # very different σ: a re-draw would move most π
        Prediction.objects.create(candidate=c, model_version=newer, mu=0.3,
                                  variance=float(rng.uniform(0.001, 0.2)), alpha=1, beta=1)
    assert routing_refresh() is not None
    after = {d.candidate_id: (d.u, d.pi, d.drawn) for d in ActiveDraw.objects.all()}
    assert after == before
    for c in cands["LP"]:
        c.refresh_from_db()
        assert (c.target_ratings, c.priority) == targets[c.pk]
    # an answer added later gets its own draw at its first decision; the old ones stay
    q = QuestionFactory(benchmark=bench).current_version
    late = CandidateAnswerFactory(question_version=q, lalm=cands["LP"][0].lalm)
    Prediction.objects.create(candidate=late, model_version=newer, mu=0.3, variance=0.05, alpha=1, beta=1)
    routing_refresh()
    assert ActiveDraw.objects.filter(candidate=late, model_version=newer).exists()
    assert {d.candidate_id: (d.u, d.pi, d.drawn) for d in ActiveDraw.objects.exclude(candidate=late)} == before


@pytest.mark.django_db
def test_switching_back_restores_the_disagreement_policy_and_bad_settings_name_their_field(two_benchmarks):
    _, bench, cands = two_benchmarks
    routing_policy_set(enabled=True)
    benchmark_routing_set(benchmark=bench, policy="leaderboard_precision")
    benchmark_routing_set(benchmark=bench, policy="disagreement")
    for c in cands["LP"]:
        c.refresh_from_db()
    assert all(c.target_ratings != 0 for c in cands["LP"])
    with pytest.raises(ValidationError) as err:
        benchmark_routing_set(benchmark=bench, policy="leaderboard_precision", budget=1.5)
    assert "budget" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        benchmark_routing_set(benchmark=bench, policy="random")
    assert "policy" in err.value.message_dict


@pytest.mark.django_db
def test_admins_choose_the_policy_on_the_routing_page_and_experts_may_not(client):
    from django.urls import reverse

    bench = BenchmarkFactory(name="Page")
    url = reverse("modelling:routing_benchmark", args=[bench.pk])
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    assert client.post(url, {"policy": "leaderboard_precision"}).status_code == 403
    client.force_login(UserFactory(roles=["admin"], is_staff=True, is_superuser=True))
    response = client.post(url, {"policy": "leaderboard_precision", "budget": "0.25", "floor": "0.1",
                                 "audit_share": "0.3"})
    assert response.status_code == 302
    row = BenchmarkRouting.objects.get(benchmark=bench)
    assert (row.policy, row.budget, row.floor, row.audit_share) == ("leaderboard_precision", 0.25, 0.1, 0.3)
    # numbers a hand-written parser would choke on are form errors, not a server error
    assert client.post(url, {"policy": "disagreement", "budget": "²", "floor": "0.1"}).status_code == 302
    assert BenchmarkRouting.objects.get(benchmark=bench).policy == "leaderboard_precision"
    page = client.get(reverse("modelling:routing")).content.decode()
    assert "Leaderboard precision" in page and 'id="routing-benchmarks"' in page
    client.post(url, {"policy": "leaderboard_precision", "budget": "2"})
    assert BenchmarkRouting.objects.get(benchmark=bench).budget == 0.25
