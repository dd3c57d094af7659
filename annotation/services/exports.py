"""Exports: the curated annotation dataset and the corrected benchmarks (ORCA paper, sections 3–5; Appendix A).

* :func:`dataset_export_orca_jsonl` — the rated dataset as ORCA JSONL, the upstream trainer's input.
* :func:`dataset_export` — the curated dataset in any of ORCA JSONL, CSV, Parquet and a Hugging Face ``datasets``
  folder, optionally split (unseen questions 8:1:1 or held-out LALMs, ORCA paper section 5.3), each with a
  ``README.md`` datasheet (counts, Krippendorff's alpha, licence, date).
* :func:`benchmark_export_corrected` — every question of a benchmark at its current version, in the benchmark's
  own format (MMAU JSON list or MMAR JSONL), with a changelog of the versions made since import.
* :func:`export_start` / :func:`export_run` — the same exports as ``Job(kind="export")`` rows: small ones run in
  the request, large ones in a Celery worker; the result is a zip file only admins may download.

Memory stays constant in the number of candidate answers: rows are read by keyset pagination (``id > last``,
``chunk_size`` at a time) as plain values, their ratings, judge scores and ORCA prediction fetched per chunk, and
every writer streams (Parquet row groups per chunk; the Hugging Face folder is built from the Parquet files by
Arrow, memory-mapped). What grows with the data is only the split lookup (one entry per question).
"""
from __future__ import annotations

import csv
import json
import logging
import os
import shutil
import uuid
import zipfile
from collections import defaultdict
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO

import orjson
from django.apps import apps
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from annotation.models import Benchmark, CandidateAnswer, Job, JudgeRating, Question, QuestionVersion, Rating
from annotation.quality.models import QUALITY_INVALID_REASON
from annotation.services.accounts import user_roles
from annotation.services.audit import audit_record
from annotation.services.splits import split_held_out_lalms, split_unseen_questions

#: Formats of :func:`dataset_export`.
DATASET_FORMATS = ("orca-jsonl", "csv", "parquet", "hf")
#: Split kinds of :func:`dataset_export`: none, unseen questions 8:1:1, held-out LALMs (ORCA paper, section 5.3).
SPLIT_KINDS = ("none", "unseen-questions", "held-out-lalms")
#: Benchmark formats of :func:`benchmark_export_corrected`.
BENCHMARK_FORMATS = ("mmau", "mmar")
#: Name of the single split when the dataset is not split.
UNSPLIT = "dataset"

logger = logging.getLogger(__name__)

_FILE_NAMES = {"orca-jsonl": "{split}.jsonl", "csv": "{split}.csv", "parquet": "{split}.parquet"}


def _json_text(value) -> str:
    """Compact JSON text of ``value``, non-ASCII kept as is (orjson: about ten times the standard library's speed,
    which is most of an export's CPU time)."""
    return orjson.dumps(value).decode()


class ExportError(ValueError):
    """An export cannot be made as asked: unknown format or split, unknown held-out LALM, nothing to export."""


class ExportCancelled(Exception):
    """The export's job was cancelled while it ran; nothing was written to the output folder."""


# --- reading: candidate answers as plain records, chunk by chunk ----------------------------------------------


def _candidate_selection(
    *,
    benchmark: Benchmark | None,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
    include_invalid: bool = False,
    after_pk: int = 0,
):
    """Candidate answers to export: on the current version with a valid rating, or (``include_invalid``) with any
    invalidated rating, on any version. ``after_pk`` keeps only candidate answers with a larger primary key."""
    # The rating subqueries carry the same ``candidate_id > after_pk`` bound: without it PostgreSQL merge-joins
    # from the first rating for every chunk, so the export grew quadratically with the number of chunks.
    # Ratings of gold items and attention checks are quality checks, never data (annotation/quality/models.py).
    ratings = Rating.objects.filter(candidate=OuterRef("pk"), candidate_id__gt=after_pk).exclude(
        invalid_reason=QUALITY_INVALID_REASON)
    has_valid = Exists(ratings.filter(is_valid=True))
    # "On its question's current version" as a semi-join on Question.current_version: the equivalent join
    # condition (question_version = question_version__question__current_version) is estimated at one row by
    # PostgreSQL, which then picks plans that sort every candidate for each chunk.
    current = Question.objects.filter(current_version__isnull=False).values("current_version_id")
    selected = Q(has_valid) & Q(question_version_id__in=current)
    if include_invalid:
        selected |= Q(Exists(ratings.filter(is_valid=False)))
    candidates = CandidateAnswer.objects.filter(selected)
    if after_pk:
        candidates = candidates.filter(pk__gt=after_pk)
    if benchmark is not None:
        candidates = candidates.filter(question_version__question__benchmark=benchmark)
    if question_ids is not None:
        candidates = candidates.filter(question_version__question_id__in=list(question_ids))
    if lalm_names is not None:
        candidates = candidates.filter(lalm__name__in=list(lalm_names))
    return candidates


