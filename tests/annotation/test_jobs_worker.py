"""A Stage 1 job through a real Celery worker on Redis and PostgreSQL, with the worker SIGKILLed mid-job.

Needs Redis at 127.0.0.1:6379 (db 7 is used) and ``DATABASE_URL`` pointing at PostgreSQL, e.g.
``DATABASE_URL=postgres://postgres@127.0.0.1:5432/orca_prep pytest tests/annotation/test_jobs_worker.py``;
skips with the reason otherwise.
"""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile
from django.db import connection

from annotation.models import Job, JobItem, Modality, QuestionVersion
from annotation.services.audio import audio_clip_from_path
from annotation.services.jobs import job_start
from tests.factories import BenchmarkFactory, QuestionFactory
from tests.fakes.openai_compat import FakeOpenAICompat

REPO = Path(__file__).resolve().parents[2]
BROKER_URL = "redis://127.0.0.1:6379/7"
N_ITEMS = 8

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def redis_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def reset_pools(app) -> None:
    """Forget the app's connection and producer pools so the next message uses the current broker settings."""
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def redis_broker(monkeypatch):
    if not redis_reachable():
        pytest.skip("Redis is not reachable at 127.0.0.1:6379 (the worker test needs a real broker)")
    if connection.vendor != "postgresql":
        pytest.skip("the worker test needs PostgreSQL shared with the worker: set DATABASE_URL=postgres://...")
    from config.celery import app

    # Celery prefers the CELERY_BROKER_URL environment variable (CI sets db 0) over app.conf.broker_url.
    monkeypatch.setenv("CELERY_BROKER_URL", BROKER_URL)
    saved = (app.conf.broker_url, app.conf.task_always_eager, app.conf.broker_transport_options)
    app.conf.broker_url = BROKER_URL
    app.conf.task_always_eager = False
    app.conf.broker_transport_options = {"visibility_timeout": 5}
    reset_pools(app)
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()
    yield app
    reset_pools(app)
    app.conf.broker_url, app.conf.task_always_eager, app.conf.broker_transport_options = saved


def worker_env(*, tmp_path: Path, **extra: str) -> dict:
    """Environment of a worker on this test's PostgreSQL database and Redis db 7, with ``extra`` variables."""
    db = connection.settings_dict
    # Sweep for a dead worker's unacknowledged message every second (kombu's default is ~100 s).
    (tmp_path / "worker_settings.py").write_text(
        "from config.settings.test import *  # noqa\n"
        "CELERY_BROKER_TRANSPORT_OPTIONS = {'visibility_timeout': 5, 'unacked_restore_interval': 1,"
        " 'unacked_restore_throttle': 1}\n"
    )
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "worker_settings",
        "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": BROKER_URL,
        "CELERY_VISIBILITY_TIMEOUT_S": "5",
        "PYTHONPATH": f"{REPO}{os.pathsep}{tmp_path}",
        **extra,
    }


def start_worker(*, env: dict, log: Path) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default", "--pool", "solo",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
    ]
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def kill_and_restart_worker(*, env: dict, log: Path, job: Job, kill_when, what: str, timeout_s: float):
    """Start a worker, SIGKILL it once ``kill_when()`` holds (``what``, within ``timeout_s``), start another and wait
    for ``job`` to end. Returns the pks of the items running at the kill and the job's done count then."""
    worker = start_worker(env=env, log=log)
    try:
        wait_for(kill_when, timeout_s=timeout_s, what=what, log=log)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        killed_while = list(JobItem.objects.filter(job=job, status=JobItem.Status.RUNNING).values_list("pk", flat=True))
        done_at_kill = Job.objects.get(pk=job.pk).done
        worker = start_worker(env=env, log=log)
        wait_for(
            lambda: Job.objects.get(pk=job.pk).status in (Job.Status.DONE, Job.Status.FAILED),
            timeout_s=180, what="the job to finish after the restart", log=log,
        )
    finally:
        worker.kill()
        worker.wait(timeout=10)
    return killed_while, done_at_kill


