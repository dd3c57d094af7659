"""Load benchmark (issue: production readiness): simulated annotators against gunicorn + PostgreSQL on 127.0.0.1.

Creates (drops first) the PostgreSQL database ``--database`` (default ``orca_bench_load``), migrates it with the
production settings (HTTP cookies, no SSL redirect), seeds ``--annotators`` annotator accounts and ``--candidates``
candidate answers (k = ``--target``), starts gunicorn on a free port of 127.0.0.1 and runs one thread per
annotator for ``--seconds``: log in, then loop GET next item → pause → POST the rating (1-5, random codes, a
comment) → pause, each pause ``--pause`` seconds (1 s: ten times faster than a real annotator).

Afterwards it checks from the database: every submit the server acknowledged (HTTP 302) has its rating
(``lost_ratings``), no (candidate, annotator) pair or unacknowledged rating appears twice (``duplicate_ratings``),
no candidate has more valid ratings than its target (``over_target``) and ``valid_rating_count`` matches the rows
(``count_mismatch``). Prints one JSON object:

    {"rps": ..., "p50_ms": ..., "p95_ms": ..., "p99_ms": ..., "errors": 0, "lost_ratings": 0,
     "duplicate_ratings": 0, "over_target": 0, "count_mismatch": 0, "ratings_accepted": ..., ...}

Annotator accounts use a fast password hasher, and log in before the clock starts (logins are not measured).

Latency is per HTTP request (next item and submit), measured by the client. Run:
``python bench/load.py [--annotators 50] [--seconds 60] [--pause 1.0] [--web-workers 4] [--web-threads 2]
[--worker-class gthread|sync]``; PostgreSQL from
``--server`` (default ``postgres://postgres@127.0.0.1:5432``), Redis db 9 as the (unused) broker.
Targets: zero errors, zero lost or duplicate ratings, p95 <= 100 ms.
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PASSWORD = "bench-load-password-7"
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
ACTION = re.compile(r'action="/rate/(\d+)/submit/')

SETTINGS = """from config.settings.production import *  # noqa
# Plain HTTP on 127.0.0.1: cookies without the Secure flag, no redirect to HTTPS.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
# The simulated accounts log in before the clock starts; a fast hasher keeps 50 logins from taking minutes.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
LOGGING = logging_config(fmt="plain", level="WARNING")
"""


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def gunicorn_serving(*, env: dict, workers: int, log: Path, threads: int = 2, worker_class: str = "gthread"):
    """Run gunicorn (``workers`` processes × ``threads`` threads, ``worker_class`` ``gthread`` or ``sync``: one
    request per process at a time, no keep-alive) on a free port of 127.0.0.1 with ``env``; yield its base URL once
    ``/readyz`` answers 200 (SystemExit with the log's tail if it never does); stop it on exit."""
    import requests

    port = free_port()
    gunicorn = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
         "--workers", str(workers), "--worker-class", worker_class,
         "--threads", str(1 if worker_class == "sync" else threads), "--timeout", "60"],
        cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                if requests.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.2)
        else:
            raise SystemExit(f"gunicorn did not become ready; log:\n{log.read_text()[-3000:]}")
        yield base
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)


def prepare_database(*, server: str, name: str) -> str:
    """Drop and create database ``name`` on ``server``; returns its URL."""
    import psycopg

    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


def seed(*, annotators: int, candidates: int, target: int) -> None:
    """Annotator accounts ``load-annotator-N`` and ``candidates`` candidate answers on one benchmark (k=target)."""
    from annotation.models import LALM, Benchmark, CandidateAnswer, Modality, Question, QuestionVersion
    from annotation.services.accounts import user_create_with_role

    for index in range(annotators):
        user_create_with_role(username=f"load-annotator-{index + 1}", role="annotator", password=PASSWORD)
    bench = Benchmark.objects.create(name="load-bench", target_ratings=target)
    lalms = [LALM.objects.create(name=f"load-lalm-{i}") for i in range(2)]
    n_questions = (candidates + len(lalms) - 1) // len(lalms)
    questions = Question.objects.bulk_create(
        [Question(benchmark=bench, external_id=f"load-{i}", modality=Modality.SOUND, category="Reasoning")
         for i in range(n_questions)]
    )
    versions = QuestionVersion.objects.bulk_create(
        [QuestionVersion(question=q, number=1, question_text=f"What is heard in clip {q.external_id}?",
                         reference_answer="A dog barking.", rationale="Three short barks, then silence.",
                         source=QuestionVersion.Source.IMPORT) for q in questions]
    )
    for question, version in zip(questions, versions):
        question.current_version = version
    Question.objects.bulk_update(questions, ["current_version"])
    rows = [CandidateAnswer(question_version=v, lalm=lalm, text=f"{lalm.name} hears a dog.")
            for v in versions for lalm in lalms][:candidates]
    CandidateAnswer.objects.bulk_create(rows)