_CANDIDATE_FIELDS = {
    "pk": "pk",
    "text": "text",
    "lalm": "lalm__name",
    "version_pk": "question_version_id",
    "version_number": "question_version__number",
    "current_version_pk": "question_version__question__current_version_id",
    "question_pk": "question_version__question_id",
    "external_id": "question_version__question__external_id",
    "benchmark": "question_version__question__benchmark__name",
    "modality": "question_version__question__modality",
    "category": "question_version__question__category",
    "sub_category": "question_version__question__sub_category",
    "choices": "question_version__question__choices",
    "question": "question_version__question_text",
    "reference": "question_version__reference_answer",
    "rationale": "question_version__rationale",
    "transcription": "question_version__transcript",
}
#: The candidate fields the ORCA JSONL rows need (no choices: decoding JSON per row costs time for nothing).
_ORCA_CANDIDATE_FIELDS = ("pk", "external_id", "lalm", "question", "reference", "rationale", "transcription",
                          "text", "modality", "category")


def _prediction_model():
    """The modelling app's ``Prediction`` model when that app is installed, else None.

    annotation never imports modelling (ARCHITECTURE.md); the app registry lets the export name the latest ORCA
    prediction without that import.
    """
    if not apps.is_installed("modelling"):
        return None
    try:
        return apps.get_model("modelling", "Prediction")
    except LookupError:
        return None


def _latest_predictions(*, after_pk: int, last_pk: int) -> dict[int, dict]:
    """Latest ORCA prediction of each candidate answer with ``after_pk < pk <= last_pk``."""
    prediction_model = _prediction_model()
    if prediction_model is None:
        return {}
    latest: dict[int, dict] = {}
    rows = (
        prediction_model.objects.filter(candidate_id__gt=after_pk, candidate_id__lte=last_pk)
        .order_by("candidate_id", "created_at", "id")
        .values_list("candidate_id", "model_version__name", "mu", "variance")
    )
    for candidate_pk, model_name, mu, variance in rows:
        latest[candidate_pk] = {"model": model_name, "mu": mu, "variance": variance}  # later rows win
    return latest


def _iter_chunks(
    *,
    fields: Collection[str],
    benchmark: Benchmark | None = None,
    chunk_size: int = 500,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
    include_invalid: bool = False,
) -> Iterator[tuple[list[tuple], int, int, dict[int, list[tuple]]]]:
    """Yield ``(candidate rows, after_pk, last_pk, ratings)`` chunk by chunk, in candidate id order.

    Candidate rows are tuples of ``fields`` (names of ``_CANDIDATE_FIELDS``, ``pk`` first); ``ratings`` maps a
    candidate pk to its ratings ``(score, codes, comment, annotator_id, is_valid, invalid_reason)`` in rating id
    order (valid ones only unless ``include_invalid``). Two queries per chunk, both bounded by the chunk's primary
    key range ``after_pk < pk <= last_pk`` (index range scans; no long ``IN`` lists to send and parse).
    """
    # Choices come as JSON text, decoded by orjson in ``_record``: Django's JSONField converter costs more per row
    # than the rest of the row together.
    lookups = [Cast(_CANDIDATE_FIELDS[name], TextField()) if name == "choices" else _CANDIDATE_FIELDS[name]
               for name in fields]
    # Keyset pagination (id > last, ``chunk_size`` rows): an index scan on the primary key per chunk, and no
    # server-side cursor (PostgreSQL plans cursors for the first rows, which made the whole export crawl).
    after_pk = 0
    while True:
        selection = _candidate_selection(
            benchmark=benchmark, question_ids=question_ids, lalm_names=lalm_names, include_invalid=include_invalid,
            after_pk=after_pk,
        )
        rows = list(selection.order_by("pk").values_list(*lookups)[:chunk_size])
        if not rows:
            return
        last_pk = rows[-1][0]
        ratings: dict[int, list[tuple]] = defaultdict(list)
        rating_rows = Rating.objects.filter(candidate_id__gt=after_pk, candidate_id__lte=last_pk).exclude(
            invalid_reason=QUALITY_INVALID_REASON)
        if not include_invalid:
            rating_rows = rating_rows.filter(is_valid=True)
        for candidate_pk, *rating in rating_rows.order_by("candidate_id", "id").values_list(
            "candidate_id", "score", "codes", "comment", "annotator_id", "is_valid", "invalid_reason"
        ):
            ratings[candidate_pk].append(rating)
        yield rows, after_pk, last_pk, ratings
        if len(rows) < chunk_size:
            return
        after_pk = last_pk


def _iter_records(
    *,
    benchmark: Benchmark | None = None,
    chunk_size: int = 500,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
    include_invalid: bool = False,
    extras: bool = True,
) -> Iterator[list[dict]]:
    """Yield chunks of export records (dicts), in candidate id order; see :func:`dataset_export` for the fields.

    Two queries per chunk (candidates, ratings), two more with ``extras`` (judge scores, ORCA predictions).
    """
    names = list(_CANDIDATE_FIELDS)
    prediction_model = _prediction_model()
    # Two queries per chunk saved when there are no judge ratings or ORCA predictions at all.
    judged = extras and JudgeRating.objects.exists()
    predicted = extras and prediction_model is not None and prediction_model.objects.exists()
    for rows, after_pk, last_pk, ratings in _iter_chunks(
        fields=names, benchmark=benchmark, chunk_size=chunk_size, question_ids=question_ids,
        lalm_names=lalm_names, include_invalid=include_invalid,
    ):
        judges = defaultdict(list)
        predictions = {}
        if judged:
            for candidate_pk, judge, variant, mode, score in (
                JudgeRating.objects.filter(candidate_id__gt=after_pk, candidate_id__lte=last_pk)
                .order_by("candidate_id", "judge_name", "prompt_variant")
                .values_list("candidate_id", "judge_name", "prompt_variant", "mode", "score")
            ):
                judges[candidate_pk].append({"judge": judge, "prompt_variant": variant, "mode": mode, "score": score})
        if predicted:
            predictions = _latest_predictions(after_pk=after_pk, last_pk=last_pk)
        records = []
        for values in rows:
            row = dict(zip(names, values, strict=True))
            pk = row["pk"]
            records.append(_record(row, ratings.get(pk, ()), judges.get(pk, []), predictions.get(pk)))
        yield records


