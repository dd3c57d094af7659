"""Stage 1 jobs end to end in the test process (eager Celery): real providers' clients against fake servers."""
import logging

import numpy as np
import pytest
import soundfile
from django.test import override_settings

from annotation.jobs.items import job_cancel, job_item_claim, job_item_process, job_retry_failed
from annotation.models import LALM, CandidateAnswer, Job, JobItem, Modality, QuestionVersion
from annotation.services.audio import audio_clip_from_path
from annotation.services.jobs import JobStartError, job_progress, job_start
from annotation.services.versions import question_version_create
from config.observability import ContextFilter
from tests.factories import BenchmarkFactory, QuestionFactory
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini, error_body
from tests.fakes.openai_compat import FakeOpenAICompat

pytestmark = pytest.mark.django_db
FAST_RETRIES = {"PREPARATION_MAX_ATTEMPTS": 3, "PREPARATION_BACKOFF_BASE_S": 0.01, "PREPARATION_BACKOFF_MAX_S": 2.0}


@pytest.fixture
def benchmark(tmp_path):
    """Three questions with their own audio: two speech, one sound."""
    bench = BenchmarkFactory(name="demo")
    for index, modality in enumerate([Modality.SPEECH, Modality.SPEECH, Modality.SOUND]):
        path = tmp_path / f"clip{index}.wav"
        soundfile.write(path, (0.1 * np.sin(np.arange(4000 + index) * 0.05)).astype("float32"), 16000)
        question = QuestionFactory(
            benchmark=bench, external_id=f"q{index}", modality=modality, version__rationale=""
        )
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])
    return bench


@pytest.fixture
def gemini():
    with FakeGemini(reply=lambda request: f"Rationale {len(request.body)}") as fake, override_settings(
        GEMINI_API_KEY="key", GEMINI_BASE_URL=fake.url, RATIONALE_PROVIDER="gemini", **FAST_RETRIES
    ):
        yield fake


def run_job(capture, **kwargs) -> Job:
    with capture(execute=True):
        job = job_start(**kwargs)
    job.refresh_from_db()
    return job


def test_rationale_job_makes_a_new_current_version_per_question_with_usage(
    benchmark, gemini, django_capture_on_commit_callbacks
):
    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark)

    assert (job.status, job.total, job.done, job.failed) == (Job.Status.DONE, 3, 3, 0)
    assert job.started_at and job.finished_at
    for question in benchmark.questions.all():
        current = question.current_version
        assert current.number == 2
        assert current.source == QuestionVersion.Source.RATIONALE
        assert current.rationale.startswith("Rationale ")
        assert current.job == job
        first = question.versions.get(number=1)
        assert (current.question_text, current.reference_answer) == (first.question_text, first.reference_answer)
    item = job.items.first()
    assert item.status == JobItem.Status.DONE
    assert item.usage["total_tokens"] == 150
    assert item.result_version.rationale.startswith("Rationale ")


def test_rerunning_a_job_skips_items_done_for_the_current_version(
    benchmark, gemini, django_capture_on_commit_callbacks
):
    run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark)
    calls = len(gemini.generate_requests)

    again = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark)

    assert (again.status, again.done) == (Job.Status.DONE, 3)
    assert set(again.items.values_list("status", flat=True)) == {JobItem.Status.SKIPPED}
    assert len(gemini.generate_requests) == calls
    assert QuestionVersion.objects.filter(source=QuestionVersion.Source.RATIONALE).count() == 3


def test_a_new_question_version_gets_a_new_rationale_only_with_overwrite(
    benchmark, gemini, django_capture_on_commit_callbacks
):
    question = benchmark.questions.get(external_id="q0")
    question_version_create(question=question, source=QuestionVersion.Source.EXPERT, rationale="Expert text")

    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"])
    assert job.items.get().status == JobItem.Status.SKIPPED

    job = run_job(
        django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"],
        overwrite=True,
    )
    question.refresh_from_db()
    assert job.items.get().status == JobItem.Status.DONE
    assert question.current_version.number == 3 and question.current_version.rationale.startswith("Rationale ")


