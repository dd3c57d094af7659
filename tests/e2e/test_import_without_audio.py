"""The newcomer of issue #33 in Chromium: ``../shared/data/aqeval_val/val.csv`` (1,968 answers of 4 LALMs, no id
column, no audio) imported from the browser without editing it — the wizard guesses the label column, its scale,
the per-answer ``type`` and “Audio not at hand” — then the leaderboard broken down by answer type, then one audio
file attached to its question on the Attach audio page. Screenshots of each page go to ``var/screenshots/admin/``
(``aqeval-*``); the pages pass axe-core (checked in a second context that may inject it)."""
import re
from urllib.parse import quote

import pytest

from annotation.models import CandidateAnswer, Question, Rating
from tests.e2e.helpers import axe_violations as _axe
from tests.e2e.helpers import login
from tests.e2e.helpers import screenshot as _shot
from tests.factories import UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]

CLIP = "-Mo7R6zQ23M.wav"  # the audio of row 1's question ("What other environmental features …")


def test_a_newcomer_imports_aqeval_without_audio_reads_the_type_breakdown_and_attaches_one_clip(
    live_server, page, browser, settings, tmp_path, axe_path, shared_data
):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    settings.MODELLING_BOOTSTRAP_RESAMPLES = 20
    UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"])  # password "pw"
    page.set_default_timeout(30_000)
    login(page, live_server.url, "adm")

    page.get_by_role("link", name="Data", exact=True).click()
    page.get_by_role("link", name="New benchmark / Add data").click()
    page.get_by_label("Benchmark").fill("AQEval val")
    page.get_by_label("Table file").set_input_files(str(shared_data / "aqeval_val" / "val.csv"))
    page.get_by_role("button", name="Read the table").click()
    page.get_by_role("heading", name="Detected columns and first rows").wait_for()

    # The wizard's guesses: the label column and its scale, the per-answer type, and no audio at hand.
    assert page.get_by_label("Rating (optional)", exact=True).input_value() == "final_annotation"
    assert page.get_by_label("Rating scale: values").input_value() == "0=1, 0.5=3, 1=5"
    metadata = page.get_by_role("group", name=re.compile("Attributes of each answer"))
    assert metadata.get_by_label("type", exact=True).is_checked()
    assert page.get_by_label("Audio not at hand: import the questions without it").is_checked()
    assert page.get_by_text("No audio files were given:").is_visible()
    record_url = page.url
    _shot(page, "admin", "aqeval-1-wizard")

    # The preview plays no audio that does not exist.
    page.get_by_role("button", name="Preview ten rows").click()
    page.locator("#import-preview table").wait_for()
    assert page.locator("#import-preview audio").count() == 0
    assert page.locator("#import-preview").get_by_text(f"{CLIP}: no file").first.is_visible()
    _shot(page, "admin", "aqeval-2-preview")

    page.get_by_role("button", name="Validate (dry run)").click()
    page.get_by_text("questions: 496 created").wait_for()
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("#import-job", has_text="Import #").get_by_text("Done").wait_for()
    assert CandidateAnswer.objects.count() == 1968 and Rating.objects.count() == 1968
    assert Question.objects.filter(status=Question.Status.AUDIO_MISSING).count() == 496
    assert page.get_by_text("queue: all 1,968 candidate answers are complete").is_visible()
    _shot(page, "admin", "aqeval-3-imported")

    # The leaderboard broken down by answer type (the first page with statistics imports scipy: slow).
    page.get_by_role("link", name="Leaderboard of AQEval val by type").click(timeout=120_000)
    page.get_by_role("heading", name="LALM leaderboard: AQEval val").wait_for(timeout=120_000)
    assert page.get_by_label("Breakdown").input_value() == "type"
    for kind in ("binary", "word", "short", "medium", "long"):
        assert page.get_by_text(f"type: {kind}", exact=True).first.is_visible()
    _shot(page, "admin", "aqeval-4-leaderboard-by-type")

    # Later: one audio file attached to its question, which becomes rateable.
    page.goto(record_url)
    page.get_by_role("link", name="Attach audio to the 496 questions waiting for it").click()
    wav = (shared_data / "af_demo_audio" / "58969.wav").read_bytes()
    page.get_by_label("Audio files").set_input_files([{"name": CLIP, "mimeType": "audio/wav", "buffer": wav}])
    page.get_by_role("button", name="Attach").click()
    page.get_by_text("1 audio file attached to 1 question of 'AQEval val' (1 of them now rateable)").wait_for()
    assert page.get_by_text("495 questions still wait for their audio").is_visible()
    question = Question.objects.get(audio_ref=CLIP)
    assert question.status == Question.Status.ACTIVE and question.audio is not None
    _shot(page, "admin", "aqeval-5-audio-attached")

    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    checked = context.new_page()
    checked.set_default_timeout(60_000)
    try:
        login(checked, live_server.url, "adm")
        checked.goto(record_url)
        checked.get_by_role("button", name="Preview ten rows").click()
        checked.locator("#import-preview table").wait_for()
        assert _axe(checked, axe_path) == []
        checked.goto(f"{live_server.url}/imports/attach-audio/?benchmark={quote('AQEval val')}")
        assert _axe(checked, axe_path) == []
        assert checked.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    finally:
        context.close()