def wait_for(condition, *, timeout_s: float, what: str, log: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; worker log:\n{log.read_text()[-4000:]}")


def test_a_killed_worker_is_restarted_and_every_item_is_done_exactly_once(redis_broker, tmp_path):
    bench = BenchmarkFactory(name="worker-bench")
    for index in range(N_ITEMS):
        path = tmp_path / f"clip{index}.wav"
        soundfile.write(path, (0.1 * np.sin(np.arange(3000 + index) * 0.05)).astype("float32"), 16000)
        question = QuestionFactory(
            benchmark=bench, external_id=f"w{index}", modality=Modality.SPEECH, version__rationale=""
        )
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])

    with FakeOpenAICompat(reply=lambda request: "Grounded rationale.") as server:
        server.delay_s = 0.6
        env = worker_env(
            tmp_path=tmp_path, RATIONALE_PROVIDER="openai", OPENAI_COMPAT_BASE_URL=f"{server.url}/v1",
            OPENAI_COMPAT_MODEL="fake-audio-model",
        )
        log = tmp_path / "worker.log"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("django.conf.settings.RATIONALE_PROVIDER", "openai")
            mp.setattr("django.conf.settings.OPENAI_COMPAT_BASE_URL", env["OPENAI_COMPAT_BASE_URL"])
            mp.setattr("django.conf.settings.OPENAI_COMPAT_MODEL", "fake-audio-model")
            job = job_start(kind=Job.Kind.RATIONALE, benchmark=bench)

        killed_while, done_at_kill = kill_and_restart_worker(
            env=env, log=log, job=job, timeout_s=100, what="3 items done and one in flight",
            kill_when=lambda: Job.objects.get(pk=job.pk).done >= 3
            and JobItem.objects.filter(job=job, status=JobItem.Status.RUNNING).exists(),
        )
        assert done_at_kill < N_ITEMS

    job.refresh_from_db()
    assert (job.status, job.done, job.failed, job.total) == (Job.Status.DONE, N_ITEMS, 0, N_ITEMS)
    for question in bench.questions.all():
        assert question.versions.filter(source=QuestionVersion.Source.RATIONALE).count() == 1
        assert question.current_version.rationale == "Grounded rationale."
    assert set(JobItem.objects.filter(job=job).values_list("status", flat=True)) == {JobItem.Status.DONE}
    assert killed_while, "the worker was killed between items, not mid-item"
    retried = JobItem.objects.get(pk=killed_while[0])
    assert retried.attempts == 2  # the redelivered message took the dead worker's item over


def test_a_worker_killed_mid_pack_is_restarted_and_every_packed_clip_is_transcribed_exactly_once(
    redis_broker, tmp_path
):
    """Six speech questions (the demo's espeak-ng clips, 3.3–7.2 s) make two packs, i.e. two messages; the worker
    is killed while it transcribes the first; the redelivered message reclaims that pack's items."""
    from django.test import override_settings

    from annotation.demo.synth import SPEECH_DIR

    bench = BenchmarkFactory(name="packed-worker-bench")
    clips = sorted(SPEECH_DIR.glob("*.flac"))
    for index in range(6):
        question = QuestionFactory(benchmark=bench, external_id=f"p{index}", modality=Modality.SPEECH)
        question.audio = audio_clip_from_path(path=clips[index % len(clips)])
        question.save(update_fields=["audio"])
    with override_settings(WHISPER_BACKEND="faster-whisper", WHISPER_MODEL="tiny.en", WHISPER_PACK_S=28.0,
                           WHISPER_PACK_GAP_S=1.0):
        job = job_start(kind=Job.Kind.TRANSCRIBE, benchmark=bench)
    assert len(set(job.items.values_list("task_id", flat=True))) == 2

    env = worker_env(
        tmp_path=tmp_path, WHISPER_BACKEND="faster-whisper", WHISPER_MODEL="tiny.en", WHISPER_CPU_THREADS="1"
    )
    killed_while, done_at_kill = kill_and_restart_worker(
        env=env, log=tmp_path / "worker.log", job=job, timeout_s=60, what="a pack in flight",
        kill_when=lambda: JobItem.objects.filter(job=job, status=JobItem.Status.RUNNING).exists(),
    )
    assert killed_while and done_at_kill < 6

    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 6, 0)
    for question in bench.questions.all():
        assert question.versions.filter(source=QuestionVersion.Source.TRANSCRIPTION).count() == 1
        assert question.current_version.transcript
    assert {item.attempts for item in JobItem.objects.filter(pk__in=killed_while)} == {2}
    assert all(item.usage["pack_clips"] > 1 for item in JobItem.objects.filter(job=job))
