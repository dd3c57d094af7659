"""ORCA's quality per benchmark and where the platform uses ORCA: per-group figures and the interval of ρ, the gates
of routing by ORCA and of its vote as a rater (refused below the threshold, with the reason on the pages), the
PPI++ note, the leaderboard's figure, adaptation runs (parent, inherited split, weights) and activation only when no
benchmark got worse. Training itself runs in test_orca_adaptation_e2e.py."""
import math
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from annotation.services.routing_fields import candidate_routing_set
from modelling.models import (
    CrossFitFold,
    CrossFitRun,
    ModelVersion,
    Prediction,
    RoutingDecision,
    ScoringRun,
    TrainingRun,
    TrainingSplit,
)
from modelling.services import routing
from modelling.services.orca_evaluation import (
    activation_compare,
    compare_on_benchmark,
    per_group_metrics,
    rho_interval,
    rho_interval_clustered,
)
from modelling.services.orca_quality import (
    figures_from_per_group,
    gate_decide,
    orca_gates,
    ppi_lambda_note,
    ppi_lambdas,
)
from modelling.services.registry import model_version_activate
from modelling.services.routing import routing_policy_set
from modelling.services.training import (
    model_version_register,
    training_config_clean,
    training_retrain_if_due,
    training_run_promote_if_not_worse,
    training_run_start,
)
from modelling.services.training_split import training_split_parts
from tests.factories import (
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

SPLIT = {"kind": "unseen_questions", "seed": 3}


# --- figures -----------------------------------------------------------------------------------------------------


def test_rho_interval_is_fisher_z_with_the_bonett_wright_standard_error():
    # ρ 0.5, n 103: z = atanh 0.5 = 0.549306, se = √(1.125 / 100) = 0.106066, ± 1.959964 se
    lo, hi = rho_interval(0.5, 103)
    assert lo == pytest.approx(math.tanh(0.549306 - 1.959964 * 0.106066), abs=1e-5)
    assert hi == pytest.approx(math.tanh(0.549306 + 1.959964 * 0.106066), abs=1e-5)
    assert (round(lo, 3), round(hi, 3)) == (0.329, 0.639)
    assert rho_interval(None, 50) is None and rho_interval(0.5, 3) is None
    lo, hi = rho_interval(1.0, 10)
    assert -1 <= lo < hi <= 1


def test_the_clustered_interval_is_a_jackknife_over_questions_and_ignores_duplicated_answers():
    from scipy.stats import spearmanr
    from scipy.stats import t as student_t

    x = [0.1, 0.4, 0.35, 0.8, 0.6, 0.9, 0.2, 0.7]
    y = [0.0, 0.5, 0.25, 1.0, 0.5, 0.75, 0.25, 1.0]
    questions = [1, 1, 2, 2, 3, 3, 4, 4]
    rho = spearmanr(x, y).statistic
    z_left = []
    for q in (1, 2, 3, 4):  # by hand: leave each question out
        keep = [i for i, c in enumerate(questions) if c != q]
        z_left.append(math.atanh(spearmanr([x[i] for i in keep], [y[i] for i in keep]).statistic))
    mean = sum(z_left) / 4
    se = math.sqrt(3 / 4 * sum((z - mean) ** 2 for z in z_left))
    half = student_t.ppf(0.975, 3) * se
    lo, hi = rho_interval_clustered(x, y, questions)
    assert (lo, hi) == pytest.approx((math.tanh(math.atanh(rho) - half), math.tanh(math.atanh(rho) + half)))
    # Four copies of every answer are no more information: the clustered interval stays, the naive one shrinks.
    assert rho_interval_clustered(x * 4, y * 4, questions * 4) == pytest.approx((lo, hi))
    naive, naive4 = rho_interval(rho, 8), rho_interval(rho, 32)
    assert naive4[1] - naive4[0] < 0.6 * (naive[1] - naive[0])
    assert rho_interval_clustered(x[:6], y[:6], questions[:6]) is None  # 3 questions: too few
    # With more questions than blocks, blocks of questions are left out (the grouped jackknife).
    many = [i // 2 for i in range(400)]
    xs = [((i * 37) % 101) / 100 for i in range(400)]
    ys = [min(1.0, v + ((i * 13) % 7) / 20) for i, v in enumerate(xs)]
    full = rho_interval_clustered(xs, ys, many)
    blocked = rho_interval_clustered(xs, ys, many, max_blocks=20)
    assert blocked[0] < spearmanr(xs, ys).statistic < blocked[1]
    assert blocked == pytest.approx(full, abs=0.05)


def test_per_group_metrics_per_benchmark_and_per_benchmark_group():
    groups = ([{"benchmark": "A", "modality": "sound", "type": "short"}] * 3
              + [{"benchmark": "A", "modality": "speech", "type": "long"}] * 3
              + [{"benchmark": "B", "modality": "sound"}] * 4)
    mu = [0.1, 0.5, 0.9, 0.2, 0.4, 0.8, 0.9, 0.7, 0.3, 0.1]
    human = [0.0, 0.5, 1.0, 0.25, 0.375, 0.75, 0.0, 0.25, 0.75, 1.0]  # A: same order; B: reversed
    human_var = [0.0, math.nan, 0.125, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, math.nan]
    var = [0.01] * 10
    block = per_group_metrics(groups, mu, var, human, human_var)
    assert set(block) == {"benchmark=A", "benchmark=A|modality=sound", "benchmark=A|modality=speech",
                          "benchmark=A|type=short", "benchmark=A|type=long", "benchmark=B",
                          "benchmark=B|modality=sound"}
    a, b = block["benchmark=A"], block["benchmark=B"]
    assert a["n"] == 6 and a["rho"] == pytest.approx(1.0) and a["tau"] == pytest.approx(1.0)
    assert a["mae_mu"] == pytest.approx((0.1 + 0 + 0.1 + 0.05 + 0.025 + 0.05) / 6)
    assert a["mae_var"] == pytest.approx((0.01 + 0.115 + 0.01 * 3) / 5)  # the nan (one rating) is left out
    assert a["rho_ci"] is not None and a["rho_ci"][1] <= 1
    assert b["n"] == 4 and b["rho"] == pytest.approx(-1.0) and b["rho_ci"] == pytest.approx(list(rho_interval(-1.0, 4)))
    assert block["benchmark=A|type=short"]["n"] == 3 and block["benchmark=A|type=short"]["rho_ci"] is None
    # The page keeps subgroups that say something beyond their benchmark: B's only modality is all of B.
    figures = figures_from_per_group(block, source="test", model="m", label="l")
    assert [name for name, _ in figures["A"].subgroups] == ["modality=sound", "modality=speech", "type=long",
                                                            "type=short"]
    assert figures["B"].subgroups == [] and figures["B"].n == 4
    with pytest.raises(ValueError):
        per_group_metrics(groups, mu[:-1], var, human, human_var)
    # With the answers' questions the interval is the jackknife over them (A: 6 answers of 3 questions: too few).
    clustered = per_group_metrics(groups, mu, var, human, human_var, clusters=[1, 1, 2, 2, 3, 3, 4, 5, 6, 7])
    assert clustered["benchmark=A"]["rho_ci"] is None and clustered["benchmark=A"]["rho"] == a["rho"]
    assert clustered["benchmark=B"]["rho_ci"] == pytest.approx(
        list(rho_interval_clustered(mu[6:], human[6:], [4, 5, 6, 7])))


# --- a store: benchmarks rated after the active model's training -------------------------------------------------


def _active_model(name: str = "orca-active") -> ModelVersion:
    run = TrainingRun.objects.create(config=training_config_clean(config={}), status=TrainingRun.Status.DONE,
                                     artifact_path=f"/models/{name}", started_at=timezone.now() - timedelta(days=1))
    version = model_version_register(run=run)
    ModelVersion.objects.filter(pk=version.pk).update(name=name)
    return model_version_activate(run=run)


def _benchmark(name: str, n: int, version: ModelVersion, *, sign: int = 1, noise: float = 0.0, variance=None):
    """``n`` questions of a new benchmark, one answer each rated once (scores cycling 1–5), predicted by ``version``
    with μ following the score (``sign`` 1) or against it (−1), plus a deterministic ``noise``."""
    bench, lalm, annotator = BenchmarkFactory(name=name), LALMFactory(), UserFactory()
    answers = []
    for i in range(n):
        candidate = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version,
                                           lalm=lalm)
        score = 1 + i % 5
        RatingFactory(candidate=candidate, annotator=annotator, score=score)
        y = (score - 1) / 4
        mu = min(1.0, max(0.0, (y if sign > 0 else 1 - y) + noise * ((i * 7) % 5 - 2) / 2))
        Prediction.objects.create(candidate=candidate, model_version=version, mu=mu,
                                  variance=variance(i) if variance else 0.02, alpha=2, beta=2)
        answers.append(candidate)
    return bench, answers


@pytest.fixture
def gates_on(settings):
    settings.ORCA_ROUTING_MIN_RHO = 0.5
    settings.ORCA_RATER_MIN_RHO = 0.7
    settings.ORCA_QUALITY_MIN_ITEMS = 30
    settings.ROUTING_AUDIT_SHARE = 0.0


def test_the_gate_refuses_routing_below_the_threshold_and_says_why(gates_on, client, settings):
    active = _active_model()
    def spread(i):  # the first four answers far above the top-20 % cut-off, the others below it
        return 0.2 if i < 4 else 0.01 + 0.0001 * i

    good, good_answers = _benchmark("Good", 40, active, variance=spread)
    weak, weak_answers = _benchmark("Weak", 40, active, sign=-1, variance=spread)
    gates = orca_gates()
    assert gates[good.pk].routing.allowed and gates[good.pk].rater.allowed
    assert gates[good.pk].figure.n == 40 and gates[good.pk].figure.source == "held out by time"
    refused = gates[weak.pk].routing
    assert not refused.allowed and not gates[weak.pk].rater.allowed
    assert refused.reason.startswith("Routing by ORCA is refused on Weak: ρ = -1.00, 95 % CI")
    assert "n = 40 answers" in refused.reason and "below ORCA_ROUTING_MIN_RHO = 0.50" in refused.reason
    # Routing was on before the gate (thresholds off): Weak's high-σ² answers got more raters.
    settings.ORCA_ROUTING_MIN_RHO = settings.ORCA_RATER_MIN_RHO = None
    routing_policy_set(enabled=True)
    for c in weak_answers[:4]:
        c.refresh_from_db()
        assert (c.target_ratings, c.priority) == (5, 10)
    # Answers routing never touched keep what they have (here an importer's target), refused or not.
    untouched = next(c for c in weak_answers if not RoutingDecision.objects.filter(candidate=c).exists())
    candidate_routing_set(candidate_ids=[untouched.pk], target_ratings=1, priority=0)
    settings.ORCA_ROUTING_MIN_RHO, settings.ORCA_RATER_MIN_RHO = 0.5, 0.7
    routing.routing_refresh(force=True)
    for c in good_answers[:4]:
        c.refresh_from_db()
        assert (c.target_ratings, c.priority) == (5, 10)  # predicted disagreement: routed
    for c in weak_answers:
        c.refresh_from_db()
        assert (c.target_ratings, c.priority) == ((1, 0) if c == untouched else (None, 0))
    back = RoutingDecision.objects.filter(candidate__in=weak_answers[:4]).order_by("-id")[:4]
    assert {d.reason for d in back} == {routing.DEFAULT} and {d.old_target_ratings for d in back} == {5}
    assert all(d.detail.startswith("ORCA not used: Routing by ORCA is refused on Weak") for d in back)
    # no Weak answer is offered to expert review by ORCA's predicted ambiguity any more (latest decision not expert)
    latest = {c.pk: RoutingDecision.objects.filter(candidate=c).order_by("-id").first() for c in weak_answers}
    assert not any(d is not None and d.expert for d in latest.values())
    logged = RoutingDecision.objects.count()
    routing.routing_refresh(force=True)  # idempotent: nothing more to undo
    assert RoutingDecision.objects.count() == logged
    # An answer only offered to expert review (its fields at the defaults) leaves it too.
    flagged = weak_answers[-2]
    RoutingDecision.objects.create(candidate=flagged, model_version=active, reason=routing.PREDICTED_DISAGREEMENT,
                                   detail="predicted ambiguous", expert=True)
    routing.routing_refresh(force=True)
    last = RoutingDecision.objects.filter(candidate=flagged).order_by("-id").first()
    assert not last.expert and last.reason == routing.DEFAULT and last.detail.startswith("ORCA not used")

    expert = UserFactory()
    expert.groups.add(Group.objects.get(name="expert"))
    client.force_login(expert)
    page = client.get(reverse("modelling:routing")).content.decode()
    assert "Routing by ORCA is refused on Weak: ρ = -1.00" in page and "Routing by ORCA is offered on Good" in page
    assert "refused</span> <span class=\"hint\">ρ -1.00 &lt; ORCA_ROUTING_MIN_RHO 0.50" in page  # shown in the cell
    runs = client.get(reverse("modelling:training_runs")).content.decode()
    assert "Routing by ORCA is refused on Weak" in runs and "ρ 1.00" in runs
    rater = client.get(reverse("modelling:rater")).content.decode()
    assert "ORCA&#x27;s vote as a rater is refused on Weak" in rater


def test_between_the_thresholds_routing_stays_but_the_models_vote_is_refused(gates_on, settings):
    settings.ORCA_RATER_MIN_RHO = 0.99
    active = _active_model()
    bench, answers = _benchmark("Mid", 40, active, noise=0.2, variance=lambda i: 0.01 if i % 2 else 0.05)
    gate = orca_gates()[bench.pk]
    assert gate.routing.allowed and not gate.rater.allowed
    assert 0.5 <= gate.figure.rho < 0.99 and "below ORCA_RATER_MIN_RHO = 0.99" in gate.rater.reason
    routing_policy_set(enabled=True)
    # One rating within 0.25 of the model's 1 + 4μ at low σ² would stop at 1 rating with the vote; not here.
    assert not RoutingDecision.objects.filter(reason=routing.CONFIDENT_MODEL_AGREES).exists()
    settings.ORCA_RATER_MIN_RHO = 0.7
    routing_policy_set(enabled=True)
    assert RoutingDecision.objects.filter(reason=routing.CONFIDENT_MODEL_AGREES).exists()


def test_without_a_figure_or_with_too_few_answers_routing_is_refused(gates_on):
    active = _active_model()
    small, _ = _benchmark("Small", 12, active)
    empty = BenchmarkFactory(name="Empty")
    gates = orca_gates()
    assert "only 12 held-out answers" in gates[small.pk].routing.reason and not gates[small.pk].routing.allowed
    assert "ORCA has no out-of-sample figure there yet" in gates[empty.pk].routing.reason
    assert gate_decide(use="routing", benchmark="X", figure=None, threshold=None, min_items=30).allowed


def test_a_run_test_split_figure_and_a_cross_fit_figure(gates_on):
    """The active model's recorded test split counts for its benchmark; a cross-fit is the fall-back."""
    active = _active_model()
    per_group = {"benchmark=Seen": {"n": 45, "rho": 0.62, "rho_ci": [0.4, 0.77], "tau": 0.5, "mae_mu": 0.1,
                                    "mae_var": 0.02}}
    TrainingRun.objects.filter(pk=active.training_run_id).update(metrics={"test": {"per_group": per_group}})
    seen = BenchmarkFactory(name="Seen")
    gates = orca_gates()
    assert gates[seen.pk].routing.allowed and not gates[seen.pk].rater.allowed
    assert gates[seen.pk].figure.source == "held-out questions" and "on its test split" in gates[seen.pk].routing.reason
    # A benchmark the active model has no figure on, but the latest cross-fit has.
    other = _active_model("orca-other")  # now active: no test figure, nothing rated after it
    model_version_activate(run=active.training_run)
    crossfit = CrossFitRun.objects.create(config=training_config_clean(config={}), folds=2, status="done",
                                          finished_at=timezone.now())
    Prediction.objects.filter(model_version=active).delete()
    bench, answers = _benchmark("Crossfitted", 30, other)
    Prediction.objects.filter(model_version=other).delete()
    fold = ModelVersion.objects.create(training_run=TrainingRun.objects.create(
        config={}, status="done", split_kind="cross_fit"), name="fold-0", artifact_path="/f")
    CrossFitFold.objects.create(crossfit=crossfit, fold=0, question_ids=[], model_version=fold)
    for i, c in enumerate(answers):
        Prediction.objects.create(candidate=c, model_version=fold, mu=(i % 5) / 4, variance=0.02, alpha=2, beta=2)
    gate = orca_gates()[bench.pk]
    assert gate.figure.source == "cross-fit" and gate.routing.allowed and gate.figure.n == 30


# --- PPI++ and the leaderboard -------------------------------------------------------------------------------------


def test_the_ppi_note_says_where_orca_adds_nothing():
    assert ppi_lambda_note(lambdas={"a": 0.6, "b": 0.4}, benchmark="X", negligible=0.1) == ""
    assert ppi_lambda_note(lambdas={}, benchmark="X") == ""
    every = ppi_lambda_note(lambdas={"a": 0.0, "b": 0.05}, benchmark="X", negligible=0.1)
    assert every.startswith("ORCA adds nothing on X: PPI++'s power-tuning λ is at most 0.1 for every LALM")
    some = ppi_lambda_note(lambdas={"a": 0.0, "b": 0.8, "c": None}, benchmark="X", negligible=0.1)
    assert some.startswith("ORCA adds nothing on X for a: PPI++'s λ is at most 0.1")


def test_the_leaderboard_shows_the_cross_fits_figure_and_when_orca_adds_nothing(client):
    bench, lalms, annotator = BenchmarkFactory(name="Noise"), [LALMFactory(name="L1"), LALMFactory(name="L2")], \
        UserFactory()
    crossfit = CrossFitRun.objects.create(config=training_config_clean(config={}), folds=2, status="done",
                                          finished_at=timezone.now())
    fold = ModelVersion.objects.create(training_run=TrainingRun.objects.create(
        config={}, status="done", split_kind="cross_fit"), name="fold-0", artifact_path="/f")
    CrossFitFold.objects.create(crossfit=crossfit, fold=0, question_ids=[], model_version=fold)
    for i in range(10):
        version = QuestionFactory(benchmark=bench).current_version
        for lalm in lalms:
            c = CandidateAnswerFactory(question_version=version, lalm=lalm)
            RatingFactory(candidate=c, annotator=annotator, score=1 + i % 5)
            # μ unrelated to the ratings: low for the first five questions, high for the next five, and the
            # scores cycle 1–5 within each five (covariance 0)
            Prediction.objects.create(candidate=c, model_version=fold, mu=0.2 + 0.6 * ((i // 5) % 2),
                                      variance=0.02, alpha=2, beta=2)
    lambdas = ppi_lambdas(benchmark="Noise")
    assert set(lambdas) == {"L1", "L2"} and all(lam <= 0.1 for lam in lambdas.values())
    expert = UserFactory()
    expert.groups.add(Group.objects.get(name="expert"))
    client.force_login(expert)
    page = client.get(reverse("modelling:leaderboard") + "?benchmark=Noise").content.decode()
    assert "ORCA on Noise" in page and f"cross-fit {crossfit.name} (the predictions PPI++ uses)" in page
    assert "n&nbsp;20" in page
    assert "ORCA adds nothing on Noise: PPI++&#x27;s power-tuning λ is at most 0.1 for every LALM" in page


# --- adaptation runs -----------------------------------------------------------------------------------------------


def test_a_run_started_from_the_active_model_records_its_parent_and_keeps_its_model_settings():
    parent_run = TrainingRun.objects.create(
        config=training_config_clean(config={"head": "multinomial", "max_length": 64, "rationale": True}),
        status="done", artifact_path="/models/parent")
    parent = model_version_register(run=parent_run)
    run = training_run_start(config={"head": "beta", "max_length": 128, "epochs": 2,
                                     "group_weights": {"benchmark=New": 4}},
                             split=SPLIT, created_by=UserFactory(), parent=parent)
    assert run.parent == parent and run.config["init_from"] == "/models/parent"
    assert (run.config["head"], run.config["max_length"], run.config["rationale"]) == ("multinomial", 64, True)
    assert run.config["epochs"] == 2 and run.config["group_weights"] == {"benchmark=New": 4.0}
    with pytest.raises(ValidationError) as err:
        training_run_start(config={}, split={"kind": "held_out_lalms", "seed": 1, "held_out_lalms": ["x"]},
                           parent=parent)
    assert "split_kind" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        training_run_start(config={"init_from": "/somewhere"}, split=SPLIT)
    assert "init_from" in err.value.message_dict
    with pytest.raises(ValidationError) as err:
        training_config_clean(config={"group_weights": {"benchmark=X": 0}})
    assert "group_weights" in err.value.message_dict


def test_an_adapted_run_keeps_its_parents_split_and_splits_only_new_questions():
    bench = BenchmarkFactory()
    old = [QuestionFactory(benchmark=bench) for _ in range(10)]
    new_bench = BenchmarkFactory(name="New")
    new = [QuestionFactory(benchmark=new_bench) for _ in range(20)]
    parent_run = TrainingRun.objects.create(config=training_config_clean(config={}), status="done",
                                            artifact_path="/p")
    TrainingSplit.objects.create(run=parent_run, train=[q.pk for q in old[:8]], dev=[old[8].pk], test=[old[9].pk])
    parent = model_version_register(run=parent_run)
    child = TrainingRun.objects.create(config=training_config_clean(config={}), split_seed=3, parent=parent)
    parts = training_split_parts(run=child, questions=old + new)
    assert {q.pk for q in old[:8]} <= parts["train"] and old[8].pk in parts["dev"] and parts["test"] >= {old[9].pk}
    fresh = {name: parts[name] - {q.pk for q in old} for name in parts}
    assert sorted(len(fresh[n]) for n in ("train", "dev", "test")) == [2, 2, 16]  # 8:1:1 of the 20 new ones
    scratch = TrainingRun.objects.create(config=training_config_clean(config={}), split_seed=3)
    assert training_split_parts(run=scratch, questions=old + new) != parts  # a fresh split over everything


def test_the_form_starts_a_run_from_the_active_model(client, settings, django_capture_on_commit_callbacks):
    settings.ORCA_ADAPT_EPOCHS = 3
    active = _active_model()
    RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(
        benchmark=BenchmarkFactory(name="AQEval val")).current_version))
    admin = UserFactory(is_staff=True)
    admin.groups.add(Group.objects.get(name="admin"))
    client.force_login(admin)
    form = client.get(reverse("modelling:training_run_new") + "?start_from=active&weight=AQEval+val").content.decode()
    assert f"the active model {active.name} (adapt it)" in form
    assert '<option value="active" selected>' in form and 'value="AQEval val"' in form
    assert re.search(r'<input type="checkbox" name="weight_benchmarks" value="AQEval val"[^>]* checked', form)
    assert re.search(r'<input type="number" name="epochs" value="3"', form)  # ORCA_ADAPT_EPOCHS, not the preset's
    plain = client.get(reverse("modelling:training_run_new")).content.decode()
    assert re.search(r'<input type="number" name="epochs" value="6"', plain)  # training from the base: the preset's
    data = {"base_model": "minilm", "head": "beta", "pooling": "auto", "epochs": 2, "lr": 1e-4, "batch_size": 8,
            "freeze_layers": 2, "lora_rank": 0, "var_weight": 5, "max_length": 96, "question": "on", "device": "cpu",
            "split_kind": "unseen_questions", "seed": 7, "start_from": "active", "weight_benchmarks": ["AQEval val"],
            "benchmark_weight": 3}
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("modelling:training_run_new"), data)
    run = TrainingRun.objects.exclude(pk=active.training_run_id).get()
    assert response.status_code == 302 and run.parent == active and run.config["init_from"] == active.artifact_path
    assert run.config["group_weights"] == {"benchmark=AQEval val": 3.0}
    page = client.get(reverse("modelling:training_run", args=[run.pk])).content.decode()
    assert f"{active.name} (adapted: its saved model is the start" in page and "benchmark=AQEval val × 3" in page
    refused = client.post(reverse("modelling:training_run_new"), data | {"split_kind": "held_out_lalms",
                                                                        "held_out_lalms": []})
    assert "Adapting the active model tests on unseen questions" in refused.content.decode()


