"""Benchmark import: MMAU test-mini (JSON list) and MMAR meta (JSONL) files as questions with versions and audio
(field mappings: :mod:`annotation.benchmark_formats`)."""
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.db import transaction
from django.db.models import Max

from annotation.benchmark_formats import BENCHMARK_FILE_FORMATS, BenchmarkFileFormat
from annotation.models import AudioClip, Benchmark, Question, QuestionVersion
from annotation.services.audio import AUDIO_EXTENSIONS, AudioReadError, audio_clip_from_path
from annotation.services.importers.common import (
    _BULK_BATCH,
    _audit_import,
    _delete_stored_files,
    _last_import_versions,
    _last_version_numbers,
    _make_current,
    _modality_parse,
    _reimport_version,
)
from annotation.services.importers.reader import (
    ImportFormatError,
    _max_length,
    _read_json_list,
    _read_jsonl,
    _Record,
)

#: Reason prefix of the versions the benchmark importer makes; re-imports compare against the latest of these,
#: so a re-import of an unchanged file never undoes later versions (ORCA texts, Stage 1 jobs, expert corrections).
BENCHMARK_IMPORT_REASON = "Benchmark import"


@dataclass(frozen=True)
class _BenchmarkItem:
    where: str
    external_id: str
    question_text: str
    reference_answer: str
    rationale: str
    modality: str
    modality_detail: str
    category: str
    sub_category: str
    choices: list
    extra: dict
    audio_ref: str


_VERSION_TEXT_FIELDS = ("question_text", "reference_answer", "rationale")
_QUESTION_META_FIELDS = ("modality", "modality_detail", "category", "sub_category", "choices", "extra", "audio_ref")


def _modality(record: _Record, name: str) -> tuple[str, str]:
    """(speech|sound|music|mixed, the raw label); MMAR's ``mix-sound-speech`` etc. become mixed."""
    label = record.text(name, max_length=_max_length(Question, "modality_detail"))
    try:
        return _modality_parse(label)
    except ValueError as exc:
        raise record.error(name, str(exc)) from exc


def _benchmark_item(record: _Record, fmt: BenchmarkFileFormat) -> _BenchmarkItem:
    """One question of a benchmark file, read with ``fmt``'s field mapping (:mod:`annotation.benchmark_formats`).

    MMAU test-mini: {id, audio_id, question, choices, answer, task, category, sub-category, ...}; MMAR meta: {id,
    audio_path, question, choices, answer, modality, category, sub-category, thinking, ...}, ``thinking`` being the
    initial rationale. Keys not mapped go to ``extra``.
    """
    rationale = record.text(fmt.rationale, required=False, null_ok=True) if fmt.rationale_imported else ""
    modality, modality_detail = _modality(record, fmt.modality)
    used = fmt.imported_fields
    return _BenchmarkItem(
        where=record.where,
        external_id=record.text("id", max_length=_max_length(Question, "external_id")),
        question_text=record.text("question"),
        reference_answer=record.text("answer"),
        rationale=rationale,
        modality=modality,
        modality_detail=modality_detail,
        category=record.label("category", max_length=_max_length(Question, "category")),
        sub_category=record.label("sub-category", max_length=_max_length(Question, "sub_category")),
        choices=record.texts("choices", required=False),
        extra={key: value for key, value in record.data.items() if key not in used},
        audio_ref=record.text(fmt.audio, required=False, null_ok=True, max_length=_max_length(Question, "audio_ref")),
    )


#: ``--format`` value -> its field mapping and file layout.
BENCHMARK_FORMATS = BENCHMARK_FILE_FORMATS


@dataclass
class BenchmarkImportSummary:
    """Counts of one benchmark import: questions created, updated (texts or metadata changed), unchanged."""

    benchmark: Benchmark
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    versions_created: int = 0
    audio_linked: int = 0

    def __str__(self) -> str:
        return (
            f"{self.benchmark.name}: {self.created} questions created, {self.updated} updated, "
            f"{self.unchanged} unchanged; {self.versions_created} question versions created; "
            f"{self.audio_linked} audio clips linked"
        )


def _check_unique_ids(file: str, items: Iterable[_BenchmarkItem]) -> None:
    first: dict[str, str] = {}
    for item in items:
        if item.external_id in first:
            raise ImportFormatError(
                file=file, where=item.where, field="id", problem=f"duplicate id (first at {first[item.external_id]})"
            )
        first[item.external_id] = item.where


def _audio_files(*, audio_dir: Path, items: Iterable[_BenchmarkItem]) -> dict[str, Path]:
    """external_id -> audio file in ``audio_dir``: ``<id>.<ext>``, else the audio reference's name or stem."""
    if not audio_dir.is_dir():
        raise ImportFormatError(file=str(audio_dir), problem="audio directory does not exist")
    present = {entry.name: entry for entry in audio_dir.iterdir() if entry.is_file()}
    found = {}
    for item in items:
        names = [f"{item.external_id}.{ext}" for ext in AUDIO_EXTENSIONS]
        if item.audio_ref:
            ref = PurePosixPath(item.audio_ref)
            names += [ref.name, *(f"{ref.stem}.{ext}" for ext in AUDIO_EXTENSIONS)]
        match = next((present[name] for name in names if name in present), None)
        if match is not None:
            found[item.external_id] = match
    return found


