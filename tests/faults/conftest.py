"""Fault tests: real PostgreSQL, real Redis and real Celery worker / gunicorn processes, bounded in time.

Run on PostgreSQL, e.g. ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/orca_faults pytest tests/faults``.
Every test skips with the reason when PostgreSQL (``DATABASE_URL``) or Redis (127.0.0.1:6379) is unreachable.
The tests never restart the shared services: a Redis restart uses a private ``redis-server`` on its own port and
folder, a PostgreSQL outage a private cluster (``initdb`` in a temporary folder) or ``pg_terminate_backend`` on the
test database's own connections. Shared Redis use is confined to db 9.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import soundfile
from django.db import connection

from annotation.models import Modality
from annotation.services.audio import audio_clip_from_path
from tests.factories import BenchmarkFactory, QuestionFactory

REPO = Path(__file__).resolve().parents[2]
SHARED_REDIS_URL = "redis://127.0.0.1:6379/9"


def port_free() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def redis_answers(port: int = 6379) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def wait_for(condition, *, timeout_s: float, what: str, log: Path | None = None, every_s: float = 0.2):
    """Poll ``condition()`` until true; on timeout fail naming ``what`` with the tail of ``log``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every_s)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{tail}")


def database_url() -> str:
    db = connection.settings_dict
    return (
        f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST'] or '127.0.0.1'}:"
        f"{db['PORT'] or 5432}/{db['NAME']}"
    )


@pytest.fixture
def postgres(transactional_db):
    """The (transactional) test database; skips unless it is PostgreSQL."""
    if connection.vendor != "postgresql":
        pytest.skip("fault tests need PostgreSQL shared with real processes: set DATABASE_URL=postgres://...")
    return connection


@pytest.fixture
def shared_redis():
    if not redis_answers(6379):
        pytest.skip("Redis is not reachable at 127.0.0.1:6379")
    return SHARED_REDIS_URL


class PrivateRedis:
    """A ``redis-server`` this test owns: its own port and folder, append-only file on, restartable."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.port = port_free()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [
            shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder),
            "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--logfile", str(self.folder / "redis.log"),
        ]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for(lambda: redis_answers(self.port), timeout_s=15, what=f"redis-server on port {self.port}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis-server flushes the append-only file and exits
            self.process.wait(timeout=15)

    def restart(self, *, down_s: float = 3.0) -> None:
        self.stop()
        time.sleep(down_s)
        self.start()


@pytest.fixture
def private_redis(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    folder = tmp_path / "redis"
    folder.mkdir()
    server = PrivateRedis(folder)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def celery_app_on(monkeypatch):
    """``use(url)`` points this process's Celery app (used by ``job_start``) at ``url``; undone afterwards."""
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager, app.conf.broker_transport_options)

    def reset_pools():
        app._pool = None
        app.amqp._producer_pool = None

    def use(url: str):
        # Celery prefers the CELERY_BROKER_URL environment variable over app.conf.broker_url.
        monkeypatch.setenv("CELERY_BROKER_URL", url)
        app.conf.broker_url = url
        app.conf.task_always_eager = False
        app.conf.broker_transport_options = {"visibility_timeout": 5}
        reset_pools()
        with app.connection_for_write() as conn:
            conn.default_channel.client.flushdb()
        return app

    yield use
    reset_pools()
    app.conf.broker_url, app.conf.task_always_eager, app.conf.broker_transport_options = saved


def worker_settings(folder: Path, *, extra_lines: str = "", **overrides) -> str:
    """Write a settings module for worker/web subprocesses (test settings + ``overrides``); returns its name."""
    lines = ["from config.settings.test import *  # noqa", "CELERY_TASK_ALWAYS_EAGER = False"]
    lines += [f"{key} = {value!r}" for key, value in overrides.items()]
    lines += [extra_lines]
    (folder / "fault_settings.py").write_text("\n".join(lines) + "\n")
    return "fault_settings"


def process_env(folder: Path, *, broker_url: str, settings_module: str, **extra: str) -> dict:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": settings_module,
        "PYTHONPATH": f"{REPO}{os.pathsep}{folder}",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        **extra,
    }


def start_worker(*, env: dict, log: Path, queues: str = "default", beat: bool = False) -> subprocess.Popen:
    """A real ``celery worker`` (solo pool, so SIGKILL kills the task with it); ``beat`` embeds the scheduler."""
    command = [
        sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", queues, "--pool", "solo",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
    ]
    if beat:
        command += ["-B", "--schedule", str(log.parent / "celerybeat-schedule")]
    # Its own process group, so stop() also ends the beat child process that -B forks.
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(process: subprocess.Popen) -> None:
    """SIGKILL the process and every process of its group (a worker's beat child, gunicorn's workers)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=15)


@contextmanager
def gunicorn(*, env: dict, log: Path):
    """gunicorn serving the project on 127.0.0.1 (1 worker, 4 threads); yields its base URL."""
    port = port_free()
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
        "--workers", "1", "--threads", "4", "--timeout", "60",
    ]
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import requests

        def up():
            try:
                return requests.get(f"{url}/healthz", timeout=1).status_code == 200
            except requests.RequestException:
                return False

        wait_for(up, timeout_s=60, what="gunicorn /healthz", log=log)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            stop(process)


def questions_with_audio(folder: Path, *, n: int, name: str, text=lambda index: "What is heard?"):
    """A benchmark of ``n`` speech questions, each with its own short synthetic clip and an empty rationale."""
    bench = BenchmarkFactory(name=name)
    for index in range(n):
        path = folder / f"{name}-{index}.wav"
        soundfile.write(path, (0.1 * np.sin(np.arange(3000 + index) * 0.05)).astype("float32"), 16000)
        question = QuestionFactory(
            benchmark=bench, external_id=f"{name}-{index}", modality=Modality.SPEECH,
            version__rationale="", version__question_text=text(index),
        )
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])
    return bench
