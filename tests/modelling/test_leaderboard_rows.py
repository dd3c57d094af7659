"""The leaderboard's rows (issue #35): the population is checked (an imported partial rating set, unserved
questions and skipped holes are labelled on the row, in the JSON, the CSV/Markdown notes and the API), a policy
switch makes the row use one design and say so, a raised audit share does not count early-stopped answers at once,
displayed means under routing come from the audit share, and known annotators widen the interval. Real database;
the design epochs are attached to the loaded data as ``selectors.LeaderboardData`` carries them (OWNERS interface
2), since the store's epoch tables are another module's."""
import pytest
from django.urls import reverse

from annotation.models import Assignment, CandidateAnswer, Question, Rating
from modelling.leaderboard.render import leaderboard_markdown
from modelling.leaderboard.selectors import leaderboard_data_load
from modelling.leaderboard.services import LeaderboardConfig, PredictionSet, leaderboard_build, leaderboard_compute
from modelling.models import ActiveDraw, RoutingDecision
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
IMPORTED = "rated answers only; imported ratings are not a random sample"


def _bench(n=12, *, name="R1", lalm="sys"):
    """One LALM answering ``n`` questions with keys (i + 0.5)/n (so key order is question order)."""
    bench = BenchmarkFactory(name=name)
    model = LALMFactory(name=lalm)
    answers = []
    for i in range(n):
        a = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version, lalm=model)
        CandidateAnswer.objects.filter(pk=a.pk).update(random_key=(i + 0.5) / n)
        if any(f.name == "random_key" for f in Question._meta.get_fields()):  # the question-level key (issue #35)
            Question.objects.filter(pk=a.question_version.question_id).update(random_key=(i + 0.5) / n)
        answers.append(a)
    return bench, answers


def _rate(answer, scores, annotators, **kw):
    for who, score in zip(annotators, scores):
        RatingFactory(candidate=answer, annotator=who, score=score, **kw)


def test_an_imported_partial_rating_set_is_labelled_and_a_full_import_is_not(client):
    bench, answers = _bench(10)
    people = [AnnotatorFactory() for _ in range(2)]
    for a, s in zip(answers[:6], (5, 4, 3, 5, 2, 4)):
        _rate(a, (s, s), people, source=Rating.Source.IMPORT)
    row = leaderboard_compute(benchmark="R1").rows[0]
    assert row.estimand == IMPORTED and row.as_json()["estimand"] == IMPORTED
    assert any("6 answers carry imported ratings, and imported ratings are not a random sample" in n
               for n in row.notes)
    board = leaderboard_compute(benchmark="R1")
    assert "imported ratings are not a random sample" in leaderboard_markdown(board)
    client.force_login(UserFactory(roles=["expert"]))
    payload = client.get(reverse("api-leaderboard"), {"benchmark": "R1"}).json()
    assert payload["rows"][0]["estimand"] == IMPORTED
    page = client.get(reverse("modelling:leaderboard"), {"benchmark": "R1"}).content.decode()
    assert "estimate of: rated answers only; imported ratings are not a random sample" in page
    # the import rates every answer: a census, nothing to label
    for a in answers[6:]:
        _rate(a, (3, 3), people, source=Rating.Source.IMPORT)
    assert leaderboard_compute(benchmark="R1").rows[0].estimand == "all answers"


def test_unserved_questions_are_left_out_and_skipped_holes_labelled():
    bench, answers = _bench(10)
    people = [AnnotatorFactory() for _ in range(2)]
    for a in answers[:8]:
        _rate(a, (4, 5), people)
    Question.objects.filter(pk=answers[9].question_version.question_id).update(status=Question.Status.RETIRED)
    row = leaderboard_compute(benchmark="R1").rows[0]
    assert row.human.n == 8 and "served answers only" in row.estimand
    assert any("1 answer to questions never served (retired) left out" in n for n in row.notes)
    # a skipped answer in the middle of the key order stays unrated while later ones were rated
    RatingFactory._meta.model.objects.filter(candidate=answers[3]).delete()
    Assignment.objects.create(candidate=answers[3], annotator=people[0], status=Assignment.Status.SKIPPED,
                              expires_at="2030-01-01T00:00:00Z")
    row = leaderboard_compute(benchmark="R1").rows[0]
    assert any("1 answer skipped by annotators and unrated" in n for n in row.notes)
    assert "skips" in row.estimand