def _feedback_entry(*, codes: str, comment: str) -> list[str] | None:
    """Seed-108 feedback for one rating: null, or lower-case codes followed by the comment's lines."""
    if not codes and not comment:
        return None
    return [*codes.lower()] + (comment.split("\n") if comment else [])


def _record(row: dict, ratings: Collection[tuple], judges: list[dict], prediction: dict | None) -> dict:
    valid, invalid, scores, codes, comments, annotators, scored = [], [], [], [], [], [], []
    for rating in ratings:
        if not rating[4]:
            invalid.append(rating)
            continue
        score, code, comment, annotator = rating[0], rating[1], rating[2], rating[3]
        valid.append(rating)
        scores.append(score)
        codes.append(code)
        comments.append(comment)
        annotators.append(f"annotator-{annotator}")
        if score is not None:
            scored.append(score)
    return {
        "id": f"{row['external_id']}_{row['lalm']}",
        "benchmark": row["benchmark"],
        "question_id": row["external_id"],
        "question_pk": row["question_pk"],
        "question_version": row["version_number"],
        "is_current_version": row["version_pk"] == row["current_version_pk"],
        "question": row["question"],
        "choices": [str(choice) for choice in (orjson.loads(row["choices"]) if row["choices"] else None) or ()],
        "reference": row["reference"],
        "rationale": row["rationale"],
        "transcription": row["transcription"],
        "candidate": row["text"],
        "lalm": row["lalm"],
        "modality": row["modality"],
        "category": row["category"],
        "sub_category": row["sub_category"],
        "ratings": scores,
        "codes": codes,
        "comments": comments,
        "annotators": annotators,
        "n_ratings": len(valid),
        "mean_score": sum(scored) / len(scored) if scored else None,
        "judge_scores": judges,
        "orca_model": prediction["model"] if prediction else None,
        "orca_mu": prediction["mu"] if prediction else None,
        "orca_variance": prediction["variance"] if prediction else None,
        "invalidated": [
            {"score": r[0], "codes": r[1], "comment": r[2], "annotator": f"annotator-{r[3]}", "reason": r[5]}
            for r in invalid
        ],
    }


_ORCA_KEYS = ("id", "question", "reference", "rationale", "transcription", "candidate", "ratings", "feedback",
              "lalm", "modality", "category")


def _orca_row(record: dict) -> dict:
    """The ORCA JSONL row of a record: the seed-108 item's fields plus ``lalm``, ``modality`` and ``category``.

    ``feedback`` (seed-108 format) is built here from the valid ratings' codes and comments: only JSONL needs it.
    """
    feedback = [_feedback_entry(codes=code, comment=comment)
                for code, comment in zip(record["codes"], record["comments"], strict=True)]
    return {key: feedback if key == "feedback" else record[key] for key in _ORCA_KEYS}


def _orca_row_curated(record: dict, *, include_invalid: bool) -> dict:
    """ORCA JSONL row of the curated export: the trainer's fields, then the curated extras."""
    row = _orca_row(record)
    row.update(
        benchmark=record["benchmark"],
        question_version=record["question_version"],
        sub_category=record["sub_category"],
        codes=record["codes"],
        comments=record["comments"],
        annotators=record["annotators"],
        judge_scores=record["judge_scores"],
        orca_prediction=(
            {"model": record["orca_model"], "mu": record["orca_mu"], "variance": record["orca_variance"]}
            if record["orca_model"] is not None
            else None
        ),
    )
    if include_invalid:
        row.update(is_current_version=record["is_current_version"], invalidated=record["invalidated"])
    return row


def _write_rows(
    fh: IO[str],
    *,
    benchmark: Benchmark | None,
    chunk_size: int,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
) -> int:
    """Write ORCA JSONL lines (``_ORCA_KEYS``, in that order) straight from the value tuples: no record dicts."""
    rows_written = 0
    encode = _json_text
    for rows, _, _, ratings in _iter_chunks(
        fields=_ORCA_CANDIDATE_FIELDS, benchmark=benchmark, chunk_size=chunk_size, question_ids=question_ids,
        lalm_names=lalm_names,
    ):
        lines = []
        for pk, external_id, lalm, question, reference, rationale, transcription, text, modality, category in rows:
            rated = ratings.get(pk, ())
            lines.append(encode({
                "id": f"{external_id}_{lalm}", "question": question, "reference": reference, "rationale": rationale,
                "transcription": transcription, "candidate": text, "ratings": [r[0] for r in rated],
                "feedback": [_feedback_entry(codes=r[1], comment=r[2]) if r[1] or r[2] else None for r in rated],
                "lalm": lalm, "modality": modality, "category": category,
            }))
        lines.append("")
        fh.write("\n".join(lines))
        rows_written += len(rows)
    return rows_written


