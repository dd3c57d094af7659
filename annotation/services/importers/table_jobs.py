"""Table imports from the browser (the admins' "New benchmark / Add data" page): a draft ``TableImport`` row for an
uploaded file, a server path or a URL; its mapping, saved and checked; the first rows mapped for a preview; a
validation (dry run) or an import as a ``Job(kind="import")`` with progress, run in the request for small tables
and by a Celery worker for large ones (``IMPORT_INLINE_MAX_ROWS``).

The row's life (claim, heartbeat, finish, fail) is :mod:`annotation.jobs.lifecycle`; the worker's task is
``annotation.tasks.table_import_job_task``, sent by name (:func:`annotation.jobs.registry.enqueue`). The import
itself is :func:`annotation.services.importers.table.table_import`, the same service as ``manage.py
import_table``.
"""
from __future__ import annotations

import logging
import shutil
import uuid
import zipfile
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import Http404
from django.utils import timezone
from django.utils.text import get_valid_filename

from annotation.access import ADMIN, require_role
from annotation.jobs import lifecycle
from annotation.jobs.registry import enqueue, kind_register
from annotation.models import Benchmark, Job, TableImport
from annotation.outbound import url_download
from annotation.services.audit import audit_record
from annotation.services.importers.presets import preset_mapping
from annotation.services.importers.reader import ImportFormatError
from annotation.services.importers.table import table_import
from annotation.services.importers.table_guess import starting_mapping
from annotation.services.importers.table_mapping import (
    ImportProblem,
    TableImportError,
    TableMapping,
    mapping_parse,
)
from annotation.services.importers.table_sources import table_read
from annotation.services.importers.table_zip import table_zip_extract
from config.observability import job_log_context

logger = logging.getLogger(__name__)

kind_register(Job.Kind.IMPORT, task="annotation.tasks.table_import_job_task", row=Job)


def _folder(name: str) -> Path:
    folder = Path(settings.IMPORT_DIR) / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _server_path(value: str, field: str) -> Path:
    """A path an admin named, allowed only inside ``IMPORT_SERVER_DIRS``."""
    path = Path(value).expanduser()
    roots = [Path(root).resolve() for root in settings.IMPORT_SERVER_DIRS]
    if not roots:
        raise ValidationError({field: "Server paths are switched off: set IMPORT_SERVER_DIRS to the folders "
                                      "admins may import from, or upload the file."})
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        raise ValidationError({field: f"{path} is not inside IMPORT_SERVER_DIRS "
                                      f"({', '.join(str(r) for r in roots)})."})
    if not resolved.exists():
        raise ValidationError({field: f"{path} does not exist on this server."})
    return resolved


def _save_upload(upload, folder: Path, field: str) -> Path:
    if upload.size > settings.IMPORT_UPLOAD_MAX_BYTES:
        raise ValidationError({field: f"{upload.name}: {upload.size} bytes is over the limit of "
                                      f"{settings.IMPORT_UPLOAD_MAX_BYTES} bytes (IMPORT_UPLOAD_MAX_BYTES)."})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (get_valid_filename(Path(upload.name or "upload").name)[:150] or "upload")
    with path.open("wb") as fh:
        for chunk in upload.chunks():
            fh.write(chunk)
    return path


def _download(url: str, folder: Path, field: str) -> Path:
    """The table at ``url`` downloaded into ``folder`` (:func:`annotation.outbound.url_download`: no private or
    loopback hosts unless ``PROVIDER_PRIVATE_NETWORKS`` allows them, redirects checked too, at most
    ``IMPORT_UPLOAD_MAX_BYTES``). Raises ``ValidationError`` on ``field`` saying why."""
    import httpx

    if not url.lower().startswith(("http://", "https://")):
        raise ValidationError({field: "Give an http:// or https:// URL."})
    name = get_valid_filename(PurePosixPath(httpx.URL(url).path).name)[:150] or "download"
    try:
        return url_download(url=url, path=folder / name, max_bytes=settings.IMPORT_UPLOAD_MAX_BYTES)
    except ValueError as error:
        message = str(error)
        raise ValidationError({field: f"{message[0].upper()}{message[1:]}."}) from error


def _unzipped_table(path: Path, field: str) -> Path:
    """The table inside an uploaded zip file (a ``datasets`` folder or the one table file in it), unpacked without
    using member names as paths (:func:`~annotation.services.importers.table_zip.table_zip_extract`)."""
    try:
        return table_zip_extract(path, path.parent / "unzipped")
    except ImportFormatError as exc:
        raise ValidationError({field: str(exc)}) from exc