def benchmark_import(
    *, path: Path, file_format: str, name: str | None = None, audio_dir: Path | None = None
) -> BenchmarkImportSummary:
    """Import a benchmark file as questions, each with version 1 (source import) as its current version.

    Formats (``file_format``): ``mmau`` — MMAU test-mini JSON list; ``mmar`` — MMAR meta JSONL. The correct choice
    text (``answer``) becomes the reference answer, MMAR's ``thinking`` the rationale; modality is normalised to
    speech/sound/music/mixed with the raw label in ``modality_detail``; fields not mapped go to ``Question.extra``.
    The benchmark is created by ``name`` (default "MMAU test-mini" / "MMAR") when absent.

    With ``audio_dir``, a file there named ``<id>.<wav|flac|mp3|ogg>`` (or the base name of ``audio_id`` /
    ``audio_path``) becomes the question's ``AudioClip``.

    Re-importing: a question whose texts equal those of its latest benchmark-import version is left alone (its
    metadata is refreshed if it changed); changed texts make a new current version whose reason names the changed
    fields.

    Raises:
        ImportFormatError: unknown format, unreadable or malformed file, duplicate ids, unreadable audio;
            nothing is written.
    """
    path = Path(path)
    fmt = BENCHMARK_FORMATS.get(file_format)
    if fmt is None:
        known = ", ".join(sorted(BENCHMARK_FORMATS))
        raise ImportFormatError(file=path.name, problem=f"unknown format {file_format!r} (expected {known})")
    read = _read_jsonl if fmt.jsonl else _read_json_list
    items = [_benchmark_item(record, fmt) for record in read(path)]
    _check_unique_ids(path.name, items)
    audio_files = _audio_files(audio_dir=Path(audio_dir), items=items) if audio_dir else {}
    new_files: list[str] = []
    try:
        with transaction.atomic():
            summary = _benchmark_write(
                path=path,
                file_format=file_format,
                name=name or fmt.default_name,
                items=items,
                audio_files=audio_files,
                new_files=new_files,
            )
            _audit_import(action="import.benchmark", path=path, obj=summary.benchmark, summary=summary)
            return summary
    except BaseException:
        _delete_stored_files(new_files)  # the rows are rolled back; their copied files must go too
        raise


def _benchmark_write(
    *,
    path: Path,
    file_format: str,
    name: str,
    items: list[_BenchmarkItem],
    audio_files: dict[str, Path],
    new_files: list[str],
) -> BenchmarkImportSummary:
    """The write phase of ``benchmark_import``; appends the storage names of copied audio files to ``new_files``."""
    benchmark, _ = Benchmark.objects.get_or_create(name=name, defaults={"source": path.name})
    summary = BenchmarkImportSummary(benchmark=benchmark)
    questions = Question.objects.filter(benchmark=benchmark).select_related("current_version")
    existing = {question.external_id: question for question in questions}
    last_imported = _last_import_versions(questions, reason_prefix=BENCHMARK_IMPORT_REASON)
    last_number = _last_version_numbers(questions)
    clip_ids_before = AudioClip.objects.aggregate(m=Max("pk"))["m"] or 0
    reason = f"{BENCHMARK_IMPORT_REASON} {path.name} ({file_format})"

    new_questions: list[tuple[Question, _BenchmarkItem]] = []
    new_versions: list[QuestionVersion] = []
    changed_questions: list[Question] = []
    for item in items:
        clip = None
        if item.external_id in audio_files:
            audio_path = audio_files[item.external_id]
            try:
                clip = audio_clip_from_path(path=audio_path)
            except (AudioReadError, OSError) as exc:
                raise ImportFormatError(file=path.name, where=item.where, field="audio", problem=str(exc)) from exc
            if clip.pk > clip_ids_before:
                new_files.append(clip.file.name)
        meta = {attr: getattr(item, attr) for attr in _QUESTION_META_FIELDS}
        question = existing.get(item.external_id)
        if question is None:
            question = Question(benchmark=benchmark, external_id=item.external_id, audio=clip, **meta)
            new_questions.append((question, item))
            summary.audio_linked += clip is not None
            continue
        changed = False
        for attr, value in meta.items():
            if getattr(question, attr) != value:
                setattr(question, attr, value)
                changed = True
        if clip is not None and question.audio_id != clip.pk:
            question.audio = clip
            summary.audio_linked += 1
            changed = True
        version = _reimport_version(question, texts={attr: getattr(item, attr) for attr in _VERSION_TEXT_FIELDS},
                                    last_imported=last_imported, last_number=last_number, reason=reason)
        if version is not None:
            new_versions.append(version)
            changed = True
        if changed:
            changed_questions.append(question)
            summary.updated += 1
        else:
            summary.unchanged += 1

    Question.objects.bulk_create([question for question, _ in new_questions], batch_size=_BULK_BATCH)
    new_versions += [_version_from_item(question, item, number=1, reason=reason) for question, item in new_questions]
    QuestionVersion.objects.bulk_create(new_versions, batch_size=_BULK_BATCH)
    Question.objects.bulk_update(changed_questions, ["audio", *_QUESTION_META_FIELDS], batch_size=_BULK_BATCH)
    _make_current(new_versions)
    summary.created = len(new_questions)
    summary.versions_created = len(new_versions)
    return summary


def _version_from_item(question: Question, item: _BenchmarkItem, *, number: int, reason: str) -> QuestionVersion:
    return QuestionVersion(
        question=question,
        number=number,
        question_text=item.question_text,
        reference_answer=item.reference_answer,
        rationale=item.rationale,
        source=QuestionVersion.Source.IMPORT,
        reason=reason,
    )