def dataset_export_orca_jsonl(
    *,
    out: Path | IO[str],
    benchmark: Benchmark | None = None,
    chunk_size: int = 500,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
) -> int:
    """Write the rated dataset as ORCA JSONL and return the number of rows written.

    One JSON object per line for each candidate answer on its question's *current* version that has at least one
    valid rating (optionally only the questions of ``benchmark``, only the questions whose primary keys are in
    ``question_ids`` and only the answers of the LALMs named in ``lalm_names``; ORCA training writes its
    train/dev/test splits this way), in candidate id order:
    ``{id: "<external_id>_<LALM name>", question, reference, rationale, transcription, candidate,
    ratings: [score 1–5 or null, ...], feedback: [null | ["a", "r", ..., "comment line", ...], ...],
    lalm, modality, category}``: the fields of an ORCA seed-108 item, its key in ``id``. ``ratings`` holds the
    valid ratings only, in rating id order; ``feedback`` is the parallel list in the seed-108 format (lower-case
    codes, then the comment split into lines; null when a rating has neither).

    Memory stays constant: candidates are read ``chunk_size`` at a time with their valid ratings, and written line
    by line. ``out`` is a text stream or a file path; a path is written to a temporary file beside it and renamed
    at the end, so a failed export never leaves a partial file.
    """
    filters = dict(benchmark=benchmark, chunk_size=chunk_size, question_ids=question_ids, lalm_names=lalm_names)
    if not isinstance(out, str | os.PathLike):
        return _write_rows(out, **filters)
    path = Path(out)
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh:
            rows = _write_rows(fh, **filters)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    return rows


# --- Krippendorff's alpha from streamed ratings -----------------------------------------------------------------


class _AlphaAccumulator:
    """Krippendorff's alpha (interval and ordinal) over 1–5 scores, accumulated item by item.

    Keeps only the 5×5 coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-reliability"), so it
    runs in constant memory during a streaming export. Items with fewer than two scores are not pairable and are
    ignored, as in the ``krippendorff`` package.
    """

    def __init__(self) -> None:
        self.coincidence = [[0.0] * 5 for _ in range(5)]

    def add(self, scores: list[int | None]) -> None:
        values = [s for s in scores if s is not None]
        m = len(values)
        if m < 2:
            return
        counts = [0] * 5
        for value in values:
            counts[value - 1] += 1
        present = [(c, n) for c, n in enumerate(counts) if n]  # only the values used: 1-3 of 5 for most items
        for c, n_c in present:
            row = self.coincidence[c]
            for k, n_k in present:
                pairs = n_c * (n_k - 1 if c == k else n_k)
                if pairs:
                    row[k] += pairs / (m - 1)

    def alpha(self, level: str) -> float | None:
        """Alpha at ``level`` ("interval" or "ordinal"); None when there is no pairable value or no variation."""
        o = self.coincidence
        n_c = [sum(row) for row in o]
        n = sum(n_c)
        if n <= 1:
            return None

        def delta2(c: int, k: int) -> float:
            if level == "interval":
                return float((c - k) ** 2)
            low, high = min(c, k), max(c, k)
            return (sum(n_c[low : high + 1]) - (n_c[c] + n_c[k]) / 2) ** 2

        observed = sum(o[c][k] * delta2(c, k) for c in range(5) for k in range(5))
        expected = sum(n_c[c] * n_c[k] * delta2(c, k) for c in range(5) for k in range(5))
        if expected == 0:
            return None
        return 1.0 - (n - 1) * observed / expected


# --- writers ----------------------------------------------------------------------------------------------------


#: Columns of the CSV, Parquet and Hugging Face outputs, in order.
TABLE_COLUMNS = (
    "id", "benchmark", "question_id", "question_version", "is_current_version", "question", "choices", "reference",
    "rationale", "transcription", "candidate", "lalm", "modality", "category", "sub_category", "ratings", "codes",
    "comments", "annotators", "n_ratings", "mean_score", "judge_scores", "orca_model", "orca_mu", "orca_variance",
    "invalidated",
)


#: TABLE_COLUMNS holding lists of values or objects, written to CSV as JSON text.
_CSV_JSON_COLUMNS = frozenset({"choices", "ratings", "codes", "comments", "annotators", "judge_scores", "invalidated"})


#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
CSV_FORMULA_STARTS = frozenset("=+-@\t\r")


def csv_cell(value: str) -> str:
    """``value`` made safe for a spreadsheet: text starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return
    gets a leading apostrophe (OWASP, "CSV injection"), so Excel, LibreOffice and Google Sheets show it as text
    instead of running it. Other text is returned unchanged."""
    return "'" + value if value and value[0] in CSV_FORMULA_STARTS else value


def _csv_rows(records: list[dict]) -> Iterator[list]:
    """CSV rows of ``records`` in ``TABLE_COLUMNS`` order: lists and objects as JSON text, None as "", text made
    safe for spreadsheets (:func:`csv_cell`).

    A per-column decision instead of a type test per cell (2.6 million cells for 100,000 rows).
    """
    encode = _json_text
    kinds = [(column, column in _CSV_JSON_COLUMNS) for column in TABLE_COLUMNS]
    for record in records:
        yield [
            (encode(value) if value else "[]") if is_json
            else "" if value is None
            else csv_cell(value) if type(value) is str
            else value
            for column, is_json in kinds
            for value in (record[column],)
        ]


