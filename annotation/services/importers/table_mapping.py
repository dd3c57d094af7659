"""The mapping document of the table importer: which column of a table is what, checked, and guessed from the
column names.

A mapping is a JSON object (README, "Your own benchmark"; the one a browser import saves can be downloaded and
given to ``manage.py import_table --mapping``)::

    {"layout": "long",
     "columns": {"question_id": …, "question": …, "reference": …, "choices": …, "audio": …, "category": …,
                 "sub_category": …, "modality": …, "rationale": …, "transcript": …, "lalm": …, "candidate": …,
                 "rating": …, "rater": …, "codes": …, "comment": …, "position": …},
     "rating_scale": {"0": 1, "0.5": 3, "1": 5}}

Every ``columns`` value is a column name (``a.b`` for a key nested in a JSON object, ``@row`` for the 0-based row
number), a list of column names (the first one the table has is used), or absent/null. Further keys: ``lalms``
(the wide layout: ``{"<LALM name>": "<answer column>" | {"candidate": …, "rating": …}}``), ``defaults``
(``{"lalm": …, "modality": …, "category": …}``: a value for every row where no column is mapped),
``imported_ratings`` (``complete``: an answer with imported ratings is complete; ``need_k``: it still needs k
ratings on the platform), ``rater_namespace`` (whose rater ids these are; default the benchmark's name),
``split`` (the split of a Hugging Face ``DatasetDict``), ``format`` (to override the file extension), ``preset``
and ``description`` (for people; the importer ignores them).

Round 2 (README, "Your own benchmark"): ``question_key`` (several columns that together identify a question, e.g.
``["filename", "question"]``), ``missing_audio`` (``refuse``, or ``allow``: a question whose audio is not found is
imported and waits for it), ``candidate_metadata`` (``{"NAME": "COLUMN"}``: per-answer attributes kept on the
candidate answer, a leaderboard breakdown), ``match`` (``question_text``: rows are matched to the benchmark's
existing questions by their normalised text, never by position alone) with ``unmatched`` (``refuse`` or ``skip``),
``judge`` (``{"name": "audiobench:llama3-70b", "scale": {"min": 0, "max": 5}}``: the ``judge_score`` column is that
judge's rating) and ``optional`` (fields whose columns may be absent from the table).
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from annotation.models import Modality
from annotation.services.importers.reader import ImportFormatError

#: The fields a column can be mapped to, with what each holds (shown on the import page and in errors).
FIELDS: dict[str, str] = {
    "question_id": "The question's id in its benchmark; rows with the same id are one question.",
    "question": "The question text.",
    "reference": "The reference answer.",
    "choices": "Multiple-choice options: a list, or a JSON array as text.",
    "audio": "The audio: a path under the audio root, an http(s) URL, a file storage key, or the file's bytes.",
    "category": "The benchmark's category of the question.",
    "sub_category": "Its sub-category.",
    "modality": "speech, sound, music or mixed (mix-… counts as mixed).",
    "rationale": "Why the reference answer is right given the audio.",
    "transcript": "Transcript of the speech in the audio.",
    "lalm": "The LALM that gave the candidate answer (long layout).",
    "candidate": "The LALM's candidate answer (long layout).",
    "rating": "A human rating of the candidate answer, mapped to 1–5 by the rating scale.",
    "rater": "Who gave the rating (pseudonymised into an import-only account).",
    "codes": "Feedback codes of the rating (a subset of Q, A, R, U, E).",
    "comment": "Free-text feedback of the rating.",
    "position": "0-based position of the question in the benchmark's import order (toolkit logs without ids).",
    "judge_score": "A toolkit's LLM judge score of the answer (the judge's rating, mapped to 1–5 by its scale).",
    "judge_explanation": "The judge's explanation or reply, kept with its score.",
    "judge_success": "Whether the judge's reply was parsed (0/false: stored as a failure, not as a score).",
}
#: Fields that hold a question's text (a change makes a new question version): field -> QuestionVersion field.
VERSION_FIELDS = {"question": "question_text", "reference": "reference_answer", "rationale": "rationale",
                  "transcript": "transcript"}
LAYOUTS = ("long", "wide")
IMPORTED_RATINGS = ("complete", "need_k")
MISSING_AUDIO = ("refuse", "allow")
MATCHES = ("question_text",)
UNMATCHED = ("refuse", "skip")
#: Group names the leaderboard and ORCA already use: a candidate metadata name may not be one of them.
RESERVED_METADATA = ("benchmark", "lalm", "modality", "category", "question", "answer")
_METADATA_NAME = re.compile(r"^[^=|\x00-\x1f]{1,60}$")
FORMATS = ("csv", "tsv", "json", "jsonl", "parquet", "hf")
ROW_COLUMN = "@row"
_DOCUMENT_KEYS = ("layout", "columns", "lalms", "defaults", "rating_scale", "imported_ratings", "rater_namespace",
                  "split", "format", "preset", "description", "question_key", "missing_audio",
                  "candidate_metadata", "match", "unmatched", "judge", "optional")
_DEFAULT_KEYS = ("lalm", "modality", "category")
_WIDE_FORBIDDEN = ("lalm", "candidate", "rating")


@dataclass(frozen=True)
class ImportProblem:
    """One problem of a table import: a bad mapping key, or a bad value in a row.

    ``row`` is the 1-based data row (the header line is not a row; JSON: the n-th object), None for the mapping;
    ``column`` the table's column, ``value`` the value as read (shortened), ``key`` the mapping key for mapping
    problems (e.g. ``columns.reference``).
    """

    reason: str
    row: int | None = None
    column: str = ""
    value: str | None = None
    key: str = ""

    def __str__(self) -> str:
        parts = []
        if self.row is not None:
            parts.append(f"row {self.row}")
        elif self.key:
            parts.append(f"mapping {self.key}")
        if self.column:
            parts.append(f"column {self.column!r}")
        if self.value is not None:
            parts.append(f"value {self.value}")
        return ": ".join([*parts, self.reason])

    def as_dict(self) -> dict:
        return {"row": self.row, "column": self.column, "value": self.value, "key": self.key, "reason": self.reason}


def shown(value) -> str:
    """A value as an error shows it: its repr, cut to 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class TableImportError(ImportFormatError):
    """A table import refused: every problem found (mapping, rows, audio), nothing written.

    ``problems`` lists them (:class:`ImportProblem`); the message is ``<file>: <n> problems`` followed by one line
    per problem, e.g. ``row 7: column 'score': value '0.7': not on the rating scale (0, 0.5, 1)``.
    """

    def __init__(self, *, file: str, problems: Sequence[ImportProblem]):
        self.problems = list(problems)
        count = f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
        super().__init__(file=file, problem="\n".join([count, *(str(p) for p in self.problems)]))


