"""The rated dataset as ORCA JSONL, the upstream trainer's input (seed-108 item fields plus lalm, modality,
category, the answer's candidate metadata and the ``groups`` ORCA reports its quality per); also the row shape of
the curated export's ``<split>.jsonl``."""
from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path
from typing import IO

from annotation.models import Benchmark
from annotation.services.exports.records import _ORCA_CANDIDATE_FIELDS, _feedback_entry, _iter_chunks, _json_text

_ORCA_KEYS = ("id", "question", "reference", "rationale", "transcription", "candidate", "ratings", "feedback",
              "lalm", "modality", "category", "metadata", "groups")


def orca_groups(*, benchmark: str, modality: str, category: str, metadata: dict | None) -> dict[str, str]:
    """The ``groups`` of an ORCA JSONL item: ``{"benchmark": …, "modality": …, "category": …, <candidate
    metadata name>: …}``, every value a non-empty text (README, "Your own benchmark"; ORCA reports its quality per
    benchmark and per benchmark and each other group, ``modelling.orca``). A metadata name never shadows the
    question's groups (the importer refuses those names)."""
    groups = {str(k): str(v) for k, v in (metadata or {}).items() if v not in (None, "")}
    groups.update((k, v) for k, v in (("benchmark", benchmark), ("modality", modality), ("category", category)) if v)
    return groups


def _orca_row(record: dict) -> dict:
    """The ORCA JSONL row of a record: the seed-108 item's fields plus ``lalm``, ``modality`` and ``category``.

    ``feedback`` (seed-108 format) is built here from the valid ratings' codes and comments: only JSONL needs it.
    """
    feedback = [_feedback_entry(codes=code, comment=comment)
                for code, comment in zip(record["codes"], record["comments"], strict=True)]
    groups = orca_groups(benchmark=record["benchmark"], modality=record["modality"], category=record["category"],
                         metadata=record["metadata"])
    return {key: feedback if key == "feedback" else groups if key == "groups" else record[key] for key in _ORCA_KEYS}


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
        imported=record["imported"],
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
        for (pk, external_id, lalm, question, reference, rationale, transcription, text, modality, category,
             benchmark_name, metadata) in rows:
            rated = ratings.get(pk, ())
            lines.append(encode({
                "id": f"{external_id}_{lalm}", "question": question, "reference": reference, "rationale": rationale,
                "transcription": transcription, "candidate": text, "ratings": [r[0] for r in rated],
                "feedback": [_feedback_entry(codes=r[1], comment=r[2]) if r[1] or r[2] else None for r in rated],
                "lalm": lalm, "modality": modality, "category": category, "metadata": metadata or {},
                "groups": orca_groups(benchmark=benchmark_name, modality=modality, category=category,
                                      metadata=metadata),
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
    lalm, modality, category, metadata, groups}``: the fields of an ORCA seed-108 item, its key in ``id``, the
    answer's candidate metadata (``{name: text}``) and its ``groups`` (:func:`orca_groups`). ``ratings`` holds the
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
