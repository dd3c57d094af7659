"""The table importer: any audio QA table — questions, reference answers, audio, the LALMs' candidate answers and
human ratings collected elsewhere — into a benchmark, driven by a mapping document
(:mod:`annotation.services.importers.table_mapping`; README, "Your own benchmark").

Three phases. (1) Read the table (:mod:`.table_sources`) and check every row against the mapping, collecting every
problem with its row, column and value; (2) find and check every distinct audio file; (3) write everything in one
transaction: the benchmark, LALMs, import-only rater accounts, audio clips, questions with their versions,
candidate answers and ratings (PostgreSQL ``COPY`` for the many rows). Any problem in (1) or (2), or a conflict
found in (3), raises :class:`TableImportError` listing them all, and nothing is written. A dry run does (3) and
rolls it back, so it reports what an import would create.

Identity, so that importing the same table again updates instead of duplicating: a question is its benchmark's
``question_id`` (``Question.external_id``), or the hash of its audio and question text (``q-<20 hex digits>``) when
the mapping has no ``question_id``, or the n-th question of the benchmark in import order (``position``); a
candidate answer is (question's current version, LALM); an imported rating is (candidate answer, rater's import
account). Changed question texts make a new question version (compared with the question's last imported version,
so an expert's later correction is not undone); a changed candidate answer replaces the stored one while nobody
rated it, and is refused once someone did; a changed imported rating is updated.
"""
from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from annotation.codes import UnknownCodeError, normalize_codes
from annotation.models import (
    LALM,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    ImportAccount,
    Question,
    QuestionVersion,
    Rating,
    TableImport,
    random_key_new,
)
from annotation.services.accounts import import_accounts_get_or_create
from annotation.services.audio import AudioReadError, audio_clip_from_path, audio_file_info
from annotation.services.importers.common import (
    _BULK_BATCH,
    _delete_stored_files,
    _last_import_versions,
    _last_version_numbers,
    _make_current,
    _modality_parse,
    _reimport_version,
    _rows_insert,
)
from annotation.services.importers.reader import ImportFormatError, _max_length
from annotation.services.importers.table_mapping import (
    VERSION_FIELDS,
    ImportProblem,
    TableImportError,
    TableMapping,
    mapping_parse,
    shown,
)
from annotation.services.importers.table_sources import AudioLocator, Table, is_missing, table_read
from annotation.services.target_ratings import benchmark_target_ratings

#: Reason prefix of the question versions this importer makes.
TABLE_IMPORT_REASON = "Table import"
#: At most this many problems are listed (the count says how many there were).
MAX_PROBLEMS = 1000
#: ``progress(phase, done, total)`` is called every this many rows.
PROGRESS_EVERY = 5000

Progress = Callable[[str, int, int], None]


@dataclass
class TableImportSummary:
    """What a table import created and changed (a dry run: what it would have)."""

    file: str
    benchmark: str
    dry_run: bool = False
    rows: int = 0
    benchmark_created: bool = False
    questions_created: int = 0
    questions_updated: int = 0
    questions_unchanged: int = 0
    versions_created: int = 0
    candidates_created: int = 0
    candidates_updated: int = 0
    candidates_unchanged: int = 0
    ratings_created: int = 0
    ratings_updated: int = 0
    ratings_unchanged: int = 0
    raters: int = 0
    rater_accounts_created: int = 0
    audio_files: int = 0
    audio_linked: int = 0
    lalms: list[str] = field(default_factory=list)
    lalms_created: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = f"{self.file} -> benchmark {self.benchmark!r}" + (" (new)" if self.benchmark_created else "")
        if self.dry_run:
            head += ": dry run, nothing written; the counts say what an import would do"
        return [
            head,
            f"rows read: {self.rows}",
            f"questions: {self.questions_created} created, {self.questions_updated} updated, "
            f"{self.questions_unchanged} unchanged; question versions created: {self.versions_created}",
            f"candidate answers: {self.candidates_created} created, {self.candidates_updated} updated, "
            f"{self.candidates_unchanged} unchanged",
            f"LALMs: {len(self.lalms)} ({', '.join(self.lalms)}); new: {', '.join(self.lalms_created) or 'none'}",
            f"ratings: {self.ratings_created} created, {self.ratings_updated} updated, {self.ratings_unchanged} "
            f"unchanged, from {_count(self.raters, 'rater')} ({self.rater_accounts_created} new import-only "
            f"account{'s' if self.rater_accounts_created != 1 else ''})",
            f"audio: {_count(self.audio_files, 'file')}, newly linked to {_count(self.audio_linked, 'question')}",
        ]

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def as_dict(self) -> dict:
        return dict(vars(self))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# --- phase 1: rows -> plan -------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Question:
    key: str
    row: int
    values: dict  # field -> value read (only mapped fields); "audio" holds the audio key
    audio_value: object = None


