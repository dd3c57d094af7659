"""The leaderboard over the store: hand-computed figures on a small fixture, the prediction sources (in-sample
refused, cross-fitted used), the command's formats, the API and the page (annotators refused), the datasheet."""
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotation.models import Judge, JudgeRating, QuestionVersion
from annotation.services.exports import dataset_export
from modelling.leaderboard import stats
from modelling.leaderboard.selectors import leaderboard_data_load
from modelling.leaderboard.services import leaderboard_budget_plan, leaderboard_compute
from modelling.models import (
    CrossFitFold,
    CrossFitRun,
    ModelVersion,
    Prediction,
    TrainingRun,
)
from modelling.services.training import model_version_register, training_config_clean
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    LALMFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

JSON_ROW_KEYS = {"lalm", "answers", "rated_answers", "ratings", "mean_rating", "sd_rating", "mean_correctness", "ci",
                 "answer_words", "judges", "orca", "ppi"}


@pytest.fixture(autouse=True)
def _resamples(settings):
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 2000


def _model_version(name: str, *, active: bool = False) -> ModelVersion:
    run = TrainingRun.objects.create(config=training_config_clean(config={}), status=TrainingRun.Status.DONE,
                                     artifact_path="/nonexistent")
    version = model_version_register(run=run)
    ModelVersion.objects.filter(pk=version.pk).update(name=name, is_active=active)
    version.refresh_from_db()
    return version


@pytest.fixture
def store():
    """Benchmark B1: LALMs good/bad rated on q1–q3, 'unrated' never rated (an imported system)."""
    bench = BenchmarkFactory(name="B1")
    questions = [QuestionFactory(benchmark=bench, modality=m, category=c)
                 for m, c in (("sound", "Counting"), ("sound", "Counting"), ("speech", "Speech"))]
    good, bad, unrated = (LALMFactory(name=n) for n in ("good", "bad", "unrated"))
    texts = {good: ["a dog barking", "two dogs", "hello world again now"], bad: ["a violin", "cat", "nothing"],
             unrated: ["x y", "z"]}
    answers = {(lalm.name, i): CandidateAnswerFactory(question_version=questions[i].current_version, lalm=lalm,
                                                      text=text)
               for lalm, ts in texts.items() for i, text in enumerate(ts)}
    u1, u2, u3 = (AnnotatorFactory() for _ in range(3))
    for (lalm, i), scores in {("good", 0): (5, 4), ("good", 1): (5,), ("good", 2): (3, 3), ("bad", 0): (1, 2),
                              ("bad", 1): (2,)}.items():
        for annotator, score in zip((u1, u2), scores):
            RatingFactory(candidate=answers[(lalm, i)], annotator=annotator, score=score)
    # not counted: an invalidated rating, a U rating without score, a rating of an answer to an old version
    RatingFactory(candidate=answers[("good", 2)], annotator=u3, score=1, is_valid=False)
    RatingFactory(candidate=answers[("bad", 2)], annotator=u3, score=None, codes="U")
    q = questions[1]
    v2 = QuestionVersion.objects.create(question=q, number=2, question_text="new", reference_answer="r",
                                        source=QuestionVersion.Source.EXPERT)
    old = answers[("good", 1)]
    q.current_version = v2
    q.save(update_fields=["current_version"])
    for lalm, text in ((good, "two dogs"), (bad, "cat")):
        answers[(lalm.name, 1, "v2")] = CandidateAnswerFactory(question_version=v2, lalm=lalm, text=text)
    # the v1 answers of q2 no longer count; re-rate v2 as v1 was
    RatingFactory(candidate=answers[("good", 1, "v2")], annotator=u1, score=5)
    RatingFactory(candidate=answers[("bad", 1, "v2")], annotator=u1, score=2)
    RatingFactory(candidate=old, annotator=u3, score=1)
    unrated_q2 = CandidateAnswerFactory(question_version=v2, lalm=unrated, text="z")
    answers[("unrated", 1, "v2")] = unrated_q2
    judge = Judge.objects.create(name="j1", provider="openai", model="m")
    retired = Judge.objects.create(name="old", provider="openai", model="m", is_active=False)
    JudgeRating.objects.create(candidate=answers[("good", 0)], judge=judge, judge_name="m", score=5)
    JudgeRating.objects.create(candidate=answers[("bad", 0)], judge=judge, judge_name="m", score=1)
    JudgeRating.objects.create(candidate=answers[("bad", 0)], judge=retired, judge_name="m2", score=5)
    current = {k: v for k, v in answers.items() if v.question_version.question.current_version_id
               == v.question_version_id}
    return {"bench": bench, "questions": questions, "answers": current}


