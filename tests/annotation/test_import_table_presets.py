"""Evaluation toolkits' output files as candidate answers, through the mapping presets (no code path of their own).

The fixtures are written from each toolkit's own code: lmms-eval's ``--log_samples`` entries (evaluator:
``doc_id``, ``doc``, ``target``, ``arguments``, ``resps``, ``filtered_resps``, hashes, then the task's
``process_results``, which for MMAU adds ``submission`` = the MMAU record), Kimi-Audio-Evalkit's merged result
JSONL (the dataset record with ``prediction`` and ``real_prompt``), MMAU's evaluation input (the benchmark's JSON
list plus ``model_prediction``) and AudioBench's log (``format_model_predictions``: the model input less its
audio, plus ``model_prediction``, in the dataset's order).
"""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import CandidateAnswer
from annotation.services.importers import TableImportError, benchmark_import, table_import
from annotation.services.importers.presets import PRESETS, preset_mapping

pytestmark = pytest.mark.django_db

MMAU = [
    {"id": "b8b7a3a1-1", "audio_id": "./test-mini-audios/1.wav", "question": "What is the source of the sound?",
     "choices": ["A dog", "A cat"], "answer": "A dog", "dataset": "AudioSet", "task": "sound", "split": "test-mini",
     "category": "Reasoning", "sub-category": "Acoustic Source Inference", "difficulty": "easy"},
    {"id": "c2d4e6f8-2", "audio_id": "./test-mini-audios/2.wav", "question": "What is the mood of the piece?",
     "choices": ["Happy", "Sad"], "answer": "Sad", "dataset": "MusicCaps", "task": "music", "split": "test-mini",
     "category": "Information Extraction", "sub-category": "Emotion", "difficulty": "medium"},
    {"id": "f1e2d3c4-3", "audio_id": "./test-mini-audios/3.wav", "question": "How many speakers are there?",
     "choices": ["One", "Two"], "answer": "Two", "dataset": "VoxCeleb", "task": "speech", "split": "test-mini",
     "category": "Reasoning", "sub-category": "Speaker Counting", "difficulty": "hard"},
]
ANSWERS = ["It sounds like a dog barking.", "The piece is sad and slow.", "I can hear two people talking."]


@pytest.fixture
def mmau(tmp_path):
    path = tmp_path / "mmau-test-mini.json"
    path.write_text(json.dumps(MMAU))
    benchmark_import(path=path, file_format="mmau", name="MMAU test-mini")
    return "MMAU test-mini"


def _answers(lalm: str) -> list[tuple[str, str]]:
    return sorted(CandidateAnswer.objects.filter(lalm__name=lalm).values_list(
        "question_version__question__external_id", "text"))


EXPECTED = sorted(zip((r["id"] for r in MMAU), ANSWERS, strict=True))


def _lmms_sample(index: int, record: dict, answer: str, *, mmau_task: bool) -> dict:
    prompt = f"{record['question']}\nA. {record['choices'][0]}\nB. {record['choices'][1]}"
    sample = {"doc_id": index, "doc": {k: v for k, v in record.items() if k != "audio_id"}, "target": record["answer"],
              "arguments": [[prompt, {"max_new_tokens": 256}]], "resps": [[answer]], "filtered_resps": [answer],
              "doc_hash": f"{index:064x}", "prompt_hash": f"{index + 1:064x}", "target_hash": f"{index + 2:064x}"}
    if mmau_task:
        sample["accuracy"] = {"overall": 1.0, "task": record["task"]}
        sample["submission"] = {**record, "model_prediction": record["choices"][0]}
    return sample


def test_lmms_eval_samples_by_doc_id(tmp_path, mmau):
    path = tmp_path / "samples_clotho_like.jsonl"
    # Written out of order, as several ranks' samples are gathered.
    path.write_text("".join(json.dumps(_lmms_sample(i, MMAU[i], ANSWERS[i], mmau_task=False)) + "\n"
                            for i in (2, 0, 1)))
    summary = table_import(path=path, benchmark_name=mmau, mapping=preset_mapping("lmms-eval", lalm="Qwen2-Audio"))
    assert (summary.candidates_created, summary.questions_created) == (3, 0)
    assert _answers("Qwen2-Audio") == EXPECTED


def test_lmms_eval_samples_are_never_matched_by_position_alone(tmp_path, mmau):
    path = tmp_path / "samples_shifted.jsonl"
    samples = [_lmms_sample(i, MMAU[i], ANSWERS[i], mmau_task=False) for i in range(3)]
    samples[1]["doc_id"] = 2  # the doc of question 1 logged at question 2's position
    path.write_text("".join(json.dumps(s) + "\n" for s in samples[:2]))
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name=mmau, mapping=preset_mapping("lmms-eval", lalm="Qwen2-Audio"))
    assert [str(p) for p in excinfo.value.problems] == [
        "row 2: column 'doc.question': value 'What is the mood of the piece?': the question at this position is "
        "'f1e2d3c4-3', whose text differs (left out with --skip-unmatched)"]
    summary = table_import(path=path, benchmark_name=mmau, mapping={
        **preset_mapping("lmms-eval", lalm="Qwen2-Audio"), "unmatched": "skip"})
    assert (summary.candidates_created, len(summary.skipped)) == (1, 1)


