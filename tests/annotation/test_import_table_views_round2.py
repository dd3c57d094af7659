"""The import pages with a table that has no audio at hand and no id column (the AQEval-like table), its candidate
metadata and the Attach audio page; the dry run's counts when it stops listing at 1,000 problems; the offer to
import without the audio; a toolkit judge file from the browser with its foreign rows left out."""
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import AudioClip, CandidateAnswer, Job, JudgeRating, Question, TableImport
from annotation.services.importers import benchmark_import
from tests.table_files import AQEVAL_COLUMNS, AQEVAL_ROWS, write_csv, write_wav, zip_folder

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("import_folders")]


def _upload(client, table, audio=None, benchmark="AQEval", **fields):
    data = {"benchmark_name": benchmark, "upload": SimpleUploadedFile(table.name, table.read_bytes()), **fields}
    if audio is not None:
        data["audio_upload"] = SimpleUploadedFile(audio.name, audio.read_bytes())
    return client.post(reverse("annotation:imports"), data)


def _mapping_post(record: TableImport, **overrides) -> dict:
    from annotation.views.imports import MappingForm

    initial = MappingForm.initial_from(record)
    data = {k: v for k, v in initial.items()
            if v is not None and v is not False and v != "" and v != [] and k != "wide_lalms"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def _post(client, name: str, record: TableImport, data: dict) -> str:
    return client.post(reverse(name, args=[record.pk]), data, HTTP_HX_REQUEST="true").content.decode()


def test_the_table_without_audio_imports_from_the_browser_as_it_is(admin_client, tmp_path):
    _upload(admin_client, write_csv(tmp_path / "val.csv", AQEVAL_COLUMNS, AQEVAL_ROWS))
    record = TableImport.objects.get()
    assert record.mapping["columns"]["rating"] == "final_annotation"  # guessed from its 0 / 0.5 / 1 values
    assert record.mapping["rating_scale"] == {"0": 1, "0.5": 3, "1": 5}
    assert record.mapping["candidate_metadata"] == {"type": "type"}
    assert record.mapping["missing_audio"] == "allow"
    page = admin_client.get(reverse("annotation:import", args=[record.pk])).content.decode()
    assert "No audio files were given:" in page
    assert 'name="candidate_metadata" value="type"' in page and 'name="missing_audio"' in page
    # A new benchmark needs the question and the reference: they are not marked optional.
    assert 'for="id_col_question" class="field-label">Question</label>' in page
    assert 'for="id_col_reference" class="field-label">Reference</label>' in page
    data = _mapping_post(record)
    preview = _post(admin_client, "annotation:import-preview", record, data)
    assert "<audio" not in preview  # no player for audio that does not exist
    assert "a.wav: no file" in preview and "not found: the question will wait for its audio" in preview
    assert "type: binary" in preview
    validation = _post(admin_client, "annotation:import-validate", record, data)
    assert "questions: 4 created" in validation and "Question.objects" not in validation
    result = _post(admin_client, "annotation:import-run", record, data)
    assert "4 questions without their audio (3 files not found) wait for it" in result
    assert "queue: all 8 candidate answers are complete with their imported ratings" in result
    assert "by type</a>" in result and "Attach audio to the 4 questions waiting for it" in result
    assert set(Question.objects.values_list("status", flat=True)) == {Question.Status.AUDIO_MISSING}
    assert set(CandidateAnswer.objects.values_list("metadata__type", flat=True)) == {
        "binary", "word", "short", "medium", "long"}
    leaderboard = admin_client.get(reverse("modelling:leaderboard"), {"benchmark": "AQEval", "by": "type"})
    page = leaderboard.content.decode()
    assert '<option value="type" selected>type (answer metadata)</option>' in page
    assert "type: binary" in page and "type: long" in page
    api = admin_client.get("/api/leaderboard/", {"benchmark": "AQEval", "by": "type"})
    assert api.status_code == 200 and [g["name"] for g in api.json()["groups"]] == [
        "binary", "long", "medium", "short", "word"]
    refused = admin_client.get("/api/leaderboard/", {"benchmark": "AQEval", "by": "typo"})
    assert refused.status_code == 400 and "modality, category, type" in refused.json()["by"][0]


def test_attach_audio_page_links_one_file_to_its_questions_and_makes_them_rateable(admin_client, tmp_path):
    _upload(admin_client, write_csv(tmp_path / "val.csv", AQEVAL_COLUMNS, AQEVAL_ROWS))
    record = TableImport.objects.get()
    _post(admin_client, "annotation:import-run", record, _mapping_post(record))
    url = reverse("annotation:import-audio-attach")
    page = admin_client.get(url, {"benchmark": "AQEval"}).content.decode()
    assert "AQEval (4 questions waiting)" in page
    wav = write_wav(tmp_path / "a.wav")
    response = admin_client.post(url, {"benchmark": "AQEval",
                                       "audio_files": [SimpleUploadedFile("a.wav", wav.read_bytes())]})
    page = response.content.decode()
    assert response.status_code == 200
    assert "1 audio file attached to 2 questions of &#x27;AQEval&#x27; (2 of them now rateable)" in page
    assert "2 questions still wait for their audio" in page
    attached = Question.objects.filter(audio__isnull=False)
    assert set(attached.values_list("audio_ref", "status")) == {("a.wav", Question.Status.ACTIVE)}
    response = admin_client.post(url, {"benchmark": "AQEval",
                                       "audio_files": [SimpleUploadedFile("a.wav", wav.read_bytes())]})
    assert response.status_code == 400 and "no file matches a question waiting for its audio" in \
        response.content.decode()
    assert AudioClip.objects.count() == 1
    folder = tmp_path / "zipped"
    folder.mkdir()
    write_wav(folder / "b.wav", pitch=500.0)
    archive = zip_folder(folder, tmp_path / "b.zip", prefix="clips/")
    response = admin_client.post(url, {"benchmark": "AQEval",
                                       "audio_files": [SimpleUploadedFile("b.zip", archive.read_bytes())]})
    assert "1 audio file attached to 1 question" in response.content.decode()
    assert Question.objects.get(audio_ref="b.wav").status == Question.Status.ACTIVE


def test_audio_not_found_is_offered_to_import_without_it(admin_client, tmp_path):
    folder = tmp_path / "wavs"
    folder.mkdir()
    write_wav(folder / "a.wav")
    audio = zip_folder(folder, tmp_path / "wavs.zip")
    _upload(admin_client, write_csv(tmp_path / "val.csv", AQEVAL_COLUMNS, AQEVAL_ROWS), audio)
    record = TableImport.objects.get()
    assert "missing_audio" not in record.mapping  # audio was given
    page = _post(admin_client, "annotation:import-validate", record, _mapping_post(record))
    assert "2 problems in the table's 8 rows (4 questions)" in page
    assert "The audio of 2 of 3 audio files was not found" in page
    offer = reverse("annotation:import-allow-missing-audio", args=[record.pk])
    assert offer in page and "Import without the audio and validate again" in page
    response = admin_client.post(offer)
    assert response.status_code == 302
    record.refresh_from_db()
    assert record.mapping["missing_audio"] == "allow"
    job = Job.objects.filter(kind=Job.Kind.IMPORT).latest("pk")
    assert job.params["dry_run"] and job.params["result"]["ok"]
    assert job.params["result"]["questions_waiting_audio"] == 2
    page = admin_client.get(reverse("annotation:import", args=[record.pk])).content.decode()
    [checkbox] = re.findall(r'<input type="checkbox" name="missing_audio"[^>]*>', page)
    assert " checked" in checkbox


def test_a_dry_run_over_a_thousand_problems_counts_rows_questions_and_all_problems(admin_client, tmp_path):
    rows = [(f"q{i}", "R", "m", "A", "7") for i in range(1200)]  # 7 is on no scale: one problem per row
    table = write_csv(tmp_path / "big.csv", ["question", "reference", "model", "response", "score"], rows)
    _upload(admin_client, table, benchmark="Big")
    record = TableImport.objects.get()
    page = _post(admin_client, "annotation:import-validate", record,
                 _mapping_post(record, scale_table="0=1, 1=5", scale_min=None, scale_max=None))
    assert "1200 problems (the first 1000 listed) in the table's 1200 rows (1200 questions)" in page
    assert "1200 rows read · 1200 questions" in page
    job = Job.objects.filter(kind=Job.Kind.IMPORT).latest("pk")
    assert (job.done, job.total, job.params["result"]["n_problems"]) == (1200, 1200, 1200)


def test_a_toolkit_judge_file_from_the_browser_with_its_foreign_rows_left_out(admin_client, tmp_path):
    mmau = [{"id": f"m{i}", "audio_id": f"./a/{i}.wav", "question": "What is heard?", "choices": [f"x{i}", f"y{i}"],
             "answer": f"x{i}", "task": "sound", "category": "c", "sub-category": "s", "difficulty": "easy"}
            for i in range(3)]
    path = tmp_path / "mmau.json"
    path.write_text(json.dumps(mmau))
    benchmark_import(path=path, file_format="mmau", name="MMAU")
    details = [{"question": f"Question:\nWhat is heard?\nChoices:\nx{i} y{i}", "reference": f"x{i}",
                "model_prediction": f"x{i}", "judge_response": "Rating: 5", "rate_score": 5.0, "success": 1}
               for i in (2, 0, 1)]
    details.append({**details[0], "question": "Question:\nFor the given audio, identify the source of the whoop."})
    judge_file = tmp_path / "mmau_mini_test_llama3_70b_judge_score.json"
    judge_file.write_text(json.dumps({"llama3_70b_judge": {"judge_score": 100.0}, "details": details}))
    _upload(admin_client, judge_file, benchmark="MMAU", preset="audiobench", lalm="Qwen")
    record = TableImport.objects.get()
    assert record.mapping["judge"] == {"name": "audiobench:llama3-70b", "scale": {"min": 0, "max": 5}}
    page = admin_client.get(reverse("annotation:import", args=[record.pk])).content.decode()
    assert 'value="audiobench:llama3-70b"' in page
    refused = _post(admin_client, "annotation:import-validate", record, _mapping_post(record))
    assert "no question of the benchmark has this text" in refused
    result = _post(admin_client, "annotation:import-run", record, _mapping_post(record, skip_unmatched="on"))
    assert "rows left out (their question is not in the benchmark): 1: row 4" in result
    assert "judge scores of audiobench:llama3-70b: 3 created" in result
    assert set(JudgeRating.objects.values_list("judge_name", "score")) == {("audiobench:llama3-70b", 5.0)}
    assert dict(CandidateAnswer.objects.values_list("question_version__question__external_id", "text")) == {
        "m0": "x0", "m1": "x1", "m2": "x2"}