class RatingScale:
    """How a file's rating values map to the platform's 1–5 scale.

    Either a table (``{"0": 1, "0.5": 3, "1": 5}``: raw value → 1–5; numbers match numerically, so ``0.50`` and
    ``.5`` are ``"0.5"``, other values match as trimmed text) or linear (``{"min": a, "max": b}``: r = 1 + 4 (v − a)
    / (b − a), rounded to the nearest integer, halves up, since a rating is an integer 1–5).
    """

    def __init__(self, document):
        self.table: dict | None = None
        self.low = self.high = None
        if not isinstance(document, Mapping) or not document:
            raise ValueError('expected a table like {"0": 1, "0.5": 3, "1": 5} or {"min": 0, "max": 1}')
        if set(document) == {"min", "max"}:
            low, high = document["min"], document["max"]
            if not all(_is_number(v) for v in (low, high)) or not low < high:
                raise ValueError(f"min and max must be numbers with min < max, got {low!r} and {high!r}")
            self.low, self.high = float(low), float(high)
            return
        table, self.shown = {}, {}
        for raw, score in document.items():
            if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
                raise ValueError(f"{raw!r} maps to {score!r}; every value must be an integer 1–5")
            table[_scale_key(raw)] = score
            self.shown[_scale_key(raw)] = str(raw)
        # Low to high whatever order the document had (PostgreSQL's jsonb reorders keys).
        order = sorted(table, key=lambda k: (isinstance(k, str), k if isinstance(k, str) else float(k), str(k)))
        self.table = {k: table[k] for k in order}
        self.shown = {k: self.shown[k] for k in order}

    def score(self, value) -> int:
        """The 1–5 score of a raw value. Raises ``ValueError`` (the reason) for a value outside the scale."""
        if self.table is not None:
            key = _scale_key(value)
            if key not in self.table:
                known = ", ".join(self.shown.values())
                raise ValueError(f"not on the rating scale ({known})")
            return self.table[key]
        number = _number(value)
        if number is None:
            raise ValueError(f"not a number (the rating scale is linear from {self.low:g} to {self.high:g})")
        if not self.low <= number <= self.high:
            raise ValueError(f"outside the rating scale {self.low:g}–{self.high:g}")
        return int(math.floor(1 + 4 * (number - self.low) / (self.high - self.low) + 0.5))

    def continuous(self, value) -> float:
        """The 1–5 value of a raw value without rounding (a judge's score: 1 + 4 (v − min) / (max − min) on a
        linear scale, the table's score otherwise). Raises ``ValueError`` like :meth:`score`."""
        if self.table is not None:
            return float(self.score(value))
        number = _number(value)
        if number is None or not self.low <= number <= self.high:
            return float(self.score(value))  # raises with the reason
        return 1 + 4 * (number - self.low) / (self.high - self.low)

    def document(self) -> dict:
        if self.table is not None:
            return {self.shown[k]: v for k, v in self.table.items()}
        return {"min": self.low, "max": self.high}


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _number(value) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _scale_key(value):
    number = _number(value)
    return number if number is not None else str(value).strip()