def test_transient_errors_are_retried_within_the_item(benchmark, gemini, django_capture_on_commit_callbacks):
    gemini.script(
        "generate",
        Reply(429, error_body(429, "RESOURCE_EXHAUSTED", "quota"), {"Retry-After": "0"}),
        Reply(500, error_body(500, "INTERNAL", "boom")),
    )

    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"])

    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 1, 0)
    assert len(gemini.generate_requests) == 3


def test_a_permanent_error_fails_the_item_with_the_message_and_retry_failed_redoes_it(
    benchmark, gemini, django_capture_on_commit_callbacks
):
    gemini.script("generate", Reply(400, error_body(400, "INVALID_ARGUMENT", "Unsupported audio")))

    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark)

    assert (job.status, job.done, job.failed) == (Job.Status.FAILED, 2, 1)
    failed = job.items.get(status=JobItem.Status.FAILED)
    assert "HTTP 400 Unsupported audio" in failed.error
    assert failed.question.current_version.number == 1
    assert job.error == "1 of 3 items failed"

    with django_capture_on_commit_callbacks(execute=True):
        assert job_retry_failed(job=job) == 1
    job.refresh_from_db()
    failed.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 3, 0)
    assert failed.status == JobItem.Status.DONE and failed.attempts == 2 and failed.error == ""


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.INFO)
        self.addFilter(ContextFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_a_jobs_log_records_carry_its_id_and_kind(benchmark, gemini, django_capture_on_commit_callbacks):
    gemini.script("generate", Reply(400, error_body(400, "INVALID_ARGUMENT", "Unsupported audio")))
    handler = _Records()
    logger = logging.getLogger("annotation.jobs")
    logger.addHandler(handler)
    try:
        job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark)
    finally:
        logger.removeHandler(handler)

    failed = [record for record in handler.records if "HTTP 400 Unsupported audio" in record.getMessage()]
    assert len(failed) == 1
    assert (failed[0].job_id, failed[0].job_kind) == (str(job.pk), "rationale")
    outside = logging.LogRecord("orca", logging.INFO, __file__, 1, "after the job", (), None)
    ContextFilter().filter(outside)
    assert (outside.job_id, outside.job_kind) == ("-", "-")


def test_exhausted_transient_errors_fail_the_item_with_the_message(
    benchmark, gemini, django_capture_on_commit_callbacks
):
    gemini.script("generate", *[Reply(503, error_body(503, "UNAVAILABLE", "overloaded"))] * 3)

    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"])

    assert (job.status, job.failed) == (Job.Status.FAILED, 1)
    assert "HTTP 503 overloaded (gave up after 3 attempts)" in job.items.get().error


def test_questions_without_audio_are_left_out_and_naming_one_is_an_error(benchmark, gemini):
    QuestionFactory(benchmark=benchmark, external_id="q9", modality=Modality.SPEECH, version__rationale="")

    assert job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark).total == 3
    with pytest.raises(JobStartError, match="questions without an audio clip: q9"):
        job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0", "q9"])


def test_candidates_job_asks_an_openai_compatible_lalm_once_per_version(benchmark, django_capture_on_commit_callbacks):
    with FakeOpenAICompat(reply=lambda r: r.json()["messages"][-1]["content"][0]["text"].upper()) as server:
        lalm = LALM.objects.create(
            name="qwen", provider=LALM.Provider.OPENAI, settings={"base_url": f"{server.url}/v1", "model": "q"}
        )
        job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.CANDIDATES, benchmark=benchmark, lalm=lalm)
        again = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.CANDIDATES, benchmark=benchmark, lalm=lalm)

    assert (job.status, job.done) == (Job.Status.DONE, 3)
    candidates = CandidateAnswer.objects.filter(lalm=lalm)
    assert candidates.count() == 3
    for candidate in candidates:
        assert candidate.text == candidate.question_version.question_text.upper()
        assert candidate.source_job == job
    assert set(again.items.values_list("status", flat=True)) == {JobItem.Status.SKIPPED}
    assert len(server.chat_requests) == 3


