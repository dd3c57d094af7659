"""The table importer: any audio QA table — questions, reference answers, audio, the LALMs' candidate answers,
human ratings collected elsewhere and a toolkit judge's scores — into a benchmark, driven by a mapping document
(:mod:`annotation.services.importers.table_mapping`; README, "Your own benchmark").

Three steps, one module each: (1) read the table (:mod:`.table_sources`) and check every row against the mapping
(:mod:`.table_plan`, cells read by :mod:`.table_cells`, toolkit rows matched by question text in
:mod:`.table_match`), collecting every problem with its row, column and value; (2) find and check every distinct
audio file (:mod:`.table_audio`); (3) write everything in one transaction (:mod:`.table_write`). Any problem in
(1) or (2), or a conflict found in (3), raises :class:`TableImportError` listing them all, and nothing is written.
A dry run does (3) and rolls it back, so it reports what an import would create (:mod:`.table_summary`).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import Benchmark, Question, TableImport
from annotation.services.audio import AudioReadError, audio_file_info
from annotation.services.importers.common import _delete_stored_files
from annotation.services.importers.reader import ImportFormatError, _max_length
from annotation.services.importers.table_audio import AudioFound, audio_advice, audio_check, audio_preview_state
from annotation.services.importers.table_locate import AudioLocator, is_missing
from annotation.services.importers.table_mapping import (
    ImportProblem,
    TableImportError,
    TableMapping,
    mapping_parse,
)
from annotation.services.importers.table_match import QuestionIndex
from annotation.services.importers.table_plan import MAX_PROBLEMS, Context, Plan, Progress, plan_table
from annotation.services.importers.table_sources import table_read
from annotation.services.importers.table_summary import TableImportSummary
from annotation.services.importers.table_write import TABLE_IMPORT_REASON, write_plan


def _context(benchmark: Benchmark | None, mapping: TableMapping) -> Context:
    """The benchmark's questions as the planner needs them (ids in import order; texts to match rows by)."""
    if benchmark is None:
        return Context()
    ids = list(Question.objects.filter(benchmark=benchmark).order_by("pk").values_list("external_id", flat=True))
    texts = mapping.match or {"position", "question"} <= set(mapping.columns)
    index = QuestionIndex.of_benchmark(benchmark) if texts else None
    return Context(exists=True, positions=ids, external_ids=set(ids), index=index)


def _refusal(file: str, plan: Plan, audio: AudioFound) -> TableImportError:
    """The error of a refused table: its problems (mapping problems first), how many there were in all, the size
    of the table they were found in, and what to do about audio not found (``advice``)."""
    problems = sorted(plan.problems, key=lambda p: (p.row is not None, p.row or 0))
    error = TableImportError(file=file, problems=problems)
    error.n_problems = max(plan.n_problems, len(problems))
    error.rows, error.questions = plan.rows, len(plan.questions)
    error.audio_not_found = audio.not_found
    error.advice = [text] if (text := audio_advice(audio)) else []
    return error


def _checked_plan(*, table, mapping: TableMapping, name: str, locator: AudioLocator, file: str,
                  progress: Progress | None) -> tuple[Plan, AudioFound]:
    """Steps 1 and 2: the plan and its audio, or :class:`TableImportError` with every problem."""
    plan = plan_table(table, mapping, _context(Benchmark.objects.filter(name=name).first(), mapping), locator,
                      progress)
    audio = AudioFound()
    if not any(p.row is None for p in plan.problems) and "audio" in mapping.columns:
        audio = audio_check(plan, locator, mapping.resolve(table.names)[0]["audio"],
                            allow_missing=mapping.missing_audio == "allow", progress=progress)
    if plan.problems:
        raise _refusal(file, plan, audio)
    if not plan.candidates and not plan.questions:
        problems = [ImportProblem(reason="the table has no rows" if not plan.skipped else
                                  "every row was left out: none of their questions is in the benchmark")]
        raise TableImportError(file=file, problems=problems + plan.skipped)
    return plan, audio