def _arrow_schema():
    import pyarrow as pa

    text = pa.string()
    return pa.schema(
        [
            ("id", text), ("benchmark", text), ("question_id", text), ("question_version", pa.int32()),
            ("is_current_version", pa.bool_()), ("question", text), ("choices", pa.list_(text)),
            ("reference", text), ("rationale", text), ("transcription", text), ("candidate", text), ("lalm", text),
            ("modality", text), ("category", text), ("sub_category", text), ("ratings", pa.list_(pa.int8())),
            ("codes", pa.list_(text)), ("comments", pa.list_(text)), ("annotators", pa.list_(text)),
            ("n_ratings", pa.int32()), ("mean_score", pa.float64()),
            ("judge_scores", pa.list_(pa.struct([("judge", text), ("prompt_variant", text), ("mode", text),
                                                 ("score", pa.float64())]))),
            ("orca_model", text), ("orca_mu", pa.float64()), ("orca_variance", pa.float64()),
            ("invalidated", pa.list_(pa.struct([
                ("score", pa.int8()), ("codes", text), ("comment", text), ("annotator", text), ("reason", text),
            ]))),
        ]
    )


class _SplitWriters:
    """The open output files of one split, one per text/table format."""

    def __init__(self, *, folder: Path, split: str, formats: Collection[str], include_invalid: bool):
        self.include_invalid = include_invalid
        self.files: list[IO] = []
        self.jsonl = self.csv = self.parquet = None
        if "orca-jsonl" in formats:
            self.jsonl = self._open(folder / _FILE_NAMES["orca-jsonl"].format(split=split))
        if "csv" in formats:
            fh = self._open(folder / _FILE_NAMES["csv"].format(split=split), newline="")
            self.csv = csv.writer(fh)
            self.csv.writerow(TABLE_COLUMNS)
        if "parquet" in formats or "hf" in formats:
            import pyarrow.parquet as pq

            self.schema = _arrow_schema()
            self.parquet = pq.ParquetWriter(folder / _FILE_NAMES["parquet"].format(split=split), self.schema)

    def _open(self, path: Path, **kwargs) -> IO[str]:
        fh = path.open("w", encoding="utf-8", **kwargs)
        self.files.append(fh)
        return fh

    def write(self, records: list[dict]) -> None:
        if self.jsonl is not None:
            self.jsonl.write(
                "".join(
                    _json_text(_orca_row_curated(r, include_invalid=self.include_invalid)) + "\n"
                    for r in records
                )
            )
        if self.csv is not None:
            self.csv.writerows(_csv_rows(records))
        if self.parquet is not None:
            import pyarrow as pa

            table = pa.Table.from_pylist([{c: r[c] for c in TABLE_COLUMNS} for r in records], schema=self.schema)
            self.parquet.write_table(table)

    def close(self) -> None:
        for fh in self.files:
            fh.close()
        if self.parquet is not None:
            self.parquet.close()


@dataclass
class SplitCounts:
    """Counts of one split of an export."""

    rows: int = 0
    ratings: int = 0
    invalidated: int = 0
    questions: set = field(default_factory=set)
    lalms: set = field(default_factory=set)

    def as_dict(self) -> dict:
        return {
            "rows": self.rows,
            "ratings": self.ratings,
            "invalidated_ratings": self.invalidated,
            "questions": len(self.questions),
            "lalms": len(self.lalms),
        }


@dataclass
class DatasetExportSummary:
    """What :func:`dataset_export` wrote: files (relative to the folder), counts per split and alpha."""

    folder: Path
    files: list[str]
    splits: dict[str, dict]
    rows: int
    ratings: int
    alpha_interval: float | None
    alpha_ordinal: float | None


def _split_plan(
    *, selection, split: str, seed: int, held_out_lalms: Collection[str]
) -> tuple[list[str], Callable[[dict], str]]:
    """(split names, record -> split name) for ``split``; see :func:`dataset_export`."""
    if split == "none":
        return [UNSPLIT], lambda record: UNSPLIT
    questions = (
        selection.order_by()
        .values_list(
            "question_version__question_id",
            "question_version__question__modality",
            "question_version__question__category",
        )
        .distinct()
    )
    if split == "unseen-questions":
        parts = split_unseen_questions(questions=list(questions), seed=seed)
        of_question = {qid: name for name, ids in parts.items() for qid in ids}
        return ["train", "dev", "test"], lambda record: of_question[record["question_pk"]]
    lalms = set(selection.order_by().values_list("lalm__name", flat=True).distinct())
    try:
        by_lalm = split_held_out_lalms(lalm_names=lalms, held_out=held_out_lalms)
    except ValueError as error:
        raise ExportError(f"held-out LALMs: {error}") from error
    train_questions = selection.filter(lalm__name__in=sorted(by_lalm["train"])).order_by().values_list(
        "question_version__question_id",
        "question_version__question__modality",
        "question_version__question__category",
    ).distinct()
    parts = split_unseen_questions(questions=list(train_questions), seed=seed, ratios=(8 / 9, 1 / 9, 0.0))
    of_question = {qid: name for name, ids in parts.items() for qid in ids}
    held = set(by_lalm["test"])
    return ["train", "dev", "test"], lambda r: "test" if r["lalm"] in held else of_question[r["question_pk"]]


