"""Importers: benchmarks (MMAU test-mini, MMAR), LALM candidate answers (JSONL) and ORCA annotation files.

Every importer reads and validates its whole file first, then writes in one transaction. Bad input raises
``ImportFormatError`` naming the file, the place (JSONL line, JSON key or list index) and the field, and leaves the
database unchanged. Importing the same file again changes nothing.

Sources: MMAU test-mini (Sakshi113/MMAU, ``mmau-test-mini.json``), MMAR (ddlBoJack/MMAR, ``MMAR-meta.jsonl``), ORCA
human annotations (BUTSpeechFIT/ORCA, ``data/seed_108/*.json``; ORCA paper, section 3.2 and Appendix A).
"""
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Subquery

from annotation.codes import UNABLE_CODES, UnknownCodeError, normalize_codes
from annotation.models import LALM, AudioClip, Benchmark, CandidateAnswer, Modality, Question, QuestionVersion, Rating
from annotation.services.accounts import user_create_with_role
from annotation.services.audio import AUDIO_EXTENSIONS, AudioReadError, audio_clip_from_path
from annotation.services.audit import audit_record
from annotation.services.versions import VERSIONED_FIELDS, candidate_counts_refresh

#: Reason prefix of the versions the benchmark importer makes; re-imports compare against the latest of these,
#: so a re-import of an unchanged file never undoes later versions (ORCA texts, Stage 1 jobs, expert corrections).
BENCHMARK_IMPORT_REASON = "Benchmark import"

#: ORCA annotation keys: ``<question id>_<LALM tag>``, the tag anonymous like ``M2_1``.
ORCA_KEY = re.compile(r"^(?P<question_id>.+)_(?P<tag>M\d+_\d+)$")

#: ORCA item field -> QuestionVersion field.
ORCA_TEXT_FIELDS = (
    ("question", "question_text"),
    ("reference", "reference_answer"),
    ("rationale", "rationale"),
    ("transcription", "transcript"),
)

#: Username of the imported annotator account for rating position ``n`` (1-based) of an ORCA item. Positions are
#: not identities: the ORCA files do not say which person gave which rating.
ORCA_ANNOTATOR_USERNAME = "orca-annotator-{position}"

_BULK_BATCH = 500


class ImportFormatError(Exception):
    """Malformed or inconsistent import input; the import wrote nothing.

    The message reads ``<file>: <place>: field <field>: <problem>``, e.g.
    ``seed_108_dev.json: key 'abc_M2_1': field ratings[2]: score 7 is outside 1-5``, where the place is
    ``line N`` (JSONL), ``key 'K'`` (JSON object) or ``index N`` (JSON list). Attributes ``file``, ``where``,
    ``field`` and ``problem`` hold the parts (empty strings where they do not apply).
    """

    def __init__(self, *, file: str, problem: str, where: str = "", field: str = ""):
        self.file, self.where, self.field, self.problem = file, where, field, problem
        parts = [file, where, f"field {field}" if field else "", problem]
        super().__init__(": ".join(part for part in parts if part))


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _max_length(model, field_name: str) -> int:
    return model._meta.get_field(field_name).max_length