def test_lmms_eval_mmau_samples_by_the_mmau_id_of_their_submission(tmp_path, mmau):
    path = tmp_path / "samples_mmau_test_mini.jsonl"
    path.write_text("".join(json.dumps(_lmms_sample(i, MMAU[i], ANSWERS[i], mmau_task=True)) + "\n" for i in (1, 2, 0)))
    table_import(path=path, benchmark_name=mmau, mapping=preset_mapping("lmms-eval-mmau", lalm="SALMONN"))
    assert _answers("SALMONN") == EXPECTED


def test_kimi_audio_evalkit_results_by_index(tmp_path):
    dataset = [{"index": i, "audio_path": f"/data/kimi/{i}.wav", "question": r["question"], "answer": r["answer"],
                "subset": "mmau-test-mini"} for i, r in enumerate(MMAU)]
    bench = tmp_path / "mmau-test-mini.jsonl"
    bench.write_text("".join(json.dumps(r) + "\n" for r in dataset))
    table_import(path=bench, benchmark_name="Kimi MMAU", mapping={
        "columns": {"question_id": "index", "question": "question", "reference": "answer", "category": "subset",
                    "candidate": "answer"}, "defaults": {"lalm": "reference (sanity)"}})
    results = tmp_path / "Kimi-Audio_mmau-test-mini.jsonl"
    results.write_text("".join(json.dumps({**r, "prediction": ANSWERS[r["index"]], "real_prompt": r["question"]})
                               + "\n" for r in dataset))
    table_import(path=results, benchmark_name="Kimi MMAU", mapping=preset_mapping("kimi-audio-evalkit",
                                                                                  lalm="Kimi-Audio"))
    assert _answers("Kimi-Audio") == sorted(zip(("0", "1", "2"), ANSWERS, strict=True))


@pytest.mark.parametrize("field", ["model_prediction", "model_output"])
def test_mmau_result_files_by_id(tmp_path, mmau, field):
    path = tmp_path / "mmau-predictions.json"
    path.write_text(json.dumps([{**r, field: a} for r, a in zip(MMAU, ANSWERS, strict=True)]))
    table_import(path=path, benchmark_name=mmau, mapping=preset_mapping("mmau", lalm="Gemini"))
    assert _answers("Gemini") == EXPECTED


def test_audiobench_logs_by_question_text_in_any_order(tmp_path, mmau):
    log = [{"instruction": "Question:\n" + r["question"] + "\nChoices:\n" + " ".join(r["choices"]),
            "reference": r["answer"], "task": r["task"], "task_type": "Audio-Understanding-Reasoning",
            "model_prediction": a} for r, a in zip(MMAU, ANSWERS, strict=True)]
    path = tmp_path / "llama3_70b_judge_p0.json"  # log/<model>/mmau_mini/<mode>_p<prompt>.json
    path.write_text(json.dumps([log[2], log[0], log[1]], indent=4))  # number_of_samples shuffles the dataset
    table_import(path=path, benchmark_name=mmau, mapping=preset_mapping("audiobench", lalm="WavLLM"))
    assert _answers("WavLLM") == EXPECTED
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps([*log, {**log[0], "instruction": "Question:\nFor the given audio, identify the "
                                                                 "source of the fire sound.\nChoices:\nA B"}]))
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=foreign, benchmark_name=mmau, mapping=preset_mapping("audiobench", lalm="WavLLM"))
    [problem] = [str(p) for p in excinfo.value.problems]
    assert problem.startswith("row 4: column 'instruction': value 'Question:\\nFor the given audio, identify the "
                              "source of the fire sound")
    assert problem.endswith("no question of the benchmark has this text (left out with --skip-unmatched)")


def test_presets_are_plain_mappings_and_need_the_lalms_name():
    assert set(PRESETS) == {"lmms-eval", "lmms-eval-mmau", "kimi-audio-evalkit", "mmau", "audiobench"}
    assert preset_mapping("mmau", lalm="M") == {
        "layout": "long", "columns": {"question_id": "id", "candidate": ["model_prediction", "model_output"]},
        "defaults": {"lalm": "M"}, "preset": "mmau"}
    with pytest.raises(ValueError, match="needs the LALM's name"):
        preset_mapping("mmau", lalm=" ")


def test_the_command_takes_a_preset(tmp_path, mmau):
    path = tmp_path / "mmau-predictions.json"
    path.write_text(json.dumps([{**r, "model_prediction": a} for r, a in zip(MMAU, ANSWERS, strict=True)]))
    out = StringIO()
    call_command("import_table", str(path), "--benchmark", mmau, "--preset", "mmau", "--lalm", "Gemini", stdout=out)
    assert "candidate answers: 3 created" in out.getvalue()
    with pytest.raises(CommandError, match="needs the LALM's name"):
        call_command("import_table", str(path), "--benchmark", mmau, "--preset", "mmau")
