"""PostgreSQL going away under a running gunicorn: /readyz says so (503) and recovers without a restart; a rating
whose transaction is cut off is answered 503 with Retry-After, leaves nothing behind and can be submitted again.

- A private PostgreSQL cluster (``initdb`` in a temporary folder, its own port) is stopped for a few seconds under
  gunicorn with persistent, health-checked connections (as in production).
- On the shared server, only the test database's own backend is terminated (``pg_terminate_backend``) while a
  rating submit waits inside its transaction, after the rating row and the candidate's count were written.
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest
import requests
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from annotation.models import Assignment, CandidateAnswer, Rating
from tests.factories import AnnotatorFactory, CandidateAnswerFactory

from .conftest import gunicorn, port_free, process_env, wait_for, worker_settings

pytestmark = [pytest.mark.faults]

PERSISTENT_CONNECTIONS = 'DATABASES["default"]["CONN_MAX_AGE"] = 60\nDATABASES["default"]["CONN_HEALTH_CHECKS"] = True'


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


class PrivateCluster:
    """A throwaway PostgreSQL cluster on 127.0.0.1:<port> in a temporary folder (run as ``postgres`` when root)."""

    def __init__(self):
        self.initdb, self.pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
        self.folder = Path(tempfile.mkdtemp(prefix="orca-faults-pg-"))
        self.data = self.folder / "data"
        self.port = port_free()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *command: str) -> None:
        if os.geteuid() == 0:
            command = ("runuser", "-u", "postgres", "--", *command)
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def create(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run(self.initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c fsync=off"
        self._run(self.pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.folder / "pg.log"), "-w", "start")

    def stop(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def private_cluster(shared_redis):
    cluster = PrivateCluster()
    if not (cluster.initdb and cluster.pg_ctl):
        shutil.rmtree(cluster.folder, ignore_errors=True)
        pytest.skip("initdb/pg_ctl are not installed")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        shutil.rmtree(cluster.folder, ignore_errors=True)
        pytest.skip("running as root without runuser: cannot start a private cluster as postgres")
    try:
        cluster.create()
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


def test_readyz_is_503_while_postgres_is_down_and_recovers_without_a_restart(private_cluster, shared_redis, tmp_path):
    module = worker_settings(tmp_path, extra_lines=PERSISTENT_CONNECTIONS)
    env = process_env(tmp_path, broker_url=shared_redis, settings_module=module)
    env["DATABASE_URL"] = private_cluster.url
    log = tmp_path / "gunicorn.log"
    with gunicorn(env=env, log=log) as (url, process):
        assert requests.get(f"{url}/readyz", timeout=10).status_code == 200

        private_cluster.stop()
        down = requests.get(f"{url}/readyz", timeout=10)
        assert down.status_code == 503
        assert down.json() == {"status": "unavailable"}  # public probe: the reason is logged, not sent
        wait_for(lambda: re.search(r"not ready: \{'database': '[^']*(?i:operational|connect)", log.read_text()),
                 timeout_s=10, what="the failed database check in the log", log=log)
        assert "'broker'" not in log.read_text().split("not ready:", 1)[1].splitlines()[0]
        assert requests.get(f"{url}/healthz", timeout=10).status_code == 200  # the process itself is fine

        time.sleep(3)
        private_cluster.start()
        wait_for(lambda: requests.get(f"{url}/readyz", timeout=10).status_code == 200,
                 timeout_s=30, what="/readyz to recover", log=log)
        assert process.poll() is None, "gunicorn was restarted"


@pytest.fixture
def annotator_session(postgres, tmp_path):
    for name in ("annotator", "expert", "admin"):
        Group.objects.get_or_create(name=name)
    annotator = AnnotatorFactory()
    candidate = CandidateAnswerFactory()
    client = Client()
    client.force_login(annotator)
    session = requests.Session()
    session.cookies.set("sessionid", client.cookies["sessionid"].value)
    return annotator, candidate, session


def test_a_rating_cut_off_by_a_lost_connection_leaves_nothing_and_is_accepted_after(
    annotator_session, shared_redis, tmp_path
):
    annotator, candidate, session = annotator_session
    module = worker_settings(tmp_path, extra_lines=PERSISTENT_CONNECTIONS)
    env = process_env(tmp_path, broker_url=shared_redis, settings_module=module)
    database = connection.settings_dict["NAME"]
    log = tmp_path / "gunicorn.log"
    with gunicorn(env=env, log=log) as (url, process):
        page = session.get(f"{url}/rate/next/", timeout=20)
        assert page.status_code == 200, page.text[:500]
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        action = re.search(r'action="(/rate/(\d+)/submit/)"', page.text)
        assignment = Assignment.objects.get(pk=int(action.group(2)))
        assert assignment.candidate_id == candidate.pk
        form = {"csrfmiddlewaretoken": token, "score": "4", "comment": "Half-written?", "seconds_on_task": "12"}

        # Hold the assignment row: the submit blocks at its last UPDATE, after inserting the rating and counting it.
        holder = psycopg.connect(database_url_of(database), autocommit=False)
        # pg_stat_activity is a snapshot per transaction: watch it from a second, autocommit connection.
        watcher = psycopg.connect(database_url_of(database), autocommit=True)
        try:
            holder.execute("SELECT id FROM annotation_assignment WHERE id = %s FOR UPDATE", [assignment.pk])
            result = {}
            post = threading.Thread(
                target=lambda: result.update(response=session.post(f"{url}{action.group(1)}", data=form, timeout=60))
            )
            post.start()
            blocked = []

            def submit_waits_on_the_lock() -> bool:
                rows = watcher.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock' "
                    "AND query LIKE 'UPDATE \"annotation_assignment\"%%'", [database]
                ).fetchall()
                blocked[:] = [pid for (pid,) in rows]
                return bool(blocked)

            wait_for(submit_waits_on_the_lock, timeout_s=30, what="the submit to wait inside its transaction", log=log)
            # The rating row exists inside the submit's open transaction, invisible to everyone else.
            assert watcher.execute("SELECT pg_terminate_backend(%s)", [blocked[0]]).fetchone()[0] is True
            post.join(timeout=60)
        finally:
            holder.rollback()
            holder.close()
            watcher.close()

        # A lost database connection is "try again", not a server bug: 503 with Retry-After (config/unavailable.py).
        assert result["response"].status_code == 503, result["response"].text[:500]
        assert int(result["response"].headers["Retry-After"]) > 0
        assert not Rating.objects.filter(candidate=candidate).exists()
        assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 0
        assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.OPEN

        # Same gunicorn, no restart: the broken connection is dropped and the annotator submits again.
        assert requests.get(f"{url}/readyz", timeout=10).status_code == 200
        again = session.post(f"{url}{action.group(1)}", data=form, timeout=30, allow_redirects=False)
        assert again.status_code == 302, again.text[:500]
        assert process.poll() is None

    rating = Rating.objects.get(candidate=candidate)
    assert (rating.annotator_id, rating.score, rating.comment) == (annotator.pk, 4, "Half-written?")
    assert CandidateAnswer.objects.get(pk=candidate.pk).valid_rating_count == 1
    assert Assignment.objects.get(pk=assignment.pk).status == Assignment.Status.SUBMITTED


def database_url_of(name: str) -> str:
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgresql://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{name}"