def dataset_export(
    *,
    out_dir: Path,
    formats: Collection[str] = ("orca-jsonl",),
    benchmark: Benchmark | None = None,
    include_invalid: bool = False,
    split: str = "none",
    seed: int = 0,
    held_out_lalms: Collection[str] = (),
    licence: str = "",
    chunk_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> DatasetExportSummary:
    """Write the curated annotation dataset into ``out_dir`` and return what was written.

    Rows: one per candidate answer on its question's current version with at least one valid rating (optionally
    only ``benchmark``'s), in candidate id order. ``include_invalid`` adds candidate answers whose ratings were
    invalidated (any version; ``is_current_version`` says which) and lists those ratings with their reason in
    ``invalidated``; ``ratings`` always holds valid ratings only.

    Fields (``TABLE_COLUMNS``): id ``<external_id>_<LALM>``, benchmark, question_id, question_version (number),
    is_current_version, question, choices, reference, rationale, transcription, candidate, lalm, modality,
    category, sub_category, ratings (1–5 or null, rating id order), codes (subset of QARUE per rating), comments,
    annotators (pseudonyms ``annotator-<n>``), n_ratings, mean_score (mean of the scores, 1–5, null if none),
    judge_scores ([{judge, prompt_variant, mode, score 1–5 | null}]; mode ``generate``, ``probability`` or
    ``probability_yesno``), orca_model / orca_mu (0–1) / orca_variance
    (0–0.25) of the latest ORCA prediction (null when none), invalidated ([{score, codes, comment, annotator,
    reason}]).

    Files per split (``dataset`` unsplit, else ``train``/``dev``/``test``): ``<split>.jsonl`` (ORCA JSONL: the
    seed-108 fields id, question, reference, rationale, transcription, candidate, ratings, feedback first, then
    the extras), ``<split>.csv`` (lists and objects as JSON text), ``<split>.parquet`` (typed, see
    ``_arrow_schema``), ``hf/`` (``datasets.DatasetDict.save_to_disk``, one split each) and ``README.md``.

    Args:
        formats: any of :data:`DATASET_FORMATS`.
        split: ``none``; ``unseen-questions`` (8:1:1 by question, stratified by modality then category, seeded;
            no question in two splits); ``held-out-lalms`` (the ``held_out_lalms``' answers are ``test``; the other
            LALMs' questions split 8:1 into train and dev). ORCA paper, section 5.3.
        seed: seed of the split.
        licence: licence text for the datasheet (default: the benchmarks' own licences).
        progress: called with the number of rows written so far after each chunk; may raise
            :class:`ExportCancelled` to stop (nothing is left in ``out_dir`` then).

    Writes into a temporary folder beside ``out_dir`` and moves the files in at the end, so a failed or cancelled
    export leaves ``out_dir`` as it was.

    Raises:
        ExportError: unknown format or split, held-out LALMs missing or unknown.
    """
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in DATASET_FORMATS]
    if unknown or not formats:
        raise ExportError(f"formats must be some of {', '.join(DATASET_FORMATS)}; got {', '.join(formats) or 'none'}")
    if split not in SPLIT_KINDS:
        raise ExportError(f"split must be one of {', '.join(SPLIT_KINDS)}; got {split!r}")
    if split == "held-out-lalms" and not held_out_lalms:
        raise ExportError("split held-out-lalms needs the names of the LALMs to hold out")
    selection = _candidate_selection(benchmark=benchmark, include_invalid=include_invalid)
    split_names, split_of = _split_plan(selection=selection, split=split, seed=seed, held_out_lalms=held_out_lalms)

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = out_dir.parent / f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        writers = {
            name: _SplitWriters(folder=work, split=name, formats=formats, include_invalid=include_invalid)
            for name in split_names
        }
        counts = {name: SplitCounts() for name in split_names}
        alpha = _AlphaAccumulator()
        written = 0
        try:
            for chunk in _iter_records(benchmark=benchmark, chunk_size=chunk_size, include_invalid=include_invalid):
                routed = defaultdict(list)
                for record in chunk:
                    name = split_of(record)
                    routed[name].append(record)
                    c = counts[name]
                    c.rows += 1
                    c.ratings += record["n_ratings"]
                    c.invalidated += len(record["invalidated"])
                    c.questions.add(record["question_pk"])
                    c.lalms.add(record["lalm"])
                    alpha.add(record["ratings"])
                for name, records in routed.items():
                    writers[name].write(records)
                written += len(chunk)
                if progress is not None:
                    progress(written)
        finally:
            for writer in writers.values():
                writer.close()
        if "hf" in formats:
            _save_hf(folder=work, split_names=split_names)
        if "parquet" not in formats:
            for name in split_names:
                (work / _FILE_NAMES["parquet"].format(split=name)).unlink(missing_ok=True)
        summary = DatasetExportSummary(
            folder=out_dir,
            files=[],
            splits={name: counts[name].as_dict() for name in split_names},
            rows=written,
            ratings=sum(c.ratings for c in counts.values()),
            alpha_interval=alpha.alpha("interval"),
            alpha_ordinal=alpha.alpha("ordinal"),
        )
        (work / "README.md").write_text(
            _datasheet(
                summary=summary,
                formats=formats,
                benchmark=benchmark,
                include_invalid=include_invalid,
                split=split,
                seed=seed,
                held_out_lalms=held_out_lalms,
                licence=licence,
            ),
            encoding="utf-8",
        )
        out_dir.mkdir(exist_ok=True)
        for entry in sorted(work.iterdir()):
            target = out_dir / entry.name
            if target.is_dir():
                shutil.rmtree(target)
            entry.replace(target)
        summary.files = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())
        return summary
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _save_hf(*, folder: Path, split_names: list[str]) -> None:
    """``hf/``: a ``datasets.DatasetDict`` of the Parquet files, saved with ``save_to_disk`` (memory-mapped)."""
    import datasets

    cache = folder / ".hf-cache"
    parts = {}
    for name in split_names:
        parts[name] = datasets.Dataset.from_parquet(
            str(folder / _FILE_NAMES["parquet"].format(split=name)), cache_dir=str(cache), keep_in_memory=False
        )
    datasets.DatasetDict(parts).save_to_disk(str(folder / "hf"))
    del parts
    shutil.rmtree(cache, ignore_errors=True)


