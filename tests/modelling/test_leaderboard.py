"""The leaderboard over the store: hand-computed figures on a small fixture, each row's estimator and interval
method, the prediction sources (in-sample refused, cross-fitted used, stale cross-fit said), the sampling (uniform,
routed: audit share only, active: fixed design), the command's formats, the API, the page and its downloads
(annotators refused), the datasheet."""
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from scipy import stats as sps

from annotation.models import CandidateAnswer, Judge, JudgeRating, QuestionVersion
from annotation.services.exports import dataset_export
from modelling.leaderboard import stats
from modelling.leaderboard.rows import benchmark_severities
from modelling.leaderboard.selectors import leaderboard_data_load
from modelling.leaderboard.services import leaderboard_budget_plan, leaderboard_compute
from modelling.models import (
    ActiveDraw,
    CrossFitFold,
    CrossFitRun,
    ModelVersion,
    Prediction,
    QuestionDraw,
    RoutingDecision,
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

JSON_ROW_KEYS = {"lalm", "answers", "rated_answers", "rated_share", "labels", "ratings", "ratings_all", "mean_rating",
                 "sd_rating", "design", "estimand",
                 "estimate", "ci", "estimator", "ci_method", "mean_correctness", "human", "ppi", "sampling", "notes",
                 "answer_words", "judges", "orca"}
PAIR_KEYS = {"a", "b", "n_questions", "diff", "ci", "level", "e_value", "p_anytime", "p_holm", "verdict", "note",
             "method", "pairs"}


@pytest.fixture(autouse=True)
def _three_questions_suffice(settings):
    """The fixture's LALMs answer three questions; the default minimum for an interval is five (tested below)."""
    settings.LEADERBOARD_MIN_QUESTIONS = 3


def _adjusted_t(values):
    """The t_adjusted interval by hand: the values plus 0 and 1, Student t with n + 1 df, clipped to [0, 1] (rows
    keep full precision: compared to 1e-9)."""
    v = np.array(list(values) + [0.0, 1.0])
    half = sps.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return pytest.approx((max(0.0, v.mean() - half), min(1.0, v.mean() + half)), abs=1e-9)


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
    assert (good.answers, good.rated_answers, good.ratings, good.rated_share) == (3, 3, 5, 1.0)
    assert good.mean_rating == 4.0 and good.sd_rating == 1.0  # 5 4 5 3 3
    assert good.mean_correctness == pytest.approx((0.875 + 1.0 + 0.5) / 3, abs=1e-4)
    assert good.ci == _adjusted_t([0.875, 1.0, 0.5])
    assert (good.estimator, good.ci_method, good.sampling) == ("classical", "t_adjusted", "uniform")
    assert good.answer_words == 3.0
    assert (bad.answers, bad.rated_answers, bad.ratings, bad.rated_share) == (3, 2, 3, pytest.approx(2 / 3))
    assert bad.mean_rating == pytest.approx(5 / 3, abs=1e-4) and bad.sd_rating == pytest.approx(0.57735, abs=1e-4)
    assert bad.mean_correctness == 0.1875
    # two rated questions: a point estimate and no interval, and the row says why
    assert bad.estimate == 0.1875 and bad.ci is None and bad.ci_method is None
    assert any(note.startswith("too few questions: 2 labelled") for note in bad.notes)
    assert bad.answer_words == pytest.approx(4 / 3, abs=0.01)
    assert not unrated.orca_only and unrated.answers == 2 and unrated.mean_rating is None and unrated.ci is None
    assert good.judges == {"j1": 1.0} and bad.judges == {"j1": 0.0} and unrated.judges == {"j1": None}
    assert good.orca is None and good.with_orca is None and board.model_version is None
    pair = board.pairwise[0]
    assert (pair.a, pair.b, pair.n_questions, pair.diff, pair.verdict) == ("good", "bad", 2, 0.75, "undecided")
    assert pair.ci is None and pair.note == "2 counted shared questions (a verdict needs 10)"
    assert pair.method == "betting_holm" and pair.pairs == 1 and pair.p_holm == pair.p_anytime > 0.05


def test_below_the_minimum_of_questions_no_row_shows_an_interval(store, settings):
    settings.LEADERBOARD_MIN_QUESTIONS = 5
    board = leaderboard_compute(benchmark="B1")
    assert all(r.ci is None and r.human is None or r.human.ci is None for r in board.rows)
    good = next(r for r in board.rows if r.lalm == "good")
    assert good.estimate == pytest.approx(0.7917, abs=1e-4) and "too few questions: 3 labelled" in good.notes[0]


def test_in_sample_predictions_are_refused_for_ppi_and_the_human_ci_stands(store):
    active = _model_version("orca-active", active=True)
    _predict(active, store["answers"])
    board = leaderboard_compute(benchmark="B1")
    rows = {r.lalm: r for r in board.rows}
    assert board.model_version == "orca-active" and board.prediction_source == "active"
    assert "PPI refused: only in-sample predictions exist" in board.ppi_note
    assert all(r.with_orca is None for r in board.rows)
    assert rows["good"].ci == _adjusted_t([0.875, 1.0, 0.5]) and rows["good"].estimator == "classical"
    assert not any("cross-fit" in note for note in rows["good"].notes)  # said once, above the table
    assert rows["good"].orca == {"mu": pytest.approx(0.7667, abs=1e-4), "var": 0.01, "n": 3}
    assert rows["unrated"].orca == {"mu": 0.6, "var": 0.01, "n": 2} and rows["unrated"].orca_only
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
    expected = stats.ppi_mean(y=[0.875, 1.0, 0.5], yhat=[0.8, 0.9, 0.6], yhat_all=[0.8, 0.9, 0.6], min_questions=3)
    good = rows["good"]
    assert (good.estimator, good.ci_method) == ("ppi++", "ppi_t")
    assert good.estimate == pytest.approx(expected.estimate, abs=1e-4)
    assert good.ci == pytest.approx(expected.ci, abs=1e-4)
    assert good.human.estimator == "classical"  # the human-only figure stays beside it
    assert good.orca["mu"] == pytest.approx(0.7667, abs=1e-4)  # the cross-fit's μ, not the active model's 0
    assert rows["unrated"].with_orca is None and rows["unrated"].orca == {"mu": 0.6, "var": 0.01, "n": 2}


def test_a_stale_cross_fit_says_how_many_answers_lack_a_prediction_and_ppi_stands_down(store):
    _crossfit(store)
    q = QuestionFactory(benchmark=store["bench"])
    late = CandidateAnswerFactory(question_version=q.current_version, lalm=store["answers"][("good", 0)].lalm)
    RatingFactory(candidate=late, annotator=AnnotatorFactory(), score=4)
    good = next(r for r in leaderboard_compute(benchmark="B1").rows if r.lalm == "good")
    assert good.with_orca is None and (good.estimator, good.ci_method) == ("classical", "t_adjusted")
    assert "cross-fit stale: 1 answer without a cross-fitted prediction" in good.notes
    assert good.ci == _adjusted_t([0.875, 1.0, 0.5, 0.75])


def test_the_budget_planner_needs_enough_counted_questions_to_plan_on(store):
    board = leaderboard_compute(benchmark="B1")
    plan = leaderboard_budget_plan(board=board, a="good", b="bad")
    assert plan.n_counted == 2 and plan.mean_diff == 0.75 and plan.sd_diff == 0.0
    # one pair: Holm's level is 0.05; two counted questions are too few to plan on
    assert plan.level == pytest.approx(0.05) and plan.power == 0.8 and not plan.decided
    assert plan.available_questions == 1 and not plan.reachable  # q2: both answered, only good's is rated
    assert plan.needed_questions is None and plan.more_ratings is None and "rate at least 10 first" in plan.note
    with pytest.raises(ValueError, match="two different LALMs with counted rated answers"):
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
    assert set(payload) == {"benchmark", "model_version", "prediction_source", "sampling_note", "verdict_method",
                            "rows", "pairwise"}
    assert payload["verdict_method"] == ("anytime-valid betting test of equal means (Waudby-Smith & Ramdas 2024), "
                                         "Holm over 1 pair")
    assert payload["benchmark"] == "B1"
    assert all(set(row) == JSON_ROW_KEYS for row in payload["rows"])
    assert payload["rows"][0]["ci"] == [round(x, 4) for x in _adjusted_t([0.875, 1.0, 0.5]).expected]
    assert (payload["rows"][0]["ci_method"], payload["rows"][0]["estimator"]) == ("t_adjusted", "classical")
    assert [row["rated_share"] for row in payload["rows"]] == [1.0, 0.6667, 0.0]
    assert [set(p) for p in payload["pairwise"]] == [PAIR_KEYS]  # "unrated" has no label: in no pair
    assert payload["pairwise"][0]["verdict"] == "undecided"
    out = StringIO()
    call_command("leaderboard", "--markdown", stdout=out)
    text = out.getvalue()
    assert "| good | 3 | 3 | 100 | 3 | 5 | 4.00 | 1.00 | 0.792 |" in text and "unrated (not rated)" in text
    assert "t_adjusted = Student t on question means" in text
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


def test_two_questions_rated_four_three_and_three_two_give_no_interval_and_no_verdict():
    """The issue's case: two LALMs, two questions, ratings {4, 3} and {3, 2} — every paired difference equal.
    Disjoint intervals from two questions would read as "A beats B"; none is shown, and the pair is undecided."""
    bench = BenchmarkFactory(name="Two")
    a, b = LALMFactory(name="A"), LALMFactory(name="B")
    for score_a, score_b in ((4, 3), (3, 2)):
        version = QuestionFactory(benchmark=bench).current_version
        RatingFactory(candidate=CandidateAnswerFactory(question_version=version, lalm=a), score=score_a)
        RatingFactory(candidate=CandidateAnswerFactory(question_version=version, lalm=b), score=score_b)
    out = StringIO()
    call_command("leaderboard", "--benchmark", "Two", "--json", stdout=out)
    payload = json.loads(out.getvalue())
    assert [row["ci"] for row in payload["rows"]] == [None, None]
    assert [row["estimate"] for row in payload["rows"]] == [0.625, 0.375]
    (pair,) = payload["pairwise"]
    assert {k: pair[k] for k in ("a", "b", "n_questions", "diff", "ci", "verdict", "note", "method")} == {
        "a": "A", "b": "B", "n_questions": 2, "diff": 0.25, "ci": None, "verdict": "undecided",
        "note": "2 counted shared questions (a verdict needs 10)", "method": "betting_holm"}
    assert pair["level"] == 0.05 and pair["p_holm"] == pair["p_anytime"] > 0.05


def test_the_api_serves_experts_and_refuses_annotators(store, client):
    url = reverse("api-leaderboard")
    client.force_login(AnnotatorFactory())
    assert client.get(url).status_code == 403
    client.force_login(UserFactory(roles=["expert"]))
    response = client.get(url, {"benchmark": "B1"})
    assert response.status_code == 200
    body = response.json()
    assert body["rows"][0]["lalm"] == "good" and body["pairwise"][0]["verdict"] == "undecided"
    assert body["verdict_method"].startswith("anytime-valid betting test of equal means")
    assert set(body["pairwise"][0]) == PAIR_KEYS and body["pairwise"][0]["method"] == "betting_holm"
    assert body["rows"][0]["ci_method"] == "t_adjusted" and "t_adjusted" in body["ci_methods"]
    assert client.get(url, {"benchmark": "nope"}).status_code == 400
    schema = client.get(reverse("api-schema"), {"format": "json"}).json()
    assert "/api/leaderboard/" in schema["paths"]


def test_the_page_shows_estimators_matrix_downloads_and_planner_to_experts_only(store, client):
    url = reverse("modelling:leaderboard")
    client.force_login(AnnotatorFactory())
    assert client.get(url).status_code == 403
    client.force_login(UserFactory(roles=["admin"], is_staff=True, is_superuser=True))
    html = client.get(url, {"benchmark": "B1"}).content.decode()
    assert "<svg" in html and 'class="leaderboard-matrix"' in html and "All 1 pair<" in html
    assert "classical · <abbr" in html and "t_adjusted</abbr>" in html and "too few questions" in html
    assert "(not rated)" in html and "(ORCA only)" not in html  # no ORCA model: nothing is "ORCA only"
    assert 'title="Mean length of the LALM\'s answers in words">Words' in html
    for fmt in ("csv", "markdown", "latex"):
        assert f"/modelling/leaderboard/download/?format={fmt}&amp;benchmark=B1" in html
    # the planner preselects two different LALMs
    assert '<select name="a" id="plan-a"><option selected>good</option>' in html
    assert '<option selected>bad</option></select>' in html.split('id="plan-b"')[1]
    response = client.get(url, {"benchmark": "B1", "a": "good", "b": "good"})
    assert "Choose two different LALMs" in response.content.decode()
    html = client.get(url, {"benchmark": "B1", "a": "good", "b": "bad"}).content.decode()
    assert "no plan: 2 counted shared questions are too few to plan on" in html and "Start a cross-fit" in html
    assert "anytime-valid betting test of equal means (Waudby-Smith &amp; Ramdas 2024), Holm over 1 pair" in html
    assert "<th scope=\"col\">e-value</th>" in html and "<th scope=\"col\">Anytime p</th>" in html
    # an unknown benchmark or breakdown is said, not a server error
    html = client.get(url, {"benchmark": "nope", "by": "²"}).content.decode()
    assert "Showing all benchmarks" in html


def test_the_downloads_are_the_table_as_csv_markdown_and_latex_with_spreadsheet_formulas_escaped(store, client):
    formula = store["answers"][("good", 0)]
    formula.lalm.name = "=HYPERLINK(1)"
    formula.lalm.save()
    url = reverse("modelling:leaderboard_download")
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    csv_response = client.get(url, {"format": "csv", "benchmark": "B1"})
    assert csv_response["Content-Type"].startswith("text/csv")
    assert csv_response["Content-Disposition"] == 'attachment; filename="leaderboard-B1.csv"'
    text = csv_response.content.decode()
    assert text.startswith("group,LALM,answers,rated answers,% rated") and ",'=HYPERLINK(1)," in text
    markdown = client.get(url, {"format": "markdown", "benchmark": "B1", "by": "modality"})
    assert markdown["Content-Disposition"] == 'attachment; filename="leaderboard-B1-modality.md"'
    assert "## Leaderboard: B1" in markdown.content.decode() and "### modality: sound" in markdown.content.decode()
    latex = client.get(url, {"format": "latex"})
    assert latex["Content-Disposition"] == 'attachment; filename="leaderboard-all.tex"'
    assert r"\begin{tabular}" in latex.content.decode()
    bad = client.get(url, {"format": "xlsx"})
    assert bad.status_code == 400 and "Format: Select a valid choice" in bad.content.decode()
    client.force_login(AnnotatorFactory())
    assert client.get(url, {"format": "csv"}).status_code == 403


def test_an_admin_starts_a_cross_fit_with_the_default_or_the_fast_recipe(client, django_capture_on_commit_callbacks):
    from modelling.models import CrossFitRun
    from modelling.services.training import training_config_clean

    client.force_login(UserFactory(roles=["admin"], is_staff=True))
    url = reverse("modelling:crossfit_start")
    with django_capture_on_commit_callbacks(execute=False):
        client.post(url, {"folds": "3", "recipe": "fast"})
        client.post(url, {"folds": "4", "recipe": "default"})
        response = client.post(url, {"folds": "5", "recipe": "huge"}, follow=True)
        assert "Recipe: Select a valid choice" in response.content.decode()
        response = client.post(url, {"folds": "²", "recipe": "fast"}, follow=True)  # int("²") once gave a 500
        assert response.status_code == 200 and "Folds: Enter a whole number" in response.content.decode()
    fast, default = CrossFitRun.objects.order_by("pk")
    assert (fast.folds, fast.config) == (3, training_config_clean(
        config={"epochs": 3, "max_length": 96, "rationale": False}))
    assert (default.folds, default.config) == (4, training_config_clean(config={}))


def test_the_dataset_datasheet_gets_the_leaderboard_table(store, tmp_path):
    dataset_export(out_dir=tmp_path / "out", benchmark=store["bench"])
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "## Leaderboard: B1" in readme and "| good | 3 | 3 | 100 | 3 | 5 |" in readme


def test_numbers_match_a_direct_computation_on_random_data():
    rng = np.random.default_rng(0)
    bench = BenchmarkFactory(name="R")
    lalms = [LALMFactory(name=f"L{i}") for i in range(3)]
    expected = {lalm.name: [] for lalm in lalms}
    for _ in range(6):
        version = QuestionFactory(benchmark=bench).current_version
        for lalm in lalms:
            candidate = CandidateAnswerFactory(question_version=version, lalm=lalm)
            scores = rng.integers(1, 6, size=rng.integers(1, 4))
            # a fresh annotator for every rating: no annotator is shared across answers, so the two-way share is 0
            for annotator, score in zip([AnnotatorFactory() for _ in scores], scores):
                RatingFactory(candidate=candidate, annotator=annotator, score=int(score))
            expected[lalm.name].append(float(np.mean((scores - 1) / 4)))
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="R").rows}
    for name, values in expected.items():
        assert rows[name].mean_correctness == pytest.approx(np.mean(values), abs=1e-4)
        assert rows[name].ci == _adjusted_t(values)


