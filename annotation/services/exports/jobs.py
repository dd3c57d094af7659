"""Export jobs: the exports as ``Job(kind="export")`` rows, run in the request or a Celery worker, reclaimed when
their worker goes silent, their zip file handed to admins only.

The row's life (claim, heartbeat after every chunk, finish, fail) is :mod:`annotation.jobs.lifecycle`; the worker's
task is ``annotation.tasks.export_job_task``, sent by name (:func:`annotation.jobs.registry.enqueue`)."""
from __future__ import annotations

import logging
import shutil
import zipfile
from collections.abc import Collection
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.access import ADMIN, require_role
from annotation.jobs import lifecycle
from annotation.jobs.registry import enqueue, kind_register
from annotation.models import Benchmark, Job, Question
from annotation.services.audit import audit_record
from annotation.services.exports.corrected_benchmark import BENCHMARK_FORMATS, benchmark_export_corrected
from annotation.services.exports.dataset import dataset_export, dataset_options_check
from annotation.services.exports.records import ExportError, _candidate_selection
from config.observability import job_log_context

logger = logging.getLogger(__name__)

kind_register(Job.Kind.EXPORT, task="annotation.tasks.export_job_task", row=Job)


#: What an export job makes.
EXPORT_KINDS = ("dataset", "benchmark")


def _export_folder(job_pk: int) -> Path:
    return Path(settings.EXPORT_DIR) / f"job-{job_pk}"


def export_archive_path(job: Job) -> Path:
    """Where the zip file of export job ``job`` is (or will be)."""
    return Path(settings.EXPORT_DIR) / f"export-{job.pk}.zip"



def export_start(
    *,
    requested_by,
    what: str = "dataset",
    benchmark: Benchmark | None = None,
    formats: Collection[str] = ("orca-jsonl",),
    include_invalid: bool = False,
    split: str = "none",
    seed: int = 0,
    held_out_lalms: Collection[str] = (),
    licence: str = "",
    benchmark_format: str = "",
    run_inline: bool | None = None,
) -> Job:
    """Start an export as a ``Job(kind="export")`` and return it (admins only).

    The options are those of :func:`dataset_export` (``what="dataset"``) or :func:`benchmark_export_corrected`
    (``what="benchmark"``, which needs ``benchmark``). Exports of at most ``EXPORT_INLINE_MAX_CANDIDATES``
    candidate answers (or ``run_inline=True``) run now, in this call; larger ones are sent to a Celery worker
    (``export_job_task``) after the commit. The job's ``total``/``done`` count rows; when it is done, its zip file
    is at :func:`export_archive_path` and :func:`export_download_path` hands it to admins.

    Raises:
        PermissionDenied: ``requested_by`` is not an admin.
        ExportError: bad options (checked before the job is created).
    """
    require_role(requested_by, ADMIN)
    if what not in EXPORT_KINDS:
        raise ExportError(f"what must be one of {', '.join(EXPORT_KINDS)}; got {what!r}")
    formats = list(dict.fromkeys(formats))
    if what == "benchmark":
        if benchmark is None:
            raise ExportError("a benchmark export needs a benchmark")
        if benchmark_format and benchmark_format not in BENCHMARK_FORMATS:
            raise ExportError(f"benchmark format must be one of {', '.join(BENCHMARK_FORMATS)}")
        total = Question.objects.filter(benchmark=benchmark).exclude(status=Question.Status.RETIRED).count()
    else:
        dataset_options_check(formats=formats, split=split, held_out_lalms=held_out_lalms)
        total = _candidate_selection(benchmark=benchmark, include_invalid=include_invalid).count()
    params = {
        "what": what,
        "formats": formats,
        "include_invalid": include_invalid,
        "split": split,
        "seed": seed,
        "held_out_lalms": sorted(held_out_lalms),
        "licence": licence,
        "benchmark_format": benchmark_format,
    }
    inline = run_inline if run_inline is not None else total <= settings.EXPORT_INLINE_MAX_CANDIDATES
    with transaction.atomic():
        job = Job.objects.create(
            kind=Job.Kind.EXPORT, benchmark=benchmark, params=params, total=total, created_by=requested_by
        )
        audit_record(actor=requested_by, action="export.start", obj=job, old=None, new=params)
        if not inline:
            enqueue(Job.Kind.EXPORT, job.pk)
    if inline:
        export_run(job_pk=job.pk)
        job.refresh_from_db()
    return job


def export_run(*, job_pk: int) -> str:
    """Run export job ``job_pk`` (claimed with a conditional update, so a duplicate message does nothing).

    Writes the files into ``EXPORT_DIR/job-<pk>/``, zips them into :func:`export_archive_path`, and marks the job
    done with ``params["result"]`` (files, counts, alpha), or failed with the error. A job cancelled while it runs
    stops after the current chunk and leaves no files. Returns the final status ("" when not claimed).
    """
    if not lifecycle.run_claim(Job, job_pk, kind=Job.Kind.EXPORT):
        return ""
    with job_log_context(job_pk, kind=Job.Kind.EXPORT):
        return _export_work(job=Job.objects.select_related("benchmark").get(pk=job_pk))