class HttpClient:
    """A lean HTTP/1.1 client for the load generators: one connection (kept alive while the server allows it,
    reopened when the server closes it), cookies, form posts, no redirects followed.

    The simulated annotators share the machine's CPU with gunicorn and PostgreSQL, which real annotators' browsers
    do not, so the generators keep their own CPU per request small (``http.client`` instead of ``requests``).
    Requests raise ``OSError`` / ``http.client.HTTPException`` on failure; one reconnect is tried when a kept-alive
    connection turns out to be closed before any byte of the response arrived.
    """

    def __init__(self, base: str, timeout: float = 30.0):
        parts = urllib.parse.urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, data: dict | None = None) -> tuple[int, str]:
        """(status, body) of ``method path``; ``data`` is sent form-encoded (lists as repeated fields)."""
        headers = {}
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        body = None
        if data is not None:
            body = urllib.parse.urlencode(data, doseq=True)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.connection.close()
                if attempt == 2:
                    raise
        text = response.read().decode()
        for header in response.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        if response.will_close:
            self.connection.close()
        return response.status, text


class Annotator(threading.Thread):
    """One simulated annotator: log in, then next item → pause → submit → pause until the deadline."""

    def __init__(self, *, base: str, username: str, pause: float, seed: int):
        super().__init__(daemon=True)
        self.base, self.username, self.pause = base, username, pause
        self.deadline = 0.0  # set before start()
        self.random = random.Random(seed)
        self.latencies: dict[str, list[float]] = {"next": [], "submit": []}
        self.errors: list[str] = []
        self.accepted: list[int] = []  # assignment pks whose submit the server acknowledged (302)
        self.empty = 0  # next-item pages without an item (queue empty for this annotator)

    def _timed(self, kind: str, method: str, path: str, data: dict | None = None) -> tuple[int, str] | None:
        started = time.perf_counter()
        try:
            response = self.client.request(method, path, data)
        except Exception as error:  # noqa: BLE001 - every failure counts as an error
            self.errors.append(f"{kind}: {type(error).__name__}: {error}")
            return None
        self.latencies[kind].append((time.perf_counter() - started) * 1000)
        return response

    def login(self) -> None:
        """Log in through the login form (not timed: password hashing is deliberately slow)."""
        self.client = HttpClient(self.base, timeout=60)
        _, page = self.client.request("GET", "/accounts/login/")
        status, _ = self.client.request("POST", "/accounts/login/", {
            "username": self.username, "password": PASSWORD, "csrfmiddlewaretoken": CSRF.search(page).group(1),
        })
        if status != 302:
            raise SystemExit(f"{self.username}: login failed with HTTP {status}")

    def run(self) -> None:
        while time.monotonic() < self.deadline:
            response = self._timed("next", "GET", "/rate/next/")
            if response is None or response[0] != 200:
                if response is not None:
                    self.errors.append(f"next: HTTP {response[0]}")
                time.sleep(self.pause)
                continue
            page = response[1]
            action = ACTION.search(page)
            time.sleep(self.pause)
            if action is None:
                self.empty += 1
                continue
            if time.monotonic() >= self.deadline:
                break
            form = {
                "csrfmiddlewaretoken": CSRF.search(page).group(1),
                "score": str(self.random.randint(1, 5)),
                "codes": self.random.sample(["Q", "A", "R"], self.random.randint(0, 2)),
                "comment": f"load test by {self.username}",
                "seconds_on_task": str(self.pause),
            }
            submitted = self._timed("submit", "POST", f"/rate/{action.group(1)}/submit/", form)
            if submitted is not None:
                if submitted[0] == 302:
                    self.accepted.append(int(action.group(1)))
                else:
                    self.errors.append(f"submit: HTTP {submitted[0]}")
            time.sleep(self.pause)