@dataclass(slots=True)
class _Rating:
    rater: str
    score: int
    codes: str
    comment: str
    row: int


@dataclass(slots=True)
class _Candidate:
    question: str
    lalm: str
    text: str
    row: int
    column: str
    ratings: list[_Rating] = field(default_factory=list)  # a list, not a dict: 100,000 answers hold one each


@dataclass
class _Plan:
    rows: int = 0
    questions: dict[str, _Question] = field(default_factory=dict)
    candidates: dict[tuple[str, str], _Candidate] = field(default_factory=dict)
    problems: list[ImportProblem] = field(default_factory=list)
    n_problems: int = 0

    def problem(self, reason: str, *, row: int | None = None, column: str = "", value=None, key: str = "") -> None:
        self.n_problems += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(ImportProblem(reason=reason, row=row, column=column,
                                               value=None if value is None else shown(value), key=key))


class _Bad(ValueError):
    """A cell's value cannot be used (the message says why)."""


def _text(value, *, max_length: int | None = None, strip: bool = False) -> str:
    while isinstance(value, list | tuple) and len(value) == 1:
        value = value[0]  # lmms-eval's filtered_resps: [["answer"]]
    if isinstance(value, str):
        text = value.strip() if strip else value
    elif isinstance(value, bool) or value is None or isinstance(value, dict | list | tuple | bytes):
        kind = "a list of several values" if isinstance(value, list | tuple) else type(value).__name__
        raise _Bad(f"expected a text, got {kind}")
    elif isinstance(value, float):
        if math.isnan(value):
            raise _Bad("missing")
        text = str(int(value)) if value.is_integer() else repr(value)
    else:
        text = str(value)
    if "\x00" in text:
        raise _Bad("contains a NUL character")
    if max_length is not None and len(text) > max_length:
        raise _Bad(f"longer than {max_length} characters")
    return text


def _required(value, *, max_length: int, what: str, complain: Callable[[str, object], None]) -> str | None:
    """The trimmed text of a cell every row must fill (an id, an LALM name), or None after ``complain(reason,
    value)``."""
    try:
        text = _text(value, max_length=max_length, strip=True)
    except _Bad as exc:
        complain(str(exc), value)
        return None
    if not text:
        complain(f"empty: every row needs {what}", value)
        return None
    return text


def _label(value, *, max_length: int) -> str:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        value = ", ".join(value)  # MMAU gives some categories as ["Reasoning"]
    return _text(value, max_length=max_length, strip=True)


def _choices(value) -> list[str]:
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise _Bad("expected a list of options, or a JSON array as text") from exc
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise _Bad("expected a list of options, or a JSON array as text")
    return [_text(v) for v in value]


def _position(value) -> int:
    if isinstance(value, bool):
        raise _Bad("expected a whole number")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise _Bad("expected a whole number")


#: Field -> how a question-level cell is read (None: the cell is missing).
_QUESTION_READERS: dict[str, Callable] = {
    "question": lambda v: _text(v),
    "reference": lambda v: _text(v),
    "rationale": lambda v: _text(v),
    "transcript": lambda v: _text(v),
    "category": lambda v: _label(v, max_length=_max_length(Question, "category")),
    "sub_category": lambda v: _label(v, max_length=_max_length(Question, "sub_category")),
    "choices": _choices,
}


def _modality(value) -> tuple[str, str]:
    label = _text(value, max_length=_max_length(Question, "modality_detail"), strip=True)
    try:
        return _modality_parse(label)
    except ValueError as exc:
        raise _Bad(str(exc)) from exc


@dataclass
class _Context:
    """What the planner needs to know of the store: the benchmark's questions, in import order."""

    exists: bool = False
    positions: list[str] = field(default_factory=list)
    external_ids: set[str] = field(default_factory=set)


#: Rows read into Python objects at a time: the plan keeps what it needs, the rest of a chunk is freed (100,000
#: rows' cells at once cost about 170 MB).
CHUNK_ROWS = 10_000