def test_a_gemini_lalm_answers_with_the_audio(benchmark, gemini, django_capture_on_commit_callbacks):
    lalm = LALM.objects.create(
        name="gemini-flash", provider=LALM.Provider.GEMINI, settings={"model": "gemini-2.0-flash"}
    )

    job = run_job(
        django_capture_on_commit_callbacks, kind=Job.Kind.CANDIDATES, benchmark=benchmark, lalm=lalm,
        external_ids=["q1"],
    )

    assert job.status == Job.Status.DONE
    assert CandidateAnswer.objects.get(lalm=lalm).text.startswith("Rationale ")
    assert gemini.generate_requests[0].path.endswith("/models/gemini-2.0-flash:generateContent")


@override_settings(GEMINI_API_KEY="")
def test_job_start_refuses_an_unconfigured_provider_with_the_reason(benchmark):
    with pytest.raises(JobStartError, match="GEMINI_API_KEY is not set"):
        job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)
    assert not Job.objects.exists()


def test_job_start_names_unknown_question_ids(benchmark, gemini):
    with pytest.raises(JobStartError, match="questions not in benchmark 'demo': nope, q77"):
        job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0", "nope", "q77"])


def test_transcription_covers_speech_questions_unless_all_modalities(benchmark):
    with override_settings(WHISPER_MODEL="tiny.en"):
        speech = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=benchmark)
        everything = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=benchmark, all_modalities=True)
    assert sorted(speech.items.values_list("question__external_id", flat=True)) == ["q0", "q1"]
    assert everything.total == 3


def test_transcription_goes_to_the_gpu_queue_when_configured(benchmark, gemini):
    with override_settings(PREPARATION_GPU_QUEUE="gpu"):
        transcribe = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=benchmark)
        rationale = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)
    plain = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=benchmark)
    assert (
        transcribe.params["queue"], rationale.params["queue"], plain.params["queue"]
    ) == ("gpu", "default", "default")


def test_cancel_stops_pending_items(benchmark, gemini, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)
    assert job_cancel(job=job) == 3
    for callback in callbacks:  # the messages were already sent: the tasks now find nothing to do
        callback()

    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert set(job.items.values_list("status", flat=True)) == {JobItem.Status.CANCELLED}
    assert gemini.generate_requests == []
    assert job_cancel(job=job) == 0


def test_a_duplicate_message_never_writes_a_second_result(benchmark, gemini):
    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"])
    item = job.items.get()

    assert job_item_process(item_pk=item.pk, task_id=item.task_id) == "done"
    assert job_item_process(item_pk=item.pk, task_id=item.task_id) == "not-claimed"
    assert job_item_process(item_pk=item.pk, task_id="another-message") == "not-claimed"
    assert QuestionVersion.objects.filter(source=QuestionVersion.Source.RATIONALE).count() == 1


def test_a_redelivered_message_takes_over_the_item_of_a_dead_worker(benchmark, gemini):
    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0"])
    item = job.items.get()
    dead_token = job_item_claim(item_pk=item.pk, task_id=item.task_id)  # the worker then died
    assert job_item_claim(item_pk=item.pk, task_id="some-other-message") is None

    assert job_item_process(item_pk=item.pk, task_id=item.task_id) == "done"

    item.refresh_from_db()
    assert item.claim_token != dead_token and item.attempts == 2
    job.refresh_from_db()
    assert (job.done, job.status) == (1, Job.Status.DONE)


def test_progress_reports_counts_percent_rate_and_eta(benchmark, gemini):
    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)
    before = job_progress(job=job)
    assert (before.total, before.pending, before.percent, before.rate_per_min) == (3, 3, 0.0, None)

    item = job.items.first()
    job_item_process(item_pk=item.pk, task_id=item.task_id)
    job.refresh_from_db()
    progress = job_progress(job=job)

    assert (progress.done, progress.pending, progress.percent) == (1, 2, 33.3)
    assert progress.rate_per_min > 0 and progress.eta_s > 0


