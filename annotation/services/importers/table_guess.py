"""Guessing a mapping for a table the import page has just read: fields from the column names, the rating column
and its scale from the values, per-answer attributes (candidate metadata) from columns whose value changes between
the answers to one question, and a toolkit judge's name and scale from its file (README, "Your own benchmark").

A guess is only the import page's starting point: the admin sees every choice as a drop-down and can change it.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from annotation.services.importers.table_locate import is_missing
from annotation.services.importers.table_mapping import RESERVED_METADATA, _number
from annotation.services.importers.table_sources import Table

#: Rows whose values the value-based guesses look at.
GUESS_ROWS = 5000
#: A column with more distinct values than this in the guessed rows is not an attribute to group answers by.
METADATA_MAX_VALUES = 20

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
    "rating": ("score", "rating", "humanscore", "humanrating", "correctness", "finalannotation", "humanannotation",
               "humanlabel", "iscorrect"),
    "rater": ("rater", "raterid", "annotator", "annotatorid", "worker", "workerid", "participant",
              "participantid", "judge"),
    "codes": ("codes", "feedbackcodes"),
    "comment": ("comment", "feedback", "comments"),
    "judge_score": ("ratescore", "judgescore"),
    "judge_explanation": ("judgeresponse", "judgeexplanation", "judgeoutput"),
    "judge_success": ("success", "judgesuccess"),
}
_JUDGE_FIELDS = ("judge_explanation", "judge_success")


def _squash(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def mapping_guess(names: Sequence[str]) -> dict[str, str]:
    """``{field: column}`` guessed from the column names ``names`` (case, spaces, ``_`` and ``-`` ignored; for
    ``a.b`` names the last part counts too); each column is used for one field at most. A judge's explanation or
    success column is guessed only beside its score column."""
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
    if "judge_score" not in guess:
        for key in _JUDGE_FIELDS:
            guess.pop(key, None)
    return guess


def _numbers(values: Iterable) -> set[float] | None:
    """The distinct numbers among ``values`` (empty cells skipped), or None when one is not a number."""
    numbers = set()
    for value in values:
        if is_missing(value):
            continue
        number = _number(value)
        if number is None:
            return None
        numbers.add(number)
    return numbers


def rating_scale_guess(values: Iterable) -> dict | None:
    """A rating scale for the values seen in a rating column: 0/0.5/1 → ``{"0": 1, "0.5": 3, "1": 5}``, 0/1 →
    ``{"0": 1, "1": 5}``, integers within 1–5 → themselves, other numbers → ``{"min", "max"}`` of the values seen;
    None for text values (the admin writes the table)."""
    numbers = _numbers(values)
    if not numbers:
        return None
    if numbers <= {0.0, 0.5, 1.0}:
        return {"0": 1, "0.5": 3, "1": 5} if 0.5 in numbers else {"0": 1, "1": 5}
    if numbers <= {1.0, 2.0, 3.0, 4.0, 5.0}:
        return {str(k): k for k in range(1, 6)}
    low, high = min(numbers), max(numbers)
    return {"min": low, "max": high} if low < high else None


def rating_column_guess(table: Table, *, used: set[str]) -> str | None:
    """The column that looks like a human correctness label when no column name said so: the first column not
    ``used`` whose values (first ``GUESS_ROWS`` rows) are numbers from 0/0.5/1 (at least two of them) — AQEval's
    ``final_annotation`` — or integers 1–5 with at least three of them. None when no column looks like one."""
    for name in table.names:
        if name in used:
            continue
        numbers = _numbers(table.column(name, 0, GUESS_ROWS))
        if not numbers:
            continue
        if (numbers <= {0.0, 0.5, 1.0} and len(numbers) >= 2) or (numbers <= {1.0, 2.0, 3.0, 4.0, 5.0}
                                                                   and len(numbers) >= 3):
            return name
    return None


def _question_keys(table: Table, guess: dict[str, str]) -> list | None:
    """The question each of the first rows belongs to, as the guessed mapping identifies it (id, or audio and
    question text); None when the guess identifies no question."""
    if "question_id" in guess:
        return table.column(guess["question_id"], 0, GUESS_ROWS)
    if "question" not in guess:
        return None
    texts = table.column(guess["question"], 0, GUESS_ROWS)
    audio = table.column(guess["audio"], 0, GUESS_ROWS) if "audio" in guess else [None] * len(texts)
    return [(str(a), str(t)) for a, t in zip(audio, texts, strict=True)]


def candidate_metadata_guess(table: Table, guess: dict[str, str]) -> dict[str, str]:
    """``{name: column}`` of the columns that look like attributes of a candidate answer: not mapped to a field,
    at most ``METADATA_MAX_VALUES`` distinct short texts, and different between two answers to the same question
    (AQEval's ``type``: binary, word, short, medium or long per answer). A column constant within every question
    is a property of the question, not of the answer, and is not guessed."""
    keys = _question_keys(table, guess)
    if keys is None:
        return {}
    used = set(guess.values())
    found = {}
    for name in table.names:
        if name in used or name.lower() in RESERVED_METADATA or "=" in name or "|" in name or len(name) > 60:
            continue
        values = table.column(name, 0, GUESS_ROWS)
        if not all(isinstance(v, str) and len(v) <= 100 for v in values if not is_missing(v)):
            continue
        distinct = {v for v in values if not is_missing(v)}
        if not 2 <= len(distinct) <= METADATA_MAX_VALUES:
            continue
        first: dict = {}
        if any(first.setdefault(key, value) != value for key, value in zip(keys, values, strict=True)
               if not is_missing(value)):
            found[name] = name
    return found


def judge_guess(table: Table, column: str) -> tuple[str, dict | None]:
    """A toolkit judge's name and scale from its file: AudioBench's ``*_judge_score.json`` names its metric
    (``{"llama3_70b_judge": {"judge_score": 56.0, ...}, "details": [...]}`` → ``audiobench:llama3-70b``) and its
    ``judge_score`` is the mean ``rate_score`` × 20 for the 0–5 prompt or × 100 for the binary (0/1) prompt
    (AudioBench, ``eval_llama3_70b.py``), which tells the scale; without that aggregate, 0/1 scores are read as the
    binary prompt and others as 0–5. ``("", None)`` when the column holds no numbers."""
    numbers = [n for v in table.column(column) if (n := _number(v)) is not None]
    name = ""
    scale = None
    for key, value in table.meta.items():
        if isinstance(value, dict) and "judge" in key and _number(value.get("judge_score")) is not None:
            name = "audiobench:" + key.replace("_judge", "").replace("_", "-")
            if numbers:
                mean = sum(numbers) / len(numbers)
                aggregate = float(value["judge_score"])
                if math.isclose(mean * 100, aggregate, rel_tol=1e-6, abs_tol=1e-6):
                    scale = {"min": 0, "max": 1}
                elif math.isclose(mean * 20, aggregate, rel_tol=1e-6, abs_tol=1e-6):
                    scale = {"min": 0, "max": 5}
            break
    if scale is None and numbers:
        scale = {"min": 0, "max": 1} if set(numbers) <= {0.0, 1.0} else {"min": 0, "max": max(5, max(numbers))}
    return name, scale


def _looks_remote(values: Iterable) -> bool:
    """True when the audio cells are URLs or bytes (found without an audio root)."""
    for value in values:
        if is_missing(value):
            continue
        if isinstance(value, bytes | bytearray | dict):
            return True
        return isinstance(value, str) and value.strip().lower().startswith(("http://", "https://"))
    return False


def mapping_guess_document(table: Table, *, audio_given: bool) -> dict:
    """The import page's first mapping for ``table``: fields from the column names, the rating column from its
    values when no name says so, the rating scale, candidate metadata, and — when no audio files were given and
    the audio column names files (not URLs or bytes) — ``"missing_audio": "allow"``, so a table without its
    audio imports and its questions wait for their audio."""
    columns = mapping_guess(table.names)
    if "rating" not in columns and (column := rating_column_guess(table, used=set(columns.values()))):
        columns["rating"] = column
    document: dict = {"layout": "long", "columns": columns, "imported_ratings": "complete"}
    if "rating" in columns:
        scale = rating_scale_guess(table.column(columns["rating"], 0, GUESS_ROWS))
        if scale is not None:
            document["rating_scale"] = scale
    metadata = candidate_metadata_guess(table, columns)
    if metadata:
        document["candidate_metadata"] = metadata
    if "audio" in columns and not audio_given and not _looks_remote(table.column(columns["audio"], 0, 50)):
        document["missing_audio"] = "allow"
    if "judge_score" in columns:
        name, scale = judge_guess(table, columns["judge_score"])
        document["judge"] = {k: v for k, v in (("name", name), ("scale", scale)) if v}
    return document


def starting_mapping(document: dict | None, table: Table, *, audio_given: bool) -> dict:
    """The mapping a new import starts from: ``document`` (a saved mapping or a preset) with a toolkit judge's
    name and scale read from the file when it maps a judge score the table has and does not name them; or, with
    no document, :func:`mapping_guess_document`."""
    if document is None:
        return mapping_guess_document(table, audio_given=audio_given)
    column = next((c for c in _options((document.get("columns") or {}).get("judge_score")) if c in table.names),
                  None)
    judge = dict(document.get("judge") or {})
    if column is not None and not (judge.get("name") and judge.get("scale")):
        name, scale = judge_guess(table, column)
        if name and not judge.get("name"):
            judge["name"] = name
        if scale and not judge.get("scale"):
            judge["scale"] = scale
        document = {**document, "judge": {k: v for k, v in judge.items() if v}}
    return document


def _options(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value) if isinstance(value, list) else []
