"""A training run's data: which rated questions go to train, dev and test, and the ORCA JSONL files written for
them (with each item's groups and its candidate answer's pk), for :mod:`modelling.services.training` and the
leaderboard's cross-fit (:mod:`modelling.leaderboard.crossfit`).

Stratified by modality, then benchmark and category, so every benchmark has its share of held-out questions; a run
adapted from a model keeps its parent's split of the questions the parent knew (README, "Training ORCA in the
browser").
"""
from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from django.db.models import F

from annotation.models import LALM, CandidateAnswer, Question
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.splits import DEFAULT_RATIOS, SPLIT_NAMES, split_held_out_lalms, split_unseen_questions
from modelling.models import SplitKind, TrainingRun, TrainingSplit
from modelling.services.orca_evaluation import candidate_groups

#: Dev share of the training LALMs' questions in the held-out-LALM scenario.
HELD_OUT_DEV_RATIOS = (0.9, 0.1, 0.0)


def _rated_questions():
    """Questions with at least one validly scored candidate answer on their current version."""
    rated = CandidateAnswer.objects.filter(
        question_version=F("question_version__question__current_version"),
        ratings__is_valid=True,
        ratings__score__isnull=False,
    ).values("question_version__question_id")
    return Question.objects.filter(pk__in=rated).only("id", "modality", "category", "benchmark_id")


def _rated_lalm_names() -> set[str]:
    return set(
        LALM.objects.filter(
            candidates__question_version=F("candidates__question_version__question__current_version"),
            candidates__ratings__is_valid=True,
            candidates__ratings__score__isnull=False,
        ).values_list("name", flat=True)
    )


def training_split_inherited(run: TrainingRun) -> dict[str, set[int]] | None:
    """The recorded split of the run's parent's training run, or None (no parent, or a parent without one)."""
    parent = run.parent
    if parent is None or parent.training_run_id is None:
        return None
    split = TrainingSplit.objects.filter(run_id=parent.training_run_id).first()
    return None if split is None else split.parts()


def training_split_parts(*, run: TrainingRun, questions) -> dict[str, set[int]]:
    """{"train", "dev", "test": question pks} of a run over ``questions`` (rows with pk, modality, category and
    benchmark_id).

    Stratified by modality, then benchmark and category (``split_unseen_questions``, seeded by the run's seed;
    8:1:1, or 9:1:0 of the training LALMs' questions for held-out LALMs), so every benchmark has its share of
    held-out questions. A run adapted from a model (``parent``) keeps the parent's split of every question the
    parent knew (its trained questions stay in train, its held-out ones in test) and splits only the questions new
    to it: its test split then holds only questions no model of its line trained on.
    """
    keyed = [(q.pk, q.modality, f"{q.benchmark_id}/{q.category}") for q in questions]
    ratios = HELD_OUT_DEV_RATIOS if run.split_kind == SplitKind.HELD_OUT_LALMS else DEFAULT_RATIOS
    inherited = training_split_inherited(run)
    if inherited is None:
        return split_unseen_questions(questions=keyed, seed=run.split_seed, ratios=ratios)
    known = inherited["train"] | inherited["dev"] | inherited["test"]
    fresh = split_unseen_questions(questions=[k for k in keyed if k[0] not in known], seed=run.split_seed,
                                   ratios=ratios)
    current = {k[0] for k in keyed}
    return {name: (inherited[name] & current) | fresh[name] for name in SPLIT_NAMES}


@dataclass(frozen=True)
class SplitItem:
    """Where an exported ORCA item comes from: its candidate answer, question and groups (``item_groups``)."""

    candidate: int
    question: int
    groups: dict


@dataclass(frozen=True)
class SplitExport:
    """A run's written split: ``paths`` {split name: JSONL path}, ``items`` {item id: :class:`SplitItem`} and
    ``parts`` {split name: question pks}."""

    paths: dict
    items: dict
    parts: dict


