"""Staff pages on the real data: p50/p95 server time of every staff page, each fetched 20 times by its role.

Creates (drops first) the PostgreSQL database ``orca_bench_pages`` (``--server``), migrates it and imports
``--data`` (default ``../shared/data``) exactly as ``make run DATA=../shared/data`` does (``setup_demo --data``:
the demo accounts, MMAU, MMAR, the ORCA seed-108 annotations with their 5,573 ratings and two LALMs' MMAR candidate
answers); ``--reuse`` keeps an earlier import. Then, in this process, under the production settings (DEBUG off,
cached templates), each page is fetched once untimed (``first_ms``: the first visit after new data, which may
fill caches) and ``--repeat`` (20) times timed by the demo account of its role through Django's test client: the
whole request (middleware, view, template) without a network, which is what "server time" means here.

``cpu_p50_ms``/``cpu_p95_ms`` are the CPU time of the Django process alone (``time.thread_time``; PostgreSQL's
work not included): on a shared, busy machine wall time includes waiting for a core, this does not.

Prints one JSON object::

    {"pages": {"<name>": {"url", "role", "status", "p50_ms", "p95_ms", "max_ms", "first_ms", "n", "cpu_p50_ms",
                          "cpu_p95_ms"}, ...},
     "ratings": 5573, "target_p95_ms": 300, "over_target": [...], "flags_refresh_s", "flags_opened", ...}

Before the pages are fetched, the refinement flags are evaluated once, as the worker's beat task does within a
minute of new ratings (``flags_refresh_s``: its time, background work that no page waits for).

Target (issue 18): p95 <= 300 ms for every staff page.
Run: ``python bench/pages.py [--reuse] [--repeat 20] [--data ../shared/data]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import load  # noqa: E402 - sibling bench script: production-like settings, percentile, prepare_database

DATABASE = "orca_bench_pages"
TARGET_P95_MS = 300.0

#: (name, URL name, args or a callable giving them, role). Detail pages take the first matching row.
PAGES = [
    ("dashboard", "dashboard", (), "expert"),
    ("agreement", "modelling:agreement", (), "expert"),
    ("agreement_interval", "modelling:agreement", (), "expert"),
    ("overview", "annotation:overview", (), "expert"),
    ("refinement_queues", "refinement:index", (), "expert"),
    ("refinement_queue", "refinement:queue", "queue", "expert"),
    ("refinement_item", "refinement:item", "flagged_question", "expert"),
    ("refinement_report", "refinement:report", (), "expert"),
    ("orca_items", "modelling:items", (), "expert"),
    ("orca_item", "modelling:item", "rated_question", "expert"),
    ("orca_runs", "modelling:training_runs", (), "expert"),
    ("orca_run_new", "modelling:training_run_new", (), "admin"),
    ("orca_rater", "modelling:rater", (), "expert"),
    ("routing", "modelling:routing", (), "expert"),
    ("leaderboard", "modelling:leaderboard", (), "expert"),
    ("jobs", "annotation:jobs", (), "admin"),
    ("judges", "annotation:judges", (), "admin"),
    ("judge_compare", "annotation:judge-compare", (), "expert"),
    ("exports", "annotation:exports", (), "admin"),
    ("audit", "annotation:audit", (), "admin"),
    ("annotator_home", "annotation:home", (), "annotator1"),
]
QUERY = {"agreement_interval": "?level=interval"}


def import_data(*, data: Path, env: dict) -> None:
    """Migrate and import ``data`` as ``make run DATA=...`` does (``setup_demo --data``).

    The bench runs under production settings (DEBUG off), where ``setup_demo`` refuses the demo accounts unless
    told explicitly: this database is the bench's own, on this machine, and the pages are fetched as those accounts.
    """
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=REPO, env=env, check=True)
    subprocess.run([sys.executable, "manage.py", "setup_demo", "--data", str(data), "--i-know-this-is-not-production"],
                   cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)


def _args(kind) -> tuple | None:
    """Arguments of a detail page: the first row that fits, or None when the data has none."""
    from annotation.models import Question
    from refinement.models import CorrectionItem

    if kind == "queue":
        item = CorrectionItem.objects.order_by("queue").values_list("queue", flat=True).first()
        return (item or "expert",)
    if kind == "flagged_question":
        pk = CorrectionItem.objects.order_by("id").values_list("question_id", flat=True).first()
        return (pk,) if pk else None
    if kind == "rated_question":
        pk = (Question.objects.filter(versions__candidates__ratings__isnull=False)
              .order_by("id").values_list("id", flat=True).first())
        return (pk,) if pk else None
    return tuple(kind)


def measure(*, repeat: int) -> dict:
    """Fetch every page of :data:`PAGES` once untimed and ``repeat`` times timed; one result dict per page."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import NoReverseMatch, reverse

    from annotation.services.accounts import DEMO_ACCOUNTS

    users = {name: get_user_model().objects.get(username=name) for name in DEMO_ACCOUNTS}
    clients = {}
    results = {}
    for name, url_name, kind, account in PAGES:
        try:
            args = _args(kind)
            url = reverse(url_name, args=args) + QUERY.get(name, "") if args is not None else None
        except NoReverseMatch:
            url = None
        if url is None:
            results[name] = {"skipped": "no such page or no row to show"}
            continue
        if account not in clients:
            clients[account] = Client()
            clients[account].force_login(users[account])
        client = clients[account]
        started = time.perf_counter()
        response = client.get(url)
        first_ms = (time.perf_counter() - started) * 1000
        times, cpu = [], []
        for _ in range(repeat):
            started, started_cpu = time.perf_counter(), time.thread_time()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
        results[name] = {
            "url": url, "role": DEMO_ACCOUNTS[account], "status": response.status_code,
            "p50_ms": round(load.percentile(times, 50), 1), "p95_ms": round(load.percentile(times, 95), 1),
            "max_ms": round(max(times), 1), "first_ms": round(first_ms, 1), "n": repeat,
            "cpu_p50_ms": round(load.percentile(cpu, 50), 1), "cpu_p95_ms": round(load.percentile(cpu, 95), 1),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--reuse", action="store_true", help="keep the database of an earlier run (no import)")
    parser.add_argument("--server", default=os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432"))
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/9")
    args = parser.parse_args()
    if not args.data.is_dir():
        raise SystemExit(f"--data {args.data}: no such folder (the real data sits beside the repository)")

    folder = Path(tempfile.mkdtemp(prefix="orca-bench-pages-"))
    (folder / "bench_load_settings.py").write_text(load.SETTINGS)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bench_load_settings",
        "PYTHONPATH": f"{REPO}{os.pathsep}{folder}",
        "DATABASE_URL": f"{args.server}/{DATABASE}",
        "CELERY_BROKER_URL": args.broker,
        "DJANGO_SECRET_KEY": "bench-pages-" + "x" * 50,
        "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1",
        "MEDIA_ROOT": str(folder / "media"),
    }
    import_s = None
    if not args.reuse:
        load.prepare_database(server=args.server, name=DATABASE)
        started = time.perf_counter()
        import_data(data=args.data, env=env)
        import_s = round(time.perf_counter() - started, 1)
    os.environ.update(env)
    sys.path[:0] = [str(REPO), str(folder)]
    import django

    django.setup()
    from annotation.models import Rating
    from refinement.services.flags import flags_refresh_recent

    # What the beat task ``refinement-flags-refresh`` does within a minute of the import; pages never evaluate
    # flags themselves, so without it the queues would stay empty. Its time is background work, reported apart.
    started = time.perf_counter()
    flags_opened = flags_refresh_recent().opened
    flags_refresh_s = round(time.perf_counter() - started, 2)

    pages = measure(repeat=args.repeat)
    timed = {name: page for name, page in pages.items() if "p95_ms" in page}
    print(json.dumps({
        "pages": pages,
        "ratings": Rating.objects.count(),
        "repeat": args.repeat,
        "import_s": import_s,
        "flags_refresh_s": flags_refresh_s,
        "flags_opened": flags_opened,
        "target_p95_ms": TARGET_P95_MS,
        "over_target": sorted(name for name, page in timed.items() if page["p95_ms"] > TARGET_P95_MS),
        "not_200": sorted(name for name, page in timed.items() if page["status"] != 200),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "cpu_count": os.cpu_count(),
    }, indent=1))


if __name__ == "__main__":
    main()
