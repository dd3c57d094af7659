"""Table import benchmark (issues 27 and 33): a long CSV of candidate answers with one rating each, imported with
``manage.py import_table`` end to end (command start to exit): 8,000 rows, then 100,000 rows; and a table without
its audio or an id column (issue 33, AQEval-like), 8,000 rows, imported and then read by ``manage.py leaderboard
--by type``.

    python bench/imports.py [--rows 8000 100000] [--no-audio-rows 8000] [--lalms 8] [--no-audio-lalms 4] [--raters 40]

The CSV is generated here (``question_id, question, reference, model, response, score, rater``: each question
answered by ``--lalms`` LALMs, each answer rated once on 0 / 0.5 / 1 by one of ``--raters`` raters) with its
mapping. Each size is imported into an emptied database ``DATABASE_URL`` (default
``postgres://postgres@127.0.0.1:5432/orca_bench_imports``, created and migrated when missing) by a child process
running the real command; ``wall_s`` is that process's life (Python and Django start-up included), ``peak_rss_mb``
its peak resident memory (``ru_maxrss`` from ``wait4``), ``cpu_s`` its CPU seconds (the database server's not
counted). The same file is then imported again (``reimport_wall_s``: nothing to change, everything compared).

The no-audio case writes AQEval's columns (``source, filename, type, question, reference, model, response,
final_annotation``; 4 LALMs as in AQEval, so 8,000 rows are 2,000 questions): question texts recur for different
clips and one clip is behind two questions, ``type`` is per answer, no audio file exists. Its mapping identifies
a question by ``question_key`` [filename, question], keeps the file name as the audio reference
(``"missing_audio": "allow"``) and ``type`` as candidate metadata.
``wall_s`` is the import plus ``leaderboard --by type --json`` (both commands' lives); validity: the largest
difference between a (type, LALM) mean rating on the leaderboard and the file's mean (0 when right), beside what
the naive identity gives — the question text alone, as without an id column and without the audio: that import
is refused, and its number of problems is reported.

Prints one JSON object: ``{"load_avg", "cpu_count", "runs": {"8000": {"wall_s", "cpu_s", "peak_rss_mb",
"reimport_wall_s", ...}, ...}, "no_audio": {"8000": {"wall_s", "import_wall_s", "leaderboard_wall_s",
"max_abs_diff_by_type", "naive_text_only_problems", ...}}, "targets", "ok"}``. Targets: 8,000 rows ≤ 20 s;
100,000 rows ≤ 40 s and ≤ 500 MB peak, on 2 cores (issue 27); the no-audio case ≤ 20 s with the leaderboard
(issue 33). The machine may be shared: ``load_avg`` says how busy it was.
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
NO_AUDIO_MAPPING = {
    "layout": "long",
    "question_key": ["filename", "question"],
    "columns": {"question": "question", "reference": "reference", "audio": "filename", "lalm": "model",
                "candidate": "response", "rating": "final_annotation"},
    "rating_scale": {"0": 1, "0.5": 3, "1": 5},
    "missing_audio": "allow",
    "candidate_metadata": {"type": "type"},
}
#: Question texts that recur for different clips (as "Are people speaking?" does in AQEval).
_TEXTS = ("Are people speaking?", "What is the main sound source?", "Is it raining?", "How many birds sing?",
          "What other environmental features can be inferred from the audio?", "Is the speaker calm?",
          "What instrument is played?", "Is there traffic nearby?", "Where could this be recorded?", "Is it indoors?")
_TYPES = ("binary", "word", "short", "medium", "long")


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


def _write_no_audio_csv(path: Path, *, rows: int, lalms: int) -> dict[tuple[str, str], float]:
    """The AQEval-like table; returns the file's mean rating 1–5 per (type, LALM)."""
    rng = random.Random(rows + 1)
    sums: dict[tuple[str, str], list[float]] = {}
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["source", "filename", "type", "question", "reference", "model", "response",
                         "final_annotation"])
        for n in range(rows):
            q, m = divmod(n, lalms)
            kind, label = rng.choice(_TYPES), rng.choice(("0.0", "0.5", "1.0"))
            writer.writerow([f"source-{q % 7}", f"clip{q // 2:06d}.wav", kind, _TEXTS[q % len(_TEXTS)],
                             f"reference {q}: yes, {q % 5} voices", f"LALM-{m}",
                             f"answer of LALM-{m} to question {q} ({kind})", label])
            sums.setdefault((kind, f"LALM-{m}"), []).append(1 + 4 * float(label))
    return {key: sum(values) / len(values) for key, values in sums.items()}