def _switched(answers, people):
    """The first 6 answers rated 1, 1 (under the earlier design), answers 6–11 rated 4, 4 (under the current one)."""
    for a in answers[:6]:
        _rate(a, (1, 1), people)
    for a in answers[6:]:
        _rate(a, (4, 4), people)
    RoutingDecision.objects.create(candidate=answers[7], reason="confident_agreeing", detail="")


def _with_epochs(data, bench, epochs, epoch_of):
    data.epochs = {bench.pk: epochs}
    data.rating_epoch = {cid: [epoch_of(cid)] * len(s) for cid, s in data.scores.items()}
    return data


def _build(data):
    return leaderboard_build(data=data, preds=PredictionSet(None, "none"), config=LeaderboardConfig(3, 10, 100))


def test_a_policy_switch_makes_the_row_use_the_current_epoch_and_say_so():
    """LP → routing: the ratings of the active epoch are left out, the row is routed (audit share of the current
    epoch), never "active", and names its design."""
    bench, answers = _bench(12)
    people = [AnnotatorFactory() for _ in range(2)]
    _switched(answers, people)
    early = {a.pk for a in answers[:6]}
    data = _with_epochs(leaderboard_data_load(benchmark="R1"), bench, [
        {"number": 1, "policy": "active", "audit_share": None, "started": "2026-01-01T00:00:00+00:00"},
        {"number": 2, "policy": "routed", "audit_share": 0.8, "started": "2026-02-01T00:00:00+00:00"},
    ], lambda cid: 1 if cid in early else 2)
    row = _build(data).rows[0]
    assert row.sampling == "routed" and row.estimator == "classical"
    assert row.design == "current design since 2026-02-01: routing, audit 80 %; ratings of earlier epoch 1 left out"
    assert row.design in row.notes and row.as_json()["design"] == row.design
    assert any("6 answers rated under an earlier design left out" in n for n in row.notes)
    # audit 80 %: keys (i + 0.5)/12 < 0.8 → answers 6–9 of the six rated under routing
    assert row.labels == 4 and row.mean_correctness == pytest.approx(0.75)


def test_uniform_then_leaderboard_precision_uses_the_active_epoch_and_keeps_the_estimand():
    """Uniform → leaderboard precision: the answers rated under the uniform epoch (the first in key order) are left
    out, the rest is still a random part, so the row stays an estimate of all answers, from the active epoch."""
    bench, answers = _bench(12)
    people = [AnnotatorFactory() for _ in range(2)]
    for a in answers[:4]:
        _rate(a, (1, 1), people)
    for i, a in enumerate(answers):
        ActiveDraw.objects.create(candidate=a, pi=0.5, u=0.1 if i % 2 == 0 else 0.9, budget=6, floor=0.2)
        if i >= 4 and i % 2 == 0:
            _rate(a, (4, 5), people)
    early = {a.pk for a in answers[:4]}
    data = _with_epochs(leaderboard_data_load(benchmark="R1"), bench, [
        {"number": 1, "policy": "uniform", "audit_share": None, "started": "2026-01-01"},
        {"number": 2, "policy": "active", "audit_share": None, "started": "2026-02-01"},
    ], lambda cid: 1 if cid in early else 2)
    row = _build(data).rows[0]
    assert (row.sampling, row.estimator, row.labels) == ("active", "active", 4)
    assert row.design == ("current design since 2026-02-01: leaderboard precision (active); ratings of earlier "
                          "epoch 1 left out")
    assert row.estimand == "all answers" and row.mean_correctness == pytest.approx(0.875)
    assert any("4 answers rated under an earlier uniform design left out" in n for n in row.notes)