def _audio_zip_check(path: Path, field: str) -> None:
    """Refuse an audio zip whose member names leave its folder, or too many or too large members, naming the
    member (:func:`annotation.services.archives.zip_open`); the import reads members by name lookup only."""
    from annotation.services.archives import ArchiveError, zip_limits, zip_open

    if not zipfile.is_zipfile(path):
        raise ValidationError({field: f"{path.name}: give the audio files as one zip file."})
    try:
        zip_open(path, **zip_limits()).close()
    except ArchiveError as exc:
        raise ValidationError({field: str(exc)}) from exc


#: Rows of a table the draft reads in the web request: its columns, the guessed mapping and the row count when the
#: table is no longer (larger tables are counted from their metadata — Parquet, ``datasets`` — or by the
#: validation).
DRAFT_HEAD_ROWS = 5000


def _rows_known(head) -> int | None:
    """The table's row count from a head read of ``DRAFT_HEAD_ROWS + 1`` rows: known from metadata, or when the
    head reached the end of the table; None otherwise (a validation or import counts and saves it)."""
    if head.total_rows is not None:
        return head.total_rows
    return head.n_rows if head.n_rows <= DRAFT_HEAD_ROWS else None


def table_import_draft_create(
    *, user, benchmark_name: str, upload=None, server_path: str = "", url: str = "", audio_upload=None,
    audio_path: str = "", mapping_upload=None, preset: str = "", lalm: str = "",
) -> TableImport:
    """Store a table for import and read its columns (admins only): the draft the import page maps.

    Exactly one source: ``upload`` (a Django ``UploadedFile``: a table file, or a zip of one table file or one
    ``datasets`` folder), ``server_path`` (a file or ``datasets`` folder inside ``IMPORT_SERVER_DIRS``) or ``url``
    (http(s), downloaded here). The audio root, optional: ``audio_upload`` (a zip of audio files) or
    ``audio_path`` (a folder or zip inside ``IMPORT_SERVER_DIRS``). The mapping starts as ``mapping_upload`` (a
    saved mapping JSON), the ``preset`` for LALM ``lalm`` (with a toolkit judge's name and scale read from the
    file), or guessed from the table (:func:`~annotation.services.importers.table_guess.starting_mapping`). Only
    the first :data:`DRAFT_HEAD_ROWS` rows are read here (the web request): the columns are those of these rows,
    and ``rows`` stays empty for a longer table without metadata to count it (a validation counts it). Zip files
    are unpacked without using member names as paths (:mod:`annotation.services.archives`).

    Raises:
        PermissionDenied: ``user`` is not an admin.
        ValidationError: keyed by form field: no or several sources, a path outside ``IMPORT_SERVER_DIRS``, a
            failed download, an unreadable table, a refused zip (naming the member), a mapping file over
            ``IMPORT_MAPPING_MAX_BYTES`` or unreadable.
    """
    import json

    require_role(user, ADMIN)
    sources = [s for s in (upload, server_path.strip(), url.strip()) if s]
    if len(sources) != 1:
        raise ValidationError({"upload": "Give the table one way: upload a file, or a server path, or a URL."})
    folder = _folder(f"draft-{uuid.uuid4().hex[:12]}")
    try:
        if upload:
            kind, source = TableImport.SourceKind.UPLOAD, upload.name
            path = _save_upload(upload, folder, "upload")
            if path.suffix.lower() == ".zip":
                path = _unzipped_table(path, "upload")
        elif server_path.strip():
            kind, source = TableImport.SourceKind.PATH, server_path.strip()
            path = _server_path(source, "server_path")
        else:
            kind, source = TableImport.SourceKind.URL, url.strip()
            path = _download(source, folder, "url")
        audio_root = ""
        if audio_upload:
            audio_root = str(_save_upload(audio_upload, folder / "audio", "audio_upload"))
            if not zipfile.is_zipfile(audio_root):
                raise ValidationError({"audio_upload": "Upload the audio files as one zip file."})
            _audio_zip_check(Path(audio_root), "audio_upload")
        elif audio_path.strip():
            audio_root = str(_server_path(audio_path.strip(), "audio_path"))
            if Path(audio_root).is_file():
                _audio_zip_check(Path(audio_root), "audio_path")
        document = None
        if mapping_upload:
            if mapping_upload.size > settings.IMPORT_MAPPING_MAX_BYTES:  # checked before a byte of it is read
                raise ValidationError({"mapping_upload": f"{mapping_upload.name}: {mapping_upload.size} bytes is over "
                                       f"the limit of {settings.IMPORT_MAPPING_MAX_BYTES} bytes for a mapping "
                                       "(IMPORT_MAPPING_MAX_BYTES)."})
            try:
                document = json.loads(mapping_upload.read().decode("utf-8"))
                mapping = mapping_parse(document)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ValidationError({"mapping_upload": f"Not a JSON file ({exc})."}) from exc
            except TableImportError as exc:
                raise ValidationError({"mapping_upload": [str(p) for p in exc.problems]}) from exc
        elif preset:
            try:
                document = preset_mapping(preset, lalm=lalm)
            except (KeyError, ValueError) as exc:
                raise ValidationError({"lalm" if isinstance(exc, ValueError) else "preset": str(exc)}) from exc
            mapping = mapping_parse(document)
        else:
            mapping = TableMapping()
        try:  # only the head in the request: a validation or import (a worker for large tables) reads the rest
            table = table_read(path, file_format=mapping.file_format, split=mapping.split, nrows=DRAFT_HEAD_ROWS + 1)
        except ImportFormatError as exc:
            raise ValidationError({"upload" if upload else "server_path" if server_path else "url": str(exc)}) \
                from exc
        with transaction.atomic():
            record = TableImport.objects.create(
                benchmark_name=benchmark_name.strip(), source_kind=kind, source=source[:1000],
                file_path=str(path), file_format=table.file_format, audio_root=audio_root,
                mapping=starting_mapping(document, table, audio_given=bool(audio_root)), columns=table.names,
                rows=_rows_known(table), created_by=user,
            )
            audit_record(actor=user, action="import.draft", obj=record, new={
                "source": record.source, "rows": record.rows, "benchmark": record.benchmark_name})
        return record
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # this draft's own files only; a server path is never touched
        raise