@dataclass
class TableMapping:
    """A checked mapping document (see the module docstring); :func:`mapping_parse` makes one.

    ``columns``: field → the column names it may come from (first present wins); ``lalms`` (wide): LALM name →
    ``{"candidate": [...], "rating": [...]}``; ``rating_scale``: None when no rating is mapped.
    """

    layout: str = "long"
    columns: dict[str, list[str]] = field(default_factory=dict)
    lalms: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    defaults: dict[str, str] = field(default_factory=dict)
    rating_scale: RatingScale | None = None
    imported_ratings: str = "complete"
    rater_namespace: str = ""
    split: str = ""
    file_format: str = ""
    question_key: list[str] = field(default_factory=list)
    missing_audio: str = "refuse"
    candidate_metadata: dict[str, list[str]] = field(default_factory=dict)
    match: str = ""
    unmatched: str = "refuse"
    judge_name: str = ""
    judge_scale: RatingScale | None = None
    optional: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def rated(self) -> bool:
        """True when any rating column is mapped."""
        return "rating" in self.columns or any("rating" in spec for spec in self.lalms.values())

    def document(self) -> dict:
        """The mapping as a JSON document (what :func:`mapping_parse` reads back)."""
        doc: dict = {"layout": self.layout,
                     "columns": {k: (v[0] if len(v) == 1 else list(v)) for k, v in self.columns.items()}}
        if self.lalms:
            doc["lalms"] = {}
            for name, spec in self.lalms.items():
                columns = {k: (v[0] if len(v) == 1 else list(v)) for k, v in spec.items()}
                doc["lalms"][name] = columns["candidate"] if set(columns) == {"candidate"} else columns
        if self.defaults:
            doc["defaults"] = dict(self.defaults)
        if self.rating_scale is not None:
            doc["rating_scale"] = self.rating_scale.document()
        doc["imported_ratings"] = self.imported_ratings
        for key, value in (("rater_namespace", self.rater_namespace), ("split", self.split),
                           ("format", self.file_format)):
            if value:
                doc[key] = value
        doc.update(self._round2_document())
        doc.update(self.extra)
        return doc

    def _round2_document(self) -> dict:
        doc: dict = {}
        if self.question_key:
            doc["question_key"] = list(self.question_key)
        if self.missing_audio != "refuse":
            doc["missing_audio"] = self.missing_audio
        if self.candidate_metadata:
            doc["candidate_metadata"] = {k: (v[0] if len(v) == 1 else list(v))
                                         for k, v in self.candidate_metadata.items()}
        if self.match:
            doc["match"] = self.match
        if self.unmatched != "refuse":
            doc["unmatched"] = self.unmatched
        if self.judge_name or self.judge_scale is not None:
            doc["judge"] = {k: v for k, v in (("name", self.judge_name), ("scale", self.judge_scale and
                                                                            self.judge_scale.document())) if v}
        if self.optional:
            doc["optional"] = list(self.optional)
        return doc

    def resolve(self, names: Sequence[str]) -> tuple[dict[str, str], dict[str, dict[str, str]], list[ImportProblem]]:
        """The concrete column of every mapped field in a table with columns ``names`` (``@row`` always exists):
        ``(fields → column, LALM → {"candidate"/"rating" → column}, problems)``; a field none of whose columns
        the table has is an "unknown column" problem naming the table's columns."""
        present = set(names) | {ROW_COLUMN}
        problems: list[ImportProblem] = []
        known = ", ".join(names[:40]) + (", …" if len(names) > 40 else "")

        def pick(key: str, options: list[str]) -> str | None:
            for option in options:
                if option in present:
                    return option
            shown_options = " or ".join(repr(o) for o in options)
            problems.append(ImportProblem(key=key, reason=f"unknown column {shown_options} (the table has: {known})"))
            return None

        columns = {k: c for k, options in self.columns.items()
                   if (k not in self.optional or present & set(options))
                   and (c := pick(f"columns.{k}", options)) is not None}
        lalms = {}
        for name, spec in self.lalms.items():
            lalms[name] = {k: c for k, options in spec.items()
                           if (c := pick(f"lalms.{name}.{k}", options)) is not None}
        return columns, lalms, problems

    def resolve_extra(self, names: Sequence[str]) -> tuple[list[str], dict[str, str], list[ImportProblem]]:
        """The columns of ``question_key`` and ``candidate_metadata`` in a table with columns ``names``:
        ``(key columns, {metadata name: column}, problems)`` (an absent column is an "unknown column" problem)."""
        present = set(names) | {ROW_COLUMN}
        known = ", ".join(names[:40]) + (", …" if len(names) > 40 else "")
        problems = [ImportProblem(key="question_key", reason=f"unknown column {c!r} (the table has: {known})")
                    for c in self.question_key if c not in present]
        metadata = {}
        for name, options in self.candidate_metadata.items():
            column = next((o for o in options if o in present), None)
            if column is None:
                problems.append(ImportProblem(key=f"candidate_metadata.{name}", reason="unknown column "
                                              f"{' or '.join(repr(o) for o in options)} (the table has: {known})"))
            else:
                metadata[name] = column
        return list(self.question_key), metadata, problems