def test_items_of_a_silent_worker_are_sent_again_after_the_lease(
    benchmark, gemini, settings, django_capture_on_commit_callbacks
):
    from datetime import timedelta

    from django.utils import timezone

    from annotation.jobs.items import job_items_requeue_stale

    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, external_ids=["q0", "q1"])
    first, second = job.items.order_by("pk")
    job_item_claim(item_pk=first.pk, task_id=first.task_id)  # this worker dies; its message is lost
    job_item_claim(item_pk=second.pk, task_id=second.task_id)  # this one is still working
    JobItem.objects.filter(pk=first.pk).update(
        claimed_at=timezone.now() - timedelta(seconds=settings.PREPARATION_ITEM_LEASE_S + 1)
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert job_items_requeue_stale() == 1

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, first.attempts) == (JobItem.Status.DONE, 2)
    assert second.status == JobItem.Status.RUNNING


def test_a_new_rationale_on_a_rated_question_works_like_a_correction(
    benchmark, gemini, django_capture_on_commit_callbacks, client
):
    """overwrite on a question in Stage 2: the old version's ratings stop counting with the job as the reason,
    its candidate answers are copied onto the new version and offered again, and the job page says so."""
    from annotation.models import Assignment, Rating
    from annotation.services.assignment import assignment_next_for_annotator
    from tests.factories import AnnotatorFactory, CandidateAnswerFactory, UserFactory, rate

    question = benchmark.questions.get(external_id="q0")
    old = question.current_version
    rated = CandidateAnswerFactory(question_version=old, text="Three barks.")
    first = rate(candidate=rated, annotator=AnnotatorFactory(), score=4)
    waiting = AnnotatorFactory()
    held = assignment_next_for_annotator(annotator=waiting)
    assert held.candidate_id == rated.pk

    job = run_job(django_capture_on_commit_callbacks, kind=Job.Kind.RATIONALE, benchmark=benchmark,
                  external_ids=["q0"], overwrite=True)

    question.refresh_from_db()
    new = question.current_version
    assert job.items.get().status == JobItem.Status.DONE and new.number == 2
    first.refresh_from_db()
    assert not first.is_valid and f"by job {job.pk} (" in first.invalid_reason and "v2" in first.invalid_reason
    assert Rating.objects.filter(pk=first.pk).exists()  # kept
    copy = CandidateAnswer.objects.get(question_version=new)
    assert (copy.lalm_id, copy.text, copy.valid_rating_count) == (rated.lalm_id, "Three barks.", 0)
    assert CandidateAnswer.objects.get(pk=rated.pk).valid_rating_count == 0
    # The annotator whose item was superseded gets the copy on the new version instead.
    again = assignment_next_for_annotator(annotator=waiting)
    assert again.candidate_id == copy.pk
    assert Assignment.objects.get(pk=held.pk).status == Assignment.Status.EXPIRED

    client.force_login(UserFactory(is_staff=True))
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "works like a correction" in page
    assert "<strong>1</strong> rating of the replaced versions stopped counting" in page
    assert "<strong>1</strong> candidate answer on the new versions waits to be rated" in page


def test_every_job_kind_is_registered_and_an_unknown_one_is_named():
    from annotation.jobs.registry import enqueue, kind_task

    kinds = ("transcribe", "judge", "export", "import", "training_run", "suggestion")
    assert {kind: kind_task(kind) for kind in kinds} == {
        "transcribe": "annotation.tasks.job_item_task",
        "judge": "annotation.tasks.job_item_task",
        "export": "annotation.tasks.export_job_task",
        "import": "annotation.tasks.table_import_job_task",
        "training_run": "modelling.tasks.training_run_task",
        "suggestion": "refinement.tasks.suggestion_generate_task",
    }
    with pytest.raises(KeyError, match="no job kind 'nonsense' is registered"):
        enqueue("nonsense", 1)