def _rows_in_chunks(table: Table, columns: dict[str, str], lalm_columns: dict[str, dict[str, str]]):
    """``(row index, index in chunk, {field: chunk values}, {LALM: {"candidate"/"rating": chunk values}})`` for
    every row, reading ``CHUNK_ROWS`` rows of the mapped columns at a time."""
    for start in range(0, table.n_rows, CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, table.n_rows)
        values = {f: table.column(c, start, stop) for f, c in columns.items()}
        wide = {name: {k: table.column(c, start, stop) for k, c in spec.items()}
                for name, spec in lalm_columns.items()}
        for i in range(stop - start):
            yield start + i, i, values, wide


class _RowReader:
    """Reads one row at a time into the plan (see :func:`_plan_table`); problems go to the plan, named by row,
    column and value."""

    def __init__(self, *, plan: _Plan, mapping: TableMapping, context: _Context, columns: dict[str, str],
                 lalm_columns: dict[str, dict[str, str]], locator: AudioLocator | None):
        self.plan, self.mapping, self.context, self.locator = plan, mapping, context, locator
        self.columns, self.lalm_columns = columns, lalm_columns
        self.constant: dict = {}  # question fields every row gets from the mapping's defaults
        if "modality" not in columns and mapping.defaults.get("modality"):
            self.constant["modality"] = (mapping.defaults["modality"], mapping.defaults["modality"])
        if "category" not in columns and mapping.defaults.get("category"):
            self.constant["category"] = mapping.defaults["category"]
        self.id_length = _max_length(Question, "external_id")
        self.audio_length = _max_length(Question, "audio_ref")
        self.lalm_length = _max_length(LALM, "name")

    def bad(self, row: int, f: str, reason: str, value=None) -> None:
        self.plan.problem(reason, row=row, column=self.columns.get(f, f), value=value)

    def row(self, row: int, values: dict, i: int, wide: dict) -> None:
        """Read data row ``row`` (1-based): cell ``values[field][i]``, the wide layout's ``wide[LALM][...][i]``."""
        key = self._question(row, values, i)
        if key is None:
            return
        if self.mapping.layout == "long":
            lalm = self.mapping.defaults.get("lalm", "")
            if "lalm" in values:
                lalm = _required(values["lalm"][i], max_length=self.lalm_length, what="its LALM",
                                 complain=lambda reason, value: self.bad(row, "lalm", reason, value))
                if lalm is None:
                    return
            answers = [(lalm, values["candidate"][i], self.columns["candidate"],
                        values["rating"][i] if "rating" in values else None, self.columns.get("rating", ""))]
        else:
            answers = [(name, cells["candidate"][i], self.lalm_columns[name]["candidate"],
                        cells["rating"][i] if "rating" in cells else None,
                        self.lalm_columns[name].get("rating", ""))
                       for name, cells in wide.items() if not is_missing(cells["candidate"][i])]
        for lalm, value, column, rating_value, rating_column in answers:
            candidate = self._candidate(row, key, lalm, value, column)
            if candidate is not None and not is_missing(rating_value):
                self._rating(row, values, i, candidate, rating_value, rating_column)

    def _question(self, row: int, values: dict, i: int) -> str | None:
        """The key of the row's question, planned or checked against its earlier rows; None after a problem."""
        question_values: dict = dict(self.constant)
        ok = True
        for f, read in (*_QUESTION_READERS.items(), ("modality", _modality)):
            if f in values and not is_missing(value := values[f][i]):
                try:
                    question_values[f] = read(value)
                except _Bad as exc:
                    self.bad(row, f, str(exc), value)
                    ok = False
        audio_value = values["audio"][i] if "audio" in values else None
        if not is_missing(audio_value) and self.locator is not None:
            try:
                question_values["audio"] = self.locator.key(audio_value)
                if len(question_values["audio"]) > self.audio_length:
                    raise _Bad(f"longer than {self.audio_length} characters")
            except ValueError as exc:
                self.bad(row, "audio", str(exc), audio_value)
                ok = False
        key = self._key(row, values, i, question_values) if ok else None
        if key is None:
            return None
        question = self.plan.questions.get(key)
        if question is None:
            if key not in self.context.external_ids:
                for f in ("question", "reference"):
                    if not question_values.get(f, "").strip():
                        self.bad(row, f, f"no question {key!r} in the benchmark yet, and its {f} is "
                                         f"{'empty' if f in values else 'not mapped'}",
                                 values[f][i] if f in values else None)
                        ok = False
            if not ok:
                return None
            self.plan.questions[key] = _Question(key=key, row=row, values=question_values, audio_value=audio_value)
            return key
        for f, value in question_values.items():
            if question.values.get(f, value) != value:
                self.bad(row, f, f"differs from row {question.row} of the same question "
                                 f"({shown(question.values[f])})", values[f][i] if f in values else value)
        if question.values.keys() - question_values.keys():
            missing = sorted(question.values.keys() - question_values.keys())
            self.bad(row, missing[0], f"missing, but row {question.row} of the same question has it")
        return key

    def _key(self, row: int, values: dict, i: int, question_values: dict) -> str | None:
        """What identifies the row's question: its id, the id at its position, or the hash of its audio and text."""
        if "question_id" in values:
            return _required(values["question_id"][i], max_length=self.id_length, what="its question's id",
                             complain=lambda reason, value: self.bad(row, "question_id", reason, value))
        if "position" in values:
            value = values["position"][i]
            positions = self.context.positions
            try:
                position = _position(value)
                if not 0 <= position < len(positions):
                    raise _Bad(f"no question at this position: the benchmark has {len(positions)} "
                               "(positions count from 0)")
            except _Bad as exc:
                self.bad(row, "position", str(exc), value)
                return None
            return positions[position]
        text = question_values.get("question", "")
        if not text.strip():
            self.bad(row, "question", "empty: without question_id the question text identifies the question",
                     values["question"][i])
            return None
        identity = f"{question_values.get('audio', '')}\x00{text}"
        return "q-" + hashlib.sha256(identity.encode()).hexdigest()[:20]

    def _candidate(self, row: int, key: str, lalm: str, value, column: str) -> _Candidate | None:
        """The planned candidate answer of ``lalm`` to question ``key`` (one per pair; every row must agree)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            self.plan.problem("missing: every row needs its candidate answer", row=row, column=column)
            return None
        try:
            text = _text(value)
        except _Bad as exc:
            self.plan.problem(str(exc), row=row, column=column, value=value)
            return None
        candidate = self.plan.candidates.get((key, lalm))
        if candidate is None:
            candidate = self.plan.candidates[(key, lalm)] = _Candidate(question=key, lalm=lalm, text=text,
                                                                       row=row, column=column)
        elif candidate.text != text:
            self.plan.problem(f"differs from the candidate answer of LALM {lalm!r} to the same question in row "
                              f"{candidate.row}", row=row, column=column, value=value)
            return None
        return candidate

    def _rating(self, row: int, values: dict, i: int, candidate: _Candidate, value, column: str) -> None:
        """Add the row's rating of ``candidate`` (its score on 1–5, rater, codes and comment)."""
        try:
            score = self.mapping.rating_scale.score(value)
        except ValueError as exc:
            self.plan.problem(str(exc), row=row, column=column, value=value)
            return
        cells = {f: values[f][i] for f in ("rater", "codes", "comment") if f in values}
        try:
            rater = _text(cells["rater"], strip=True) if not is_missing(cells.get("rater")) else ""
            if "rater" in cells and not rater:
                raise _Bad("empty: a rating needs its rater when the rater column is mapped")
        except _Bad as exc:
            self.bad(row, "rater", str(exc), cells.get("rater"))
            return
        texts = {}
        for f in ("codes", "comment"):
            try:
                texts[f] = _text(cells[f], strip=True) if not is_missing(cells.get(f)) else ""
                if f == "codes":
                    texts[f] = normalize_codes(texts[f])
            except (_Bad, UnknownCodeError) as exc:
                self.bad(row, f, str(exc), cells.get(f))
                return
        earlier = next((r for r in candidate.ratings if r.rater == rater), None)
        if earlier is not None:
            who = f"rater {rater!r}" if rater else "the file (no rater column: one import account)"
            self.plan.problem(f"a second rating of LALM {candidate.lalm!r}'s answer by {who} (first in row "
                              f"{earlier.row})", row=row, column=column, value=value)
            return
        candidate.ratings.append(_Rating(rater=rater, score=score, codes=texts["codes"], comment=texts["comment"],
                                         row=row))