def _column_options(value, key: str, problems: list[ImportProblem]) -> list[str] | None:
    if value is None or value == "" or value == []:
        return None
    options = [value] if isinstance(value, str) else value
    if not isinstance(options, list) or not all(isinstance(o, str) and o for o in options):
        problems.append(ImportProblem(key=key, reason=f"expected a column name or a list of them, got {shown(value)}"))
        return None
    return options


def mapping_parse(document) -> TableMapping:
    """Check a mapping document and return it as a :class:`TableMapping`.

    Checks what needs no table: known keys, a layout, a candidate column (long) or LALM columns (wide), the LALM
    (a column or ``defaults.lalm``), what identifies a question (``question_id``, ``question_key``, ``question`` —
    with ``audio`` when mapped — or ``position``, only one of them), a rating scale for every rating column, a
    rating for a rater, codes or comment, a judge's name for its scores, candidate metadata names.

    Raises:
        TableImportError: every problem found (file ``mapping``), e.g. ``mapping columns.refrence: unknown
            field``.
    """
    problems: list[ImportProblem] = []
    if not isinstance(document, Mapping):
        raise TableImportError(file="mapping", problems=[ImportProblem(reason="expected a JSON object")])
    for key in document:
        if key not in _DOCUMENT_KEYS:
            problems.append(ImportProblem(key=key, reason=f"unknown key (expected {', '.join(_DOCUMENT_KEYS)})"))
    mapping = TableMapping(extra={k: document[k] for k in ("preset", "description") if k in document})
    layout = document.get("layout", "long")
    if layout not in LAYOUTS:
        problems.append(ImportProblem(key="layout", reason=f"{shown(layout)} is not long or wide"))
    else:
        mapping.layout = layout
    problems += _columns_parse(document, mapping)
    problems += _defaults_parse(document, mapping)
    imported = document.get("imported_ratings", "complete")
    if imported not in IMPORTED_RATINGS:
        problems.append(ImportProblem(key="imported_ratings", reason=f"{shown(imported)} is not complete or need_k"))
    else:
        mapping.imported_ratings = imported
    for key, attr in (("rater_namespace", "rater_namespace"), ("split", "split"), ("format", "file_format")):
        value = document.get(key, "")
        if value and not isinstance(value, str):
            problems.append(ImportProblem(key=key, reason=f"expected a text, got {shown(value)}"))
        else:
            setattr(mapping, attr, value or "")
    if mapping.file_format and mapping.file_format not in FORMATS:
        problems.append(ImportProblem(key="format",
                                      reason=f"{shown(mapping.file_format)} is not one of {', '.join(FORMATS)}"))
    if "rating_scale" in document and document["rating_scale"] not in (None, {}):
        try:
            mapping.rating_scale = RatingScale(document["rating_scale"])
        except ValueError as exc:
            problems.append(ImportProblem(key="rating_scale", reason=str(exc)))
    problems += _round2_parse(document, mapping)
    problems += _structure_problems(mapping, rating_scale_given="rating_scale" in document and document["rating_scale"])
    if problems:
        raise TableImportError(file="mapping", problems=problems)
    return mapping


