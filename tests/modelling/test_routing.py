"""Routing annotation by ORCA's predicted disagreement: the policy, its log, its triggers, its pages."""
import pytest
from django.contrib.auth.models import Group
from django.test import override_settings
from django.urls import reverse

from annotation.models import CandidateAnswer, Question
from annotation.services.routing_fields import candidate_routing_set
from modelling.models import ModelVersion, Prediction, RoutingDecision, TrainingRun
from modelling.services import routing
from modelling.services.routing import (
    RoutingRules,
    RoutingThresholds,
    model_rating,
    routing_decide,
    routing_evaluate,
    routing_policy_load,
    routing_policy_set,
    routing_refresh,
    routing_replay,
)
from refinement.models import CorrectionItem, Queue
from refinement.services.routing_offer import routing_expert_offers_refresh
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory, UserFactory

RULES = RoutingRules()
THRESHOLDS = RoutingThresholds(high_variance=0.08, low_variance=0.02, expert_variance=0.1)


@pytest.fixture(autouse=True)
def _no_audit(settings):
    """The rules below route every candidate; the audit share has its own tests at the end."""
    settings.ROUTING_AUDIT_SHARE = 0.0


# --- the pure policy -------------------------------------------------------------------------------------------


def test_top_quantile_of_predicted_variance_gets_five_ratings_and_priority():
    choice = routing_decide(mu=0.5, variance=0.09, scores=[], thresholds=THRESHOLDS, rules=RULES)
    assert (choice.target_ratings, choice.priority, choice.reason) == (5, 10, routing.PREDICTED_DISAGREEMENT)


def test_any_candidate_outside_the_top_quantile_stops_at_two_ratings_within_one_point():
    # σ² 0.05: neither top (≥ 0.08) nor low enough for the model's vote (≤ 0.02).
    waiting = routing_decide(mu=0.5, variance=0.05, scores=[3], thresholds=THRESHOLDS, rules=RULES)
    agreeing = routing_decide(mu=0.5, variance=0.05, scores=[3, 4], thresholds=THRESHOLDS, rules=RULES)
    assert (waiting.target_ratings, waiting.reason) == (None, routing.DEFAULT)
    assert (agreeing.target_ratings, agreeing.priority, agreeing.reason) == (2, 0, routing.CONFIDENT_AGREEING)


def test_two_ratings_more_than_the_tolerance_apart_keep_the_default():
    choice = routing_decide(mu=0.05, variance=0.01, scores=[1, 3], thresholds=THRESHOLDS, rules=RULES)
    strict = routing_decide(mu=0.5, variance=0.05, scores=[3, 4], thresholds=THRESHOLDS,
                            rules=RoutingRules(agree_tolerance=0))
    assert (choice.target_ratings, choice.priority, choice.reason) == (None, 0, routing.CONFIDENT_DISAGREEING)
    assert (strict.target_ratings, strict.reason) == (None, routing.CONFIDENT_DISAGREEING)


def test_a_predicted_disagreement_never_stops_early():
    choice = routing_decide(mu=0.5, variance=0.09, scores=[4, 4], thresholds=THRESHOLDS, rules=RULES)
    assert (choice.target_ratings, choice.priority, choice.reason) == (5, 10, routing.PREDICTED_DISAGREEMENT)


def test_observed_disagreement_overrides_the_prediction_once_there_are_enough_ratings():
    # [5, 5, 1]: mean 11/3, sample variance (16/9 + 16/9 + 64/9) / 2 = 5.33 ≥ 1.0.
    choice = routing_decide(mu=0.95, variance=0.01, scores=[5, 5, 1], thresholds=THRESHOLDS, rules=RULES)
    more = routing_decide(mu=0.95, variance=0.01, scores=[5, 5, 1], thresholds=THRESHOLDS,
                          rules=RoutingRules(observed_disagreement_target=5))
    assert (choice.target_ratings, choice.priority, choice.reason) == (None, 10, routing.OBSERVED_DISAGREEMENT)
    assert (more.target_ratings, more.priority) == (5, 10)


def test_observed_agreement_overrides_a_predicted_disagreement_once_there_are_enough_ratings():
    before = routing_decide(mu=0.5, variance=0.2, scores=[4, 4], thresholds=THRESHOLDS, rules=RULES)
    after = routing_decide(mu=0.5, variance=0.2, scores=[4, 4, 4], thresholds=THRESHOLDS, rules=RULES)
    assert before.target_ratings == 5
    assert (after.target_ratings, after.reason, after.expert) == (None, routing.OBSERVED_AGREEMENT, True)