def table_import(
    *,
    path: Path,
    benchmark_name: str,
    mapping: TableMapping | dict,
    audio_root: Path | None = None,
    dry_run: bool = False,
    record: TableImport | None = None,
    source: str = "",
    created_by=None,
    progress: Progress | None = None,
) -> TableImportSummary:
    """Import the table at ``path`` into the benchmark ``benchmark_name`` (created when absent) as the mapping
    says; with ``dry_run`` check and count everything, then write nothing.

    Args:
        path: a CSV, TSV, JSON (list of objects, or an object holding one such list, e.g. AudioBench's
            ``details``), JSONL or Parquet file, or a Hugging Face ``datasets`` folder.
        mapping: a mapping document (:func:`~annotation.services.importers.table_mapping.mapping_parse`) or a
            parsed one.
        audio_root: folder or zip file the audio column's relative paths start from (URLs, file storage keys and
            audio bytes need none).
        record: the browser's :class:`~annotation.models.TableImport` row; without one, a (non-dry) import
            records a new row with the mapping (source ``source`` or the path). The row's ``summary``,
            ``benchmark`` and ``imported_at`` are written in the import's transaction.
        progress: called as ``progress(phase, done, total)`` while rows (phase ``checking rows``, counting rows)
            and audio files (``checking audio``, counting distinct files) are checked; also ``reading`` and
            ``writing``.

    Returns:
        The summary (:class:`~annotation.services.importers.table_summary.TableImportSummary`).

    Raises:
        TableImportError: every problem with the mapping, the rows (row number, column, value, reason) or the
            audio files (at most ``MAX_PROBLEMS`` listed; ``n_problems``, ``rows`` and ``questions`` say how many
            problems in how large a table, ``advice`` what to do about audio not found); also a changed answer
            that was rated already. Nothing is written.
        ImportFormatError: the file cannot be read (format, encoding, malformed CSV or JSON with its line).
    """
    path = Path(path)
    mapping = mapping if isinstance(mapping, TableMapping) else mapping_parse(mapping)
    name = (benchmark_name or "").strip()
    if not name or len(name) > _max_length(Benchmark, "name"):
        raise ImportFormatError(file=path.name, problem=f"benchmark name {benchmark_name!r} is empty or longer "
                                f"than {_max_length(Benchmark, 'name')} characters")
    if progress is not None:
        progress("reading", 0, 0)
    table = table_read(path, file_format=mapping.file_format, split=mapping.split)
    summary = TableImportSummary(file=path.name, benchmark=name, dry_run=dry_run, rows=table.n_rows,
                                 candidate_metadata=list(mapping.candidate_metadata))
    workdir = Path(tempfile.mkdtemp(prefix="orca-table-import-"))
    locator = AudioLocator(root=audio_root, workdir=workdir, max_bytes=settings.AUDIO_UPLOAD_MAX_BYTES)
    stored: list[str] = []
    try:
        plan, audio = _checked_plan(table=table, mapping=mapping, name=name, locator=locator, file=path.name,
                                    progress=progress)
        summary.skipped = [p.as_dict() for p in plan.skipped]
        summary.audio_missing_files = len(audio.missing)
        names, file_format = table.names, table.file_format
        del table  # the plan holds what is needed; the read table's memory goes back before the writes
        if progress is not None:
            progress("writing", summary.rows, summary.rows)
        with transaction.atomic():
            benchmark = write_plan(plan=plan, mapping=mapping, benchmark_name=name, file_name=path.name,
                                   audio=audio, dry_run=dry_run, summary=summary, stored=stored)
            if dry_run:
                transaction.set_rollback(True)
            else:
                _record(record=record, mapping=mapping, benchmark=benchmark, summary=summary, path=path,
                        columns=names, file_format=file_format, audio_root=audio_root, source=source,
                        created_by=created_by)
    except BaseException:
        _delete_stored_files(stored)  # the rows are rolled back; their copied files must go too
        raise
    finally:
        locator.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if dry_run:
        _delete_stored_files(stored)
    return summary


def _record(*, record: TableImport | None, mapping: TableMapping, benchmark: Benchmark, summary, path: Path,
            columns: list[str], file_format: str, audio_root, source: str, created_by) -> None:
    """Save the mapping and the summary with the import (a new ``TableImport`` row when none is given) and audit."""
    from annotation.services.audit import audit_record

    now = timezone.now()
    if record is None:
        record = TableImport(source_kind=TableImport.SourceKind.PATH, source=source or str(path),
                             file_path=str(path), created_by=created_by)
    record.benchmark_name, record.benchmark = benchmark.name, benchmark
    record.file_format, record.columns, record.rows = file_format, columns, summary.rows
    record.audio_root = str(audio_root or "")
    record.mapping, record.summary, record.imported_at = mapping.document(), summary.as_dict(), now
    record.save()
    counts = {k: v for k, v in summary.as_dict().items() if isinstance(v, int) and not isinstance(v, bool)}
    audit_record(actor=created_by, actor_label="" if created_by else f"import {path.name}", action="import.table",
                 obj=record, new={"file": path.name, "benchmark": benchmark.name, **counts})


