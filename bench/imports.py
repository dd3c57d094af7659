"""Table import benchmark (issue 27): a long CSV of candidate answers with one rating each, imported with
``manage.py import_table`` end to end (command start to exit): 8,000 rows, then 100,000 rows.

    python bench/imports.py [--rows 8000 100000] [--lalms 8] [--raters 40]

The CSV is generated here (``question_id, question, reference, model, response, score, rater``: each question
answered by ``--lalms`` LALMs, each answer rated once on 0 / 0.5 / 1 by one of ``--raters`` raters) with its
mapping. Each size is imported into an emptied database ``DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/orca_bench_imports``, created and migrated when missing) by a child process
running the real command; ``wall_s`` is that process's life (Python and Django start-up included), ``peak_rss_mb``
its peak resident memory (``ru_maxrss`` from ``wait4``), ``cpu_s`` its CPU seconds (the database server's not
counted). The same file is then imported again (``reimport_wall_s``: nothing to change, everything compared).

Prints one JSON object: ``{"load_avg", "cpu_count", "runs": {"8000": {"wall_s", "cpu_s", "peak_rss_mb",
"reimport_wall_s", "candidates", "ratings"}, ...}, "targets"}``. Targets (issue 27): 8,000 rows ≤ 20 s; 100,000
rows ≤ 40 s and ≤ 500 MB peak, on 2 cores.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/orca_bench_imports"
MAPPING = {
    "layout": "long",
    "columns": {"question_id": "question_id", "question": "question", "reference": "reference", "lalm": "model",
                "candidate": "response", "rating": "score", "rater": "rater"},
    "defaults": {"modality": "sound"},
    "rating_scale": {"0": 1, "0.5": 3, "1": 5},
}


def _ensure_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _write_csv(path: Path, *, rows: int, lalms: int, raters: int) -> None:
    rng = random.Random(rows)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["question_id", "question", "reference", "model", "response", "score", "rater"])
        for n in range(rows):
            q, m = divmod(n, lalms)
            writer.writerow([
                f"q{q:06d}", f"What happens in clip {q}, and what does the speaker ask for at the end?",
                f"A dog barks {q % 7} times near a busy road; the speaker asks for the door to be opened.",
                f"LALM-{m}", f"The clip has a dog barking {(q + m) % 7} times and some traffic noise; someone "
                             "asks to open the door.",
                rng.choice(("0", "0.5", "1")), f"rater-{rng.randrange(raters)}",
            ])


def _empty_database() -> None:
    """Migrate, then empty the tables an import writes (a benchmark cannot be deleted row by row: its questions'
    current versions protect them)."""
    subprocess.run([sys.executable, str(REPO / "manage.py"), "migrate", "--verbosity", "0"], check=True, cwd=REPO)
    import psycopg

    url = os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "TRUNCATE annotation_rating, annotation_assignment, annotation_judgerating, annotation_candidateanswer, "
            "annotation_jobitem, annotation_questionversion, annotation_question, annotation_lalm, "
            "annotation_tableimport, annotation_importaccount, annotation_benchmark RESTART IDENTITY CASCADE")
        conn.execute("DELETE FROM auth_user WHERE username LIKE 'imported-%'")


def _import(path: Path, mapping: Path) -> dict:
    """``manage.py import_table`` in a child process: its wall time, CPU seconds and peak RSS."""
    command = [sys.executable, str(REPO / "manage.py"), "import_table", str(path), "--benchmark", "Bench",
               "--mapping", str(mapping)]
    start = time.perf_counter()
    child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "LOG_LEVEL": "WARNING"})
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    out, err = child.stdout.read(), child.stderr.read()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"import_table failed ({child.returncode}):\n{err}\n{out}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "output": out.strip().splitlines()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[8000, 100_000])
    parser.add_argument("--lalms", type=int, default=8)
    parser.add_argument("--raters", type=int, default=40)
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    _ensure_database(url)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="orca-bench-imports-") as folder:
        mapping = Path(folder) / "mapping.json"
        mapping.write_text(json.dumps(MAPPING))
        for rows in args.rows:
            path = Path(folder) / f"long-{rows}.csv"
            _write_csv(path, rows=rows, lalms=args.lalms, raters=args.raters)
            _empty_database()
            first = _import(path, mapping)
            again = _import(path, mapping)
            runs[str(rows)] = {
                "wall_s": first["wall_s"], "cpu_s": first["cpu_s"], "peak_rss_mb": first["peak_rss_mb"],
                "reimport_wall_s": again["wall_s"], "reimport_peak_rss_mb": again["peak_rss_mb"],
                "file_mb": round(path.stat().st_size / 1e6, 1), "summary": first["output"][2:6],
            }
    print(json.dumps({
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "database": url.rsplit("/", 1)[1],
        "runs": runs,
        "targets": {"8000": {"wall_s": 20}, "100000": {"wall_s": 40, "peak_rss_mb": 500}},
    }, indent=1))


if __name__ == "__main__":
    main()