def _export_work(*, job: Job) -> str:
    job_pk, params = job.pk, job.params

    def progress(done: int) -> None:
        lifecycle.run_heartbeat(Job, job_pk, done=done)  # raises RunStopped once the job was cancelled

    folder = _export_folder(job_pk)
    try:
        if params.get("what") == "benchmark":
            summary = benchmark_export_corrected(
                benchmark=job.benchmark, out_dir=folder, file_format=params.get("benchmark_format", ""),
                progress=progress,
            )
            result = {"files": summary.files, "questions": summary.questions, "changes": summary.changes}
        else:
            summary = dataset_export(
                out_dir=folder,
                formats=params.get("formats") or ["orca-jsonl"],
                benchmark=job.benchmark,
                include_invalid=params.get("include_invalid", False),
                split=params.get("split", "none"),
                seed=params.get("seed", 0),
                held_out_lalms=params.get("held_out_lalms") or (),
                licence=params.get("licence", ""),
                progress=progress,
            )
            result = {
                "files": summary.files,
                "rows": summary.rows,
                "ratings": summary.ratings,
                "splits": summary.splits,
                "alpha_interval": summary.alpha_interval,
                "alpha_ordinal": summary.alpha_ordinal,
                "alpha_undefined": summary.alpha_undefined,
            }
        archive = export_archive_path(job)
        partial = archive.with_name(archive.name + ".partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    zf.write(path, arcname=str(path.relative_to(folder)))
        partial.replace(archive)
        shutil.rmtree(folder, ignore_errors=True)
    except lifecycle.RunStopped:
        shutil.rmtree(folder, ignore_errors=True)
        return Job.Status.CANCELLED
    except Exception as error:  # the job row must say why it failed; the worker logs the traceback
        shutil.rmtree(folder, ignore_errors=True)
        with transaction.atomic():
            lifecycle.run_fail(Job, job_pk, error=f"{type(error).__name__}: {error}"[:5000])
            audit_record(actor=None, actor_label=f"job {job_pk}", action="export.fail", obj=job,
                         old={"status": Job.Status.RUNNING}, new={"status": Job.Status.FAILED, "error": str(error)})
        logger.exception("export job %s failed", job_pk)
        return Job.Status.FAILED
    done_rows = result.get("rows", result.get("questions", 0))
    with transaction.atomic():
        finished = lifecycle.run_finish(
            Job, job_pk, done=done_rows, total=done_rows, params={**params, "result": result}
        )
        if finished:
            audit_record(actor=None, actor_label=f"job {job_pk}", action="export.finish", obj=job,
                         old={"status": Job.Status.RUNNING}, new={"status": Job.Status.DONE, **result})
    if not finished:  # cancelled after the last chunk
        export_archive_path(job).unlink(missing_ok=True)
        return Job.Status.CANCELLED
    return Job.Status.DONE


#: Times a silent export is sent again before it is failed (a worker killed for memory would die each time).
EXPORT_MAX_RECLAIMS = 2


def exports_reclaim_stale(*, now: datetime | None = None) -> int:
    """Reclaim export jobs whose worker went silent, as ``job_items_requeue_stale`` does for Stage 1 items.

    An export is silent when it is ``running`` and its heartbeat (written after every chunk) is older than
    ``EXPORT_LEASE_S``, which is longer than the export task's hard time limit, so the old execution is gone.
    Each one is put back to ``queued`` (its partial folder removed, progress reset, ``params["reclaims"]`` + 1) and
    sent to a worker again after the commit; one already reclaimed ``EXPORT_MAX_RECLAIMS`` times is failed with a
    message saying so. An export still ``queued`` a lease after it was created or last sent (its message was lost,
    e.g. the broker was down when the request committed) is sent again; a duplicate message is harmless, as
    :func:`export_run` claims the job with a conditional update. Beat runs this every 5 minutes
    (``annotation.tasks.exports_reclaim_stale_task``).

    Returns:
        The number of exports reclaimed, failed or sent again.
    """
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EXPORT_LEASE_S)
    changed = 0
    for job in Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.RUNNING, heartbeat_at__lt=stale):
        reclaims = int((job.params or {}).get("reclaims", 0))
        silent = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, heartbeat_at__lt=stale)
        with transaction.atomic():
            if reclaims >= EXPORT_MAX_RECLAIMS:
                error = (f"The worker running this export stopped answering {reclaims + 1} times (last sign of life "
                         f"{job.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC); check the worker's log (memory, time limit) "
                         "and start the export again.")
                if not silent.update(status=Job.Status.FAILED, error=error, finished_at=now):
                    continue
                new = {"status": Job.Status.FAILED, "error": error}
            else:
                if not silent.update(status=Job.Status.QUEUED, started_at=None, heartbeat_at=now, done=0,
                                     params={**job.params, "reclaims": reclaims + 1}):
                    continue
                enqueue(Job.Kind.EXPORT, job.pk)
                new = {"status": Job.Status.QUEUED, "reclaims": reclaims + 1}
            # Before the commit, so the new execution never finds (or loses) the dead one's partial files.
            shutil.rmtree(_export_folder(job.pk), ignore_errors=True)
            audit_record(actor=None, actor_label="system", action="export.reclaim", obj=job,
                         old={"status": Job.Status.RUNNING}, new=new)
        changed += 1
    # heartbeat_at of a queued export: when its message was last sent again (None: only at creation).
    unsent = Job.objects.filter(kind=Job.Kind.EXPORT, status=Job.Status.QUEUED).filter(
        Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True, created_at__lt=stale)
    )
    for job in unsent:
        with transaction.atomic():
            if Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(heartbeat_at=now):
                enqueue(Job.Kind.EXPORT, job.pk)
                changed += 1
    return changed


def export_download_path(*, user, job: Job) -> Path:
    """The zip file of a finished export job, for an admin.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        FileNotFoundError: the job is not a finished export or its file is gone.
    """
    require_role(user, ADMIN)
    path = export_archive_path(job)
    if job.kind != Job.Kind.EXPORT or job.status != Job.Status.DONE or not path.is_file():
        raise FileNotFoundError(f"export job {job.pk} has no file to download ({job.status})")
    return path