def test_the_model_votes_only_with_a_low_sigma2_and_a_rating_within_a_quarter_point_of_its_own():
    assert model_rating(0.95) == 5 and model_rating(0.875) == 5 and model_rating(0.05) == 1

    def target(mu, variance, score, rules=RULES):
        return routing_decide(mu=mu, variance=variance, scores=[score], thresholds=THRESHOLDS, rules=rules)

    agree = target(0.95, 0.01, 5)  # 1 + 4·0.95 = 4.8: |5 − 4.8| = 0.2 ≤ 0.25
    assert (agree.target_ratings, agree.reason) == (1, routing.CONFIDENT_MODEL_AGREES)
    assert target(0.95, 0.01, 4).target_ratings is None  # |4 − 4.8| = 0.8
    assert target(0.9, 0.01, 5).target_ratings is None  # 1 + 4·0.9 = 4.6: |5 − 4.6| = 0.4 > 0.25
    assert target(0.95, 0.03, 5).target_ratings is None  # σ² above the vote cut-off 0.02
    assert target(0.95, 0.01, 5, RoutingRules(model_vote=False)).target_ratings is None
    assert target(0.5, 0.01, 3).target_ratings == 1  # 1 + 4·0.5 = 3: the vote is not only for extreme μ


def test_thresholds_are_quantiles_of_the_predicted_variances():
    t = RoutingThresholds.from_variances([0.01 * i for i in range(1, 11)], RULES)
    assert t.high_variance == pytest.approx(0.082)
    assert t.low_variance == pytest.approx(0.037)
    with pytest.raises(ValueError):
        RoutingThresholds.from_variances([], RULES)


def test_replay_takes_ratings_until_the_target_and_re_decides_after_each():
    kw = {"thresholds": THRESHOLDS, "rules": RULES, "default_target": 3}
    # The first 5 is within 0.25 of the model's 4.8 and σ² is low: the model's vote stops it at one rating.
    assert routing_replay(mu=0.95, variance=0.01, arrivals=[5, 5, 4, 5], **kw) == [5]
    # 4 is not (0.8 away); 4 and 5 agree within one point: two ratings.
    assert routing_replay(mu=0.95, variance=0.01, arrivals=[4, 5, 1, 2, 5], **kw) == [4, 5]
    # [1, 4] disagree → k = 3; [1, 4, 5] has sample variance 4.33 ≥ 1 → the default k (3) by default ...
    assert routing_replay(mu=0.5, variance=0.05, arrivals=[1, 4, 5, 1, 2], **kw) == [1, 4, 5]
    # ... or 5 ratings when the setting asks for more ([1, 4, 5, 1] has variance 4.25).
    more = {**kw, "rules": RoutingRules(observed_disagreement_target=5)}
    assert routing_replay(mu=0.5, variance=0.05, arrivals=[1, 4, 5, 1, 2, 3], **more) == [1, 4, 5, 1, 2]
    # Predicted disagreement: no early stop at [3, 3]; three agreeing ratings then restore k = 3.
    assert routing_replay(mu=0.5, variance=0.09, arrivals=[3, 3, 3, 3], **kw) == [3, 3, 3]
    assert routing_replay(mu=0.5, variance=0.09, arrivals=[3], **kw) == [3]


# --- the platform --------------------------------------------------------------------------------------------


def _active_version(name="orca-test") -> ModelVersion:
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, artifact_path="/x")
    ModelVersion.objects.filter(is_active=True).update(is_active=False)
    return ModelVersion.objects.create(training_run=run, name=name, artifact_path="/x", is_active=True)


def _candidates(version, specs):
    """specs: [(mu, variance)] → candidate answers (one question each) with a prediction of ``version``."""
    out = []
    for mu, variance in specs:
        c = CandidateAnswerFactory()
        Prediction.objects.create(candidate=c, model_version=version, mu=mu, variance=variance, alpha=1, beta=1)
        out.append(c)
    return out


def _rate(candidate, *scores):
    for s in scores:
        RatingFactory(candidate=candidate, score=s)


@pytest.fixture
def routed_store(db):
    """Ten candidates: σ² 0.01…0.10; the three lowest have μ 0.95 (confident), the rest μ 0.5."""
    version = _active_version()
    specs = [(0.95 if i <= 3 else 0.5, 0.01 * i) for i in range(1, 11)]
    return version, _candidates(version, specs)


@pytest.mark.django_db
def test_routing_does_nothing_while_switched_off(routed_store):
    assert routing_evaluate().changed == 0
    assert not RoutingDecision.objects.exists()