#: Extra datasheet sections: callables ``(benchmark or None) -> Markdown text`` appended to every dataset export's
#: ``README.md``. Apps that annotation may not import add theirs here (modelling's leaderboard table, registered in
#: ``ModellingConfig.ready``), so the datasheet gets their figures without annotation importing them.
DATASHEET_SECTIONS: list[Callable[[Benchmark | None], str]] = []


def datasheet_section_register(section: Callable[[Benchmark | None], str]) -> None:
    """Add ``section`` to :data:`DATASHEET_SECTIONS` once (registering the same callable twice is a no-op)."""
    if section not in DATASHEET_SECTIONS:
        DATASHEET_SECTIONS.append(section)


def _fmt_alpha(value: float | None) -> str:
    return "n/a (fewer than two scores per item, or no variation)" if value is None else f"{value:.4f}"


def _datasheet(
    *,
    summary: DatasetExportSummary,
    formats: Collection[str],
    benchmark: Benchmark | None,
    include_invalid: bool,
    split: str,
    seed: int,
    held_out_lalms: Collection[str],
    licence: str,
) -> str:
    benchmarks = [benchmark] if benchmark is not None else list(Benchmark.objects.order_by("name"))
    if not licence:
        licence = "; ".join(f"{b.name}: {b.licence or 'not stated'}" for b in benchmarks) or "not stated"
    lines = [
        "# ORCA curated annotation dataset",
        "",
        f"- Exported: {timezone.now().isoformat(timespec='seconds')}",
        f"- Benchmarks: {', '.join(b.name for b in benchmarks) or 'none'}",
        f"- Licence: {licence}",
        f"- Formats: {', '.join(formats)}",
        f"- Rows (candidate answers): {summary.rows}",
        f"- Valid ratings: {summary.ratings}",
        f"- Invalidated ratings included: {'yes, in `invalidated` with their reason' if include_invalid else 'no'}",
        f"- Krippendorff's alpha (interval, valid scored ratings): {_fmt_alpha(summary.alpha_interval)}",
        f"- Krippendorff's alpha (ordinal, valid scored ratings): {_fmt_alpha(summary.alpha_ordinal)}",
    ]
    if split == "unseen-questions":
        lines.append(f"- Split: unseen questions, train/dev/test 8:1:1 stratified by modality then category, seed {seed}"
                     " (ORCA paper, section 5.3); no question is in two splits")
    elif split == "held-out-lalms":
        lines.append(f"- Split: held-out LALMs {', '.join(sorted(held_out_lalms))} form `test`; the other LALMs' "
                     f"questions are split 8:1 into train/dev, seed {seed} (ORCA paper, section 5.3)")
    else:
        lines.append("- Split: none (one `dataset` split)")
    lines += ["", "## Splits", "", "| split | rows | ratings | invalidated | questions | LALMs |", "|---|---|---|---|---|---|"]
    for name, c in summary.splits.items():
        lines.append(
            f"| {name} | {c['rows']} | {c['ratings']} | {c['invalidated_ratings']} | {c['questions']} | {c['lalms']} |"
        )
    lines += [
        "",
        "## Rows",
        "",
        "One row per candidate answer (an LALM's answer to one question version). Ratings are human correctness "
        "scores 1 (not correct) to 5 (completely correct), null only with code U or E; feedback codes: "
        "Q incomplete question, A had to use audio, R reference answer incorrect/incomplete, U unable to judge "
        "(ambiguous), E unable to judge (expertise) — ORCA paper, Appendix A.",
        "",
        "Columns: " + ", ".join(f"`{c}`" for c in TABLE_COLUMNS) + ".",
        "",
        "`<split>.jsonl` is ORCA JSONL: `id`, `question`, `reference`, `rationale`, `transcription`, `candidate`, "
        "`ratings`, `feedback` (seed-108 format: lower-case codes then comment lines, null when none) are the "
        "trainer's input; the other keys are extras. `<split>.csv` holds lists and objects as JSON text. "
        "`<split>.parquet` and `hf/` (`datasets.load_from_disk`) are typed.",
        "",
        "Annotators are pseudonyms (`annotator-<n>`), stable within one platform.",
        "",
    ]
    for section in DATASHEET_SECTIONS:
        lines += [section(benchmark).rstrip("\n"), ""]
    return "\n".join(lines)


# --- the corrected benchmark --------------------------------------------------------------------------------------


def benchmark_format_of(benchmark: Benchmark) -> str:
    """``mmar`` when the benchmark was imported from a JSONL file (MMAR meta), else ``mmau`` (a JSON list)."""
    return "mmar" if benchmark.source.lower().endswith(".jsonl") else "mmau"