def test_under_routing_only_the_audit_share_counts_and_the_row_says_so(store, settings):
    """Routing decided answers of B1 (its rated answers were chosen by priority and stopped early): the estimate
    uses the audit share (questions whose random key is below 0.2: q1 and q3, for every LALM) only; the other rated
    answers weigh 0."""
    answers = store["answers"]
    for question, value in zip(store["questions"], (0.05, 0.5, 0.1)):
        question.__class__.objects.filter(pk=question.pk).update(random_key=value)
        CandidateAnswer.objects.filter(question_version__question=question).update(random_key=value)
    RoutingDecision.objects.create(candidate=answers[("good", 1, "v2")], reason="confident_agreeing", detail="")
    settings.LEADERBOARD_MIN_QUESTIONS = 2
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="B1").rows}
    good, bad = rows["good"], rows["bad"]
    assert good.sampling == "routed" and good.labels == 2 and good.rated_answers == 3
    assert good.mean_correctness == pytest.approx((0.875 + 0.5) / 2, abs=1e-4)
    assert good.ci == _adjusted_t([0.875, 0.5])
    assert "routing chose what was rated: the estimates use the audit share only (2 of its 2 answers rated; " \
           "ratings of 1 routed answer weigh 0)" in good.notes
    assert bad.labels == 1 and bad.ci is None
    board = leaderboard_compute(benchmark="B1")
    assert "audit share" in board.sampling_note


