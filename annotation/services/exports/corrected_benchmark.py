"""The corrected benchmark: every question of a benchmark at its current version, in the benchmark's own format
(MMAU JSON list or MMAR JSONL), with a changelog of the versions made since import (ORCA paper, section 3.3)."""
from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.utils import timezone

from annotation.benchmark_formats import BENCHMARK_FILE_FORMATS, MMAR, MMAU, benchmark_record
from annotation.models import Benchmark, Question, QuestionVersion
from annotation.services.exports.records import ExportError

#: Benchmark formats of :func:`benchmark_export_corrected`.
BENCHMARK_FORMATS = tuple(BENCHMARK_FILE_FORMATS)


def benchmark_format_of(benchmark: Benchmark) -> str:
    """``mmar`` when the benchmark was imported from a JSONL file (MMAR meta), else ``mmau`` (a JSON list)."""
    return MMAR.name if benchmark.source.lower().endswith(".jsonl") else MMAU.name


def _benchmark_record(question: Question, version: QuestionVersion, file_format: str) -> dict:
    """One item in the benchmark's own format (the fields the importer reads), plus rationale and transcript."""
    record = benchmark_record(
        BENCHMARK_FILE_FORMATS[file_format], external_id=question.external_id, audio_ref=question.audio_ref,
        question_text=version.question_text, choices=question.choices, reference_answer=version.reference_answer,
        modality=question.modality_detail or question.modality, category=question.category,
        sub_category=question.sub_category, rationale=version.rationale,
    )
    record.update(question.extra or {})
    record.update(transcript=version.transcript, version=version.number)
    return record


_CHANGELOG_FIELDS = ("question_text", "reference_answer", "rationale", "transcript")


@dataclass
class BenchmarkExportSummary:
    """What :func:`benchmark_export_corrected` wrote."""

    folder: Path
    files: list[str]
    questions: int
    changes: int


def benchmark_export_corrected(
    *, benchmark: Benchmark, out_dir: Path, file_format: str = "", chunk_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> BenchmarkExportSummary:
    """Write ``benchmark`` at its current versions so others can re-run it, with a changelog.

    Files: ``<name>.json`` (MMAU: a JSON list of {id, audio_id, question, choices, answer, task, category,
    sub-category, rationale, ...}) or ``<name>.jsonl`` (MMAR: one {id, audio_path, question, choices, answer,
    modality, category, sub-category, thinking, ...} per line), each item with ``transcript`` and ``version``
    added; ``CHANGELOG.md`` and ``changelog.jsonl`` with one entry per version after the first (number, source,
    reason, who, when, and old → new for each changed text field); ``README.md``. Retired questions are left out.

    Raises:
        ExportError: ``file_format`` is not ``mmau`` or ``mmar``.
    """
    file_format = file_format or benchmark_format_of(benchmark)
    if file_format not in BENCHMARK_FORMATS:
        raise ExportError(f"benchmark format must be one of {', '.join(BENCHMARK_FORMATS)}; got {file_format!r}")
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    slug = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in benchmark.name)
    jsonl = BENCHMARK_FILE_FORMATS[file_format].jsonl
    data_name = f"{slug}.jsonl" if jsonl else f"{slug}.json"
    try:
        questions = (
            Question.objects.filter(benchmark=benchmark, current_version__isnull=False)
            .exclude(status=Question.Status.RETIRED)
            .select_related("current_version")
        )
        written = 0
        with (work / data_name).open("w", encoding="utf-8") as fh:
            if not jsonl:
                fh.write("[")
            last_pk = 0
            while True:
                chunk = list(questions.filter(pk__gt=last_pk).order_by("pk")[:chunk_size])
                if not chunk:
                    break
                last_pk = chunk[-1].pk
                for question in chunk:
                    record = json.dumps(_benchmark_record(question, question.current_version, file_format),
                                        ensure_ascii=False)
                    if jsonl:
                        fh.write(record + "\n")
                    else:
                        fh.write(("," if written else "") + "\n  " + record)
                    written += 1
                if progress is not None:
                    progress(written)
            if not jsonl:
                fh.write("\n]\n")
        changes = _write_changelog(benchmark=benchmark, folder=work, chunk_size=chunk_size)
        (work / "README.md").write_text(
            f"# {benchmark.name} (corrected)\n\n"
            f"- Exported: {timezone.now().isoformat(timespec='seconds')}\n"
            f"- Source: {benchmark.source or 'not stated'} ({benchmark.version or 'no version'})\n"
            f"- Licence: {benchmark.licence or 'not stated'}\n"
            f"- Format: {file_format.upper()} (`{data_name}`), every question at its current version, "
            f"with `transcript` and `version` added\n"
            f"- Questions: {written}\n- Versions after import (changelog entries): {changes}\n\n"
            "See `CHANGELOG.md` (and `changelog.jsonl`) for what changed, by whom and why (ORCA paper, section 3.3).\n",
            encoding="utf-8",
        )
        out_dir.mkdir(exist_ok=True)
        for entry in sorted(work.iterdir()):
            entry.replace(out_dir / entry.name)
        return BenchmarkExportSummary(
            folder=out_dir, files=sorted(p.name for p in out_dir.iterdir()), questions=written, changes=changes
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_changelog(*, benchmark: Benchmark, folder: Path, chunk_size: int) -> int:
    versions = (
        QuestionVersion.objects.filter(question__benchmark=benchmark)
        .select_related("question", "created_by")
        .order_by("question__external_id", "question_id", "number")
    )
    entries = 0
    previous: QuestionVersion | None = None
    with (folder / "changelog.jsonl").open("w", encoding="utf-8") as jl, (folder / "CHANGELOG.md").open(
        "w", encoding="utf-8"
    ) as md:
        md.write(f"# Changelog of {benchmark.name}\n\nOne entry per question version made after the first.\n")
        for version in versions.iterator(chunk_size=chunk_size):
            if previous is None or previous.question_id != version.question_id:
                previous = version
                continue
            changed = {
                name: {"old": getattr(previous, name), "new": getattr(version, name)}
                for name in _CHANGELOG_FIELDS
                if getattr(previous, name) != getattr(version, name)
            }
            entry = {
                "id": version.question.external_id,
                "version": version.number,
                "source": version.source,
                "reason": version.reason,
                "by": version.created_by.get_username() if version.created_by else "",
                "at": version.created_at.isoformat(timespec="seconds"),
                "changes": changed,
            }
            jl.write(json.dumps(entry, ensure_ascii=False) + "\n")
            md.write(
                f"\n## {entry['id']} v{previous.number} → v{version.number} ({version.get_source_display()})\n\n"
                f"- When: {entry['at']}\n- By: {entry['by'] or 'a job or an import'}\n"
                f"- Reason: {version.reason or '—'}\n"
            )
            for name, change in changed.items():
                md.write(f"- {name}: {change['old']!r} → {change['new']!r}\n")
            entries += 1
            previous = version
    return entries