def _plan_table(table: Table, mapping: TableMapping, context: _Context, locator: AudioLocator | None,
                progress: Progress | None = None) -> _Plan:
    """Check every row of ``table`` against ``mapping`` and group them into questions, candidate answers and
    ratings; every problem is collected in the plan (nothing raises)."""
    plan = _Plan(rows=table.n_rows)
    columns, lalm_columns, problems = mapping.resolve(table.names)
    for problem in problems:
        plan.problem(problem.reason, key=problem.key)
    if problems:
        return plan
    cols = mapping.columns
    if not ({"question", "reference"} <= set(cols)) and not context.exists and "position" not in cols:
        missing = " and ".join(k for k in ("question", "reference") if k not in cols)
        plan.problem(f"unmapped required field: {missing} (the benchmark is new, so its questions are created "
                     "from the table)", key=f"columns.{'question' if 'question' not in cols else 'reference'}")
        return plan
    if "position" in cols and not context.exists:
        plan.problem("questions by position need an existing benchmark: import the benchmark first",
                     key="columns.position")
        return plan
    reader = _RowReader(plan=plan, mapping=mapping, context=context, columns=columns, lalm_columns=lalm_columns,
                        locator=locator)
    for index, i, values, wide in _rows_in_chunks(table, columns, lalm_columns):
        if progress is not None and index % PROGRESS_EVERY == 0:
            progress("checking rows", index, table.n_rows)
        reader.row(index + 1, values, i, wide)
    return plan