MU = {("good", 0): 0.8, ("good", 1, "v2"): 0.9, ("good", 2): 0.6, ("bad", 0): 0.2, ("bad", 1, "v2"): 0.3,
      ("bad", 2): 0.1, ("unrated", 0): 0.5, ("unrated", 1, "v2"): 0.7}


def _predict(version, answers, keys=MU):
    for key in keys:
        Prediction.objects.create(candidate=answers[key], model_version=version, mu=MU[key], variance=0.01,
                                  alpha=2, beta=2)


def test_the_figures_equal_hand_computed_ones(store):
    board = leaderboard_compute(benchmark="B1")
    rows = {r.lalm: r for r in board.rows}
    assert [r.lalm for r in board.rows] == ["good", "bad", "unrated"]
    good, bad, unrated = rows["good"], rows["bad"], rows["unrated"]
    assert (good.answers, good.rated_answers, good.ratings) == (3, 3, 5)
    assert good.mean_rating == 4.0 and good.sd_rating == 1.0  # 5 4 5 3 3
    assert good.mean_correctness == pytest.approx((0.875 + 1.0 + 0.5) / 3, abs=1e-4)
    # three questions resampled: all-q3 (mean 0.5) and all-q2 (1.0) each have probability 1/27 > 2.5 %
    assert good.ci == (0.5, 1.0)
    assert good.answer_words == 3.0
    assert (bad.answers, bad.rated_answers, bad.ratings) == (3, 2, 3)
    assert bad.mean_rating == pytest.approx(5 / 3, abs=1e-4) and bad.sd_rating == pytest.approx(0.57735, abs=1e-4)
    assert bad.mean_correctness == 0.1875
    assert bad.ci == (0.125, 0.25)  # resamples without q2 (or without q1) have probability 7/27
    assert bad.answer_words == pytest.approx(4 / 3, abs=0.01)
    assert unrated.orca_only and unrated.answers == 2 and unrated.mean_rating is None and unrated.ci is None
    assert good.judges == {"j1": 1.0} and bad.judges == {"j1": 0.0} and unrated.judges == {"j1": None}
    assert good.orca is None and good.ppi is None and board.model_version is None
    pair = board.pairwise[0]
    assert (pair.a, pair.b, pair.n, pair.mean_diff, pair.verdict) == ("good", "bad", 2, 0.75, "a>b")


def test_in_sample_predictions_are_refused_for_ppi_and_the_human_ci_stands(store):
    active = _model_version("orca-active", active=True)
    _predict(active, store["answers"])
    board = leaderboard_compute(benchmark="B1")
    rows = {r.lalm: r for r in board.rows}
    assert board.model_version == "orca-active" and board.prediction_source == "active"
    assert "PPI refused: only in-sample predictions exist" in board.ppi_note
    assert all(r.ppi is None for r in board.rows)
    assert rows["good"].ci == (0.5, 1.0)
    assert rows["good"].orca == {"mu": pytest.approx(0.7667, abs=1e-4), "var": 0.01}
    assert rows["unrated"].orca == {"mu": 0.6, "var": 0.01}
    assert board.agreement["ORCA"] is None  # two rated LALMs are no ranking


def _crossfit(store) -> CrossFitRun:
    run = CrossFitRun.objects.create(config=training_config_clean(config={}), folds=2, status="done")
    q1, q2, q3 = store["questions"]
    for fold, held in enumerate(([q1.pk, q3.pk], [q2.pk])):
        version = _model_version(f"fold-{fold}")
        CrossFitFold.objects.create(crossfit=run, fold=fold, question_ids=held, model_version=version)
        _predict(version, store["answers"], [k for k in MU if store["answers"][k].question_version.question_id in held])
    return run


def test_cross_fitted_predictions_power_the_ppi_estimate_through_ppi_py(store):
    other = _model_version("orca-active", active=True)
    _predict(other, store["answers"])
    Prediction.objects.filter(model_version=other).update(mu=0.0)
    run = _crossfit(store)
    board = leaderboard_compute(benchmark="B1")
    rows = {r.lalm: r for r in board.rows}
    assert board.model_version == run.name and board.prediction_source == "crossfit" and not board.ppi_note
    expected = stats.ppi_mean(y=[0.875, 1.0, 0.5], yhat=[0.8, 0.9, 0.6], yhat_all=[0.8, 0.9, 0.6])
    assert rows["good"].ppi == {"estimate": pytest.approx(expected.estimate, abs=1e-4),
                                "ci": [pytest.approx(v, abs=1e-4) for v in expected.ci]}
    assert rows["good"].orca["mu"] == pytest.approx(0.7667, abs=1e-4)  # the cross-fit's μ, not the active model's 0
    assert rows["unrated"].ppi is None and rows["unrated"].orca == {"mu": 0.6, "var": 0.01}


