"""A toolkit's own result files with its judge's scores (issue: AudioBench's ``<dataset>_llama3_70b_judge_score.json``
of 20 MMAU test-mini items, two of which — positions 10 and 18 — are not MMAU questions): the ``details`` object
read as a table, answers matched to their questions by text (never by position), foreign questions refused with
their row and text or — ``--skip-unmatched`` — left out and reported, and the judge's per-answer score imported as
that judge's rating, shown beside humans on the judge comparison and on the leaderboard.

The files are written as AudioBench writes them (``src/dataset_src/mmau_mini.py``: the instruction
``"Question:\\n<question>\\nChoices:\\n<choices joined by spaces>"``, a shuffled sample when ``number_of_samples``
is set; ``eval_methods/eval_llama3_70b.py``: ``details`` of {question, reference, model_prediction,
judge_response, rate_score, success}, ``judge_score`` = mean ``rate_score`` × 100 for the binary prompt).
"""
import json
import random
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import CandidateAnswer, JudgeRating
from annotation.services.importers import TableImportError, benchmark_import, table_import
from annotation.services.importers.presets import preset_mapping
from annotation.services.judge_comparison import judge_comparison
from modelling.leaderboard.services import leaderboard_compute
from tests.factories import RatingFactory, UserFactory

pytestmark = pytest.mark.django_db

JUDGE = "audiobench:llama3-70b"
FOREIGN = {10: "For the given audio, identify the source of the fire sound.",
           18: "For the given audio, identify the source of the whoop."}


def _instruction(record: dict) -> str:
    return "Question:\n" + record["question"] + "\nChoices:\n" + " ".join(record["choices"])


def _judge_file(path, records: list[dict], *, foreign: dict[int, str] | None = None):
    """An AudioBench judge score file of ``records`` (in this order), the ``foreign`` positions replaced by
    questions no benchmark has; one reply the toolkit could not parse (``success`` 0)."""
    details = []
    for index, record in enumerate(records):
        question = _instruction(record)
        if foreign and index in foreign:
            question = "Question:\n" + foreign[index] + "\nChoices:\nFireplace Campfire Candle Torch"
        correct = index % 3 != 0
        details.append({"question": question, "reference": record["answer"],
                        "model_prediction": record["answer"] if correct else record["choices"][-1],
                        "judge_response": f"Explanation: answer {index}. Rating: {int(correct)}",
                        "rate_score": float(correct), "success": 1, "task": record["task"]})
    details[1].update(rate_score=0.0, success=0, judge_response="I cannot rate this.")
    mean = sum(d["rate_score"] for d in details) / len(details)
    path.write_text(json.dumps({"llama3_70b_judge": {"judge_score": mean * 100, "success_rate": 0.95},
                                "task_scores": {}, "details": details}, indent=4))
    return path


@pytest.fixture
def mmau(shared_data):
    benchmark_import(path=shared_data / "mmau" / "mmau-test-mini.json", file_format="mmau", name="MMAU test-mini")
    records = json.loads((shared_data / "mmau" / "mmau-test-mini.json").read_text())
    return random.Random(42).sample(records, 20)  # number_of_samples=20 shuffles and samples the dataset


def test_a_judge_score_file_with_foreign_questions_is_refused_with_their_rows_and_texts(tmp_path, mmau):
    path = _judge_file(tmp_path / "mmau_mini_test_llama3_70b_judge_score.json", mmau, foreign=FOREIGN)
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="MMAU test-mini", mapping=preset_mapping("audiobench", lalm="Qwen"))
    problems = [str(p) for p in excinfo.value.problems]
    assert len(problems) == 2
    for problem, (position, text) in zip(problems, sorted(FOREIGN.items()), strict=True):
        assert problem.startswith(f"row {position + 1}: column 'question': value 'Question:\\n{text[:20]}")
        assert problem.endswith("no question of the benchmark has this text (left out with --skip-unmatched)")
    assert not CandidateAnswer.objects.filter(lalm__name="Qwen").exists()