def test_periodic_retraining_adapts_the_active_model_and_weights_up_a_new_benchmark(
        settings, django_capture_on_commit_callbacks):
    settings.ORCA_RETRAIN_EVERY = 3
    settings.ORCA_ADAPT_WEIGHT = 5.0
    settings.ORCA_ADAPT_EPOCHS = 3
    active = _active_model()
    old_bench = BenchmarkFactory(name="Old")
    for _ in range(4):
        RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(
            benchmark=old_bench).current_version))
    TrainingRun.objects.filter(pk=active.training_run_id).update(source_rating_count=4,
                                                                  source_rating_counts={"Old": 4})
    TrainingSplit.objects.create(run=active.training_run, train=[], dev=[], test=[])
    new_bench = BenchmarkFactory(name="New")
    for _ in range(3):
        RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(
            benchmark=new_bench).current_version))
    with django_capture_on_commit_callbacks(execute=False):
        run = training_retrain_if_due()
    assert run.trigger == TrainingRun.Trigger.RETRAIN and run.parent == active
    assert run.config["init_from"] == active.artifact_path and run.config["group_weights"] == {"benchmark=New": 5.0}
    assert run.config["epochs"] == 3 and active.training_run.config["epochs"] != 3  # ORCA_ADAPT_EPOCHS


