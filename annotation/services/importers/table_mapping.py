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
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
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
}
#: Fields that hold a question's text (a change makes a new question version): field -> QuestionVersion field.
VERSION_FIELDS = {"question": "question_text", "reference": "reference_answer", "rationale": "rationale",
                  "transcript": "transcript"}
LAYOUTS = ("long", "wide")
IMPORTED_RATINGS = ("complete", "need_k")
FORMATS = ("csv", "tsv", "json", "jsonl", "parquet", "hf")
ROW_COLUMN = "@row"
_DOCUMENT_KEYS = ("layout", "columns", "lalms", "defaults", "rating_scale", "imported_ratings", "rater_namespace",
                  "split", "format", "preset", "description")
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
        doc.update(self.extra)
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

        columns = {k: c for k, options in self.columns.items() if (c := pick(f"columns.{k}", options)) is not None}
        lalms = {}
        for name, spec in self.lalms.items():
            lalms[name] = {k: c for k, options in spec.items()
                           if (c := pick(f"lalms.{name}.{k}", options)) is not None}
        return columns, lalms, problems


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
    (a column or ``defaults.lalm``), what identifies a question (``question_id``, ``question`` — with ``audio``
    when mapped — or ``position``, not both ``question_id`` and ``position``), a rating scale for every rating
    column, a rating for a rater, codes or comment.

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
    defaults = document.get("defaults", {})
    if not isinstance(defaults, Mapping):
        problems.append(ImportProblem(key="defaults", reason="expected an object"))
        defaults = {}
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
    problems += _structure_problems(mapping, rating_scale_given="rating_scale" in document and document["rating_scale"])
    if problems:
        raise TableImportError(file="mapping", problems=problems)
    return mapping


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
    if not ({"question_id", "question", "position"} & set(cols)):
        problems.append(ImportProblem(key="columns.question_id", reason="unmapped required field: question_id, "
                                      "question (with audio) or position identifies the question"))
    if "question_id" in cols and "position" in cols:
        problems.append(ImportProblem(key="columns.position", reason="question_id and position both identify the "
                                      "question: map one of them"))
    if mapping.rated and mapping.rating_scale is None and not rating_scale_given:
        problems.append(ImportProblem(key="rating_scale", reason="a rating column needs a rating_scale: a table "
                                      'like {"0": 1, "0.5": 3, "1": 5} or {"min": 0, "max": 1}'))
    if not mapping.rated:
        for key in ("rater", "codes", "comment"):
            if key in cols:
                problems.append(ImportProblem(key=f"columns.{key}", reason="needs a rating column"))
    return problems


# --- guessing a mapping from the column names --------------------------------------------------------------

#: Column names (lower case, letters and digits only) that each field is guessed from, best first.
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "question_id": ("questionid", "qid", "itemid", "id", "index", "uid"),
    "question": ("question", "questiontext", "query", "prompt", "instruction"),
    "reference": ("reference", "referenceanswer", "ref", "answer", "groundtruth", "gt", "gold", "target",
                  "correctanswer"),
    "choices": ("choices", "options"),
    "audio": ("audio", "audiobytes", "audiopath", "audiofile", "audiourl", "audioid", "wav", "filename", "file",
              "path", "url"),
    "category": ("category", "subset"),
    "sub_category": ("subcategory",),
    "modality": ("modality", "task"),
    "rationale": ("rationale", "explanation", "thinking"),
    "transcript": ("transcript", "transcription"),
    "lalm": ("model", "lalm", "modelname", "system", "lalmname"),
    "candidate": ("response", "candidate", "candidateanswer", "prediction", "modelprediction", "modeloutput",
                  "output", "answerprediction", "filteredresps", "generation", "hypothesis"),
    "rating": ("score", "rating", "humanscore", "humanrating", "correctness"),
    "rater": ("rater", "raterid", "annotator", "annotatorid", "worker", "workerid", "participant",
              "participantid", "judge"),
    "codes": ("codes", "feedbackcodes"),
    "comment": ("comment", "feedback", "comments"),
}


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def mapping_guess(names: Sequence[str]) -> dict[str, str]:
    """``{field: column}`` guessed from the column names ``names`` (case, spaces, ``_`` and ``-`` ignored; for
    ``a.b`` names the last part counts too); each column is used for one field at most."""
    squashed: dict[str, str] = {}
    for name in names:
        for variant in (name, name.rsplit(".", 1)[-1]):
            squashed.setdefault(_squash(variant), name)
    guess: dict[str, str] = {}
    used: set[str] = set()
    for key, synonyms in _SYNONYMS.items():
        for synonym in synonyms:
            column = squashed.get(synonym)
            if column is not None and column not in used:
                guess[key] = column
                used.add(column)
                break
    return guess


def rating_scale_guess(values: Iterable) -> dict | None:
    """A rating scale for the values seen in a rating column: 0/0.5/1 → ``{"0": 1, "0.5": 3, "1": 5}``, 0/1 →
    ``{"0": 1, "1": 5}``, integers within 1–5 → themselves, other numbers → ``{"min", "max"}`` of the values seen;
    None for text values (the admin writes the table)."""
    numbers = set()
    for value in values:
        if value is None or value == "":
            continue
        number = _number(value)
        if number is None:
            return None
        numbers.add(number)
    if not numbers:
        return None
    if numbers <= {0.0, 0.5, 1.0}:
        return {"0": 1, "0.5": 3, "1": 5} if 0.5 in numbers else {"0": 1, "1": 5}
    if numbers <= {1.0, 2.0, 3.0, 4.0, 5.0}:
        return {str(k): k for k in range(1, 6)}
    low, high = min(numbers), max(numbers)
    return {"min": low, "max": high} if low < high else None