def _columns_parse(document, mapping: TableMapping) -> list[ImportProblem]:
    """``columns`` (field → column options) and the wide layout's ``lalms`` into ``mapping``; their problems."""
    problems: list[ImportProblem] = []
    columns = document.get("columns", {})
    if not isinstance(columns, Mapping):
        problems.append(ImportProblem(key="columns", reason="expected an object of field → column"))
        columns = {}
    for key, value in columns.items():
        if key not in FIELDS:
            problems.append(ImportProblem(key=f"columns.{key}",
                                          reason=f"unknown field (expected one of {', '.join(FIELDS)})"))
            continue
        options = _column_options(value, f"columns.{key}", problems)
        if options:
            mapping.columns[key] = options
    lalms = document.get("lalms", {})
    if not isinstance(lalms, Mapping):
        problems.append(ImportProblem(key="lalms", reason='expected {"<LALM name>": "<answer column>", …}'))
        lalms = {}
    for name, spec in lalms.items():
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            problems.append(ImportProblem(key="lalms", reason=f"{shown(name)} is not an LALM name (1–200 characters)"))
            continue
        spec = {"candidate": spec} if isinstance(spec, str | list) else spec
        if not isinstance(spec, Mapping) or set(spec) - {"candidate", "rating"} or "candidate" not in spec:
            problems.append(ImportProblem(key=f"lalms.{name}",
                                          reason='expected "<answer column>" or {"candidate": …, "rating": …}'))
            continue
        parsed = {k: o for k, v in spec.items() if (o := _column_options(v, f"lalms.{name}.{k}", problems))}
        if "candidate" in parsed:
            mapping.lalms[name] = parsed
    return problems


def _defaults_parse(document, mapping: TableMapping) -> list[ImportProblem]:
    """``defaults`` (a value for every row) into ``mapping``; their problems."""
    problems: list[ImportProblem] = []
    defaults = document.get("defaults", {})
    if not isinstance(defaults, Mapping):
        return [ImportProblem(key="defaults", reason="expected an object")]
    for key, value in defaults.items():
        if key not in _DEFAULT_KEYS:
            problems.append(ImportProblem(key=f"defaults.{key}",
                                          reason=f"unknown key (expected {', '.join(_DEFAULT_KEYS)})"))
        elif value in (None, ""):
            continue
        elif not isinstance(value, str) or len(value) > 200:
            problems.append(ImportProblem(key=f"defaults.{key}",
                                          reason=f"{shown(value)} is not a text of 1–200 characters"))
        elif key == "modality" and value not in Modality.values:
            problems.append(ImportProblem(key="defaults.modality",
                                          reason=f"{shown(value)} is not one of {', '.join(Modality.values)}"))
        else:
            mapping.defaults[key] = value
    return problems


def _choice(document, key: str, options: tuple[str, ...], problems: list[ImportProblem]) -> str:
    value = document.get(key, options[0])
    if value in (None, ""):
        return options[0]
    if value not in options:
        problems.append(ImportProblem(key=key, reason=f"{shown(value)} is not one of {', '.join(options)}"))
        return options[0]
    return value


def _round2_parse(document, mapping: TableMapping) -> list[ImportProblem]:
    """Read ``question_key``, ``missing_audio``, ``candidate_metadata``, ``match``, ``unmatched``, ``judge`` and
    ``optional`` into ``mapping``; returns their problems."""
    problems: list[ImportProblem] = []
    key = document.get("question_key") or []
    if not isinstance(key, list) or not all(isinstance(c, str) and c for c in key) or len(set(key)) != len(key):
        problems.append(ImportProblem(key="question_key", reason="expected a list of distinct column names"))
    elif len(key) == 1:
        problems.append(ImportProblem(key="question_key", reason="one column: map it as columns.question_id"))
    else:
        mapping.question_key = list(key)
    mapping.missing_audio = _choice(document, "missing_audio", MISSING_AUDIO, problems)
    mapping.match = "" if document.get("match") in (None, "") else _choice(document, "match", MATCHES, problems)
    mapping.unmatched = _choice(document, "unmatched", UNMATCHED, problems)
    metadata = document.get("candidate_metadata") or {}
    if not isinstance(metadata, Mapping):
        problems.append(ImportProblem(key="candidate_metadata", reason='expected {"NAME": "COLUMN", …}'))
        metadata = {}
    for name, value in metadata.items():
        if not isinstance(name, str) or not _METADATA_NAME.match(name) or name.strip() != name:
            problems.append(ImportProblem(key="candidate_metadata", reason=f"{shown(name)} is not a name of 1–60 "
                                          "characters without '=', '|' or surrounding spaces"))
        elif name.lower() in RESERVED_METADATA:
            problems.append(ImportProblem(key=f"candidate_metadata.{name}", reason=f"{name!r} is a group the "
                                          "platform already has: choose another name"))
        elif (options := _column_options(value, f"candidate_metadata.{name}", problems)) is not None:
            mapping.candidate_metadata[name] = options
    problems += _judge_parse(document.get("judge"), mapping)
    optional = document.get("optional") or []
    if not isinstance(optional, list) or not all(isinstance(o, str) and o in FIELDS for o in optional):
        problems.append(ImportProblem(key="optional", reason=f"expected a list of fields ({', '.join(FIELDS)})"))
    else:
        mapping.optional = list(optional)
    return problems