def _benchmark_record(question: Question, version: QuestionVersion, file_format: str) -> dict:
    """One item in the benchmark's own format (the fields the importer reads), plus rationale and transcript."""
    record = {"id": question.external_id}
    if file_format == "mmar":
        record.update(audio_path=question.audio_ref, question=version.question_text, choices=question.choices,
                      answer=version.reference_answer, modality=question.modality_detail or question.modality,
                      category=question.category, **{"sub-category": question.sub_category},
                      thinking=version.rationale)
    else:
        record.update(audio_id=question.audio_ref, question=version.question_text, choices=question.choices,
                      answer=version.reference_answer, task=question.modality_detail or question.modality,
                      category=question.category, **{"sub-category": question.sub_category},
                      rationale=version.rationale)
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
    data_name = f"{slug}.jsonl" if file_format == "mmar" else f"{slug}.json"
    try:
        questions = (
            Question.objects.filter(benchmark=benchmark, current_version__isnull=False)
            .exclude(status=Question.Status.RETIRED)
            .select_related("current_version")
        )
        written = 0
        with (work / data_name).open("w", encoding="utf-8") as fh:
            if file_format == "mmau":
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
                    if file_format == "mmar":
                        fh.write(record + "\n")
                    else:
                        fh.write(("," if written else "") + "\n  " + record)
                    written += 1
                if progress is not None:
                    progress(written)
            if file_format == "mmau":
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


# --- export jobs ------------------------------------------------------------------------------------------------

#: What an export job makes.
EXPORT_KINDS = ("dataset", "benchmark")


def _export_folder(job_pk: int) -> Path:
    return Path(settings.EXPORT_DIR) / f"job-{job_pk}"


def export_archive_path(job: Job) -> Path:
    """Where the zip file of export job ``job`` is (or will be)."""
    return Path(settings.EXPORT_DIR) / f"export-{job.pk}.zip"


def _access_exports(user) -> None:
    if "admin" not in user_roles(user):
        raise PermissionDenied("Only admins may export datasets.")


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
    _access_exports(requested_by)
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
        bad = [f for f in formats if f not in DATASET_FORMATS]
        if bad or not formats:
            raise ExportError(f"formats must be some of {', '.join(DATASET_FORMATS)}")
        if split not in SPLIT_KINDS:
            raise ExportError(f"split must be one of {', '.join(SPLIT_KINDS)}")
        if split == "held-out-lalms" and not held_out_lalms:
            raise ExportError("split held-out-lalms needs the names of the LALMs to hold out")
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
            from annotation.tasks import export_job_task

            transaction.on_commit(lambda: export_job_task.delay(job.pk))
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
    now = timezone.now()
    if not Job.objects.filter(pk=job_pk, kind=Job.Kind.EXPORT, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=now, heartbeat_at=now
    ):
        return ""
    job = Job.objects.select_related("benchmark").get(pk=job_pk)
    params = job.params

    def progress(done: int) -> None:
        updated = Job.objects.filter(pk=job_pk, status=Job.Status.RUNNING).update(
            done=done, heartbeat_at=timezone.now()
        )
        if not updated:
            raise ExportCancelled(f"export job {job_pk} was cancelled")

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
            }
        archive = export_archive_path(job)
        partial = archive.with_name(archive.name + ".partial")
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    zf.write(path, arcname=str(path.relative_to(folder)))
        partial.replace(archive)
        shutil.rmtree(folder, ignore_errors=True)
    except ExportCancelled:
        shutil.rmtree(folder, ignore_errors=True)
        return Job.Status.CANCELLED
    except Exception as error:  # the job row must say why it failed; the worker logs the traceback
        shutil.rmtree(folder, ignore_errors=True)
        with transaction.atomic():
            Job.objects.filter(pk=job_pk, status=Job.Status.RUNNING).update(
                status=Job.Status.FAILED, error=f"{type(error).__name__}: {error}"[:5000], finished_at=timezone.now()
            )
            audit_record(actor=None, actor_label=f"job {job_pk}", action="export.fail", obj=job,
                         old={"status": Job.Status.RUNNING}, new={"status": Job.Status.FAILED, "error": str(error)})
        logger.exception("export job %s failed", job_pk)
        return Job.Status.FAILED
    done_rows = result.get("rows", result.get("questions", 0))
    with transaction.atomic():
        finished = Job.objects.filter(pk=job_pk, status=Job.Status.RUNNING).update(
            status=Job.Status.DONE,
            done=done_rows,
            total=done_rows,
            params={**params, "result": result},
            finished_at=timezone.now(),
            heartbeat_at=timezone.now(),
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
    from annotation.tasks import export_job_task

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
                transaction.on_commit(lambda pk=job.pk: export_job_task.delay(pk))
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
                transaction.on_commit(lambda pk=job.pk: export_job_task.delay(pk))
                changed += 1
    return changed


def export_download_path(*, user, job: Job) -> Path:
    """The zip file of a finished export job, for an admin.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        FileNotFoundError: the job is not a finished export or its file is gone.
    """
    _access_exports(user)
    path = export_archive_path(job)
    if job.kind != Job.Kind.EXPORT or job.status != Job.Status.DONE or not path.is_file():
        raise FileNotFoundError(f"export job {job.pk} has no file to download ({job.status})")
    return path


def export_jobs_for_user(*, user):
    """Export jobs, newest first (admins only).

    Raises:
        PermissionDenied: ``user`` is not an admin.
    """
    _access_exports(user)
    return Job.objects.filter(kind=Job.Kind.EXPORT).select_related("benchmark", "created_by").order_by("-created_at")


def export_job_for_user(*, user, job_pk: int) -> Job:
    """Export job ``job_pk`` for an admin.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        Job.DoesNotExist: no such export job.
    """
    return export_jobs_for_user(user=user).get(pk=job_pk)
