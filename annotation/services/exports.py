"""Exports: the rated dataset as ORCA JSONL, the input of ORCA training (ORCA paper, section 4; Appendix A)."""
import json
import os
from pathlib import Path
from collections.abc import Collection
from typing import IO

from django.db.models import Exists, F, OuterRef, Prefetch

from annotation.models import Benchmark, CandidateAnswer, Rating


def _feedback_entry(*, codes: str, comment: str) -> list[str] | None:
    """Seed-108 feedback for one rating: null, or lower-case codes followed by the comment's lines."""
    if not codes and not comment:
        return None
    return [code.lower() for code in codes] + (comment.split("\n") if comment else [])


def _row(candidate: CandidateAnswer) -> dict:
    version = candidate.question_version
    question = version.question
    ratings = candidate.valid_ratings
    return {
        "id": f"{question.external_id}_{candidate.lalm.name}",
        "question": version.question_text,
        "reference": version.reference_answer,
        "rationale": version.rationale,
        "transcription": version.transcript,
        "candidate": candidate.text,
        "ratings": [rating.score for rating in ratings],
        "feedback": [_feedback_entry(codes=rating.codes, comment=rating.comment) for rating in ratings],
        "lalm": candidate.lalm.name,
        "modality": question.modality,
        "category": question.category,
    }


def _write_rows(
    fh: IO[str],
    *,
    benchmark: Benchmark | None,
    chunk_size: int,
    question_ids: Collection[int] | None = None,
    lalm_names: Collection[str] | None = None,
) -> int:
    candidates = (
        CandidateAnswer.objects.filter(question_version=F("question_version__question__current_version"))
        .filter(Exists(Rating.objects.filter(candidate=OuterRef("pk"), is_valid=True)))
        .select_related("question_version__question", "lalm")
        .prefetch_related(
            Prefetch("ratings", queryset=Rating.objects.filter(is_valid=True).order_by("id"), to_attr="valid_ratings")
        )
        .order_by("id")
    )
    if benchmark is not None:
        candidates = candidates.filter(question_version__question__benchmark=benchmark)
    if question_ids is not None:
        candidates = candidates.filter(question_version__question_id__in=list(question_ids))
    if lalm_names is not None:
        candidates = candidates.filter(lalm__name__in=list(lalm_names))
    rows = 0
    for candidate in candidates.iterator(chunk_size=chunk_size):
        fh.write(json.dumps(_row(candidate), ensure_ascii=False) + "\n")
        rows += 1
    return rows


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

    Memory stays constant: candidates are read ``chunk_size`` at a time with their valid ratings prefetched, and
    written line by line. ``out`` is a text stream or a file path; a path is written to a temporary file beside it
    and renamed at the end, so a failed export never leaves a partial file.
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
