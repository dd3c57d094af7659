"""ORCA JSONL export: one row per rated candidate answer on a current question version, valid ratings only."""
import io
import json

import pytest
from django.core.management import CommandError, call_command

from annotation.models import QuestionVersion
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.versions import question_version_create
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory, RatingFactory

pytestmark = pytest.mark.django_db


def _export(**kwargs) -> list[dict]:
    out = io.StringIO()
    rows = dataset_export_orca_jsonl(out=out, **kwargs)
    lines = out.getvalue().splitlines()
    assert rows == len(lines)
    return [json.loads(line) for line in lines]


def test_a_row_holds_the_current_texts_the_valid_ratings_and_seed_108_feedback():
    question = QuestionFactory(
        external_id="abc",
        modality="speech",
        category="Semantic Layer",
        version__question_text="How many women speak?",
        version__reference_answer="Three",
        version__rationale="Three distinct female voices.",
        version__transcript="Open up!",
    )
    candidate = CandidateAnswerFactory(question_version=question.current_version, lalm__name="M2_1", text="Two.",
                                       metadata={"type": "word"})
    RatingFactory(candidate=candidate, score=4)
    RatingFactory(candidate=candidate, score=None, codes="U", comment="too noisy")
    RatingFactory(candidate=candidate, score=2, codes="AR", comment="reference is wrong\nlisten at 0:03")
    RatingFactory(candidate=candidate, score=1, is_valid=False, invalid_reason="question corrected")

    assert _export() == [
        {
            "id": "abc_M2_1",
            "question": "How many women speak?",
            "reference": "Three",
            "rationale": "Three distinct female voices.",
            "transcription": "Open up!",
            "candidate": "Two.",
            "ratings": [4, None, 2],
            "feedback": [None, ["u", "too noisy"], ["a", "r", "reference is wrong", "listen at 0:03"]],
            "lalm": "M2_1",
            "modality": "speech",
            "category": "Semantic Layer",
            "metadata": {"type": "word"},
            "groups": {"benchmark": question.benchmark.name, "modality": "speech", "category": "Semantic Layer",
                       "type": "word"},
        }
    ]


def test_candidates_without_a_valid_rating_are_left_out():
    rated = RatingFactory().candidate
    only_invalid = RatingFactory(is_valid=False).candidate
    unrated = CandidateAnswerFactory()
    ids = [row["candidate"] for row in _export()]
    assert ids == [rated.text]
    assert only_invalid.text not in ids and unrated.text not in ids


def test_only_candidates_on_current_question_versions_are_exported():
    old = RatingFactory(score=1).candidate
    question = old.question_version.question
    new_version = question_version_create(
        question=question, source=QuestionVersion.Source.EXPERT, reference_answer="Corrected"
    )
    new = RatingFactory(candidate=CandidateAnswerFactory(question_version=new_version, lalm=old.lalm), score=5)

    rows = _export()
    assert [(row["candidate"], row["reference"], row["ratings"]) for row in rows] == [
        (new.candidate.text, "Corrected", [5])
    ]


def test_the_export_can_be_limited_to_one_benchmark():
    mine = BenchmarkFactory(name="MMAR")
    RatingFactory(candidate=CandidateAnswerFactory(question_version=QuestionFactory(benchmark=mine).current_version))
    RatingFactory()
    assert len(_export()) == 2
    assert [row["id"].split("_")[0] for row in _export(benchmark=mine)] == [
        mine.questions.get().external_id
    ]


def test_the_export_streams_in_chunks_with_a_constant_number_of_queries(django_assert_max_num_queries):
    for _ in range(7):
        candidate = RatingFactory().candidate
        RatingFactory(candidate=candidate)
    # Two queries (candidates, their valid ratings) per chunk of 3: never one query per candidate.
    with django_assert_max_num_queries(6):
        rows = _export(chunk_size=3)
    assert len(rows) == 7 and all(len(row["ratings"]) == 2 for row in rows)


def test_export_dataset_command_writes_dataset_jsonl_in_the_folder(tmp_path, capsys):
    RatingFactory()
    out = tmp_path / "export" / "orca"
    call_command("export_dataset", "--format", "orca-jsonl", "--out", str(out))
    lines = (out / "dataset.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["ratings"] == [3]
    assert capsys.readouterr().out.strip() == f"{out / 'dataset.jsonl'}: 1 rows"
    assert [p.name for p in out.iterdir()] == ["dataset.jsonl"]  # no partial file left behind


def test_export_dataset_command_refuses_an_unknown_benchmark(tmp_path):
    with pytest.raises(CommandError, match="no benchmark named 'Nope'"):
        call_command("export_dataset", "--format", "orca-jsonl", "--out", str(tmp_path), "--benchmark", "Nope")
