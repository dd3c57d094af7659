"""Reading for exports: candidate answers as plain records, chunk by chunk (keyset pagination, constant memory).

Shared by every dataset writer (:mod:`.orca_jsonl`, :mod:`.dataset`); the errors of all exports are here too.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator

import orjson
from django.apps import apps
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast

from annotation.crowd.models import QUALITY_INVALID_REASON
from annotation.jobs.lifecycle import RunStopped
from annotation.models import Benchmark, CandidateAnswer, JudgeRating, Question, Rating


def _json_text(value) -> str:
    """Compact JSON text of ``value``, non-ASCII kept as is (orjson: about ten times the standard library's speed,
    which is most of an export's CPU time)."""
    return orjson.dumps(value).decode()


class ExportError(ValueError):
    """An export cannot be made as asked: unknown format or split, unknown held-out LALM, nothing to export."""


class ExportCancelled(RunStopped):
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
    # Ratings of gold items and attention checks are quality checks, never data (annotation/crowd/models.py).
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
    "metadata": "metadata",
}
#: The candidate fields the ORCA JSONL rows need (no choices: decoding JSON per row costs time for nothing).
_ORCA_CANDIDATE_FIELDS = ("pk", "external_id", "lalm", "question", "reference", "rationale", "transcription",
                          "text", "modality", "category", "benchmark", "metadata")


def _prediction_model():
    """The modelling app's ``Prediction`` model when that app is installed, else None.

    annotation never imports modelling (README, Layout: house rules); the app registry lets the export name the
    latest ORCA prediction without that import.
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
    candidate pk to its ratings ``(score, codes, comment, annotator_id, is_valid, invalid_reason, source)`` in
    rating id order (valid ones only unless ``include_invalid``). Two queries per chunk, both bounded by the chunk's
    primary key range ``after_pk < pk <= last_pk`` (index range scans; no long ``IN`` lists to send and parse).
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
            "candidate_id", "score", "codes", "comment", "annotator_id", "is_valid", "invalid_reason", "source"
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
    valid, invalid, scores, codes, comments, annotators, imported, scored = [], [], [], [], [], [], [], []
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
        imported.append(rating[6] == Rating.Source.IMPORT)
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
        "metadata": row["metadata"] or {},
        "ratings": scores,
        "codes": codes,
        "comments": comments,
        "annotators": annotators,
        "imported": imported,
        "n_ratings": len(valid),
        "mean_score": sum(scored) / len(scored) if scored else None,
        "judge_scores": judges,
        "orca_model": prediction["model"] if prediction else None,
        "orca_mu": prediction["mu"] if prediction else None,
        "orca_variance": prediction["variance"] if prediction else None,
        "invalidated": [
            {"score": r[0], "codes": r[1], "comment": r[2], "annotator": f"annotator-{r[3]}", "reason": r[5],
             "imported": r[6] == Rating.Source.IMPORT}
            for r in invalid
        ],
    }