def table_import_mapping_save(*, record: TableImport, user, document: dict, benchmark_name: str) -> TableMapping:
    """Check ``document`` and save it (and the benchmark name) on the draft, even when the check fails, so the
    admin's choices survive; returns the parsed mapping.

    Raises:
        PermissionDenied: not an admin. TableImportError: the mapping's problems.
    """
    require_role(user, ADMIN)
    record.mapping, record.benchmark_name = document, benchmark_name.strip() or record.benchmark_name
    record.save(update_fields=["mapping", "benchmark_name", "updated_at"])
    return mapping_parse(document)


def table_import_start(*, record: TableImport, user, dry_run: bool, run_inline: bool | None = None) -> Job:
    """Start a validation (``dry_run``) or an import of the draft as a ``Job(kind="import")`` and return it.

    Tables of at most ``IMPORT_INLINE_MAX_ROWS`` rows (or ``run_inline=True``) run now, in this call; larger ones
    are sent to a Celery worker after the commit. The job's ``params["result"]`` holds the summary, or
    ``problems`` (row, column, value, reason) when the table was refused.

    Raises:
        PermissionDenied: not an admin. TableImportError: the saved mapping is invalid.
        ValidationError: an import of this table is already queued or running.
    """
    require_role(user, ADMIN)
    mapping_parse(record.mapping)
    if record.job_id and Job.objects.filter(pk=record.job_id, status__in=lifecycle.ACTIVE).exists():
        raise ValidationError("A validation or import of this table is running; wait for it to finish.")
    params = {"table_import": record.pk, "dry_run": dry_run, "benchmark_name": record.benchmark_name,
              "file": Path(record.file_path).name}
    # Not counted yet (only the head was read): a worker reads it.
    inline = run_inline if run_inline is not None else (
        record.rows is not None and record.rows <= settings.IMPORT_INLINE_MAX_ROWS)
    with transaction.atomic():
        job = Job.objects.create(kind=Job.Kind.IMPORT, params=params, total=record.rows or 0, created_by=user,
                                 benchmark=Benchmark.objects.filter(name=record.benchmark_name).first())
        TableImport.objects.filter(pk=record.pk).update(job=job)
        record.job = job
        audit_record(actor=user, action="import.start", obj=job, new=params)
        if not inline:
            enqueue(Job.Kind.IMPORT, job.pk)
    if inline:
        table_import_run(job_pk=job.pk)
        job.refresh_from_db()
    return job