def test_skip_unmatched_imports_the_answers_by_text_and_the_judges_scores_and_reports_the_rest(tmp_path, mmau):
    path = _judge_file(tmp_path / "mmau_mini_test_llama3_70b_judge_score.json", mmau, foreign=FOREIGN)
    out = StringIO()
    call_command("import_table", str(path), "--benchmark", "MMAU test-mini", "--preset", "audiobench",
                 "--lalm", "Qwen", "--skip-unmatched", stdout=out)
    printed = out.getvalue()
    assert "candidate answers: 18 created" in printed
    assert "rows left out (their question is not in the benchmark): 2: row 11 " in printed and "row 19 " in printed
    assert (f"judge scores of {JUDGE}: 18 created, 0 updated, 0 unchanged (1 not parsed by the toolkit, stored as "
            "failures); scale 0–1 → 1–5 (read from the file)") in printed
    answers = CandidateAnswer.objects.filter(lalm__name="Qwen").select_related("question_version__question")
    by_id = {a.question_version.question.external_id: a for a in answers}
    expected = {r["id"]: r for i, r in enumerate(mmau) if i not in FOREIGN}
    assert set(by_id) == set(expected)  # every answer on its own question, whatever its position
    for index, record in enumerate(mmau):
        if index in FOREIGN:
            continue
        answer = by_id[record["id"]]
        rating = JudgeRating.objects.get(candidate=answer, judge_name=JUDGE, prompt_variant="imported")
        correct = index % 3 != 0
        assert answer.text == (record["answer"] if correct else record["choices"][-1])
        assert rating.score == (None if index == 1 else 5.0 if correct else 1.0)
        assert rating.explanation.startswith("Explanation" if index != 1 else "I cannot")
    again = StringIO()
    call_command("import_table", str(path), "--benchmark", "MMAU test-mini", "--preset", "audiobench",
                 "--lalm", "Qwen", "--skip-unmatched", stdout=again)
    assert f"judge scores of {JUDGE}: 0 created, 0 updated, 18 unchanged" in again.getvalue()
    with pytest.raises(CommandError, match="2 problem"):
        call_command("import_table", str(path), "--benchmark", "MMAU test-mini", "--preset", "audiobench",
                     "--lalm", "Qwen", stderr=StringIO())


def test_the_judges_scores_stand_beside_humans_on_the_comparison_and_the_leaderboard(tmp_path, mmau):
    path = _judge_file(tmp_path / "mmau_mini_test_llama3_70b_judge_score.json", mmau, foreign=FOREIGN)
    table_import(path=path, benchmark_name="MMAU test-mini",
                 mapping={**preset_mapping("audiobench", lalm="Qwen"), "unmatched": "skip"})
    for answer in CandidateAnswer.objects.filter(lalm__name="Qwen"):
        for score in (4, 5):
            RatingFactory(candidate=answer, score=score)
    comparison = judge_comparison(user=UserFactory(is_staff=True, roles=["expert"]))
    [row] = [r for r in comparison.rows if r.label == f"{JUDGE} / imported"]
    assert row.n == 17 and row.failures == 1  # the failure is not compared
    assert row.note == "imported from the toolkit's file, its scale mapped to 1–5"
    [coverage] = [c for c in comparison.coverage if c.label == f"{JUDGE} / imported"]
    assert (coverage.scored, coverage.failures, coverage.candidates) == (17, 1, 18)
    board = leaderboard_compute(benchmark="MMAU test-mini")
    assert f"{JUDGE} (imported)" in board.judges
    [qwen] = board.rows
    assert qwen.judges[f"{JUDGE} (imported)"] is not None


def test_the_predictions_log_a_plain_list_is_matched_by_its_instruction_text(tmp_path, mmau):
    log = [{"instruction": _instruction(r), "reference": r["answer"], "task": r["task"],
            "task_type": "Audio-Understanding-Reasoning", "model_prediction": r["choices"][0]} for r in mmau]
    path = tmp_path / "mmau_mini_test.json"
    path.write_text(json.dumps(log))
    summary = table_import(path=path, benchmark_name="MMAU test-mini",
                           mapping=preset_mapping("audiobench", lalm="SALMONN"))
    assert (summary.candidates_created, summary.judge) == (20, "")
    stored = dict(CandidateAnswer.objects.filter(lalm__name="SALMONN").values_list(
        "question_version__question__external_id", "text"))
    assert stored == {r["id"]: r["choices"][0] for r in mmau}