def _judge_parse(judge, mapping: TableMapping) -> list[ImportProblem]:
    if judge in (None, {}):
        return []
    if not isinstance(judge, Mapping) or set(judge) - {"name", "scale"}:
        return [ImportProblem(key="judge", reason='expected {"name": "toolkit:judge", "scale": {"min": 0, "max": 5}}')]
    problems = []
    name = judge.get("name") or ""
    if not isinstance(name, str) or len(name) > 200 or name.strip() != name:
        problems.append(ImportProblem(key="judge.name", reason=f"{shown(name)} is not a name of 1–200 characters"))
    else:
        mapping.judge_name = name
    if judge.get("scale") not in (None, {}):
        try:
            mapping.judge_scale = RatingScale(judge["scale"])
        except ValueError as exc:
            problems.append(ImportProblem(key="judge.scale", reason=str(exc)))
    return problems


def _structure_problems(mapping: TableMapping, *, rating_scale_given) -> list[ImportProblem]:
    """What the mapped fields need of each other (see :func:`mapping_parse`)."""
    problems = []
    cols = mapping.columns
    if mapping.layout == "long":
        if mapping.lalms:
            problems.append(ImportProblem(key="lalms", reason="only the wide layout has LALM columns"))
        if "candidate" not in cols:
            problems.append(ImportProblem(key="columns.candidate",
                                          reason="unmapped required field: the candidate answer"))
        if "lalm" not in cols and not mapping.defaults.get("lalm"):
            problems.append(ImportProblem(key="columns.lalm",
                                          reason="unmapped required field: map the LALM column or give defaults.lalm"))
    else:
        if not mapping.lalms:
            problems.append(ImportProblem(key="lalms", reason="unmapped required field: the wide layout needs "
                                                              "LALM answer columns"))
        for key in _WIDE_FORBIDDEN:
            if key in cols:
                problems.append(ImportProblem(key=f"columns.{key}",
                                              reason="not in the wide layout (each LALM has its own columns)"))
    if not ({"question_id", "question", "position"} & set(cols)) and not mapping.question_key:
        problems.append(ImportProblem(key="columns.question_id", reason="unmapped required field: question_id, "
                                      "question_key, question (with audio) or position identifies the question"))
    identities = [k for k in ("question_id", "position") if k in cols] + (["question_key"] if mapping.question_key
                                                                          else [])
    if len(identities) > 1:
        problems.append(ImportProblem(key="columns.position" if "position" in cols else "question_key",
                                      reason=f"{' and '.join(identities)} each identify the question: map one of "
                                             "them"))
    if mapping.match and (identities or "question" not in cols):
        problems.append(ImportProblem(key="match", reason="matching by question text needs the question column "
                                      "and no question_id, question_key or position"))
    judged = {"judge_score", "judge_explanation", "judge_success"} & set(cols)
    if judged and "judge_score" not in cols:
        problems.append(ImportProblem(key="columns.judge_score", reason="a judge's explanation or success needs "
                                      "the judge_score column"))

    if mapping.rated and mapping.rating_scale is None and not rating_scale_given:
        problems.append(ImportProblem(key="rating_scale", reason="a rating column needs a rating_scale: a table "
                                      'like {"0": 1, "0.5": 3, "1": 5} or {"min": 0, "max": 1}'))
    if not mapping.rated:
        for key in ("rater", "codes", "comment"):
            if key in cols:
                problems.append(ImportProblem(key=f"columns.{key}", reason="needs a rating column"))
    return problems