def test_the_budget_planner_uses_the_shared_rated_questions(store):
    _crossfit(store)
    data = leaderboard_data_load(benchmark="B1")
    board = leaderboard_compute(benchmark="B1", data=data)
    plan = leaderboard_budget_plan(board=board, a="good", b="bad")
    assert plan.n_shared == 2 and plan.mean_diff == 0.75 and plan.sd_diff == 0.0
    assert plan.needed_pairs_uniform == 2 and plan.available_pairs == 3 and plan.orca_factor is not None
    with pytest.raises(ValueError, match="share 0 rated questions"):
        leaderboard_budget_plan(board=board, a="good", b="unrated")


def test_the_breakdown_by_modality_has_one_table_per_value(store):
    board = leaderboard_compute(benchmark="B1", by="modality")
    groups = dict(board.groups)
    assert set(groups) == {"sound", "speech"}
    speech = {r.lalm: r for r in groups["speech"]}
    assert speech["good"].mean_correctness == 0.5 and speech["bad"].rated_answers == 0
    with pytest.raises(ValueError):
        leaderboard_compute(by="lalm")


def test_the_command_prints_json_in_the_documented_shape_and_the_other_formats(store):
    out = StringIO()
    call_command("leaderboard", "--benchmark", "B1", "--json", stdout=out)
    payload = json.loads(out.getvalue())
    assert set(payload) == {"benchmark", "model_version", "rows"} and payload["benchmark"] == "B1"
    assert all(set(row) == JSON_ROW_KEYS for row in payload["rows"])
    assert payload["rows"][0]["ci"] == [0.5, 1.0]
    out = StringIO()
    call_command("leaderboard", "--markdown", stdout=out)
    text = out.getvalue()
    assert "| good | 3 | 3 | 5 | 4.00 | 1.00 | 0.792 | [0.500, 1.000] |" in text and "unrated (ORCA only)" in text
    out = StringIO()
    call_command("leaderboard", "--csv", "--by", "category", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("group,LALM,answers") and any(
        line.startswith("category: Speech,good,") for line in lines
    )
    out = StringIO()
    call_command("leaderboard", "--latex", stdout=out)
    assert r"\toprule" in out.getvalue() and r"ORCA $\mu$" in out.getvalue()
    with pytest.raises(CommandError, match="no benchmark named 'nope'"):
        call_command("leaderboard", "--benchmark", "nope")


def test_the_api_serves_experts_and_refuses_annotators(store, client):
    url = reverse("api-leaderboard")
    client.force_login(AnnotatorFactory())
    assert client.get(url).status_code == 403
    client.force_login(UserFactory(roles=["expert"]))
    response = client.get(url, {"benchmark": "B1"})
    assert response.status_code == 200
    body = response.json()
    assert body["rows"][0]["lalm"] == "good" and body["pairwise"][0]["verdict"] == "a>b"
    assert client.get(url, {"benchmark": "nope"}).status_code == 400
    schema = client.get(reverse("api-schema"), {"format": "json"}).json()
    assert "/api/leaderboard/" in schema["paths"]


def test_the_page_shows_tables_forest_plot_and_planner_to_experts_only(store, client):
    url = reverse("modelling:leaderboard")
    client.force_login(AnnotatorFactory())
    assert client.get(url).status_code == 403
    client.force_login(UserFactory(roles=["admin"], is_staff=True, is_superuser=True))
    response = client.get(url, {"benchmark": "B1", "a": "good", "b": "bad"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "<svg" in html and "good beats bad" in html and "(ORCA only)" in html
    assert "Uniform, human only" in html and "Start a cross-fit" in html


def test_an_admin_starts_a_cross_fit_with_the_default_or_the_fast_recipe(client, django_capture_on_commit_callbacks):
    from modelling.models import CrossFitRun
    from modelling.services.training import training_config_clean

    client.force_login(UserFactory(roles=["admin"], is_staff=True))
    url = reverse("modelling:crossfit_start")
    with django_capture_on_commit_callbacks(execute=False):
        client.post(url, {"folds": "3", "recipe": "fast"})
        client.post(url, {"folds": "4"})
        response = client.post(url, {"folds": "5", "recipe": "huge"}, follow=True)
    assert "recipe: must be one of default, fast" in response.content.decode()
    fast, default = CrossFitRun.objects.order_by("pk")
    assert (fast.folds, fast.config) == (3, training_config_clean(
        config={"epochs": 3, "max_length": 96, "rationale": False}))
    assert (default.folds, default.config) == (4, training_config_clean(config={}))


def test_the_dataset_datasheet_gets_the_leaderboard_table(store, tmp_path):
    dataset_export(out_dir=tmp_path / "out", benchmark=store["bench"])
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "## Leaderboard: B1" in readme and "| good | 3 | 3 | 5 |" in readme


def test_numbers_match_a_direct_computation_on_random_data():
    rng = np.random.default_rng(0)
    bench = BenchmarkFactory(name="R")
    lalms = [LALMFactory(name=f"L{i}") for i in range(3)]
    annotators = [AnnotatorFactory() for _ in range(3)]
    expected = {lalm.name: [] for lalm in lalms}
    for _ in range(6):
        version = QuestionFactory(benchmark=bench).current_version
        for lalm in lalms:
            candidate = CandidateAnswerFactory(question_version=version, lalm=lalm)
            scores = rng.integers(1, 6, size=rng.integers(1, 4))
            for annotator, score in zip(annotators, scores):
                RatingFactory(candidate=candidate, annotator=annotator, score=int(score))
            expected[lalm.name].append(float(np.mean((scores - 1) / 4)))
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="R").rows}
    for name, values in expected.items():
        assert rows[name].mean_correctness == pytest.approx(np.mean(values), abs=1e-4)


def test_answers_drawn_by_the_leaderboard_precision_policy_are_weighted_by_one_over_pi(store):
    from modelling.models import RoutingDecision

    _crossfit(store)
    answers = store["answers"]
    for key, drawn, pi in ((("good", 0), True, 0.5), (("good", 1, "v2"), True, 0.8), (("good", 2), True, 0.4)):
        RoutingDecision.objects.create(candidate=answers[key], reason="default", detail="before")
        RoutingDecision.objects.create(candidate=answers[key], reason="active_selected" if drawn else "active_skipped",
                                       inclusion_probability=pi)
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="B1").rows}
    expected = stats.active_mean(y=[0.875, 1.0, 0.5], yhat=[0.8, 0.9, 0.6], pi=[0.5, 0.8, 0.4],
                                 sampled=[True, True, True])
    assert rows["good"].ppi == {"estimate": pytest.approx(expected.estimate, abs=1e-4),
                                "ci": [pytest.approx(v, abs=1e-4) for v in expected.ci]}
    # bad's answers were not decided by the policy, and PPI++ needs 3 rated answers (λ and the mean are estimated
    # from them): bad has 2, so no prediction-powered figure, only the human-only one
    assert rows["bad"].ppi is None and rows["bad"].mean_correctness is not None
    RoutingDecision.objects.filter(candidate=answers[("good", 2)]).update(reason="active_skipped")
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="B1").rows}
    assert rows["good"].ppi is None  # two drawn answers are too few as well


