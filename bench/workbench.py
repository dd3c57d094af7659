"""Workbench benchmark (issue 4): "next item" and "submit" latency with 50,000 candidate answers and 100,000 ratings.

Creates (drops first) the PostgreSQL database ``orca_bench_workbench`` (``--server``), migrates it, fills it with
``--candidates`` candidate answers and ``--ratings`` ratings by COPY (k = 3; 30 % of the candidates are
complete, the rest have 1–2 ratings, so the queue must skip finished work), starts gunicorn on 127.0.0.1 and
drives it over real HTTP with the simulated annotators of ``bench/load.py`` without think time: GET next item, POST
the rating, repeat — first one annotator (c1), then 16 at once (c16), each for ``--seconds``. Every annotator has
rated items before, so the queue has to exclude their own ratings too.

Prints one JSON object::

    {"next_item": {"c1": {"p50_ms", "p95_ms", "n", "errors"}, "c16": {...}},
     "submit": {"c1": {...}, "c16": {...}}, "candidates": 50000, "ratings_before": 100000, ...}

Latency is per HTTP request as the client sees it on 127.0.0.1 (server time plus loopback and the client's own
parsing). The simulated annotators share the 2 cores with gunicorn and PostgreSQL, so they use the lean
``load.HttpClient`` (``http.client``): about 0.4 ms of client CPU per request where ``requests`` took about 2 ms.
Targets (issue 4): p95 <= 25 ms at c1 and <= 100 ms at c16, zero errors.
Run: ``python bench/workbench.py [--seconds 20] [--web-workers 4] [--web-threads 2] [--worker-class gthread|sync]``
(the defaults are the deployment's gthread workers; ``sync`` serves one request per process and closes the
connection, which spreads 16 clients more evenly over the workers).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402 - sibling bench script: settings file, Annotator threads, percentile, free_port

DATABASE = "orca_bench_workbench"
N_LALMS = 5
N_RATERS = 60  # past annotators besides the simulated ones
N_CLIENTS = 16


def seed(*, candidates: int, ratings: int) -> dict:
    """Fill the database: one benchmark, ``candidates // 5`` questions × 5 LALMs, ``ratings`` ratings (COPY)."""
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from export import _copy, _reset_sequence

    from annotation.models import LALM, Benchmark, CandidateAnswer, Question, QuestionVersion, Rating
    from annotation.services.accounts import user_create_with_role

    rng = random.Random(4)
    with transaction.atomic():
        for i in range(N_CLIENTS):
            user_create_with_role(username=f"load-annotator-{i + 1}", role="annotator", password=load.PASSWORD)
        clients = list(get_user_model().objects.filter(username__startswith="load-annotator-"))
        raters = [get_user_model().objects.create(username=f"past-annotator-{i}") for i in range(N_RATERS)]
        people = clients + raters
        bench = Benchmark.objects.create(name="workbench-bench", target_ratings=3)
        lalms = [LALM.objects.create(name=f"W{i}") for i in range(N_LALMS)]
        n_questions = candidates // N_LALMS
        _copy(Question, [{"id": q, "benchmark_id": bench.pk, "external_id": f"wb-{q:06d}", "modality": "sound",
                          "category": f"Category {q % 12}"} for q in range(1, n_questions + 1)])
        _copy(QuestionVersion, [
            {"id": q, "question_id": q, "number": 1, "question_text": f"What is heard in clip {q}?",
             "reference_answer": "A dog barks three times.", "rationale": "Three short barks over traffic noise.",
             "source": "import"} for q in range(1, n_questions + 1)
        ])
        with connection.cursor() as cursor:
            cursor.execute("UPDATE annotation_question SET current_version_id = id")
        # Ratings per candidate: 30 % complete (3), 40 % with 2 and 30 % with 1 — 100,000 ratings for 50,000
        # candidates — then whatever budget is left (other sizes) tops candidates up, never above 3.
        order = list(range(n_questions * N_LALMS))
        rng.shuffle(order)
        counts = [0] * len(order)
        budget = ratings
        start = 0
        for share, k in ((0.3, 3), (0.4, 2), (0.3, 1)):
            for index in order[start:start + int(share * len(order))]:
                if budget >= k:
                    counts[index] = k
                    budget -= k
            start += int(share * len(order))
        for index in order:
            while budget and counts[index] < 3:
                counts[index] += 1
                budget -= 1
        candidate_rows, rating_rows = [], []
        rating_id = 0
        for cid0, n in enumerate(counts):
            q = cid0 // N_LALMS + 1
            cid = cid0 + 1
            candidate_rows.append({"id": cid, "question_version_id": q, "lalm_id": lalms[cid0 % N_LALMS].pk,
                                   "valid_rating_count": n, "text": f"A dog barking {cid % 7} times."})
            for person in rng.sample(people, n):
                rating_id += 1
                rating_rows.append({"id": rating_id, "candidate_id": cid, "question_version_id": q,
                                    "annotator_id": person.pk, "score": rng.randint(1, 5), "codes": "",
                                    "source": "import", "seconds_on_task": 20.0})
        _copy(CandidateAnswer, candidate_rows)
        _copy(Rating, rating_rows)
        for model in (Question, QuestionVersion, CandidateAnswer, Rating):
            _reset_sequence(model)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"candidates": len(candidate_rows), "ratings_before": len(rating_rows),
            "complete_before": sum(1 for n in counts if n >= 3)}


