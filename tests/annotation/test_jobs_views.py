"""Staff job pages (list, start form, htmx progress partial, retry, cancel) and the ``prepare`` command."""
import numpy as np
import pytest
import soundfile
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse

from annotation.models import LALM, Job, JobItem, Modality
from annotation.services.audio import audio_clip_from_path
from annotation.services.jobs import job_start
from tests.factories import BenchmarkFactory, QuestionFactory, UserFactory
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini, error_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def benchmark(tmp_path):
    bench = BenchmarkFactory(name="demo")
    for index in range(2):
        path = tmp_path / f"c{index}.wav"
        soundfile.write(path, (0.1 * np.sin(np.arange(3000 + index) * 0.05)).astype("float32"), 16000)
        question = QuestionFactory(
            benchmark=bench, external_id=f"q{index}", modality=Modality.SPEECH, version__rationale=""
        )
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])
    return bench


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(username="lead", is_staff=True, roles=["admin"]))
    return client


@pytest.fixture
def gemini():
    with FakeGemini() as fake, override_settings(
        GEMINI_API_KEY="key", GEMINI_BASE_URL=fake.url, PREPARATION_MAX_ATTEMPTS=1
    ):
        yield fake


def test_annotators_cannot_see_or_start_jobs(client, benchmark):
    client.force_login(UserFactory(username="annotator"))
    assert client.get(reverse("annotation:jobs")).status_code == 403
    assert client.post(
        reverse("annotation:job-start"), {"kind": "transcribe", "benchmark": benchmark.pk}
    ).status_code == 403


def test_experts_see_job_progress_but_cannot_start_retry_or_cancel_jobs(client, benchmark, gemini):
    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, overwrite=True)  # messages not sent: stays queued
    client.force_login(UserFactory(username="expert", is_staff=True, roles=["expert"]))

    listing = client.get(reverse("annotation:jobs"))
    assert listing.status_code == 200 and "Start a job" not in listing.content.decode()
    detail = client.get(reverse("annotation:job", args=[job.pk]))
    assert detail.status_code == 200 and reverse("annotation:job-cancel", args=[job.pk]) not in detail.content.decode()
    assert client.post(
        reverse("annotation:job-start"), {"kind": "rationale", "benchmark": benchmark.pk}
    ).status_code == 403
    assert client.post(reverse("annotation:job-retry", args=[job.pk])).status_code == 403
    assert client.post(reverse("annotation:job-cancel", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.status == Job.Status.QUEUED and Job.objects.count() == 1


@override_settings(GEMINI_API_KEY="")
def test_job_list_shows_unconfigured_providers_as_unavailable_with_the_reason(staff_client, benchmark):
    LALM.objects.create(name="local-qwen", provider=LALM.Provider.OPENAI)

    page = staff_client.get(reverse("annotation:jobs")).content.decode()

    assert "unavailable: GEMINI_API_KEY is not set" in page
    assert "local-qwen" in page and "OPENAI_COMPAT_BASE_URL is not set" in page
    assert "faster-whisper (tiny.en)" in page


def test_starting_a_job_from_the_page_runs_it_and_the_progress_reaches_100_percent(
    staff_client, benchmark, gemini, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("annotation:job-start"), {"kind": "rationale", "benchmark": benchmark.pk})

    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("annotation:job", args=[job.pk])
    assert job.created_by.username == "lead"
    page = staff_client.get(response["Location"]).content.decode()
    assert "100.0 %" in page and 'value="2"' in page and "every 2s" not in page

    listing = staff_client.get(reverse("annotation:jobs")).content.decode()
    assert f'href="{reverse("annotation:job", args=[job.pk])}"' in listing and "Done" in listing


def test_the_progress_partial_polls_every_two_seconds_while_the_job_runs(staff_client, benchmark, gemini):
    job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)  # messages not sent: stays queued

    response = staff_client.get(reverse("annotation:job", args=[job.pk]), HTTP_HX_REQUEST="true")

    body = response.content.decode()
    assert body.lstrip().startswith('<section id="job-progress"')
    assert 'hx-trigger="every 2s"' in body and "0.0 %" in body and "2 waiting" in body
    assert "<html" not in body


def test_an_unavailable_provider_comes_back_as_an_error_message(staff_client, benchmark):
    with override_settings(GEMINI_API_KEY=""):
        response = staff_client.post(
            reverse("annotation:job-start"), {"kind": "rationale", "benchmark": benchmark.pk}, follow=True
        )
    assert "GEMINI_API_KEY is not set" in response.content.decode()
    assert not Job.objects.exists()


def test_candidates_need_an_lalm(staff_client, benchmark):
    response = staff_client.post(reverse("annotation:job-start"), {"kind": "candidates", "benchmark": benchmark.pk})
    assert response.status_code == 400
    assert "Choose the LALM" in response.content.decode()


def test_retry_and_cancel_buttons(staff_client, benchmark, gemini, django_capture_on_commit_callbacks):
    gemini.script("generate", Reply(400, error_body(400, "INVALID_ARGUMENT", "bad audio")))
    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark)
    page = staff_client.get(reverse("annotation:job", args=[job.pk])).content.decode()
    assert "HTTP 400 bad audio" in page and "Retry failed items" in page

    with django_capture_on_commit_callbacks(execute=True):
        staff_client.post(reverse("annotation:job-retry", args=[job.pk]))
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 2, 0)

    queued = job_start(kind=Job.Kind.RATIONALE, benchmark=benchmark, overwrite=True)
    staff_client.post(reverse("annotation:job-cancel", args=[queued.pk]))
    queued.refresh_from_db()
    assert queued.status == Job.Status.CANCELLED
    assert set(queued.items.values_list("status", flat=True)) == {JobItem.Status.CANCELLED}


def test_prepare_command_starts_a_job_and_waits_for_it(benchmark, gemini, capsys, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        call_command("prepare", "rationale", "--benchmark", "demo", "--questions", "q1")
    out = capsys.readouterr().out
    job = Job.objects.get()
    assert f"job {job.pk}: Rationales of 1 items queued" in out
    job.refresh_from_db()
    assert job.status == Job.Status.DONE
    assert list(job.items.values_list("question__external_id", flat=True)) == ["q1"]


def test_prepare_command_names_bad_arguments(benchmark):
    with pytest.raises(CommandError, match="no benchmark named 'nope'"):
        call_command("prepare", "transcribe", "--benchmark", "nope")
    with pytest.raises(CommandError, match="--lalm is required"):
        call_command("prepare", "candidates", "--benchmark", "demo")
    with pytest.raises(CommandError, match="questions not in benchmark 'demo': zz"):
        call_command("prepare", "transcribe", "--benchmark", "demo", "--questions", "zz")
