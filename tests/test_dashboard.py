"""The pipeline dashboard: per benchmark the funnel through the three stages, alpha, ORCA and running work."""
import pytest
from django.contrib.auth.models import Group

from annotation.models import Job, Modality
from annotation.services.versions import question_version_create
from modelling.models import ModelVersion, TrainingRun
from refinement.models import CorrectableField, Correction, CorrectionItem, Queue
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


@pytest.fixture(autouse=True)
def _setup(settings):
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    settings.ANNOTATION_TARGET_RATINGS = 2
    from django.core.cache import cache

    cache.clear()


def _expert(client):
    user = UserFactory(is_staff=True)
    user.groups.add(Group.objects.get(name="expert"))
    user.refresh_from_db()
    client.force_login(user)
    return user


def _pipeline():
    """A benchmark: 3 questions (2 speech, 1 with transcript; 2 with rationale), 2 LALMs, ratings, flags, a fix."""
    bench = BenchmarkFactory(name="MMAR-mini")
    other = BenchmarkFactory(name="Empty bench")
    q1 = QuestionFactory(benchmark=bench, modality=Modality.SPEECH, version__rationale="R1",
                         version__transcript="T1")
    q2 = QuestionFactory(benchmark=bench, modality=Modality.SPEECH, version__rationale="R2", version__transcript="")
    q3 = QuestionFactory(benchmark=bench, modality=Modality.SOUND, version__rationale="")
    qwen, taltech = LALMFactory(name="Qwen"), LALMFactory(name="TalTech")
    raters = [AnnotatorFactory() for _ in range(3)]
    rated = []
    for question in (q1, q2, q3):
        for lalm in (qwen, taltech):
            rated.append(CandidateAnswerFactory(question_version=question.current_version, lalm=lalm))
    # Rated to k=2: q1/qwen, q1/taltech, q2/qwen; q2/taltech has one rating.
    for candidate, scores in zip(rated, ([4, 5], [2, 2], [1, 2], [3])):
        for rater, score in zip(raters, scores):
            RatingFactory(candidate=candidate, annotator=rater, score=score)
        candidate.valid_rating_count = len(scores)
        candidate.save(update_fields=["valid_rating_count"])
    CorrectionItem.objects.create(question=q2, queue=Queue.REFERENCE, question_version=q2.current_version)
    CorrectionItem.objects.create(question=q3, queue=Queue.REFERENCE, question_version=q3.current_version)
    CorrectionItem.objects.create(question=q3, queue=Queue.DISAGREEMENT, question_version=q3.current_version)
    return bench, other, q1, q3, raters, qwen


def test_the_funnel_counts_each_stage_per_benchmark_and_lalm(client):
    bench, *_ = _pipeline()
    _expert(client)
    response = client.get("/dashboard/")
    assert response.status_code == 200
    funnels = {b.name: b for b in response.context["dashboard"].benchmarks}
    b = funnels["MMAR-mini"]
    assert (b.questions, b.with_rationale, b.speech, b.speech_with_transcript) == (3, 2, 2, 1)
    assert (b.candidates, b.candidates_rated_to_k, b.candidates_with_ratings) == (6, 3, 4)
    assert [(row.name, row.candidates, row.rated_to_k) for row in b.lalms] == [("Qwen", 3, 2), ("TalTech", 3, 1)]
    assert b.flagged == {"reference": 2, "disagreement": 1} and b.flagged_total == 3
    assert (b.corrected, b.rerated) == (0, 0)
    assert b.alpha is not None and b.alpha_ratings == 7
    assert funnels["Empty bench"].questions == 0 and funnels["Empty bench"].alpha is None

    html = response.content.decode()
    assert f'href="/refinement/queue/reference/?benchmark={bench.pk}">2</a>' in html
    assert f'href="/overview/?benchmark={bench.pk}">3</a>' in html
    assert 'href="/modelling/agreement/"' in html


def test_alpha_says_it_rests_on_the_answers_with_two_or_more_ratings_not_on_every_rating(client):
    """The newcomer's case: a benchmark imported with one human label per answer plus a few rated twice shows alpha
    "from 5 candidate answers with ≥ 2 ratings", not "on 1,975 ratings"."""
    bench = BenchmarkFactory(name="AQEval val")
    first, second = AnnotatorFactory(), AnnotatorFactory()
    for n in range(12):  # rated once: no part of alpha
        RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench)
                                                       .current_version), annotator=first, score=n % 5 + 1)
    for scores in ((1, 5), (5, 1), (2, 4), (4, 2), (3, 3)):
        candidate = CandidateAnswerFactory(question_version=QuestionFactory(benchmark=bench).current_version)
        for rater, score in zip((first, second), scores):
            RatingFactory(candidate=candidate, annotator=rater, score=score)
    _expert(client)
    response = client.get("/dashboard/")
    d = response.context["dashboard"]
    [b] = d.benchmarks
    assert (b.alpha_items, b.alpha_ratings) == (5, 22) and (d.alpha_items, d.alpha_ratings) == (5, 22)
    assert d.alpha is not None and d.alpha < 0
    text = " ".join(response.content.decode().split())
    assert "from 5 candidate answers with ≥ 2 ratings · 22 valid ratings in all" in text
    assert text.count("from 5 candidate answers with ≥ 2 ratings") == 2  # the overall figure and the benchmark's
    assert "in all)" in text and "in all )" not in text