def test_a_toolkit_judges_imported_scores_stand_beside_humans_on_the_comparison_page(
    live_server, page, browser, settings, tmp_path, axe_path
):
    """AudioBench's judge file (its ``details`` list) imported with the ``audiobench`` preset, one foreign row left
    out; with two human ratings per answer the comparison page shows the toolkit judge's row."""
    import json

    from annotation.services.importers import benchmark_import, table_import
    from annotation.services.importers.presets import preset_mapping
    from tests.factories import RatingFactory

    records = [{"id": f"m{i}", "audio_id": f"./a/{i}.wav", "question": f"What is heard in clip {i}?",
                "choices": [f"x{i}", f"y{i}"], "answer": f"x{i}", "task": "sound", "category": "c",
                "sub-category": "s", "difficulty": "easy"} for i in range(6)]
    mmau = tmp_path / "mmau.json"
    mmau.write_text(json.dumps(records))
    benchmark_import(path=mmau, file_format="mmau", name="MMAU mini")
    details = [{"question": f"Question:\n{r['question']}\nChoices:\n{' '.join(r['choices'])}", "reference": r["answer"],
                "model_prediction": r["choices"][i % 2], "judge_response": f"Rating: {1 - i % 2}",
                "rate_score": float(1 - i % 2), "success": 1} for i, r in enumerate(records)]
    details.append({**details[0], "question": "Question:\nFor the given audio, identify the source of the whoop."})
    judge_file = tmp_path / "mmau_mini_test_llama3_70b_judge_score.json"
    mean = sum(d["rate_score"] for d in details) / len(details)
    judge_file.write_text(json.dumps({"llama3_70b_judge": {"judge_score": mean * 100}, "details": details}))
    table_import(path=judge_file, benchmark_name="MMAU mini",
                 mapping={**preset_mapping("audiobench", lalm="Qwen"), "unmatched": "skip"})
    from annotation.models import CandidateAnswer

    for i, answer in enumerate(CandidateAnswer.objects.order_by("question_version__question__external_id")):
        for score in ((5, 4) if i % 2 == 0 else (1, 2)):
            RatingFactory(candidate=answer, score=score)
    UserFactory(username="exp", is_staff=True, roles=["expert"])
    page.set_default_timeout(30_000)
    login(page, live_server.url, "exp")
    page.goto(f"{live_server.url}/judges/compare/")
    assert page.get_by_role("rowheader", name="audiobench:llama3-70b / imported").first.is_visible()
    _shot(page, "expert", "aqeval-6-judge-comparison-audiobench")
    context = browser.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)
    checked = context.new_page()
    try:
        login(checked, live_server.url, "exp")
        checked.goto(f"{live_server.url}/judges/compare/")
        assert _axe(checked, axe_path) == []
    finally:
        context.close()
