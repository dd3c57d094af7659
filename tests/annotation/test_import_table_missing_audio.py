"""Tables without their audio or an id column (issue: an AQEval-like table, the same question text for different
clips, no audio at hand, a per-answer ``type``): ``"missing_audio": "allow"``, composite question keys, questions
waiting for their audio (kept out of every queue, their imported ratings counted) and the audio attached later —
by an import with the audio or by the Attach audio service — to the right questions, idempotently."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import LALM, AudioClip, CandidateAnswer, Question
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.importers import TableImportError, table_import
from annotation.services.importers.table_audio import benchmark_audio_attach
from annotation.services.importers.table_guess import mapping_guess_document
from annotation.services.importers.table_sources import table_read
from tests.factories import AnnotatorFactory
from tests.table_files import (
    AQEVAL_COLUMNS,
    AQEVAL_MAPPING,
    AQEVAL_ROWS,
    group_means,
    write_csv,
    write_wav,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def aqeval_csv(tmp_path):
    return write_csv(tmp_path / "val.csv", AQEVAL_COLUMNS, AQEVAL_ROWS)


def _questions(benchmark="AQEval") -> dict[tuple[str, str], Question]:
    """The benchmark's questions by (audio reference, question text)."""
    return {(q.audio_ref, q.current_version.question_text): q
            for q in Question.objects.filter(benchmark__name=benchmark).select_related("current_version")}


def test_the_guessed_mapping_of_a_table_without_audio_or_ids_is_the_one_that_imports_it(aqeval_csv):
    guess = mapping_guess_document(table_read(aqeval_csv), audio_given=False)
    assert guess == {**AQEVAL_MAPPING, "imported_ratings": "complete"}
    assert mapping_guess_document(table_read(aqeval_csv), audio_given=True).get("missing_audio") is None


def test_the_command_imports_it_without_audio_or_an_id_column_and_its_questions_wait(tmp_path, aqeval_csv, settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({**AQEVAL_MAPPING, "imported_ratings": "need_k"}))
    out = StringIO()
    call_command("import_table", str(aqeval_csv), "--benchmark", "AQEval", "--mapping", str(mapping), stdout=out)
    printed = out.getvalue()
    assert "questions: 4 created" in printed and "candidate answers: 8 created" in printed
    assert "4 questions without their audio (3 files not found) wait for it: not served to raters" in printed
    assert "queue: 0 candidate answers offered to annotators, 8 waiting for their question's audio" in printed
    questions = _questions()
    # The same text for two clips is two questions; one clip behind two texts is two questions.
    assert set(questions) == {("a.wav", "Are people speaking?"), ("b.wav", "Are people speaking?"),
                              ("c.wav", "What is the source of the sound?"), ("a.wav", "What else can be heard?")}
    assert {q.status for q in questions.values()} == {Question.Status.AUDIO_MISSING}
    assert questions[("b.wav", "Are people speaking?")].current_version.reference_answer == "no"
    assert all(q.audio_id is None for q in questions.values())
    # Imported ratings count (each answer has its one rating) …
    candidates = CandidateAnswer.objects.filter(question_version__question__benchmark__name="AQEval")
    assert sorted(candidates.values_list("valid_rating_count", flat=True)) == [1] * 8
    assert dict(candidates.values_list("text", "metadata__type"))["No one is speaking."] == "short"
    # … but the answers still needing ratings are not served while their question waits for its audio.
    assert assignment_next_for_annotator(annotator=AnnotatorFactory()) is None


def test_without_missing_audio_the_command_refuses_and_says_what_to_do(tmp_path, aqeval_csv):
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps({k: v for k, v in AQEVAL_MAPPING.items() if k != "missing_audio"}))
    err = StringIO()
    with pytest.raises(CommandError) as excinfo:
        call_command("import_table", str(aqeval_csv), "--benchmark", "AQEval", "--mapping", str(mapping), stderr=err)
    message = str(excinfo.value)
    assert message.startswith("val.csv: 3 problem(s) in 8 rows (4 questions), nothing was written")
    assert '"missing_audio": "allow"' in message and "The audio of 3 of 3 audio files was not found" in message
    assert "row 1: column 'filename': value 'a.wav': audio not found" in err.getvalue()
    assert not Question.objects.exists()


def test_a_composite_question_key_tells_apart_clips_with_the_same_question(aqeval_csv):
    mapping = {k: v for k, v in AQEVAL_MAPPING.items() if k != "missing_audio"}
    mapping["columns"] = {k: v for k, v in mapping["columns"].items() if k != "audio"}
    mapping["question_key"] = ["filename", "question"]
    summary = table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=mapping)
    assert (summary.questions_created, summary.candidates_created, summary.ratings_created) == (4, 8, 8)
    assert set(Question.objects.values_list("external_id", flat=True)) == {
        "a.wav | Are people speaking?", "b.wav | Are people speaking?", "c.wav | What is the source of the sound?",
        "a.wav | What else can be heard?"}
    assert set(Question.objects.values_list("status", flat=True)) == {Question.Status.ACTIVE}  # no audio mapped
    again = table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=mapping)
    assert (again.questions_unchanged, again.candidates_unchanged, again.ratings_unchanged) == (4, 8, 8)
    # Without the key (and without audio) the shared text merges two clips: refused with the row that differs.
    mapping.pop("question_key")
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=aqeval_csv, benchmark_name="Merged", mapping=mapping)
    assert "row 3: column 'reference': value 'no': differs from row 1 of the same question ('yes')" in [
        str(p) for p in excinfo.value.problems]