def test_under_routing_verdicts_and_the_planner_count_audit_questions_only(store, settings):
    """Question keys 0.05 / 0.5 / 0.1 with a 0.2 audit share: q1 and q3 are in the audit for every LALM, q2 for
    none. Both LALMs' rated answers to q2 do not count; the pair counts q1 (both rated) and has q3 to come (bad's
    answer to it holds only a U rating)."""
    for question, value in zip(store["questions"], (0.05, 0.5, 0.1)):
        question.__class__.objects.filter(pk=question.pk).update(random_key=value)
        CandidateAnswer.objects.filter(question_version__question=question).update(random_key=value)
    RoutingDecision.objects.create(candidate=store["answers"][("good", 1, "v2")], reason="confident_agreeing",
                                   detail="")
    board = leaderboard_compute(benchmark="B1")
    q = [question.pk for question in store["questions"]]
    assert board.question_values == {"good": {q[0]: 0.875, q[2]: 0.5}, "bad": {q[0]: 0.125}}
    (pair,) = board.pairwise
    assert pair.n_questions == 1 and pair.verdict == "undecided"
    plan = leaderboard_budget_plan(board=board, a="good", b="bad")
    assert plan.n_counted == 1 and plan.available_questions == 1 and plan.counted_share == 1.0  # audit served first
    settings.ROUTING_AUDIT_PRIORITY = 5  # below the high priority: one served question in five is in the audit
    assert leaderboard_budget_plan(board=leaderboard_compute(benchmark="B1"), a="good", b="bad").counted_share == 0.2