def test_a_raised_audit_share_does_not_count_early_stopped_answers_at_once():
    bench, answers = _bench(12)
    people = [AnnotatorFactory() for _ in range(2)]
    for a in answers:
        _rate(a, (3, 3), people)
    RoutingDecision.objects.create(candidate=answers[7], reason="confident_agreeing", detail="")
    data = _with_epochs(leaderboard_data_load(benchmark="R1"), bench, [
        {"number": 1, "policy": "routed", "audit_share": 0.25, "started": "2026-01-01"},
        {"number": 2, "policy": "routed", "audit_share": 0.5, "started": "2026-02-01"},
    ], lambda cid: 1)
    row = _build(data).rows[0]
    assert row.labels == 3  # keys < 0.25, not < 0.5: answers 3–5 were routed under epoch 1
    assert row.design.startswith("epochs combined (routing, audit 25 % since 2026-01-01, routing, audit 50 % since "
                                 "2026-02-01): answers with key < 0.25")


def test_displayed_means_under_routing_come_from_the_audit_share():
    bench, answers = _bench(12)
    people = [AnnotatorFactory() for _ in range(3)]
    for i, a in enumerate(answers):
        _rate(a, (5, 5, 5) if (i + 0.5) / 12 < 0.2 else (1,), people)  # audit answers: k ratings; the rest stopped
    RoutingDecision.objects.create(candidate=answers[5], reason="confident_model_agrees", detail="")
    row = leaderboard_compute(benchmark="R1").rows[0]
    assert row.sampling == "routed" and row.labels == 2  # keys 0.04 and 0.125 are below the audit share 0.2
    assert (row.mean_rating, row.ratings, row.ratings_all) == (5.0, 6, 16)
    assert row.as_json()["mean_rating"] == 5.0 and "| 16 |" not in leaderboard_markdown(leaderboard_compute(
        benchmark="R1"))
    assert any(n.startswith("mean rating ± sd and ratings: the 6 ratings the estimate uses") for n in row.notes)


def test_annotators_crossed_with_answers_widen_the_row_interval():
    """Two strict and two lenient annotators rate every answer: with the annotators known the row's interval is
    wider than with each rating its own cluster, and names them."""
    bench, answers = _bench(30)
    strict, lenient = [AnnotatorFactory() for _ in range(3)], [AnnotatorFactory() for _ in range(3)]
    for i, a in enumerate(answers):
        who = [strict[i % 3], lenient[i % 3]]
        _rate(a, (1 + i % 2, 5), who)
    data = leaderboard_data_load(benchmark="R1")
    data.raters = {}  # annotators unknown: each rating its own cluster
    naive = _build(data).rows[0]
    people = dict(Rating.objects.values_list("id", "annotator_id"))
    data.raters = {cid: [people[r] for r in Rating.objects.filter(candidate_id=cid).order_by("id").values_list(
        "id", flat=True)] for cid in data.scores}
    crossed = _build(data).rows[0]
    assert crossed.estimate == naive.estimate
    assert crossed.human.raters == 6 and crossed.as_json()["human"]["annotators"] == 6
    assert crossed.ci[1] - crossed.ci[0] > naive.ci[1] - naive.ci[0]


def test_routed_epochs_do_not_combine_across_the_migration_to_question_level_keys():
    """A benchmark routed before migration ``modelling 0014`` (epoch 1: per-answer audit) and routed after it (epoch
    2, started by the migration): the ratings of epoch 1 are left out — an answer early-stopped under its old key
    can lie in the question-level audit — while two routed epochs after the migration still combine."""
    from modelling.leaderboard.designs import PER_ANSWER_DESIGN_ENDS, design_of
    from modelling.leaderboard.selectors import LeaderboardData

    migrated = [{"number": 1, "policy": "routed", "audit_share": 0.2, "started": "2026-01-01",
                 "reason": "before design epochs were recorded (read from the routing tables)"},
                {"number": 2, "policy": "routed", "audit_share": 0.2, "started": "2026-11-28",
                 "reason": PER_ANSWER_DESIGN_ENDS + " (migrations annotation 0014, modelling 0014): …"}]
    data = LeaderboardData(sampling={1: "routed"}, audit_share={1: 0.2}, epochs={1: migrated})
    design = design_of(data, 1, epochs_with_ratings={1, 2})
    assert design.epochs == frozenset({2}) and "epoch 1 left out" in design.text
    later = migrated + [{"number": 3, "policy": "routed", "audit_share": 0.3, "started": "2026-11-29",
                         "reason": "audit share changed"}]
    data.epochs = {1: later}
    design = design_of(data, 1, epochs_with_ratings={1, 2, 3})
    assert design.epochs == frozenset({2, 3}) and design.share == 0.2