def _audio_check(plan: _Plan, locator: AudioLocator, column: str, progress: Progress | None) -> dict:
    """Locate and read the header of every distinct audio file of the plan's questions; ``{audio key: located
    audio}``; problems go to the plan, on the first row naming each file."""
    located = {}
    first: dict[str, _Question] = {}
    for question in plan.questions.values():
        if "audio" in question.values:
            first.setdefault(question.values["audio"], question)
    for done, (key, question) in enumerate(first.items()):
        if progress is not None and done % 200 == 0:
            progress("checking audio", done, len(first))
        try:
            found = locator.locate(question.audio_value)
            audio_file_info(path=found.path, name=found.name)
        except (ValueError, AudioReadError, OSError) as exc:
            plan.problem(str(exc), row=question.row, column=column, value=question.audio_value)
            continue
        located[key] = found
    return located


# --- phase 3: write ----------------------------------------------------------------------------------------------

def _context(benchmark: Benchmark | None) -> _Context:
    if benchmark is None:
        return _Context()
    ids = list(Question.objects.filter(benchmark=benchmark).order_by("pk").values_list("external_id", flat=True))
    return _Context(exists=True, positions=ids, external_ids=set(ids))


def _write(*, plan: _Plan, mapping: TableMapping, benchmark_name: str, file_name: str, located: dict,
           dry_run: bool, summary: TableImportSummary, stored: list[str]) -> Benchmark:
    """Phase 3 (call inside a transaction); appends the storage names of audio files it copied to ``stored``.

    Raises:
        TableImportError: a changed candidate answer that was already rated.
    """
    benchmark, summary.benchmark_created = Benchmark.objects.get_or_create(
        name=benchmark_name, defaults={"source": file_name})
    reason = f"{TABLE_IMPORT_REASON} {file_name}"

    lalm_names = sorted({c.lalm for c in plan.candidates.values()})
    lalms = {}
    for name in lalm_names:
        lalms[name], created = LALM.objects.get_or_create(name=name, defaults={"provider": LALM.Provider.IMPORT})
        if created:
            summary.lalms_created.append(name)
    summary.lalms = lalm_names

    raters = sorted({rating.rater for c in plan.candidates.values() for rating in c.ratings})
    accounts = {}
    if raters:
        known = ImportAccount.objects.count()
        accounts = import_accounts_get_or_create(namespace=mapping.rater_namespace or benchmark.name,
                                                 rater_ids=raters)
        summary.raters = len(accounts)
        summary.rater_accounts_created = ImportAccount.objects.count() - known

    clips: dict[str, AudioClip] = {}
    summary.audio_files = len(located)
    if not dry_run:
        newest = AudioClip.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
        for key, found in located.items():
            clip = audio_clip_from_path(path=found.path, stored_name=found.stored_name, original_name=found.name)
            if clip.pk > newest and not found.stored_name:
                stored.append(clip.file.name)
            clips[key] = clip

    questions = _write_questions(plan=plan, benchmark=benchmark, reason=reason, clips=clips, summary=summary)
    _write_candidates(plan=plan, benchmark=benchmark, mapping=mapping, questions=questions, lalms=lalms,
                      accounts=accounts, summary=summary)
    return benchmark


def _question_meta(values: dict, clips: dict) -> dict:
    """Question fields (not versioned) from a planned question's values: only the mapped ones."""
    meta = {}
    if "modality" in values:
        meta["modality"], meta["modality_detail"] = values["modality"]
    for f in ("category", "sub_category", "choices"):
        if f in values:
            meta[f] = values[f]
    if "audio" in values:
        meta["audio_ref"] = values["audio"]
        if values["audio"] in clips:
            meta["audio"] = clips[values["audio"]]
    return meta