def test_answers_drawn_by_the_leaderboard_precision_policy_are_weighted_by_one_over_pi(store):
    """A fixed design on every answer of B1: drawn answers with ratings are the labels, weighted 1/π; the active
    estimate with the cross-fitted μ is the headline, the one without ORCA the human-only figure."""
    _crossfit(store)
    answers = store["answers"]
    design = {("good", 0): (0.5, 0.1), ("good", 1, "v2"): (0.8, 0.3), ("good", 2): (0.4, 0.2),
              ("bad", 0): (0.5, 0.7), ("bad", 1, "v2"): (0.5, 0.2), ("bad", 2): (0.5, 0.3),
              ("unrated", 0): (0.5, 0.9), ("unrated", 1, "v2"): (0.5, 0.9)}
    for key, (pi, u) in design.items():
        ActiveDraw.objects.create(candidate=answers[key], pi=pi, u=u, budget=0.5, floor=0.2)
    rows = {r.lalm: r for r in leaderboard_compute(benchmark="B1").rows}
    good = rows["good"]
    # the raters' share: q0 rated 5, 4 → variance of (1, 0.75) / 2; q1 rated once → the others' mean sample variance
    # (0.03125 and 0) / 1; q2 rated 3, 3 → 0
    within = [0.03125 / 2, 0.03125 / 2, 0.0]
    # the annotators' share when the data carries who rated (u1 rates all three answers, u2 two of them)
    data = leaderboard_data_load(benchmark="B1")
    labels = [answers[("good", 0)].pk, answers[("good", 1, "v2")].pk, answers[("good", 2)].pk]
    crossed = {"ratings": [[(s - 1) / 4 for s in data.scores[c]] for c in labels],
               "raters": [data.raters[c] for c in labels] if getattr(data, "raters", None) else None,
               "severity": benchmark_severities(data, list(data.answers))[data.answers[labels[0]]["benchmark_id"]]}
    expected = stats.active_mean(y=[0.875, 1.0, 0.5], yhat=[0.8, 0.9, 0.6], pi=[0.5, 0.8, 0.4],
                                 sampled=[True, True, True], within=within, min_questions=3, **crossed)
    assert (good.sampling, good.estimator, good.ci_method) == ("active", "active", "design_t")
    assert good.estimate == pytest.approx(expected.estimate, abs=1e-4) and good.ci == pytest.approx(expected.ci,
                                                                                                     abs=1e-4)
    human = stats.active_mean(y=[0.875, 1.0, 0.5], pi=[0.5, 0.8, 0.4], sampled=[True, True, True], within=within,
                              min_questions=3, **crossed)
    assert good.mean_correctness == pytest.approx(human.estimate, abs=1e-4)
    # bad: q0 not drawn (u 0.7 ≥ π 0.5) though rated; q2 drawn but unrated: one label, no interval
    assert rows["bad"].labels == 1 and rows["bad"].ci is None
    # an answer created later (routing has not decided it yet) is drawn when the leaderboard reads it (issue #35):
    # π the budget of the benchmark's draws (no prediction), u its question's; the row keeps an estimate
    late = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=store["bench"]).current_version,
                                  lalm=answers[("good", 0)].lalm)
    good = next(r for r in leaderboard_compute(benchmark="B1").rows if r.lalm == "good")
    draw = ActiveDraw.objects.get(candidate=late)
    assert draw.pi == 0.5 and draw.u == QuestionDraw.objects.get(question=late.question_version.question).u
    assert good.answers == 4 and good.estimate is not None