def verify(accepted: list[tuple[str, int]]) -> dict:
    """Compare the acknowledged submits with the database (see the module docstring)."""
    from django.contrib.auth import get_user_model
    from django.db.models import Count, F, Q

    from annotation.models import Assignment, CandidateAnswer, Rating
    from annotation.services.assignment import target_ratings_expression

    users = dict(get_user_model().objects.filter(username__startswith="load-annotator-").values_list("username", "pk"))
    candidate_of = dict(Assignment.objects.values_list("pk", "candidate_id"))
    acknowledged = [(candidate_of[pk], users[username]) for username, pk in accepted]
    ratings = set(Rating.objects.values_list("candidate_id", "annotator_id"))
    pairs = Rating.objects.values("candidate_id", "annotator_id").annotate(n=Count("id")).filter(n__gt=1).count()
    valid = Count("ratings", filter=Q(ratings__is_valid=True))
    over = CandidateAnswer.objects.annotate(k=target_ratings_expression(), n=valid).filter(n__gt=F("k")).count()
    mismatch = CandidateAnswer.objects.annotate(n=valid).exclude(valid_rating_count=F("n")).count()
    return {
        "lost_ratings": sum(1 for pair in acknowledged if pair not in ratings),
        # The same pair acknowledged twice, stored twice, or stored without any acknowledgement.
        "duplicate_ratings": (len(acknowledged) - len(set(acknowledged))) + pairs + len(ratings - set(acknowledged)),
        "over_target": over,
        "count_mismatch": mismatch,
        "ratings_in_db": Rating.objects.count(),
        "candidates_full": CandidateAnswer.objects.annotate(k=target_ratings_expression())
        .filter(valid_rating_count__gte=F("k")).count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pause", type=float, default=1.0, help="seconds between actions")
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--target", type=int, default=3, help="k: ratings per candidate answer")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--web-threads", type=int, default=2, help="threads per gunicorn worker (gthread)")
    parser.add_argument("--worker-class", choices=["gthread", "sync"], default="gthread", help="gunicorn worker class")
    parser.add_argument("--server", default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--database", default="orca_bench_load")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="orca-bench-load-"))
    (folder / "bench_load_settings.py").write_text(SETTINGS)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench_load_settings",
        "PYTHONPATH": f"{REPO}{os.pathsep}{folder}",
        "DATABASE_URL": prepare_database(server=args.server, name=args.database),
        "CELERY_BROKER_URL": args.broker,
        "DJANGO_SECRET_KEY": "bench-load-" + "x" * 50,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "MEDIA_ROOT": str(folder / "media"),
        "AXES_ENABLED": "true",
    }
    os.environ.update(env)
    sys.path[:0] = [str(REPO), str(folder)]
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
    import django

    django.setup()
    seed(annotators=args.annotators, candidates=args.candidates, target=args.target)

    with gunicorn_serving(env=env, workers=args.web_workers, threads=args.web_threads,
                          worker_class=args.worker_class, log=folder / "gunicorn.log") as base:
        annotators = [
            Annotator(base=base, username=f"load-annotator-{i + 1}", pause=args.pause, seed=i)
            for i in range(args.annotators)
        ]
        for annotator in annotators:
            annotator.login()
        started = time.monotonic()
        for annotator in annotators:
            annotator.deadline = started + args.seconds
            annotator.start()
            time.sleep(args.pause / args.annotators)  # stagger the starts over one pause
        for annotator in annotators:
            annotator.join(timeout=args.seconds + 120)
        wall = time.monotonic() - started

    from django.db import connection

    connection.close()
    latencies = [ms for a in annotators for kind in a.latencies.values() for ms in kind]
    submits = [ms for a in annotators for ms in a.latencies["submit"]]
    nexts = [ms for a in annotators for ms in a.latencies["next"]]
    errors = [error for a in annotators for error in a.errors]
    accepted = [(a.username, pk) for a in annotators for pk in a.accepted]
    result = {
        "rps": round(len(latencies) / wall, 1),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "errors": len(errors),
        **verify(accepted),
        "requests": len(latencies),
        "ratings_accepted": len(accepted),
        "empty_next_pages": sum(a.empty for a in annotators),
        "next_p95_ms": round(percentile(nexts, 95), 1),
        "submit_p95_ms": round(percentile(submits, 95), 1),
        "mean_ms": round(statistics.fmean(latencies), 1) if latencies else 0.0,
        "max_ms": round(max(latencies), 1) if latencies else 0.0,
        "annotators": args.annotators,
        "seconds": round(wall, 1),
        "pause_s": args.pause,
        "web_workers": args.web_workers,
        "web_threads": args.web_threads,
        "worker_class": args.worker_class,
        "candidates": args.candidates,
        "target": args.target,
        "cpu_count": os.cpu_count(),
        "error_samples": sorted(set(errors))[:5],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