def test_an_empty_store_gives_an_empty_table_everywhere(client):
    out = StringIO()
    call_command("leaderboard", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"benchmark": None, "model_version": None, "rows": []}
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    html = client.get(reverse("modelling:leaderboard")).content.decode()
    assert "No candidate answers yet." in html and "<svg" in html


def test_the_page_and_api_figures_are_computed_once_per_change_of_the_data(store, monkeypatch):
    from modelling.leaderboard import services

    calls = []
    real = services.leaderboard_compute
    monkeypatch.setattr(services, "leaderboard_compute", lambda **kw: calls.append(kw) or real(**kw))
    first, svg = services.leaderboard_cached(benchmark="B1")
    again, svg_again = services.leaderboard_cached(benchmark="B1")
    assert len(calls) == 1 and again.as_api() == first.as_api() and svg_again == svg
    # a new valid rating changes the figures: computed again, and the new rating counts
    unrated = store["answers"][("unrated", 0)]
    RatingFactory(candidate=unrated, annotator=AnnotatorFactory(), score=4)
    fresh, _ = services.leaderboard_cached(benchmark="B1")
    assert len(calls) == 2
    assert next(r for r in fresh.rows if r.lalm == "unrated").ratings == 1
    # so does retiring a judge
    Judge.objects.filter(name="j1").update(is_active=False)
    retired, _ = services.leaderboard_cached(benchmark="B1")
    assert len(calls) == 3 and "j1" not in retired.judges