class _Record:
    """One source record (a JSON object) with typed field access; every problem raises ``ImportFormatError``."""

    def __init__(self, *, file: str, where: str, data):
        self.file, self.where = file, where
        if not isinstance(data, dict):
            raise self.error("", f"expected a JSON object, got {_describe(data)}")
        self.data = data

    def error(self, field_name: str, problem: str) -> ImportFormatError:
        return ImportFormatError(file=self.file, where=self.where, field=field_name, problem=problem)

    def text(self, name: str, *, required: bool = True, null_ok: bool = False, max_length: int | None = None) -> str:
        """The string at ``name``; "" when it is absent and not required, or null and ``null_ok``."""
        if name not in self.data:
            if required:
                raise self.error(name, "missing")
            return ""
        value = self.data[name]
        if value is None and null_ok:
            return ""
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {_describe(value)}")
        if max_length is not None and len(value) > max_length:
            raise self.error(name, f"longer than {max_length} characters")
        return value

    def texts(self, name: str, *, required: bool = True) -> list[str]:
        """The list of strings at ``name``; [] when it is absent and not required."""
        if name not in self.data:
            if required:
                raise self.error(name, "missing")
            return []
        value = self.data[name]
        if not isinstance(value, list):
            raise self.error(name, f"expected a list of strings, got {_describe(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{name}[{index}]", f"expected a string, got {_describe(item)}")
        return list(value)

    def label(self, name: str, *, max_length: int) -> str:
        """An optional label: a string, null, or a list of strings joined with ", " (13 MMAU records give their
        category as ``["Reasoning"]``)."""
        if isinstance(self.data.get(name), list):
            joined = ", ".join(self.texts(name))
            if len(joined) > max_length:
                raise self.error(name, f"longer than {max_length} characters")
            return joined
        return self.text(name, required=False, null_ok=True, max_length=max_length)