@pytest.mark.django_db
def test_switching_routing_on_routes_the_top_quantile_and_logs_why(routed_store):
    version, cands = routed_store
    result = routing_policy_set(enabled=True)
    for c in cands:
        c.refresh_from_db()
    assert [c.target_ratings for c in cands] == [None] * 8 + [5, 5]
    assert [c.priority for c in cands] == [0] * 8 + [10, 10]
    assert result.changed == 2 and result.by_reason == {routing.PREDICTED_DISAGREEMENT: 2}
    decision = RoutingDecision.objects.filter(reason=routing.PREDICTED_DISAGREEMENT, candidate=cands[-1]).latest("id")
    assert (decision.old_target_ratings, decision.target_ratings, decision.model_version) == (None, 5, version)
    assert "top 20%" in decision.detail


@pytest.mark.django_db
def test_new_agreeing_ratings_stop_a_candidate_at_two_and_disagreement_restores(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    middle = cands[4]  # μ 0.5, σ² 0.05: neither top nor bottom quantile
    _rate(middle, 4, 5)
    routing_refresh()
    middle.refresh_from_db()
    assert middle.target_ratings == 2
    # An edit makes them disagree: the default comes back.
    middle.ratings.filter(score=5).delete()
    _rate(middle, 2)
    routing_evaluate(candidate_ids=[middle.pk])
    middle.refresh_from_db()
    assert middle.target_ratings is None
    reasons = list(RoutingDecision.objects.filter(candidate=middle).order_by("id").values_list("reason", flat=True))
    assert reasons == [routing.CONFIDENT_AGREEING, routing.CONFIDENT_DISAGREEING]


@pytest.mark.django_db
def test_one_rating_that_matches_a_confident_model_stops_the_candidate(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    confident, unsure = cands[0], cands[3]  # σ² 0.01 (bottom 30 %: ≤ 0.037) and 0.04 (not)
    _rate(confident, 5)  # |5 − (1 + 4·0.95)| = 0.2
    _rate(unsure, 3)  # μ 0.5 → 3.0, but σ² too high for the vote
    result = routing_refresh()
    confident.refresh_from_db()
    unsure.refresh_from_db()
    assert (confident.target_ratings, unsure.target_ratings) == (1, None)
    assert result.by_reason == {routing.CONFIDENT_MODEL_AGREES: 1}
    assert "within 0.25 of the model's 1 + 4μ = 4.80" in RoutingDecision.objects.get(candidate=confident).detail


@pytest.mark.django_db
def test_observed_disagreement_overrides_the_prediction_when_new_ratings_arrive(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    quiet = cands[4]  # μ 0.5, σ² 0.05: no rule until rated
    _rate(quiet, 1, 3, 5)
    result = routing_refresh()
    quiet.refresh_from_db()
    assert (quiet.target_ratings, quiet.priority) == (None, 10)
    assert result.by_reason == {routing.OBSERVED_DISAGREEMENT: 1}
    assert routing_policy_load().rating_watermark > 0
    with override_settings(ROUTING_OBSERVED_DISAGREEMENT_TARGET=5):
        routing_evaluate(candidate_ids=[quiet.pk])
    quiet.refresh_from_db()
    assert (quiet.target_ratings, quiet.priority) == (5, 10)


@pytest.mark.django_db
def test_a_newly_activated_model_re_routes_everything(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    newer = _active_version("orca-newer")
    for i, c in enumerate(cands):  # reversed: now the first two are the most uncertain
        Prediction.objects.create(candidate=c, model_version=newer, mu=0.5, variance=0.01 * (10 - i), alpha=1, beta=1)
    routing_refresh()
    targets = list(CandidateAnswer.objects.filter(pk__in=[c.pk for c in cands]).order_by("id")
                   .values_list("target_ratings", flat=True))
    assert targets == [5, 5] + [None] * 8
    assert RoutingDecision.objects.filter(model_version=newer).exclude(target_ratings=None).count() == 2


@pytest.mark.django_db
def test_refresh_waits_until_the_active_model_scored_every_current_candidate(routed_store):
    routing_policy_set(enabled=True)
    CandidateAnswerFactory()  # not scored yet
    assert routing_refresh(force=True) is None


@pytest.mark.django_db
def test_switching_routing_off_restores_the_defaults_and_logs_it(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    result = routing_policy_set(enabled=False)
    assert result.changed == 2
    assert not CandidateAnswer.objects.filter(target_ratings__isnull=False).exists()
    assert not CandidateAnswer.objects.filter(priority__gt=0).exists()
    assert RoutingDecision.objects.filter(reason=routing.ROUTING_OFF).count() == 2


@pytest.mark.django_db
@override_settings(ROUTING_EXPERT_QUANTILE=0.1)
def test_predicted_ambiguous_questions_are_offered_to_expert_review_once(routed_store):
    _, cands = routed_store
    routing_policy_set(enabled=True)
    assert routing_expert_offers_refresh() == 1
    item = CorrectionItem.objects.get(queue=Queue.EXPERT)
    assert item.question_id == cands[-1].question_version.question_id
    assert item.evidence == {"routing": {str(cands[-1].pk): 0.1}}
    assert routing_expert_offers_refresh() == 0


@pytest.mark.django_db
def test_the_annotation_service_rejects_an_impossible_target():
    from django.core.exceptions import ValidationError

    c = CandidateAnswerFactory()
    with pytest.raises(ValidationError):
        candidate_routing_set(candidate_ids=[c.pk], target_ratings=21, priority=0)
    with pytest.raises(ValidationError):
        candidate_routing_set(candidate_ids=[c.pk], target_ratings=-1, priority=0)
    assert candidate_routing_set(candidate_ids=[c.pk], target_ratings=0, priority=-1) == 1  # "not to be rated"
    assert candidate_routing_set(candidate_ids=[c.pk], target_ratings=4, priority=3) == 1
    c.refresh_from_db()
    assert (c.target_ratings, c.priority) == (4, 3)


# --- pages ---------------------------------------------------------------------------------------------------


def _user(group: str | None):
    user = UserFactory(is_staff=group == "admin") if group else AnnotatorFactory()
    if group:
        user.groups.add(Group.objects.get(name=group))
    return user


@pytest.mark.django_db
def test_annotators_get_403_on_the_routing_and_rater_pages(client):
    client.force_login(_user(None))
    assert client.get(reverse("modelling:routing")).status_code == 403
    assert client.get(reverse("modelling:rater")).status_code == 403
    assert client.post(reverse("modelling:routing_switch"), {"enabled": "on"}).status_code == 403


@pytest.mark.django_db
def test_experts_read_the_routing_page_but_may_not_switch_it(client, routed_store):
    client.force_login(_user("expert"))
    page = client.get(reverse("modelling:routing"))
    assert page.status_code == 200 and b"Routing is off" in page.content
    assert client.post(reverse("modelling:routing_switch"), {"enabled": "on"}).status_code == 403
    assert not routing_policy_load().enabled


@pytest.mark.django_db
def test_an_admin_switches_routing_on_and_sees_who_got_more_raters_and_why(client, routed_store):
    _, cands = routed_store
    admin = _user("admin")
    client.force_login(admin)
    response = client.post(reverse("modelling:routing_switch"), {"enabled": "on"})
    assert response.status_code == 302
    policy = routing_policy_load()
    assert policy.enabled and policy.updated_by == admin
    page = client.get(reverse("modelling:routing"))
    body = page.content.decode()
    assert "Routing is on" in body
    assert page.context["summary"]["more"] == 2
    assert "Predicted disagreement (top σ² quantile)" in body and "k → 5" in body
    filtered = client.get(reverse("modelling:routing"), {"reason": "confident_agreeing"})
    assert len(filtered.context["page"].object_list) == 0


# --- the audit share ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_audit_share_answers_always_get_the_default_k_at_the_audit_priority(settings):
    """Answers whose question's random key is below the audit share are never stopped early nor given more raters,
    whatever their prediction and ratings; the others are routed as before. A benchmark can set its own share."""
    settings.ROUTING_AUDIT_SHARE = 0.5
    version = _active_version()
    cands = _candidates(version, [(0.95, 0.01)] * 4 + [(0.5, 0.10)] * 4)  # confident, and predicted disagreement
    keys = [0.1, 0.3, 0.6, 0.9] * 2
    for c, key in zip(cands, keys):  # the key is the question's (one question per answer here)
        Question.objects.filter(pk=c.question_version.question_id).update(random_key=key)
        CandidateAnswer.objects.filter(pk=c.pk).update(random_key=key)
    routing_policy_set(enabled=True)
    for c in cands:
        _rate(c, 5)  # matches a confident model's 4.8: the model's vote would stop it at one rating
    routing_refresh()
    for c, key in zip(cands, keys):
        c.refresh_from_db()
        audit = RoutingDecision.objects.filter(candidate=c, reason="audit").exists()
        if key < 0.5:
            assert (c.target_ratings, c.priority, audit) == (None, settings.ROUTING_AUDIT_PRIORITY, True)
        else:
            assert not audit and c.target_ratings in (1, 5)  # the model's vote, or predicted disagreement
    # A benchmark's own share replaces the setting; a larger share keeps every earlier member.
    from modelling.services.routing import benchmark_routing_set

    bench = cands[0].question_version.question.benchmark
    benchmark_routing_set(benchmark=bench, policy="disagreement", audit_share=0.7)
    audited = {c.pk for c in cands if c.question_version.question.benchmark_id == bench.pk
               and CandidateAnswer.objects.get(pk=c.pk).priority == settings.ROUTING_AUDIT_PRIORITY}
    assert audited == {c.pk for c, key in zip(cands, keys)
                       if c.question_version.question.benchmark_id == bench.pk and key < 0.7}