def test_an_empty_store_gives_an_empty_table_everywhere(client):
    out = StringIO()
    call_command("leaderboard", "--json", stdout=out)
    payload = json.loads(out.getvalue())
    assert payload["rows"] == [] and payload["pairwise"] == [] and payload["model_version"] is None
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    html = client.get(reverse("modelling:leaderboard")).content.decode()
    assert "No candidate answers yet." in html and "<svg" in html


def test_the_page_and_api_figures_are_computed_once_per_change_of_the_data(store, monkeypatch):
    from modelling.leaderboard import render, services

    calls = []
    real = services.leaderboard_compute
    monkeypatch.setattr(services, "leaderboard_compute", lambda **kw: calls.append(kw) or real(**kw))
    first, svg = render.leaderboard_cached(benchmark="B1")
    again, svg_again = render.leaderboard_cached(benchmark="B1")
    assert len(calls) == 1 and again.as_api() == first.as_api() and svg_again == svg
    # a new valid rating changes the figures: computed again, and the new rating counts
    unrated = store["answers"][("unrated", 0)]
    RatingFactory(candidate=unrated, annotator=AnnotatorFactory(), score=4)
    fresh, _ = render.leaderboard_cached(benchmark="B1")
    assert len(calls) == 2
    assert next(r for r in fresh.rows if r.lalm == "unrated").ratings == 1
    # so does retiring a judge
    Judge.objects.filter(name="j1").update(is_active=False)
    retired, _ = render.leaderboard_cached(benchmark="B1")
    assert len(calls) == 3 and "j1" not in retired.judges
    # and a routing decision (the sampling changes)
    RoutingDecision.objects.create(candidate=unrated, reason="audit", detail="")
    routed, _ = render.leaderboard_cached(benchmark="B1")
    assert len(calls) == 4 and next(r for r in routed.rows if r.lalm == "good").sampling == "routed"