def orca_jsonl_with_groups(*, out: Path, question_ids=None, lalm_names=None) -> dict[str, SplitItem]:
    """Write ORCA JSONL (``dataset_export_orca_jsonl``, benchmark by benchmark) with each item's ``groups``
    (benchmark, modality, category and candidate-metadata groups: ``orca_quality.item_groups``) and its candidate
    answer's pk as ``id`` (the readable ``<external_id>_<LALM>`` moves to ``key``: ids stay unique across
    benchmarks). Returns {item id: :class:`SplitItem`}. Written to a temporary file renamed at the end: a failed
    export leaves no file."""
    from annotation.models import Benchmark

    selection = CandidateAnswer.objects.filter(question_version=F("question_version__question__current_version"))
    if question_ids is not None:
        selection = selection.filter(question_version__question_id__in=list(question_ids))
    if lalm_names is not None:
        selection = selection.filter(lalm__name__in=list(lalm_names))
    question = "question_version__question__"
    key_of, questions_of = {}, defaultdict(set)
    for pk, qid, bench, external_id, lalm in selection.values_list(
            "pk", question + "id", question + "benchmark_id", question + "external_id", "lalm__name"):
        key_of[(bench, external_id, lalm)] = (pk, qid)
        questions_of[bench].add(qid)
    groups = candidate_groups(candidate_ids=[pk for pk, _ in key_of.values()])
    index: dict[str, SplitItem] = {}
    partial = out.with_name(out.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as fh, tempfile.TemporaryFile("w+", encoding="utf-8") as buffer:
            for benchmark in Benchmark.objects.filter(pk__in=list(questions_of)).order_by("name"):
                buffer.seek(0)
                buffer.truncate()
                dataset_export_orca_jsonl(out=buffer, benchmark=benchmark, lalm_names=lalm_names,
                                          question_ids=None if question_ids is None else questions_of[benchmark.pk])
                buffer.seek(0)
                for line in buffer:
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    pk, qid = key_of[(benchmark.pk, row["id"][: -len(row["lalm"]) - 1], row["lalm"])]
                    row["key"], row["id"], row["groups"] = row["id"], str(pk), groups[pk]
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    index[str(pk)] = SplitItem(pk, qid, groups[pk])
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return index


def training_split_write(*, run: TrainingRun, data_dir: Path) -> SplitExport:
    """Write the run's train/dev/test ORCA JSONL files (with groups) into ``data_dir``.

    Unseen questions: :func:`training_split_parts` over the rated questions. Held-out LALMs: the test split is every
    answer of the held-out LALMs; the other LALMs' answers are split 9:1 by question into train/dev.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    questions = list(_rated_questions())
    paths = {name: data_dir / f"{name}.jsonl" for name in SPLIT_NAMES}
    parts = training_split_parts(run=run, questions=questions)
    if run.split_kind == SplitKind.HELD_OUT_LALMS:
        lalms = split_held_out_lalms(lalm_names=_rated_lalm_names(), held_out=run.held_out_lalms)
        filters = {
            "train": {"question_ids": parts["train"], "lalm_names": lalms["train"]},
            "dev": {"question_ids": parts["dev"], "lalm_names": lalms["train"]},
            "test": {"lalm_names": lalms["test"]},
        }
    else:
        filters = {name: {"question_ids": parts[name]} for name in paths}
    items = {}
    for name, path in paths.items():
        items |= orca_jsonl_with_groups(out=path, **filters[name])
    return SplitExport(paths, items, parts)


def training_split_export(*, run: TrainingRun, data_dir: Path) -> dict[str, Path]:
    """:func:`training_split_write`'s paths by split name."""
    return training_split_write(run=run, data_dir=data_dir).paths


def scored_items(path: Path) -> list:
    """The ``modelling.orca`` items of an ORCA JSONL file that have at least one scored rating (answers rated only
    with U/E are exported but carry no training signal)."""
    from modelling.orca import load_items

    return [item for item in load_items(path, require_ratings=False) if item.ratings]