def _write_questions(*, plan: _Plan, benchmark: Benchmark, reason: str, clips: dict,
                     summary: TableImportSummary) -> dict[str, Question]:
    """Create the new questions (version 1 current) and update the changed ones; ``{key: question}``."""
    existing = {q.external_id: q for q in Question.objects.filter(benchmark=benchmark).select_related(
        "current_version").defer("extra", "current_version__transcript_segments")}
    # Only questions whose texts differ from their current version can need a new one (see _reimport_version):
    # their last import versions and version numbers are read, the others' never (a re-import of 100,000 rows).
    differing = [existing[key].pk for key, planned in plan.questions.items() if key in existing and any(
        getattr(existing[key].current_version, VERSION_FIELDS[f], None) != v
        for f, v in planned.values.items() if f in VERSION_FIELDS)]
    last_imported = _last_import_versions(differing) if differing else {}
    last_number = _last_version_numbers(differing) if differing else {}
    new_questions, new_versions, changed = [], [], []
    defaults = {"modality": "", "modality_detail": "unknown (table import)"}
    for key, planned in plan.questions.items():
        meta = _question_meta(planned.values, clips)
        texts = {VERSION_FIELDS[f]: v for f, v in planned.values.items() if f in VERSION_FIELDS}
        question = existing.get(key)
        if question is None:
            question = Question(benchmark=benchmark, external_id=key, **{**defaults, **meta})
            new_questions.append(question)
            new_versions.append(QuestionVersion(
                question=question, number=1, source=QuestionVersion.Source.IMPORT, reason=reason,
                **{"question_text": "", "reference_answer": "", **texts}))
            summary.audio_linked += "audio" in meta
            continue
        is_changed = False
        for attr, value in meta.items():
            if getattr(question, attr) != value and not (attr == "audio" and question.audio_id == value.pk):
                setattr(question, attr, value)
                is_changed = True
                summary.audio_linked += attr == "audio"
        version = _reimport_version(question, texts=texts, last_imported=last_imported, last_number=last_number,
                                    reason=reason)
        if version is not None:
            new_versions.append(version)
            is_changed = True
        if is_changed:
            changed.append(question)
            summary.questions_updated += 1
        else:
            summary.questions_unchanged += 1
    Question.objects.bulk_create(new_questions, batch_size=_BULK_BATCH)
    QuestionVersion.objects.bulk_create(new_versions, batch_size=_BULK_BATCH)
    Question.objects.bulk_update(changed, ["audio", "audio_ref", "modality", "modality_detail", "category",
                                           "sub_category", "choices"], batch_size=_BULK_BATCH)
    _make_current(new_versions)
    summary.questions_created = len(new_questions)
    summary.versions_created = len(new_versions)
    existing.update((q.external_id, q) for q in new_questions)
    return existing


def _current_candidates(benchmark: Benchmark, lalm_ids: list[int], *, full: bool) -> dict[tuple[int, int], tuple]:
    """``{(question version pk, LALM pk): (pk, text, valid_rating_count, target_ratings)}`` of the benchmark's
    candidate answers on current versions; with ``full=False`` only ``(pk,)`` (no texts: less memory)."""
    fields = ("pk", "text", "valid_rating_count", "target_ratings") if full else ("pk",)
    rows = CandidateAnswer.objects.filter(
        question_version__question__benchmark=benchmark, lalm_id__in=lalm_ids,
        question_version=F("question_version__question__current_version"),
    ).values_list("question_version_id", "lalm_id", *fields)
    return {(v, lalm): rest for v, lalm, *rest in rows.iterator(chunk_size=5000)}