# --- activation: not worse on any benchmark --------------------------------------------------------------------


def test_a_drop_counts_only_beyond_the_tolerance_and_beyond_noise():
    human = [(i % 5) / 4 for i in range(60)]
    questions = [i // 2 for i in range(60)]
    same = compare_on_benchmark(mu_new=human, mu_active=human, human_mean=human, questions=questions, tolerance=0.02)
    assert same["diff"] == 0 and not same["worse"] and same["n_questions"] == 30
    noisy = [h + 0.3 * ((i * 7) % 5 - 2) / 2 for i, h in enumerate(human)]
    worse = compare_on_benchmark(mu_new=noisy, mu_active=human, human_mean=human, questions=questions, tolerance=0.02)
    assert worse["diff"] < -0.02 and worse["diff_ci"][1] < 0 and worse["worse"]
    lenient = compare_on_benchmark(mu_new=noisy, mu_active=human, human_mean=human, questions=questions,
                                   tolerance=1.0)
    assert not lenient["worse"]
    tiny = compare_on_benchmark(mu_new=[0.1, 0.2], mu_active=[0.2, 0.1], human_mean=[0, 1], questions=[1, 2],
                                tolerance=0.02)
    assert tiny["diff"] is None and not tiny["worse"]


def _held_out_run(active: ModelVersion, benchmarks: dict[str, float]) -> tuple[TrainingRun, dict]:
    """A finished retraining run and its test split's held-out answers: per benchmark 20 answers (questions not in
    the active model's split), predicted by the active model perfectly and by the new one with ``noise``."""
    held_out = {}
    seen_question = QuestionFactory()
    for name, noise in benchmarks.items():
        bench = BenchmarkFactory(name=name)
        for i in range(20):
            c = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
            y = (i % 5) / 4
            Prediction.objects.create(candidate=c, model_version=active, mu=y, variance=0.02, alpha=2, beta=2)
            held_out[c.pk] = (y + noise * ((i * 37) % 11 - 5) / 5, y, c.question_version.question_id, name)
    # an answer to a question the active model trained on: never compared
    c = CandidateAnswerFactory(question_version=seen_question.current_version)
    Prediction.objects.create(candidate=c, model_version=active, mu=0.5, variance=0.02, alpha=2, beta=2)
    held_out[c.pk] = (0.5, 0.5, seen_question.pk, "A")
    TrainingSplit.objects.create(run=active.training_run, train=[seen_question.pk])
    run = TrainingRun.objects.create(config=training_config_clean(config={}), status="done", artifact_path="/new",
                                     trigger=TrainingRun.Trigger.RETRAIN,
                                     metrics={"dev": {"unclamped": {"rho": 0.99}}})
    model_version_register(run=run)
    return run, held_out


def test_activation_is_refused_when_one_benchmark_gets_worse(settings, client):
    settings.ORCA_ACTIVATION_RHO_TOLERANCE = 0.02
    active = _active_model()
    run, held_out = _held_out_run(active, {"A": 0.0, "B": 0.6})
    decision = activation_compare(run=run, held_out=held_out)
    by_bench = {c["benchmark"]: c for c in decision["benchmarks"]}
    assert by_bench["A"]["n"] == 20 and not by_bench["A"]["worse"]  # the seen question's answer is left out
    assert by_bench["B"]["worse"] and decision["activate"] is False
    assert decision["reasons"][0].startswith("worse on B: ρ ")
    TrainingRun.objects.filter(pk=run.pk).update(activation_decision=decision)
    run.refresh_from_db()
    assert not training_run_promote_if_not_worse(run=run)  # despite its better dev ρ (0.99 against none)
    run.refresh_from_db()
    assert "not activated: worse on B" in run.log and not ScoringRun.objects.exists()
    assert ModelVersion.objects.get(is_active=True) == active
    expert = UserFactory()
    expert.groups.add(Group.objects.get(name="expert"))
    client.force_login(expert)
    page = client.get(reverse("modelling:training_run", args=[run.pk])).content.decode()
    assert "not activated automatically" in page and "worse on B: ρ " in page and "Compared with the active" in page


def test_activation_goes_ahead_when_no_benchmark_is_worse_and_not_against_a_changed_active_model(settings):
    active = _active_model()
    run, held_out = _held_out_run(active, {"A": 0.0, "B": 0.02})
    decision = activation_compare(run=run, held_out=held_out)
    assert decision["activate"] is True and decision["reasons"][0].startswith("not worse than orca-active on any of 2")
    TrainingRun.objects.filter(pk=run.pk).update(activation_decision=decision)
    run.refresh_from_db()
    assert training_run_promote_if_not_worse(run=run)
    assert ScoringRun.objects.get().model_version == run.model_version
    # The same decision against a model that is no longer the active one activates nothing.
    ScoringRun.objects.all().delete()
    _active_model("orca-newer")
    assert not training_run_promote_if_not_worse(run=run)
    run.refresh_from_db()
    assert "the active model changed since the comparison" in run.log