def verify(*, accepted: list[tuple[str, int]], ratings_before: int) -> dict:
    """Check the database against the acknowledged submits: none lost, none stored twice or unacknowledged, no
    candidate above k, ``valid_rating_count`` equal to the valid rows."""
    from django.contrib.auth import get_user_model
    from django.db.models import Count, F, Q

    from annotation.models import Assignment, CandidateAnswer, Rating
    from annotation.services.assignment import target_ratings_expression

    users = dict(get_user_model().objects.filter(username__startswith="load-annotator-").values_list("username", "pk"))
    candidate_of = dict(Assignment.objects.values_list("pk", "candidate_id"))
    acknowledged = [(candidate_of[pk], users[username]) for username, pk in accepted]
    new = set(Rating.objects.filter(pk__gt=ratings_before).values_list("candidate_id", "annotator_id"))
    valid = Count("ratings", filter=Q(ratings__is_valid=True))
    return {
        "lost_ratings": sum(1 for pair in acknowledged if pair not in new),
        "duplicate_ratings": (len(acknowledged) - len(set(acknowledged))) + len(new - set(acknowledged)),
        "over_target": CandidateAnswer.objects.annotate(k=target_ratings_expression(), n=valid)
        .filter(n__gt=F("k")).count(),
        "count_mismatch": CandidateAnswer.objects.annotate(n=valid).exclude(valid_rating_count=F("n")).count(),
        "ratings_after": Rating.objects.count(),
    }


def drive(*, base: str, clients: int, seconds: float) -> dict:
    """``clients`` annotators (logged in first) loop next → submit with no pause for ``seconds``."""
    annotators = [load.Annotator(base=base, username=f"load-annotator-{i + 1}", pause=0.0, seed=i)
                  for i in range(clients)]
    for annotator in annotators:
        annotator.login()
    started = time.monotonic()
    for annotator in annotators:
        annotator.deadline = started + seconds
        annotator.start()
    for annotator in annotators:
        annotator.join(timeout=seconds + 120)
    out = {}
    for kind, key in (("next", "next_item"), ("submit", "submit")):
        values = [ms for a in annotators for ms in a.latencies[kind]]
        errors = [e for a in annotators for e in a.errors if e.startswith(kind)]
        out[key] = {"p50_ms": round(load.percentile(values, 50), 1), "p95_ms": round(load.percentile(values, 95), 1),
                    "n": len(values), "errors": len(errors)}
    out["accepted"] = [(a.username, pk) for a in annotators for pk in a.accepted]
    out["sample_errors"] = [e for a in annotators for e in a.errors][:5]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=50_000)
    parser.add_argument("--ratings", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each run (c1, then c16)")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--web-threads", type=int, default=2, help="threads per gunicorn worker (gthread)")
    parser.add_argument("--worker-class", choices=["gthread", "sync"], default="gthread", help="gunicorn worker class")
    parser.add_argument("--server", default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="orca-bench-workbench-"))
    (folder / "bench_load_settings.py").write_text(load.SETTINGS)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench_load_settings",
        "PYTHONPATH": f"{REPO}{os.pathsep}{folder}",
        "DATABASE_URL": load.prepare_database(server=args.server, name=DATABASE),
        "CELERY_BROKER_URL": args.broker,
        "DJANGO_SECRET_KEY": "bench-workbench-" + "x" * 50,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "MEDIA_ROOT": str(folder / "media"),
    }
    os.environ.update(env)
    sys.path[:0] = [str(REPO), str(folder)]
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
    import django

    django.setup()
    seeded = seed(candidates=args.candidates, ratings=args.ratings)
    from django.db import connection

    connection.close()

    runs = {}
    with load.gunicorn_serving(env=env, workers=args.web_workers, threads=args.web_threads,
                          worker_class=args.worker_class, log=folder / "gunicorn.log") as base:
        runs["c1"] = drive(base=base, clients=1, seconds=args.seconds)
        runs["c16"] = drive(base=base, clients=N_CLIENTS, seconds=args.seconds)

    accepted = runs["c1"].pop("accepted") + runs["c16"].pop("accepted")
    result = {
        "next_item": {name: run["next_item"] for name, run in runs.items()},
        "submit": {name: run["submit"] for name, run in runs.items()},
        **seeded,
        **verify(accepted=accepted, ratings_before=seeded["ratings_before"]),
        "seconds_per_run": args.seconds,
        "web_workers": args.web_workers,
        "web_threads": args.web_threads,
        "worker_class": args.worker_class,
        "sample_errors": runs["c1"]["sample_errors"] + runs["c16"]["sample_errors"],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