def test_alpha_with_no_answer_rated_twice_says_it_is_not_defined(client):
    RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory().current_version), score=3)
    _expert(client)
    text = " ".join(client.get("/dashboard/").content.decode().split())
    assert "not defined: no candidate answer has two ratings yet" in text


def test_gold_items_and_attention_checks_are_not_counted_as_candidate_answers(client):
    from annotation.crowd.items import attention_check_create

    bench, *_ = _pipeline()
    question = bench.questions.order_by("pk").first()
    attention_check_create(question=question, text="This is an attention check: rate this answer 2.", expected_score=2)
    _expert(client)
    b = {b.name: b for b in client.get("/dashboard/").context["dashboard"].benchmarks}["MMAR-mini"]
    assert b.candidates == 6
    assert [row.name for row in b.lalms] == ["Qwen", "TalTech"]


def test_a_correction_counts_as_corrected_then_as_re_rated_once_its_new_version_is_rated(client):
    _, _, q1, _, raters, qwen = _pipeline()
    expert = _expert(client)
    old = q1.current_version
    new = question_version_create(question=q1, source="expert", created_by=expert, reference_answer="Fixed.")
    Correction.objects.create(question=q1, field=CorrectableField.REFERENCE_ANSWER, from_version=old, to_version=new,
                              old_text="A dog barking", new_text="Fixed.", expert=expert, reason="Wrong answer.")
    b = client.get("/dashboard/").context["dashboard"].benchmarks[1]
    assert b.name == "MMAR-mini" and (b.corrected, b.rerated) == (1, 0)
    # Candidate answers on the old version no longer count as the benchmark's current work.
    assert b.candidates == 4

    RatingFactory(candidate=CandidateAnswerFactory(question_version=new, lalm=qwen), annotator=raters[0], score=4)
    b = client.get("/dashboard/").context["dashboard"].benchmarks[1]
    assert (b.corrected, b.rerated) == (1, 1)


def test_it_shows_the_active_orca_version_with_its_rho_and_running_work_with_progress(client):
    bench, *_ = _pipeline()
    admin = UserFactory(is_staff=True, is_superuser=True, roles=["admin"])
    run = TrainingRun.objects.create(status=TrainingRun.Status.DONE, created_by=admin,
                                     metrics={"test": {"clamped": {"rho": 0.812}}, "dev": {"clamped": {"rho": 0.7}}})
    ModelVersion.objects.create(training_run=run, name="orca-1-minilm", artifact_path="/tmp/x", is_active=True,
                                metrics=run.metrics)
    TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, steps_done=30, steps_total=120)
    Job.objects.create(kind=Job.Kind.RATIONALE, status=Job.Status.RUNNING, benchmark=bench, total=10, done=4)
    Job.objects.create(kind=Job.Kind.RATIONALE, status=Job.Status.DONE, benchmark=bench, total=10, done=10)
    _expert(client)
    response = client.get("/dashboard/")
    d = response.context["dashboard"]
    assert d.active_version.name == "orca-1-minilm" and d.active_rho == 0.812 and d.active_rho_split == "test"
    assert [(w.url_name, w.percent) for w in d.running] == [("annotation:job", 40), ("modelling:training_run", 25)]
    html = response.content.decode()
    assert "ρ 0.812" in html and f'href="/modelling/runs/{run.pk}/"' in html


def test_annotators_may_not_open_it(client):
    user = AnnotatorFactory()
    user.refresh_from_db()
    client.force_login(user)
    assert client.get("/dashboard/").status_code == 403


def test_it_takes_a_fixed_number_of_queries_whatever_the_number_of_benchmarks(client, django_assert_max_num_queries):
    _pipeline()
    _expert(client)
    client.get("/dashboard/")  # fills the agreement cache
    for i in range(5):
        QuestionFactory(benchmark=BenchmarkFactory(name=f"more-{i}"))
    with django_assert_max_num_queries(20):
        assert client.get("/dashboard/").status_code == 200


def test_before_flags_are_evaluated_the_dashboard_says_so_and_how_instead_of_zero(client):
    from refinement.tasks import flags_refresh_task

    question = QuestionFactory(benchmark=BenchmarkFactory(name="ORCA imported"))
    RatingFactory(candidate=CandidateAnswerFactory(question_version=question.current_version), score=2, codes="R")
    _expert(client)
    html = client.get("/dashboard/").content.decode()
    assert "Flags not evaluated yet." in html and ">not evaluated yet</a>" in html
    assert 'action="/refinement/flags/evaluate/"' in html and 'name="next" value="/dashboard/"' in html

    flags_refresh_task()  # what the beat (or "Evaluate flags now") runs
    response = client.get("/dashboard/")
    html = response.content.decode()
    assert "not evaluated yet" not in html and response.context["dashboard"].flags_evaluated_at is not None
    assert response.context["dashboard"].benchmarks[0].flagged_total == 1


def test_work_queued_for_over_a_minute_asks_whether_a_worker_runs_and_how_to_start_one(client):
    from datetime import timedelta

    from django.utils import timezone

    old = TrainingRun.objects.create(status=TrainingRun.Status.QUEUED)
    TrainingRun.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    TrainingRun.objects.create(status=TrainingRun.Status.QUEUED)  # just queued: a worker may take it any moment
    TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, steps_total=10)
    _expert(client)
    response = client.get("/dashboard/")
    assert [w.waiting_for_worker for w in response.context["dashboard"].running] == [True, False, False]
    html = response.content.decode()
    assert html.count("no worker has started it") == 1 and "<code>make run</code>" in html