def test_a_later_import_with_the_audio_attaches_it_by_reference_and_makes_the_questions_rateable(
        tmp_path, aqeval_csv, settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    mapping = {**AQEVAL_MAPPING, "imported_ratings": "need_k"}
    table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=mapping)
    wavs = tmp_path / "wavs"
    wavs.mkdir()
    write_wav(wavs / "a.wav")
    summary = table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=mapping, audio_root=wavs)
    assert (summary.audio_files, summary.audio_linked, summary.audio_attached) == (1, 2, 2)
    assert (summary.questions_waiting_audio, summary.candidates_unchanged, summary.ratings_unchanged) == (2, 8, 8)
    questions = _questions()
    clip = AudioClip.objects.get()
    for key in (("a.wav", "Are people speaking?"), ("a.wav", "What else can be heard?")):
        assert (questions[key].audio_id, questions[key].status) == (clip.pk, Question.Status.ACTIVE)
    for key in (("b.wav", "Are people speaking?"), ("c.wav", "What is the source of the sound?")):
        assert (questions[key].audio_id, questions[key].status) == (None, Question.Status.AUDIO_MISSING)
    assignment = assignment_next_for_annotator(annotator=AnnotatorFactory())
    assert assignment.candidate.question_version.question.audio_ref == "a.wav"
    again = table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=mapping, audio_root=wavs)
    assert (again.audio_linked, again.audio_attached, again.questions_unchanged) == (0, 0, 4)
    assert AudioClip.objects.count() == 1


def test_the_attach_service_links_one_file_to_every_question_waiting_for_it_once(tmp_path, aqeval_csv):
    table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=AQEVAL_MAPPING)
    benchmark = Question.objects.first().benchmark
    wav = write_wav(tmp_path / "a.wav")
    summary = benchmark_audio_attach(benchmark=benchmark, files={"a.wav": wav, "stray.wav": wav})
    assert (summary.files, summary.linked, summary.activated, summary.still_waiting) == (1, 2, 2, 2)
    assert summary.unused == ["stray.wav"]
    waiting = Question.objects.filter(status=Question.Status.AUDIO_MISSING)
    assert set(waiting.values_list("audio_ref", flat=True)) == {"b.wav", "c.wav"}
    with pytest.raises(TableImportError, match="no file matches a question waiting for its audio"):
        benchmark_audio_attach(benchmark=benchmark, files={"a.wav": wav})  # attached already: nothing to do
    not_audio = tmp_path / "b.wav"
    not_audio.write_bytes(b"not audio at all")
    with pytest.raises(TableImportError) as excinfo:
        benchmark_audio_attach(benchmark=benchmark, files={"b.wav": not_audio})
    assert "'b.wav'" in str(excinfo.value) and waiting.count() == 2
    assert AudioClip.objects.count() == 1


def test_leaderboard_by_a_candidate_metadata_field_gives_the_files_means(aqeval_csv):
    table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=AQEVAL_MAPPING)
    out = StringIO()
    call_command("leaderboard", "--benchmark", "AQEval", "--by", "type", "--json", stdout=out)
    board = json.loads(out.getvalue())
    shown = {(group["name"], row["lalm"]): row["mean_rating"] for group in board["groups"] for row in group["rows"]}
    expected = group_means(AQEVAL_ROWS, group=2, model=5, score=7)
    assert set(shown) == set(expected)
    for key, mean in expected.items():
        assert shown[key] == pytest.approx(1 + 4 * mean, abs=0.006), key  # 0/0.5/1 → 1/3/5
    with pytest.raises(CommandError, match="by must be one of modality, category, type"):
        call_command("leaderboard", "--benchmark", "AQEval", "--by", "typo")


def test_lalms_of_a_table_show_their_provider_as_imported_from_a_file(aqeval_csv):
    table_import(path=aqeval_csv, benchmark_name="AQEval", mapping=AQEVAL_MAPPING)
    assert {lalm.get_provider_display() for lalm in LALM.objects.all()} == {"Imported answers (from a file)"}


def test_the_real_aqeval_table_imports_as_it_is_and_its_type_breakdown_matches_the_file(shared_data):
    path = shared_data / "aqeval_val" / "val.csv"
    mapping = mapping_guess_document(table_read(path), audio_given=False)
    assert mapping["candidate_metadata"] == {"type": "type"} and mapping["missing_audio"] == "allow"
    summary = table_import(path=path, benchmark_name="AQEval val", mapping=mapping)
    assert (summary.questions_created, summary.candidates_created, summary.ratings_created) == (496, 1968, 1968)
    assert summary.questions_waiting_audio == 496 and summary.answers_complete == 1968
    out = StringIO()
    call_command("leaderboard", "--benchmark", "AQEval val", "--by", "type", "--json", stdout=out)
    board = json.loads(out.getvalue())
    import csv

    with path.open(encoding="utf-8") as fh:
        rows = [tuple(r.values()) for r in csv.DictReader(fh)]
    expected = group_means(rows, group=2, model=5, score=7)
    shown = {(group["name"], row["lalm"]): row["mean_rating"] for group in board["groups"] for row in group["rows"]}
    assert set(shown) == set(expected)
    for key, mean in expected.items():
        assert shown[key] == pytest.approx(1 + 4 * mean, abs=0.006), key
