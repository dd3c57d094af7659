"""Faults around the Celery broker and external providers, through a real worker on a private Redis.

- Redis restarted while a Stage 1 job's messages are queued: /readyz answers 503 while it is down, the worker
  reconnects by itself and every item is done exactly once (Redis keeps the messages in its append-only file, as
  docker/compose.yaml runs it).
- An OpenAI-compatible provider answering 429, 500, too slowly or with a malformed body: bounded retries, then
  the item is FAILED with a message naming the cause and the job is FAILED with the count.
"""
import re
import time
from pathlib import Path

import pytest
from django.test import Client

from annotation.models import Job, JobItem, QuestionVersion
from annotation.services.jobs import job_start
from tests.fakes.base import Reply
from tests.fakes.openai_compat import FakeOpenAICompat

from .conftest import process_env, questions_with_audio, start_worker, stop, wait_for, worker_settings

pytestmark = [pytest.mark.worker, pytest.mark.faults]


def _start_rationale_job(bench, server_url: str) -> Job:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("django.conf.settings.RATIONALE_PROVIDER", "openai")
        mp.setattr("django.conf.settings.OPENAI_COMPAT_BASE_URL", server_url)
        mp.setattr("django.conf.settings.OPENAI_COMPAT_MODEL", "fake-audio-model")
        return job_start(kind=Job.Kind.RATIONALE, benchmark=bench)


def _worker_env(tmp_path: Path, *, broker_url: str, server_url: str, **overrides) -> dict:
    module = worker_settings(
        tmp_path,
        CELERY_BROKER_TRANSPORT_OPTIONS={
            "visibility_timeout": 5, "unacked_restore_interval": 1, "unacked_restore_throttle": 1
        },
        RATIONALE_PROVIDER="openai",
        OPENAI_COMPAT_BASE_URL=server_url,
        OPENAI_COMPAT_MODEL="fake-audio-model",
        **overrides,
    )
    return process_env(tmp_path, broker_url=broker_url, settings_module=module)


def test_a_redis_restart_with_queued_jobs_loses_nothing_and_the_worker_reconnects(
    postgres, private_redis, celery_app_on, tmp_path
):
    n_items = 10
    celery_app_on(private_redis.url)
    bench = questions_with_audio(tmp_path, n=n_items, name="redis-restart")
    with FakeOpenAICompat(reply=lambda request: "Grounded rationale.") as server:
        server.delay_s = 0.5
        job = _start_rationale_job(bench, f"{server.url}/v1")
        log = tmp_path / "worker.log"
        worker = start_worker(
            env=_worker_env(tmp_path, broker_url=private_redis.url, server_url=f"{server.url}/v1"), log=log
        )
        try:
            wait_for(lambda: Job.objects.get(pk=job.pk).done >= 2, timeout_s=90, what="2 items done", log=log)
            done_before = Job.objects.get(pk=job.pk).done
            private_redis.stop()
            down = Client().get("/readyz")  # the web side says the broker is gone
            assert down.status_code == 503 and down.json() == {"status": "unavailable"}
            time.sleep(3)
            private_redis.start()
            assert Client().get("/readyz").status_code == 200
            assert worker.poll() is None, "the worker died when Redis went away"
            wait_for(
                lambda: Job.objects.get(pk=job.pk).status in (Job.Status.DONE, Job.Status.FAILED),
                timeout_s=150, what="the job to finish after the Redis restart", log=log,
            )
        finally:
            stop(worker)

    job.refresh_from_db()
    assert done_before < n_items, "the job finished before Redis was restarted"
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, n_items, 0)
    assert set(JobItem.objects.filter(job=job).values_list("status", flat=True)) == {JobItem.Status.DONE}
    for question in bench.questions.all():  # exactly once: one rationale version per question
        assert question.versions.filter(source=QuestionVersion.Source.RATIONALE).count() == 1
    assert re.search(r"(?i)connect(ed|ion)", log.read_text(errors="replace"))


class FailingProvider(FakeOpenAICompat):
    """Replies by the marker in the question text: 429 / 500 forever, a reply slower than the timeout, a body that
    is not a chat completion, or a normal answer."""

    def route(self, request):
        body = request.body.decode(errors="replace")
        if request.path.endswith("/chat/completions"):
            for marker, reply in (
                ("MODE-429", Reply(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})),
                ("MODE-500", Reply(500, {"error": {"message": "internal error"}})),
                ("MODE-SLOW", Reply(200, {"choices": []}, delay_s=3.0)),
                ("MODE-MALFORMED", Reply(200, "{\"choices\": [ this is not json")),
            ):
                if marker in body:
                    return reply
        return super().route(request)


def test_provider_errors_are_retried_a_bounded_number_of_times_then_fail_the_item_visibly(
    postgres, private_redis, celery_app_on, tmp_path
):
    modes = ["MODE-429", "MODE-500", "MODE-SLOW", "MODE-MALFORMED", "MODE-OK"]
    celery_app_on(private_redis.url)
    bench = questions_with_audio(tmp_path, n=len(modes), name="providers", text=lambda i: f"Question {modes[i]}?")
    max_attempts = 3
    with FailingProvider(reply=lambda request: "Grounded rationale.") as server:
        job = _start_rationale_job(bench, f"{server.url}/v1")
        log = tmp_path / "worker.log"
        env = _worker_env(
            tmp_path, broker_url=private_redis.url, server_url=f"{server.url}/v1",
            PREPARATION_MAX_ATTEMPTS=max_attempts, PREPARATION_BACKOFF_BASE_S=0.1, PREPARATION_BACKOFF_MAX_S=0.2,
            PREPARATION_REQUEST_TIMEOUT_S=1.0,
        )
        started = time.monotonic()
        worker = start_worker(env=env, log=log)
        try:
            wait_for(
                lambda: Job.objects.get(pk=job.pk).status in (Job.Status.DONE, Job.Status.FAILED),
                timeout_s=120, what="the job to end", log=log,
            )
        finally:
            stop(worker)
        elapsed = time.monotonic() - started
        calls = {mode: sum(mode in r.body.decode(errors="replace") for r in server.chat_requests) for mode in modes}

    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.FAILED, 1, 4)
    assert job.error == "4 of 5 items failed"
    errors = {item.question.current_version.question_text: (item.status, item.error)
              for item in JobItem.objects.filter(job=job).select_related("question__current_version")}
    assert errors["Question MODE-OK?"] == (JobItem.Status.DONE, "")
    assert "HTTP 429" in errors["Question MODE-429?"][1]
    assert "HTTP 500" in errors["Question MODE-500?"][1]
    assert "no answer within 1 s" in errors["Question MODE-SLOW?"][1]
    assert "malformed" in errors["Question MODE-MALFORMED?"][1]
    assert all(status == JobItem.Status.FAILED for text, (status, _) in errors.items() if "OK" not in text)
    # Bounded: transient errors are tried max_attempts times, a malformed reply once (it is permanent).
    assert calls == {"MODE-429": max_attempts, "MODE-500": max_attempts, "MODE-SLOW": max_attempts,
                     "MODE-MALFORMED": 1, "MODE-OK": 1}
    assert elapsed < 90