def _read_json(path: Path):
    try:
        with path.open(encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ImportFormatError(file=path.name, where=where, problem=f"invalid JSON: {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ImportFormatError(file=path.name, problem=f"cannot read the file ({exc.strerror})") from exc


def _read_jsonl(path: Path) -> list[_Record]:
    records = []
    try:
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except json.JSONDecodeError as exc:
                    where = f"line {lineno} column {exc.colno}"
                    raise ImportFormatError(file=path.name, where=where, problem=f"invalid JSON: {exc.msg}") from exc
                records.append(_Record(file=path.name, where=f"line {lineno}", data=data))
    except UnicodeDecodeError as exc:
        raise ImportFormatError(file=path.name, problem=f"not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise ImportFormatError(file=path.name, problem=f"cannot read the file ({exc.strerror})") from exc
    return records


def _read_json_list(path: Path) -> list[_Record]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise ImportFormatError(file=path.name, problem=f"expected a JSON list of questions, got {_describe(data)}")
    records = []
    for index, item in enumerate(data):
        item_id = item.get("id") if isinstance(item, dict) else None
        where = f"index {index} (id {item_id!r})" if isinstance(item_id, str) else f"index {index}"
        records.append(_Record(file=path.name, where=where, data=item))
    return records


# --- Benchmarks ----------------------------------------------------------------------------------------------


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


_VERSION_TEXT_FIELDS = (
    ("question_text", "question text"),
    ("reference_answer", "reference answer"),
    ("rationale", "rationale"),
)
_QUESTION_META_FIELDS = ("modality", "modality_detail", "category", "sub_category", "choices", "extra", "audio_ref")


def _modality(record: _Record, name: str) -> tuple[str, str]:
    """(speech|sound|music|mixed, the raw label); MMAR's ``mix-sound-speech`` etc. become mixed."""
    label = record.text(name, max_length=_max_length(Question, "modality_detail"))
    normalised = label.strip().lower()
    if normalised in (Modality.SPEECH, Modality.SOUND, Modality.MUSIC):
        return normalised, label
    if normalised == Modality.MIXED or normalised.startswith("mix-"):
        return Modality.MIXED.value, label
    raise record.error(name, f"unknown modality {label!r} (expected speech, sound, music or mix-...)")


def _common_item(record: _Record, *, modality_field: str, audio_field: str, rationale: str, used: set[str]):
    modality, modality_detail = _modality(record, modality_field)
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
        audio_ref=record.text(audio_field, required=False, null_ok=True, max_length=_max_length(Question, "audio_ref")),
    )


_MMAU_USED = {"id", "audio_id", "question", "choices", "answer", "task", "category", "sub-category"}
_MMAR_USED = {"id", "audio_path", "question", "choices", "answer", "modality", "category", "sub-category", "thinking"}


def _mmau_item(record: _Record) -> _BenchmarkItem:
    """MMAU test-mini: {id, audio_id, question, choices, answer, task, category, sub-category, ...}."""
    return _common_item(record, modality_field="task", audio_field="audio_id", rationale="", used=_MMAU_USED)


def _mmar_item(record: _Record) -> _BenchmarkItem:
    """MMAR meta: {id, audio_path, question, choices, answer, modality, category, sub-category, thinking, ...};
    ``thinking`` is the initial rationale."""
    rationale = record.text("thinking", required=False, null_ok=True)
    return _common_item(
        record, modality_field="modality", audio_field="audio_path", rationale=rationale, used=_MMAR_USED
    )


@dataclass(frozen=True)
class _BenchmarkFormat:
    default_name: str
    read: Callable[[Path], list[_Record]]
    parse: Callable[[_Record], _BenchmarkItem]


#: ``--format`` value -> how to read it.
BENCHMARK_FORMATS = {
    "mmau": _BenchmarkFormat(default_name="MMAU test-mini", read=_read_json_list, parse=_mmau_item),
    "mmar": _BenchmarkFormat(default_name="MMAR", read=_read_jsonl, parse=_mmar_item),
}


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


def _delete_stored_files(names: Iterable[str]) -> None:
    storage = AudioClip._meta.get_field("file").storage
    for name in names:
        storage.delete(name)


def _audit_import(*, action: str, path: Path, obj, summary) -> None:
    """One audit event per import (actor "import <file name>"), its new value the summary's counts."""
    counts = {name: value for name, value in vars(summary).items() if isinstance(value, int)}
    audit_record(actor=None, actor_label=f"import {path.name}", action=action, obj=obj,
                 new={"file": path.name, **counts})


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
    items = [fmt.parse(record) for record in fmt.read(path)]
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
    last_imported = {
        version.question_id: version  # ordered by number: the last one wins
        for version in QuestionVersion.objects.filter(
            question__benchmark=benchmark,
            source=QuestionVersion.Source.IMPORT,
            reason__startswith=BENCHMARK_IMPORT_REASON,
        ).order_by("question_id", "number")
    }
    last_number = dict(
        QuestionVersion.objects.filter(question__benchmark=benchmark)
        .values("question_id")
        .annotate(n=Max("number"))
        .values_list("question_id", "n")
    )
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
        base = last_imported.get(question.pk) or question.current_version
        text_changes = {
            attr: label
            for attr, label in _VERSION_TEXT_FIELDS
            if base is None or getattr(base, attr) != getattr(item, attr)
        }
        if text_changes:
            version = _next_version(
                question,
                number=last_number.get(question.pk, 0) + 1,
                changes={attr: getattr(item, attr) for attr in text_changes},
                reason=f"{reason}: changed {', '.join(text_changes.values())}",
            )
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


def _make_current(versions: list[QuestionVersion]) -> None:
    """Make each of these saved versions its question's current version (in the database and on the instances).

    Precondition: each is the highest-numbered version of its question. One UPDATE per batch of questions, where
    ``bulk_update`` would build a CASE per row (about ten times slower for a 1,000-question benchmark).
    """
    newest = QuestionVersion.objects.filter(question=OuterRef("pk")).order_by("-number").values("pk")[:1]
    ids = [version.question_id for version in versions]
    for start in range(0, len(ids), _BULK_BATCH):
        Question.objects.filter(pk__in=ids[start : start + _BULK_BATCH]).update(current_version=Subquery(newest))
    for version in versions:
        version.question.current_version = version


def _next_version(question: Question, *, number: int, changes: dict[str, str], reason: str) -> QuestionVersion | None:
    """The next (unsaved) import version of ``question``: its current texts with ``changes`` applied, or None
    when the current version already has them. As in ``question_version_create``, fields not changed are carried
    over, so a Stage 1 transcript or rationale survives a change of the reference answer."""
    current = question.current_version
    if current is not None and all(getattr(current, attr) == value for attr, value in changes.items()):
        return None
    values = {attr: getattr(current, attr) for attr in VERSIONED_FIELDS} if current is not None else {}
    if current is not None and changes.get("transcript", current.transcript) != current.transcript:
        values.update(transcript_language="", transcript_segments=[])  # they described the old transcript
    values.update(changes)
    return QuestionVersion(
        question=question, number=number, source=QuestionVersion.Source.IMPORT, reason=reason, **values
    )


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


# --- Candidate answers ---------------------------------------------------------------------------------------


@dataclass
class CandidateImportSummary:
    """Counts of one candidate-answer import: created, updated (text changed, no ratings yet), unchanged."""

    lalm: LALM
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def __str__(self) -> str:
        return (
            f"{self.lalm.name}: {self.created} candidate answers created, {self.updated} updated, "
            f"{self.unchanged} unchanged"
        )


def candidate_answers_import(
    *, path: Path, lalm_name: str, benchmark_name: str, field: str = "answer_prediction"
) -> CandidateImportSummary:
    """Import an LALM's answers (JSONL: ``id`` and the answer at ``field``) as candidate answers.

    Each line's ``id`` is a question's ``external_id`` in the benchmark named ``benchmark_name``; the candidate
    answer is attached to that question's current version. The LALM is created by name (provider "import") when
    absent. Re-importing the same file changes nothing; a changed answer replaces the stored text only while that
    candidate answer has no ratings.

    Raises:
        ImportFormatError: malformed line, missing or non-string field, duplicate id, unknown benchmark, unknown
            question id, or a changed answer for a candidate that already has ratings; nothing is written.
    """
    path = Path(path)
    records = _read_jsonl(path)
    answers: list[tuple[_Record, str, str]] = []
    first: dict[str, str] = {}
    for record in records:
        external_id = record.text("id")
        text = record.text(field)
        if external_id in first:
            raise record.error("id", f"duplicate id {external_id!r} (first at {first[external_id]})")
        first[external_id] = record.where
        answers.append((record, external_id, text))
    if len(lalm_name) > _max_length(LALM, "name") or not lalm_name.strip():
        raise ImportFormatError(file=path.name, problem=f"LALM name {lalm_name!r} is empty or too long")
    benchmark = Benchmark.objects.filter(name=benchmark_name).first()
    if benchmark is None:
        raise ImportFormatError(
            file=path.name, problem=f"benchmark {benchmark_name!r} does not exist (import it with import_benchmark)"
        )
    version_ids = dict(Question.objects.filter(benchmark=benchmark).values_list("external_id", "current_version_id"))
    for record, external_id, _ in answers:
        if external_id not in version_ids:
            raise record.error("id", f"no question {external_id!r} in benchmark {benchmark.name!r}")
        if version_ids[external_id] is None:
            raise record.error("id", f"question {external_id!r} has no current version")

    with transaction.atomic():
        lalm, _ = LALM.objects.get_or_create(name=lalm_name, defaults={"provider": LALM.Provider.IMPORT})
        summary = CandidateImportSummary(lalm=lalm)
        existing = {
            candidate.question_version_id: candidate
            for candidate in CandidateAnswer.objects.filter(
                lalm=lalm, question_version__question__benchmark=benchmark
            ).annotate(n_ratings=Count("ratings"))
        }
        new, changed = [], []
        for record, external_id, text in answers:
            candidate = existing.get(version_ids[external_id])
            if candidate is None:
                new.append(CandidateAnswer(question_version_id=version_ids[external_id], lalm=lalm, text=text))
            elif candidate.text == text:
                summary.unchanged += 1
            elif candidate.n_ratings:
                raise record.error(
                    field,
                    f"differs from the stored candidate answer of LALM {lalm.name!r}, which has ratings "
                    "(not overwritten)",
                )
            else:
                candidate.text = text
                changed.append(candidate)
        CandidateAnswer.objects.bulk_create(new, batch_size=_BULK_BATCH)
        CandidateAnswer.objects.bulk_update(changed, ["text"], batch_size=_BULK_BATCH)
        summary.created, summary.updated = len(new), len(changed)
        _audit_import(action="import.candidates", path=path, obj=lalm, summary=summary)
    return summary


# --- ORCA annotations ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _OrcaRating:
    position: int  # 1-based position in the item's ``ratings`` list
    score: int | None
    codes: str
    comment: str


@dataclass
class _OrcaItem:
    key: str
    where: str  # "key 'K'" (seed-108 JSON object) or "line N" (JSONL), for error messages
    question_id: str
    tag: str
    texts: dict[str, str]  # QuestionVersion field -> text
    candidate: str
    ratings: list[_OrcaRating]
    skipped: int  # null scores without U or E


@dataclass
class OrcaImportSummary:
    """Counts of one ORCA annotation import."""

    file: str
    questions_matched: int = 0
    questions_created: int = 0
    versions_created: int = 0
    candidates_created: int = 0
    candidates_existing: int = 0
    ratings_created: int = 0
    ratings_existing: int = 0
    skipped_unscored: int = 0  # null score whose codes hold neither U nor E: not a rating the database can hold

    def __str__(self) -> str:
        return (
            f"{self.file}: questions matched {self.questions_matched}, created {self.questions_created}; "
            f"question versions created {self.versions_created}; "
            f"candidates created {self.candidates_created}, already present {self.candidates_existing}; "
            f"ratings created {self.ratings_created}, already present {self.ratings_existing}; "
            f"skipped: unscored without U/E {self.skipped_unscored}"
        )


def _orca_score(record: _Record, index: int, value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"score {value!r} is {_describe(value)}, expected an integer 1-5 or null"
        raise record.error(f"ratings[{index}]", problem)
    if not 1 <= value <= 5:
        raise record.error(f"ratings[{index}]", f"score {value} is outside 1-5")
    return value


def _orca_feedback(record: _Record, index: int, value) -> tuple[str, str]:
    """(canonical codes, comment) from one feedback entry: null, or a list of one-letter codes and free text."""
    if value is None:
        return "", ""
    if not isinstance(value, list):
        raise record.error(f"feedback[{index}]", f"expected null or a list, got {_describe(value)}")
    letters, lines = [], []
    for position, entry in enumerate(value):
        name = f"feedback[{index}][{position}]"
        if not isinstance(entry, str):
            raise record.error(name, f"expected a string, got {_describe(entry)}")
        if len(entry.strip()) == 1:
            try:
                letters.append(normalize_codes(entry.strip()))
            except UnknownCodeError as exc:
                raise record.error(name, str(exc)) from exc
        elif entry.strip():
            lines.append(entry)
    return normalize_codes("".join(letters)), "\n".join(lines)


def _orca_item(file: str, key: str, value) -> _OrcaItem:
    record = _Record(file=file, where=f"key {key!r}", data=value)
    match = ORCA_KEY.match(key)
    if match is None:
        raise record.error("", "key is not '<question id>_<LALM tag>' with a tag like M2_1")
    texts = {model_field: record.text(source) for source, model_field in ORCA_TEXT_FIELDS}
    return _orca_item_from(record, key=key, question_id=match["question_id"], tag=match["tag"], texts=texts,
                           feedback_required=True)


def _orca_item_from(
    record: _Record, *, key: str, question_id: str, tag: str, texts: dict[str, str], feedback_required: bool
) -> _OrcaItem:
    if len(question_id) > _max_length(Question, "external_id"):
        raise record.error("", f"question id longer than {_max_length(Question, 'external_id')} characters")
    candidate = record.text("candidate")
    scores = record.data.get("ratings")
    feedback = record.data.get("feedback")
    if "feedback" not in record.data and not feedback_required and isinstance(scores, list):
        feedback = [None] * len(scores)
    for name, values in (("ratings", scores), ("feedback", feedback)):
        if name not in record.data and (name == "ratings" or feedback_required):
            raise record.error(name, "missing")
        if not isinstance(values, list):
            raise record.error(name, f"expected a list, got {_describe(values)}")
    if len(feedback) != len(scores):
        raise record.error("feedback", f"has {len(feedback)} entries but ratings has {len(scores)}")
    ratings, skipped = [], 0
    for index, (raw_score, raw_feedback) in enumerate(zip(scores, feedback, strict=True)):
        score = _orca_score(record, index, raw_score)
        codes, comment = _orca_feedback(record, index, raw_feedback)
        if score is None and not UNABLE_CODES & set(codes):
            skipped += 1
            continue
        ratings.append(_OrcaRating(position=index + 1, score=score, codes=codes, comment=comment))
    return _OrcaItem(
        key=key,
        where=record.where,
        question_id=question_id,
        tag=tag,
        texts=texts,
        candidate=candidate,
        ratings=ratings,
        skipped=skipped,
    )


def _orca_jsonl_item(record: _Record, seen: dict[str, str]) -> _OrcaItem:
    """One line of the ORCA authors' JSONL (or of our ORCA JSONL export, which adds ``lalm``)."""
    item_id = record.text("id", max_length=_max_length(Question, "external_id") + _max_length(LALM, "name") + 1)
    if not item_id:
        raise record.error("id", "is empty")
    if item_id in seen:
        raise record.error("id", f"{item_id!r} repeats {seen[item_id]}")
    seen[item_id] = record.where
    lalm = record.data.get("lalm")
    if lalm is not None:
        lalm = record.text("lalm", max_length=_max_length(LALM, "name"))
        if not lalm or not item_id.endswith("_" + lalm) or len(item_id) == len(lalm) + 1:
            raise record.error("lalm", f"{lalm!r} is not the end of id {item_id!r} ('<question id>_<LALM>')")
        question_id = item_id[: -len(lalm) - 1]
    else:
        match = ORCA_KEY.match(item_id)
        if match is None:
            raise record.error("id", f"{item_id!r} is not '<question id>_<LALM tag>' with a tag like M2_1")
        question_id, lalm = match["question_id"], match["tag"]
    texts = {
        "question_text": record.text("question"),
        "reference_answer": record.text("reference"),
        "rationale": record.text("rationale", null_ok=True),
        "transcript": record.text("transcription", required=False, null_ok=True),
    }
    return _orca_item_from(record, key=item_id, question_id=question_id, tag=lalm, texts=texts,
                           feedback_required=False)


def _check_one_text_per_question(file: str, items: Iterable[_OrcaItem]) -> None:
    first: dict[str, _OrcaItem] = {}
    for item in items:
        seen = first.setdefault(item.question_id, item)
        for source, model_field in ORCA_TEXT_FIELDS:
            if item.texts[model_field] != seen.texts[model_field]:
                raise ImportFormatError(
                    file=file,
                    where=item.where,
                    field=source,
                    problem=f"differs from {seen.where} of the same question (a file holds one version of it)",
                )


def ratings_import_orca(*, path: Path, benchmark_name: str = "ORCA imported") -> OrcaImportSummary:
    """Import an ORCA annotation file: questions' texts, candidate answers and human ratings.

    Input (ORCA paper section 3.2, Appendix A; ``BUTSpeechFIT/ORCA`` ``data/seed_108``): a JSON object keyed
    ``<question id>_<LALM tag>`` (tag like ``M2_1``), each value {question, reference, rationale, transcription,
    candidate, ratings: list of 1–5 or null, feedback: parallel list of null or a list of one-letter codes
    a/e/r/u/q and free-text strings}.

    Questions are matched by ``external_id`` across all benchmarks (preferring ``benchmark_name`` when an id is in
    several); unmatched ones are created in the benchmark ``benchmark_name``. When an item's texts differ from
    its question's current version, a new version (source import, reason "ORCA annotations <file name>") becomes
    current; all items of a question share it. LALMs are created by tag (provider import). Each item becomes one
    candidate answer; each rating position ``n`` is the account ``orca-annotator-<n>`` (annotator group, unusable
    password). A non-null score becomes a rating with its codes (canonical, upper case) and the free texts joined
    by newlines as comment; a null score is kept only with code U or E and is otherwise skipped and counted.
    ``CandidateAnswer.valid_rating_count`` is refreshed. Re-importing the same file changes nothing.

    Raises:
        ImportFormatError: malformed JSON, a bad key, a missing or mistyped field, a score that is not an integer
            1–5 or null, an unknown code, items of one question with different texts, a candidate text that
            differs from the stored candidate answer, an id found in several benchmarks; nothing is written.
    """
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise ImportFormatError(
            file=path.name, problem=f"expected a JSON object keyed '<question id>_<LALM tag>', got {_describe(data)}"
        )
    items = [_orca_item(path.name, key, value) for key, value in data.items()]
    _check_one_text_per_question(path.name, items)
    with transaction.atomic():
        summary = _orca_write(path=path, items=items, benchmark_name=benchmark_name)
        _audit_import(action="import.orca_ratings", path=path, obj=None, summary=summary)
        return summary


def ratings_import_orca_jsonl(*, path: Path, benchmark_name: str = "ORCA imported") -> OrcaImportSummary:
    """Import the ORCA authors' JSONL annotations (their released dataset, e.g. from Hugging Face; also our own
    ORCA JSONL export): one JSON object per line with ``id`` ("<question id>_<LALM tag>", or any LALM name when the
    line has ``lalm`` as our export writes), ``question``, ``reference``, ``rationale`` (string or null),
    ``candidate``, ``ratings`` (list of 1–5 or null), and optionally ``transcription`` and ``feedback`` (the parallel
    list of the seed-108 format; all null when absent). Other fields are ignored.

    Everything else is as :func:`ratings_import_orca` (questions matched by id, a new version when texts differ,
    LALMs by tag, rating position n → account ``orca-annotator-<n>``, re-import changes nothing), in one transaction.

    Raises:
        ImportFormatError: ``<file>: line N: field <name>: <problem>`` for malformed JSON, a missing or mistyped
            field, a bad or repeated id, a score that is not an integer 1–5 or null, an unknown code, lines of one
            question with different texts, or a candidate text that differs from the stored one; nothing is written.
    """
    path = Path(path)
    seen: dict[str, str] = {}
    items = [_orca_jsonl_item(record, seen) for record in _read_jsonl(path)]
    if not items:
        raise ImportFormatError(file=path.name, problem="no annotation lines")
    _check_one_text_per_question(path.name, items)
    with transaction.atomic():
        summary = _orca_write(path=path, items=items, benchmark_name=benchmark_name)
        _audit_import(action="import.orca_ratings", path=path, obj=None, summary=summary)
        return summary


def _orca_questions(
    *, path: Path, items: list[_OrcaItem], benchmark_name: str, summary: "OrcaImportSummary"
) -> dict[str, Question]:
    """external_id -> Question for every item, creating the missing ones in ``benchmark_name``."""
    first_key = {}
    for item in items:
        first_key.setdefault(item.question_id, item.where)
    found = defaultdict(list)
    for question in Question.objects.filter(external_id__in=list(first_key)).select_related(
        "benchmark", "current_version"
    ):
        found[question.external_id].append(question)
    questions, missing = {}, []
    for question_id, key in first_key.items():
        matches = found.get(question_id, [])
        if len(matches) > 1:
            matches = [q for q in matches if q.benchmark.name == benchmark_name] or matches
        if len(matches) > 1:
            names = ", ".join(sorted(q.benchmark.name for q in matches))
            raise ImportFormatError(
                file=path.name,
                where=key,
                problem=f"question id {question_id!r} is in several benchmarks ({names}); choose one with --benchmark",
            )
        if matches:
            questions[question_id] = matches[0]
        else:
            missing.append(question_id)
    summary.questions_matched = len(questions)
    if missing:
        benchmark, _ = Benchmark.objects.get_or_create(name=benchmark_name, defaults={"source": path.name})
        # ORCA files do not say the modality: left blank for an expert to set.
        created = [Question(benchmark=benchmark, external_id=qid, modality_detail="unknown (ORCA)") for qid in missing]
        Question.objects.bulk_create(created, batch_size=_BULK_BATCH)
        questions.update((q.external_id, q) for q in created)
        summary.questions_created = len(created)
    return questions


def _orca_write(*, path: Path, items: list[_OrcaItem], benchmark_name: str) -> OrcaImportSummary:
    summary = OrcaImportSummary(file=path.name)
    questions = _orca_questions(path=path, items=items, benchmark_name=benchmark_name, summary=summary)

    # Versions: one per question whose current texts differ from the file's.
    last_number = dict(
        QuestionVersion.objects.filter(question__in=[q.pk for q in questions.values()])
        .values("question_id")
        .annotate(n=Max("number"))
        .values_list("question_id", "n")
    )
    texts = {item.question_id: item.texts for item in items}
    new_versions = []
    for question_id, question in questions.items():
        number = last_number.get(question.pk, 0) + 1
        reason = f"ORCA annotations {path.name}"
        version = _next_version(question, number=number, changes=texts[question_id], reason=reason)
        if version is not None:
            new_versions.append(version)
    QuestionVersion.objects.bulk_create(new_versions, batch_size=_BULK_BATCH)
    _make_current(new_versions)
    summary.versions_created = len(new_versions)

    # LALMs and candidate answers.
    lalms = {
        tag: LALM.objects.get_or_create(name=tag, defaults={"provider": LALM.Provider.IMPORT})[0]
        for tag in sorted({item.tag for item in items})
    }
    version_ids = {q.current_version.pk for q in questions.values()}
    existing = {
        (c.question_version_id, c.lalm_id): c
        for c in CandidateAnswer.objects.filter(lalm__in=list(lalms.values()))
        if c.question_version_id in version_ids
    }
    candidates, new_candidates = {}, []
    for item in items:
        version, lalm = questions[item.question_id].current_version, lalms[item.tag]
        candidate = existing.get((version.pk, lalm.pk))
        if candidate is None:
            candidate = CandidateAnswer(question_version=version, lalm=lalm, text=item.candidate)
            new_candidates.append(candidate)
        elif candidate.text != item.candidate:
            raise ImportFormatError(
                file=path.name,
                where=item.where,
                field="candidate",
                problem=f"differs from the stored candidate answer of LALM {lalm.name!r} on question version "
                f"{version.number}",
            )
        else:
            summary.candidates_existing += 1
        candidates[item.key] = candidate
    CandidateAnswer.objects.bulk_create(new_candidates, batch_size=_BULK_BATCH)
    summary.candidates_created = len(new_candidates)

    # Imported annotator accounts and ratings.
    positions = sorted({rating.position for item in items for rating in item.ratings})
    usernames = {position: ORCA_ANNOTATOR_USERNAME.format(position=position) for position in positions}
    for username in usernames.values():
        user_create_with_role(username=username, role="annotator", password=None)
    users = {u.username: u for u in get_user_model().objects.filter(username__in=list(usernames.values()))}
    annotators = {position: users[username] for position, username in usernames.items()}
    candidate_ids = {c.pk for c in candidates.values()}
    rated = Rating.objects.filter(annotator__in=list(annotators.values())).values_list("candidate_id", "annotator_id")
    already_rated = {pair for pair in rated if pair[0] in candidate_ids}
    new_ratings = []
    for item in items:
        candidate = candidates[item.key]
        summary.skipped_unscored += item.skipped
        for rating in item.ratings:
            annotator = annotators[rating.position]
            if (candidate.pk, annotator.pk) in already_rated:
                summary.ratings_existing += 1
                continue
            new_ratings.append(
                Rating(
                    candidate=candidate,
                    question_version=candidate.question_version,
                    annotator=annotator,
                    score=rating.score,
                    codes=rating.codes,
                    comment=rating.comment,
                    source=Rating.Source.IMPORT,
                )
            )
    Rating.objects.bulk_create(new_ratings, batch_size=_BULK_BATCH)
    summary.ratings_created = len(new_ratings)
    _refresh_valid_rating_counts(candidate_ids)
    return summary


def _refresh_valid_rating_counts(candidate_ids: Iterable[int]) -> None:
    """Set ``valid_rating_count`` of these candidate answers to their number of valid ratings, in batches."""
    ids = sorted(candidate_ids)
    for start in range(0, len(ids), _BULK_BATCH):
        candidate_counts_refresh(candidates=CandidateAnswer.objects.filter(pk__in=ids[start : start + _BULK_BATCH]))