def table_import_run(*, job_pk: int) -> str:
    """Run import job ``job_pk`` (claimed with a conditional update: a duplicate message does nothing); returns
    its final status ("" when not claimed).

    Done: ``params["result"]`` = the summary (``ok`` true), or for a refused dry run ``ok`` false and
    ``problems``. Failed: a refused import (``problems`` in the result, nothing written) or an unexpected error
    (its message in ``error``). Cancelled while it checked rows: stops at the next heartbeat.
    """
    if not lifecycle.run_claim(Job, job_pk, kind=Job.Kind.IMPORT):
        return ""
    with job_log_context(job_pk, kind=Job.Kind.IMPORT):
        job = Job.objects.get(pk=job_pk)
        params = dict(job.params)
        record = TableImport.objects.filter(pk=params.get("table_import")).first()
        dry_run = bool(params.get("dry_run"))

        def progress(phase: str, done: int, total: int) -> None:
            lifecycle.run_heartbeat(Job, job_pk, done=done, total=total or job.total,
                                    params={**params, "phase": phase})

        try:
            if record is None:
                raise ImportFormatError(file=params.get("file", ""), problem="the import's table was deleted")
            summary = table_import(
                path=Path(record.file_path), benchmark_name=record.benchmark_name, mapping=record.mapping,
                audio_root=Path(record.audio_root) if record.audio_root else None, dry_run=dry_run,
                record=None if dry_run else record, created_by=job.created_by, progress=progress,
            )
        except lifecycle.RunStopped:
            return Job.Status.CANCELLED
        except ImportFormatError as error:
            problems = error.problems if isinstance(error, TableImportError) else [ImportProblem(reason=str(error))]
            result = {"ok": False, "problems": [p.as_dict() for p in problems], "dry_run": dry_run,
                      **refusal_counts(error)}
            finish = lifecycle.run_finish if dry_run else lifecycle.run_fail
            finish(Job, job_pk, params={**params, "phase": "done", "result": result},
                   **({"done": result["rows"], "total": result["rows"]} if result.get("rows") is not None else {}),
                   error="" if dry_run else f"{result['n_problems']} problems in the table; nothing was written")
            return Job.Status.DONE if dry_run else Job.Status.FAILED
        except Exception as error:  # the job row must say why it failed; the worker logs the traceback
            logger.exception("import job %s failed", job_pk)
            lifecycle.run_fail(Job, job_pk, error=f"{type(error).__name__}: {error}"[:5000],
                               params={**params, "phase": "done"})
            return Job.Status.FAILED
        result = {"ok": True, "dry_run": dry_run, **summary.as_dict(), "lines": summary.lines()}
        if dry_run and record.rows != summary.rows:  # counted now (a draft knows only the head of a large table)
            TableImport.objects.filter(pk=record.pk).update(rows=summary.rows)
        benchmark = Benchmark.objects.filter(name=record.benchmark_name).first()
        with transaction.atomic():
            finished = lifecycle.run_finish(Job, job_pk, done=summary.rows, total=summary.rows,
                                            params={**params, "phase": "done", "result": result})
            if benchmark is not None:
                Job.objects.filter(pk=job_pk).update(benchmark=benchmark)
        return Job.Status.DONE if finished else Job.Status.CANCELLED


def refusal_counts(error: ImportFormatError) -> dict:
    """How large a refusal was: ``n_problems`` (all found; at most ``MAX_PROBLEMS`` are listed), the table's
    ``rows`` and ``questions`` (None when the file could not be read), ``advice`` lines and ``audio_not_found``."""
    listed = len(getattr(error, "problems", [])) or 1
    return {"n_problems": getattr(error, "n_problems", listed), "rows": getattr(error, "rows", None),
            "questions": getattr(error, "questions", None), "advice": getattr(error, "advice", []),
            "audio_not_found": getattr(error, "audio_not_found", 0)}


def table_imports_fail_stale(*, now: datetime | None = None) -> int:
    """Fail running imports whose heartbeat is older than ``IMPORT_LEASE_S`` (their worker died; an import writes
    in one transaction, so nothing of it was kept) and say so; beat runs this every 5 minutes. Returns how many."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.IMPORT_LEASE_S)
    return Job.objects.filter(kind=Job.Kind.IMPORT, status=Job.Status.RUNNING, heartbeat_at__lt=stale).update(
        status=Job.Status.FAILED, finished_at=now,
        error="The worker running this import stopped answering; nothing was written. Start it again.")


def table_import_list_for_user(*, user):
    """Table imports, newest first, with their latest job (admins only). Raises ``PermissionDenied``."""
    require_role(user, ADMIN)
    return TableImport.objects.select_related("job", "benchmark", "created_by")


def table_import_get_for_user(*, user, pk: int) -> TableImport:
    """One table import (admins only). Raises ``PermissionDenied`` or ``Http404``."""
    try:
        return table_import_list_for_user(user=user).get(pk=pk)
    except TableImport.DoesNotExist:
        raise Http404("No such import.") from None