def test_a_clear_difference_over_enough_shared_questions_is_a_verdict_in_the_matrix_and_the_list(client):
    bench = BenchmarkFactory(name="Clear")
    strong, weak = LALMFactory(name="strong"), LALMFactory(name="weak")
    raters = [AnnotatorFactory() for _ in range(2)]
    for i in range(12):
        version = QuestionFactory(benchmark=bench).current_version
        for lalm, scores in ((strong, (5, 4 + i % 2)), (weak, (1, 2 - i % 2))):
            candidate = CandidateAnswerFactory(question_version=version, lalm=lalm)
            for rater, score in zip(raters, scores):
                RatingFactory(candidate=candidate, annotator=rater, score=score)
    board = leaderboard_compute(benchmark="Clear")
    (pair,) = board.pairwise
    assert (pair.a, pair.b, pair.n_questions, pair.verdict) == ("strong", "weak", 12, "a>b")
    assert pair.p_anytime <= 0.05 and pair.p_anytime == pytest.approx(1 / max(1.0, pair.e_value)) and pair.ci[0] > 0
    matrix = {row["lalm"]: {c["other"]: c["verdict"] for c in row["cells"]} for row in board.verdict_matrix()}
    assert matrix == {"strong": {"strong": "self", "weak": "better"}, "weak": {"strong": "worse", "weak": "self"}}
    client.force_login(UserFactory(roles=["expert"], is_staff=True))
    html = client.get(reverse("modelling:leaderboard"), {"benchmark": "Clear"}).content.decode()
    assert 'class="verdict-better" title="strong − weak: +0.875 over 12 shared questions' in html
    assert "strong beats weak" in html and "1 of 1 pairs decided by the anytime-valid betting test" in html
    title = next(c["title"] for row in board.verdict_matrix() for c in row["cells"] if c["verdict"] == "better")
    assert "0.95 confidence sequence [+" in title and "e-value" in title
    assert "(betting test, human only, Holm over 1 pair)" in title