def _write_candidates(*, plan: _Plan, benchmark: Benchmark, mapping: TableMapping, questions: dict[str, Question],
                      lalms: dict[str, LALM], accounts: dict, summary: TableImportSummary) -> None:
    """Create or update the candidate answers and their imported ratings, with their rating counts and, for rated
    answers, their own k (``imported_ratings``: ``complete`` = the ratings they have; ``need_k`` = their imported
    ratings + the benchmark's k). New rows go in by ``COPY`` straight from the plan (no list of 100,000 tuples)."""
    k = benchmark_target_ratings(benchmark)
    need_k = mapping.imported_ratings == "need_k"
    lalm_ids = [lalm.pk for lalm in lalms.values()]
    existing = _current_candidates(benchmark, lalm_ids, full=True) if not summary.benchmark_created else {}
    old_ratings: dict[tuple[int, int], tuple] = {}
    imported_counts: dict[int, int] = {}
    if existing:
        ratings = Rating.objects.filter(candidate__question_version__question__benchmark=benchmark,
                                        candidate__lalm_id__in=lalm_ids)
        if accounts:
            for pk, cid, aid, score, codes, comment in ratings.filter(
                    annotator_id__in=[user.pk for user in accounts.values()]).values_list(
                    "pk", "candidate_id", "annotator_id", "score", "codes", "comment").iterator(chunk_size=5000):
                old_ratings[(cid, aid)] = (pk, score, codes, comment)
        if need_k:
            imported_counts = dict(ratings.filter(source=Rating.Source.IMPORT, is_valid=True).values(
                "candidate_id").annotate(n=Count("pk")).values_list("candidate_id", "n"))

    def where(planned: _Candidate) -> tuple[int, int]:
        return questions[planned.question].current_version_id, lalms[planned.lalm].pk

    new_ratings, text_changes, updated_ratings = [], {}, []
    increments, targets = defaultdict(list), {}
    for planned in plan.candidates.values():
        found = existing.get(where(planned))
        if found is None:
            summary.candidates_created += 1
            summary.ratings_created += len(planned.ratings)
            continue
        pk, text, valid_count, target = found
        if text != planned.text:
            text_changes[pk] = planned
        else:
            summary.candidates_unchanged += 1
        fresh = 0
        for rating in planned.ratings:
            account = accounts[rating.rater].pk
            old = old_ratings.get((pk, account))
            if old is None:
                new_ratings.append((pk, where(planned)[0], account, rating))
                fresh += 1
            elif old[1:] != (rating.score, rating.codes, rating.comment):
                updated_ratings.append(Rating(pk=old[0], score=rating.score, codes=rating.codes,
                                              comment=rating.comment, updated_at=timezone.now()))
            else:
                summary.ratings_unchanged += 1
        summary.ratings_created += fresh
        if fresh:
            increments[fresh].append(pk)
        if planned.ratings:
            wanted = imported_counts.get(pk, 0) + fresh + k if need_k else valid_count + fresh
            if wanted != target:
                targets[pk] = wanted
    _refuse_rated_changes(text_changes, summary.file)
    if text_changes:
        CandidateAnswer.objects.bulk_update(
            [CandidateAnswer(pk=pk, text=planned.text) for pk, planned in text_changes.items()], ["text"],
            batch_size=_BULK_BATCH)
        summary.candidates_updated = len(text_changes)

    def new_candidate_rows():
        for planned in plan.candidates.values():
            version_id, lalm_id = where(planned)
            if (version_id, lalm_id) not in existing:
                n = len(planned.ratings)
                target = (n + k if need_k else n) if n else None
                yield version_id, lalm_id, planned.text, None, target, 0, n, random_key_new()

    if summary.candidates_created:
        _rows_insert(CandidateAnswer, ["question_version_id", "lalm_id", "text", "source_job_id", "target_ratings",
                                       "priority", "valid_rating_count", "random_key"], new_candidate_rows(),
                     now_fields=["created_at"])
    created = _current_candidates(benchmark, lalm_ids, full=False) if summary.candidates_created else {}

    def new_rating_rows():
        for cid, vid, aid, r in new_ratings:
            yield cid, vid, aid, r.score, r.codes, r.comment, None, None, Rating.Source.IMPORT, True, ""
        for planned in plan.candidates.values():
            key = where(planned)
            if planned.ratings and key not in existing:
                for r in planned.ratings:
                    yield (created[key][0], key[0], accounts[r.rater].pk, r.score, r.codes, r.comment, None, None,
                           Rating.Source.IMPORT, True, "")

    _rows_insert(Rating, ["candidate_id", "question_version_id", "annotator_id", "score", "codes", "comment",
                          "seconds_on_task", "audio_seconds_played", "source", "is_valid", "invalid_reason"],
                 new_rating_rows(), now_fields=["created_at", "updated_at"])
    for n, pks in increments.items():
        for start in range(0, len(pks), _BULK_BATCH):
            CandidateAnswer.objects.filter(pk__in=pks[start:start + _BULK_BATCH]).update(
                valid_rating_count=F("valid_rating_count") + n)
    if targets:
        CandidateAnswer.objects.bulk_update([CandidateAnswer(pk=pk, target_ratings=t) for pk, t in targets.items()],
                                            ["target_ratings"], batch_size=_BULK_BATCH)
    Rating.objects.bulk_update(updated_ratings, ["score", "codes", "comment", "updated_at"], batch_size=_BULK_BATCH)
    summary.ratings_updated = len(updated_ratings)


