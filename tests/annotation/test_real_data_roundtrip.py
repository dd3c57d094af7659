"""Real data (../shared/data): MMAU test-mini, MMAR, LALM answers and the ORCA seed-108 annotations.

Expected numbers are derived from the files in each test, never typed in.
"""
import io
import json
import re

import pytest
from django.conf import settings
from django.db.models import Count, F, Q

from annotation.models import CandidateAnswer, Modality, Question, Rating
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.importers import benchmark_import, candidate_answers_import, ratings_import_orca
from tests.factories import AnnotatorFactory, rate

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data]

ORCA_KEY = re.compile(r"^(?P<question_id>.+)_(?P<tag>M\d+_\d+)$")


def _expected_ratings(item: dict) -> tuple[list[tuple], int]:
    """From one raw seed-108 item: the (score, codes, comment) of each rating the database can hold, in file
    order, and the number of null scores whose feedback has neither u nor e (which cannot be stored)."""
    kept, skipped = [], 0
    for score, feedback in zip(item["ratings"], item["feedback"], strict=True):
        entries = feedback or []
        letters = {entry.strip().upper() for entry in entries if len(entry.strip()) == 1}
        codes = "".join(code for code in "QARUE" if code in letters)
        comment = "\n".join(entry for entry in entries if len(entry.strip()) > 1)
        if score is None and not letters & {"U", "E"}:
            skipped += 1
        else:
            kept.append((score, codes, comment))
    return kept, skipped


def _exported_ratings(row: dict) -> list[tuple]:
    """(score, codes, comment) of each rating in an exported row."""
    ratings = []
    for score, feedback in zip(row["ratings"], row["feedback"], strict=True):
        entries = feedback or []
        codes = "".join(entry.upper() for entry in entries if len(entry) == 1)
        ratings.append((score, codes, "\n".join(entry for entry in entries if len(entry) > 1)))
    return ratings


def _export() -> dict[str, dict]:
    out = io.StringIO()
    dataset_export_orca_jsonl(out=out)
    return {row["id"]: row for row in map(json.loads, out.getvalue().splitlines())}


def _import_benchmarks(data_dir):
    mmau = benchmark_import(path=data_dir / "mmau" / "mmau-test-mini.json", file_format="mmau")
    mmar = benchmark_import(path=data_dir / "mmar" / "MMAR-meta.jsonl", file_format="mmar")
    return mmau, mmar


def test_seed_108_dev_survives_import_and_export_rating_by_rating(shared_data):

    _import_benchmarks(shared_data)
    dev_path = shared_data / "orca_seed108" / "seed_108_dev.json"
    data = json.loads(dev_path.read_text(encoding="utf-8"))
    expected = {key: _expected_ratings(item) for key, item in data.items()}

    summary = ratings_import_orca(path=dev_path)

    question_ids = {ORCA_KEY.match(key)["question_id"] for key in data}
    assert (summary.questions_matched, summary.questions_created) == (len(question_ids), 0)
    assert summary.versions_created == len(question_ids)
    assert summary.candidates_created == len(data)
    assert summary.ratings_created == sum(len(kept) for kept, _ in expected.values())
    assert summary.skipped_unscored == sum(skipped for _, skipped in expected.values())

    rows = _export()
    assert set(rows) == {key for key, (kept, _) in expected.items() if kept}
    for key, row in rows.items():
        item = data[key]
        assert _exported_ratings(row) == expected[key][0], key
        fields = ("question", "reference", "rationale", "transcription", "candidate")
        assert [row[name] for name in fields] == [item[name] for name in fields], key
        assert row["lalm"] == ORCA_KEY.match(key)["tag"]
        assert row["modality"] in Modality.values and row["category"], key

    # A new annotator rates one imported candidate through the rating service; the export shows it after the rest.
    key = next(k for k, row in rows.items() if len(row["ratings"]) < settings.ANNOTATION_TARGET_RATINGS)
    match = ORCA_KEY.match(key)
    candidate = CandidateAnswer.objects.get(
        question_version=Question.objects.get(external_id=match["question_id"]).current_version,
        lalm__name=match["tag"],
    )
    rate(candidate=candidate, annotator=AnnotatorFactory(), score=3, codes=["a"], comment="heard it twice")
    after = _export()
    assert after[key]["ratings"] == [*rows[key]["ratings"], 3]
    assert after[key]["feedback"] == [*rows[key]["feedback"], ["a", "heard it twice"]]
    assert {k: row for k, row in after.items() if k != key} == {k: row for k, row in rows.items() if k != key}


def test_train_and_dev_import_every_scored_or_unable_to_judge_rating(shared_data):
    files = [shared_data / "orca_seed108" / name for name in ("seed_108_train.json", "seed_108_dev.json")]
    contents = [json.loads(path.read_text(encoding="utf-8")) for path in files]
    items = [item for data in contents for item in data.values()]
    scored = sum(score is not None for item in items for score in item["ratings"])
    kept = sum(len(_expected_ratings(item)[0]) for item in items)
    skipped = sum(_expected_ratings(item)[1] for item in items)
    question_ids = {ORCA_KEY.match(key)["question_id"] for data in contents for key in data}

    # No benchmark imported first: every question is created in "ORCA imported".
    summaries = [ratings_import_orca(path=path) for path in files]

    assert sum(s.questions_created for s in summaries) == len(question_ids)
    assert sum(s.candidates_created for s in summaries) == len(items) == CandidateAnswer.objects.count()
    assert sum(s.ratings_created for s in summaries) == kept == Rating.objects.count()
    assert sum(s.skipped_unscored for s in summaries) == skipped
    assert Rating.objects.filter(score__isnull=False).count() == scored
    assert not Rating.objects.filter(score__isnull=True).exclude(Q(codes__contains="U") | Q(codes__contains="E"))
    miscounted = CandidateAnswer.objects.annotate(n=Count("ratings", filter=Q(ratings__is_valid=True))).exclude(
        n=F("valid_rating_count")
    )
    assert not miscounted.exists()


def test_both_real_answer_files_give_every_mmar_question_a_candidate(shared_data):
    _, mmar = _import_benchmarks(shared_data)
    mmar_ids = {json.loads(line)["id"] for line in (shared_data / "mmar" / "MMAR-meta.jsonl").open(encoding="utf-8")}
    assert mmar.created == len(mmar_ids)
    answer_files = {
        "Qwen3-Omni-30B (thinking)": shared_data / "mmar_preds_qwen3omni" / "v9_predictions.jsonl",
        "TalTech audio reasoning agent": shared_data / "mmar_taltech_agent" / "taltech_agent_mmar_reasoning.jsonl",
    }
    for lalm, path in answer_files.items():
        lines = sum(1 for line in path.open(encoding="utf-8") if line.strip())
        assert candidate_answers_import(path=path, lalm_name=lalm, benchmark_name="MMAR").created == lines
        assert candidate_answers_import(path=path, lalm_name=lalm, benchmark_name="MMAR").unchanged == lines
    per_question = Question.objects.filter(benchmark=mmar.benchmark).annotate(
        n=Count("current_version__candidates")
    )
    assert set(per_question.values_list("n", flat=True)) == {len(answer_files)}
