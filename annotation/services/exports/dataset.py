"""The curated annotation dataset in any of ORCA JSONL, CSV, Parquet and a Hugging Face ``datasets`` folder,
optionally split (unseen questions 8:1:1 or held-out LALMs, ORCA paper section 5.3), with a datasheet."""
from __future__ import annotations

import shutil
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection
from pathlib import Path

from annotation.agreement import AlphaAccumulator
from annotation.models import Benchmark
from annotation.services.exports.datasheet import DatasetExportSummary, SplitCounts, _datasheet
from annotation.services.exports.records import ExportError, _candidate_selection, _iter_records
from annotation.services.exports.writers import _FILE_NAMES, _save_hf, _SplitWriters
from annotation.services.splits import split_held_out_lalms, split_unseen_questions

#: Formats of :func:`dataset_export`.
DATASET_FORMATS = ("orca-jsonl", "csv", "parquet", "hf")
#: Split kinds of :func:`dataset_export`: none, unseen questions 8:1:1, held-out LALMs (ORCA paper, section 5.3).
SPLIT_KINDS = ("none", "unseen-questions", "held-out-lalms")
#: Name of the single split when the dataset is not split.
UNSPLIT = "dataset"


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


def dataset_options_check(*, formats, split: str, held_out_lalms) -> tuple[str, ...]:
    """The dataset formats without repeats, in order, once the options of a dataset export are known to be valid.

    Raises:
        ExportError: no format or an unknown one, an unknown split, or split ``held-out-lalms`` without LALMs.
    """
    formats = tuple(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in DATASET_FORMATS]
    if unknown or not formats:
        raise ExportError(f"formats must be some of {', '.join(DATASET_FORMATS)}; got {', '.join(formats) or 'none'}")
    if split not in SPLIT_KINDS:
        raise ExportError(f"split must be one of {', '.join(SPLIT_KINDS)}; got {split!r}")
    if split == "held-out-lalms" and not held_out_lalms:
        raise ExportError("split held-out-lalms needs the names of the LALMs to hold out")
    return formats


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
    annotators (pseudonyms ``annotator-<n>``), imported (per rating: true when it came from a file, e.g. a
    table import of ratings collected elsewhere, false when it was made on this platform), n_ratings, mean_score
    (mean of the scores, 1–5, null if none),
    judge_scores ([{judge, prompt_variant, mode, score 1–5 | null}]; mode ``generate``, ``probability`` or
    ``probability_yesno``), orca_model / orca_mu (0–1) / orca_variance
    (0–0.25) of the latest ORCA prediction (null when none), invalidated ([{score, codes, comment, annotator,
    reason, imported}]).

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
    formats = dataset_options_check(formats=formats, split=split, held_out_lalms=held_out_lalms)
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
        alpha = AlphaAccumulator()
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
            alpha_undefined=alpha.why_undefined(),
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