def table_preview(*, path: Path, mapping: TableMapping | dict, benchmark_name: str, audio_root: Path | None = None,
                  rows: int = 10) -> tuple[list[dict], list[ImportProblem]]:
    """The first ``rows`` rows of the table as the mapping reads them, without writing or downloading anything:
    ``([{row, question_id, question, reference, lalm, candidate, score, rater, audio, audio_playable,
    audio_note, metadata, judge_score, ...}], problems)``.

    ``score`` is the rating on the 1–5 scale; ``audio`` the audio cell as given, ``audio_playable`` whether the
    import would find it (a file under the audio root or in the file storage, bytes, or a URL), ``audio_note``
    why not. Problems of these rows are returned, not raised (the import page shows them beside the rows).

    Raises:
        TableImportError: the mapping document itself is invalid.
        ImportFormatError: the file cannot be read.
    """
    mapping = mapping if isinstance(mapping, TableMapping) else mapping_parse(mapping)
    table = table_read(Path(path), file_format=mapping.file_format, split=mapping.split, nrows=rows)
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    workdir = Path(tempfile.mkdtemp(prefix="orca-table-preview-"))
    locator = AudioLocator(root=audio_root, workdir=workdir, max_bytes=settings.AUDIO_UPLOAD_MAX_BYTES)
    try:
        plan = plan_table(table, mapping, _context(benchmark, mapping), locator)
        states = {key: audio_preview_state(locator, q.audio_value, allow_missing=mapping.missing_audio == "allow")
                  for key, q in plan.questions.items()}
    finally:
        locator.close()
        shutil.rmtree(workdir, ignore_errors=True)
    out = []
    for candidate in plan.candidates.values():
        question = plan.questions[candidate.question]
        for rating in candidate.ratings or [None]:
            out.append({
                "row": rating.row if rating else candidate.row,
                "question_id": candidate.question,
                "question": question.values.get("question", ""),
                "reference": question.values.get("reference", ""),
                "audio": "" if is_missing(question.audio_value) or isinstance(question.audio_value, bytes | dict)
                else str(question.audio_value),
                "audio_row": question.row,
                "audio_playable": states[candidate.question][0],
                "audio_note": states[candidate.question][1],
                "lalm": candidate.lalm,
                "candidate": candidate.text,
                "metadata": candidate.metadata or {},
                "judge_score": candidate.judge.score if candidate.judge else None,
                "score": rating.score if rating else None,
                "rater": rating.rater if rating else "",
            })
    out.sort(key=lambda r: r["row"])
    return out[:rows], plan.problems + plan.skipped


def table_audio_locate(*, path: Path, mapping: TableMapping | dict, row: int, audio_root: Path | None,
                       workdir: Path) -> Path:
    """The local audio file of data row ``row`` (1-based) of the table, found as an import would find it (the
    import page's preview player). Files made for it go to ``workdir``.

    Raises:
        ValueError: the row has no audio, or it cannot be found or read (the reason).
    """
    mapping = mapping if isinstance(mapping, TableMapping) else mapping_parse(mapping)
    table = table_read(Path(path), file_format=mapping.file_format, split=mapping.split, nrows=row)
    columns, _, problems = mapping.resolve(table.names)
    if problems or "audio" not in columns or not 1 <= row <= table.n_rows:
        raise ValueError("this row has no audio")
    value = table.column(columns["audio"], row - 1, row)[0]
    if is_missing(value):
        raise ValueError("this row has no audio")
    locator = AudioLocator(root=audio_root, workdir=workdir, max_bytes=settings.AUDIO_UPLOAD_MAX_BYTES)
    try:
        found = locator.locate(value)
        audio_file_info(path=found.path, name=found.name)
    except AudioReadError as exc:
        raise ValueError(str(exc)) from exc
    finally:
        locator.close()
    return found.path


__all__ = ["MAX_PROBLEMS", "TABLE_IMPORT_REASON", "ImportProblem", "TableImportError", "TableImportSummary",
           "table_audio_locate", "table_import", "table_preview"]
