"""Export benchmark (issue 7): 100,000 candidate answers with 300,000 ratings in PostgreSQL, exported to ORCA JSONL
and CSV; wall time and peak memory of each.

    python bench/export.py [--candidates 100000] [--ratings-per-candidate 3]

Uses the database ``DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/orca_bench_export``), creating it,
migrating it and filling it with generated rows (PostgreSQL ``COPY``) when it does not hold exactly the asked-for
numbers. Each export runs in its own child process, so ``peak_rss_mb`` is that process's peak resident memory
(``ru_maxrss``: Python, Django and the export), not the generator's. Prints one JSON object:
``{"orca_jsonl": {"wall_s", "cpu_s", "peak_rss_mb", "rows"}, "csv": {...}, "candidates", "ratings"}``
(``cpu_s``: the export process's CPU seconds, start-up included; the database server's are not counted).
Target (issue 7): ≤ 10 s and ≤ 300 MB peak RSS each, on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/orca_bench_export"
N_LALMS = 5
N_ANNOTATORS = 60


def _setup_django() -> None:
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    import django

    django.setup()


def _ensure_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    admin_url = url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _copy(model, rows: list[dict]) -> None:
    """COPY ``rows`` (field name -> value) into ``model``'s table; other fields get their Python default."""
    from django.db import connection
    from django.utils import timezone

    fields = [f for f in model._meta.concrete_fields]
    now = timezone.now()
    columns = [f.column for f in fields]
    buffer = []
    for row in rows:
        values = []
        for f in fields:
            if f.attname in row:
                value = row[f.attname]
            elif f.name in row:
                value = row[f.name]
            elif getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                value = now
            else:
                value = f.get_default()  # "" for text fields, None for nullable ones
            if isinstance(value, list | dict):
                value = json.dumps(value)
            values.append(value)
        buffer.append(values)
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg 3 cursor
        with raw.copy(f'COPY "{model._meta.db_table}" ({", ".join(columns)}) FROM STDIN') as copy:
            for values in buffer:
                copy.write_row(values)


def _reset_sequence(model) -> None:
    from django.db import connection

    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('\"{table}\"', 'id'), COALESCE(MAX(id), 1)) FROM \"{table}\""
        )


def _generate(*, candidates: int, per_candidate: int) -> None:
    import random

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection, transaction

    from annotation.models import LALM, Benchmark, CandidateAnswer, Question, QuestionVersion, Rating

    call_command("migrate", verbosity=0)
    if (CandidateAnswer.objects.count(), Rating.objects.count()) == (candidates, candidates * per_candidate):
        return
    rng = random.Random(0)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "TRUNCATE annotation_rating, annotation_assignment, annotation_judgerating, "
                "annotation_candidateanswer, annotation_jobitem, annotation_questionversion, annotation_question, "
                "annotation_lalm, annotation_benchmark RESTART IDENTITY CASCADE"
            )
        User = get_user_model()
        users = [User.objects.get_or_create(username=f"bench-annotator-{i}")[0] for i in range(N_ANNOTATORS)]
        benchmark = Benchmark.objects.create(name="Export bench", licence="CC-BY-4.0")
        lalms = [LALM.objects.create(name=f"M{i}_1") for i in range(1, N_LALMS + 1)]
        n_questions = candidates // N_LALMS
        modalities = ["speech", "sound", "music", "mixed"]
        _copy(Question, [
            {"id": q, "benchmark_id": benchmark.pk, "external_id": f"bench-{q:06d}", "modality": modalities[q % 4],
             "category": f"Category {q % 12}", "sub_category": f"Sub {q % 40}", "choices": ["a", "b", "c", "d"]}
            for q in range(1, n_questions + 1)
        ])
        _copy(QuestionVersion, [
            {"id": q, "question_id": q, "number": 1, "question_text": f"What happens in clip {q}? " * 3,
             "reference_answer": f"A dog barks {q % 7} times near a busy road.",
             "rationale": "Three short barks are heard over traffic noise, then a car horn. " * 2,
             "transcript": "" if q % 4 else "Open the door, please, it is raining outside.", "source": "import"}
            for q in range(1, n_questions + 1)
        ])
        with connection.cursor() as cursor:
            cursor.execute("UPDATE annotation_question SET current_version_id = id")
        candidate_rows, rating_rows = [], []
        codes = ["", "", "", "A", "R", "AR", "Q"]
        rating_id = 0
        for q in range(1, n_questions + 1):
            for j, lalm in enumerate(lalms):
                cid = (q - 1) * N_LALMS + j + 1
                candidate_rows.append({
                    "id": cid, "question_version_id": q, "lalm_id": lalm.pk, "valid_rating_count": per_candidate,
                    "text": f"The clip has a dog barking {(q + j) % 7} times and some traffic.",
                })
                for annotator in rng.sample(users, per_candidate):
                    rating_id += 1
                    code = rng.choice(codes)
                    rating_rows.append({
                        "id": rating_id, "candidate_id": cid, "question_version_id": q,
                        "annotator_id": annotator.pk, "score": rng.randint(1, 5), "codes": code,
                        "comment": "reference misses the horn" if "R" in code else "", "source": "import",
                        "seconds_on_task": 20.0, "audio_seconds_played": 8.0,
                    })
        _copy(CandidateAnswer, candidate_rows)
        _copy(Rating, rating_rows)
        for model in (Question, QuestionVersion, CandidateAnswer, Rating):
            _reset_sequence(model)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _run_one(file_format: str) -> dict:
    """One export in this process; returns {wall_s, rows} (the parent measures peak RSS)."""
    from annotation.services.exports import dataset_export, dataset_export_orca_jsonl

    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        if file_format == "orca_jsonl":
            rows = dataset_export_orca_jsonl(out=Path(folder) / "dataset.jsonl", chunk_size=2000)
        else:
            rows = dataset_export(out_dir=Path(folder) / "out", formats=["csv"], chunk_size=2000).rows
        wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak_mb = usage.ru_maxrss / 1024  # KiB on Linux
    # CPU seconds of this process (user + system, Django start-up included): on a shared, loaded machine the wall
    # time says more about the neighbours than about the export.
    cpu = usage.ru_utime + usage.ru_stime
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(peak_mb, 1), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=int, default=100_000)
    parser.add_argument("--ratings-per-candidate", type=int, default=3)
    parser.add_argument("--run-one", choices=["orca_jsonl", "csv"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one:
        _setup_django()
        print(json.dumps(_run_one(args.run_one)))
        return
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    _ensure_database(url)
    _setup_django()
    _generate(candidates=args.candidates, per_candidate=args.ratings_per_candidate)
    from annotation.models import CandidateAnswer, Rating

    result = {}
    for name in ("orca_jsonl", "csv"):
        child = subprocess.run(
            [sys.executable, __file__, "--run-one", name], capture_output=True, text=True, check=True,
            env={**os.environ, "LOG_LEVEL": "WARNING"},
        )
        measured = json.loads(child.stdout.strip().splitlines()[-1])
        result[name] = {key: measured[key] for key in ("wall_s", "cpu_s", "peak_rss_mb", "rows")}
    result["candidates"] = CandidateAnswer.objects.count()
    result["ratings"] = Rating.objects.count()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