def _no_audio_case(folder: Path, *, rows: int, lalms: int) -> dict:
    """Import the AQEval-like table, read ``leaderboard --by type`` and compare it with the file."""
    path = folder / f"no-audio-{rows}.csv"
    expected = _write_no_audio_csv(path, rows=rows, lalms=lalms)
    mapping = folder / "no-audio-mapping.json"
    mapping.write_text(json.dumps(NO_AUDIO_MAPPING))
    naive = folder / "naive-mapping.json"
    naive.write_text(json.dumps({**{k: v for k, v in NO_AUDIO_MAPPING.items() if k != "question_key"},
                                 "columns": {k: v for k, v in NO_AUDIO_MAPPING["columns"].items() if k != "audio"}}))
    _empty_database()
    refused = _run([*_import_command(path, naive)], check=False)
    first = _run(_import_command(path, mapping))
    board = _run([sys.executable, str(REPO / "manage.py"), "leaderboard", "--benchmark", "Bench", "--by", "type",
                  "--json"])
    groups = json.loads("\n".join(board["output"]))["groups"]
    shown = {(g["name"], r["lalm"]): r["mean_rating"] for g in groups for r in g["rows"]}
    diff = max(abs(shown.get(key, float("inf")) - mean) for key, mean in expected.items())
    return {"wall_s": round(first["wall_s"] + board["wall_s"], 2), "import_wall_s": first["wall_s"],
            "leaderboard_wall_s": board["wall_s"], "cpu_s": round(first["cpu_s"] + board["cpu_s"], 2),
            "import_cpu_s": first["cpu_s"], "leaderboard_cpu_s": board["cpu_s"],
            "peak_rss_mb": max(first["peak_rss_mb"], board["peak_rss_mb"]),
            "max_abs_diff_by_type": round(diff, 4), "groups": len(shown),
            "naive_text_only_problems": _problem_count(refused), "summary": first["output"][2:9]}


def _problem_count(run: dict) -> int | None:
    """The number of problems the refused import reported (its CommandError line), None if it was not refused."""
    for line in run["stderr"].splitlines():
        if line.startswith("CommandError:") and "problem(s)" in line:
            return int(line.split(": ")[2].split(" ")[0])
    return None


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


def _import_command(path: Path, mapping: Path) -> list[str]:
    return [sys.executable, str(REPO / "manage.py"), "import_table", str(path), "--benchmark", "Bench",
            "--mapping", str(mapping)]


def _import(path: Path, mapping: Path) -> dict:
    """``manage.py import_table`` in a child process: its wall time, CPU seconds and peak RSS."""
    return _run(_import_command(path, mapping))


def _run(command: list[str], *, check: bool = True) -> dict:
    """A command in a child process: its wall time, CPU seconds, peak RSS and output lines."""
    # Output goes to files, not pipes: a refused import prints a thousand problems, more than a pipe holds while
    # nobody reads it (the child would block on write and wait4 for ever).
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(command, cwd=REPO, stdout=stdout, stderr=stderr, text=True,
                                 env={**os.environ, "LOG_LEVEL": "WARNING"})
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        stdout.seek(0)
        stderr.seek(0)
        out, err = stdout.read(), stderr.read()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode and check:
        raise SystemExit(f"{command[2]} failed ({child.returncode}):\n{err}\n{out}")
    return {"wall_s": round(wall, 2), "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1), "output": out.strip().splitlines(), "stderr": err}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[8000, 100_000])
    parser.add_argument("--no-audio-rows", type=int, nargs="*", default=[8000])
    parser.add_argument("--no-audio-lalms", type=int, default=4)
    parser.add_argument("--lalms", type=int, default=8)
    parser.add_argument("--raters", type=int, default=40)
    args = parser.parse_args()
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
    _ensure_database(url)
    runs, no_audio = {}, {}
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
        for rows in args.no_audio_rows:
            no_audio[str(rows)] = _no_audio_case(Path(folder), rows=rows, lalms=args.no_audio_lalms)
    targets = {"8000": {"wall_s": 20}, "100000": {"wall_s": 40, "peak_rss_mb": 500},
               "no_audio_8000": {"wall_s": 20, "max_abs_diff_by_type": 0.006}}
    ok = {f"{rows}": run["wall_s"] <= targets[rows]["wall_s"] and run["peak_rss_mb"] <= targets[rows].get(
        "peak_rss_mb", float("inf")) for rows, run in runs.items() if rows in targets}
    ok.update({f"no_audio_{rows}": run["wall_s"] <= 20 and run["max_abs_diff_by_type"] <= 0.006
               for rows, run in no_audio.items()})
    print(json.dumps({
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "database": url.rsplit("/", 1)[1],
        "runs": runs,
        "no_audio": no_audio,
        "targets": targets,
        "ok": ok,
    }, indent=1))


if __name__ == "__main__":
    main()