def _refuse_rated_changes(text_changes: dict[int, _Candidate], file: str) -> None:
    """Raise :class:`TableImportError` for every changed answer (``{candidate pk: planned}``) someone rated."""
    if not text_changes:
        return
    rated = set(Rating.objects.filter(candidate_id__in=list(text_changes)).values_list("candidate_id", flat=True))
    conflicts = [
        ImportProblem(row=planned.row, column=planned.column, value=shown(planned.text),
                      reason=f"differs from the stored candidate answer of LALM {planned.lalm!r}, which was rated "
                             "already (it is not overwritten)")
        for pk, planned in text_changes.items() if pk in rated
    ]
    if conflicts:
        raise TableImportError(file=file, problems=conflicts)


# --- the service -------------------------------------------------------------------------------------------------

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
        path: a CSV, TSV, JSON (list of objects), JSONL or Parquet file, or a Hugging Face ``datasets`` folder.
        mapping: a mapping document (:func:`~annotation.services.importers.table_mapping.mapping_parse`) or a
            parsed one.
        audio_root: folder or zip file the audio column's relative paths start from (URLs, file storage keys and
            audio bytes need none).
        record: the browser's :class:`~annotation.models.TableImport` row; without one, a (non-dry) import
            records a new row with the mapping (source ``source`` or the path). The row's ``summary``,
            ``benchmark`` and ``imported_at`` are written in the import's transaction.
        progress: called as ``progress(phase, done, total)`` while rows and audio files are checked (phases
            ``reading``, ``checking rows``, ``checking audio``, ``writing``).

    Returns:
        The summary: questions, versions, candidate answers, LALMs, ratings and import accounts created, updated
        and unchanged; audio files linked.

    Raises:
        TableImportError: every problem with the mapping, the rows (row number, column, value, reason) or the
            audio files; also a changed answer that was rated already. Nothing is written.
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
    summary = TableImportSummary(file=path.name, benchmark=name, dry_run=dry_run, rows=table.n_rows)
    workdir = Path(tempfile.mkdtemp(prefix="orca-table-import-"))
    locator = AudioLocator(root=audio_root, workdir=workdir, max_bytes=settings.AUDIO_UPLOAD_MAX_BYTES)
    stored: list[str] = []
    try:
        plan = _plan_table(table, mapping, _context(Benchmark.objects.filter(name=name).first()), locator, progress)
        located = {}
        mapping_problems = any(p.row is None for p in plan.problems)
        if not mapping_problems and "audio" in mapping.columns:
            located = _audio_check(plan, locator, mapping.resolve(table.names)[0]["audio"], progress)
        if plan.problems:
            problems = sorted(plan.problems, key=lambda p: (p.row is not None, p.row or 0))
            raise TableImportError(file=path.name, problems=problems)
        if not plan.candidates and not plan.questions:
            raise TableImportError(file=path.name, problems=[ImportProblem(reason="the table has no rows")])
        names, file_format = table.names, table.file_format
        del table  # the plan holds what is needed; the read table's memory goes back before the writes
        if progress is not None:
            progress("writing", summary.rows, summary.rows)
        with transaction.atomic():
            benchmark = _write(plan=plan, mapping=mapping, benchmark_name=name, file_name=path.name,
                               located=located, dry_run=dry_run, summary=summary, stored=stored)
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
    """The first ``rows`` rows of the table as the mapping reads them, without writing or fetching anything:
    ``([{row, question_id, question, reference, lalm, candidate, score, rater, audio, ...}], problems)``.

    ``score`` is the rating on the 1–5 scale; ``audio`` the audio cell as given. Problems of these rows are
    returned, not raised (the import page shows them beside the rows).

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
        plan = _plan_table(table, mapping, _context(benchmark), locator)
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
                "lalm": candidate.lalm,
                "candidate": candidate.text,
                "score": rating.score if rating else None,
                "rater": rating.rater if rating else "",
            })
    out.sort(key=lambda r: r["row"])
    return out[:rows], plan.problems


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
        audio_file_info(path=found.path)
    except AudioReadError as exc:
        raise ValueError(str(exc)) from exc
    finally:
        locator.close()
    return found.path


__all__ = ["TABLE_IMPORT_REASON", "ImportProblem", "TableImportError", "TableImportSummary", "table_audio_locate",
           "table_import", "table_preview"]
