"""Importers: MMAU/MMAR benchmarks, LALM candidate answers and ORCA annotation files (small files in tmp_path)."""
import json

import numpy as np
import pytest
import soundfile
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from annotation.models import LALM, AudioClip, Benchmark, CandidateAnswer, Question, QuestionVersion, Rating
from annotation.services.importers import (
    ImportFormatError,
    benchmark_import,
    candidate_answers_import,
    ratings_import_orca,
)
from annotation.services.versions import question_version_create
from tests.factories import AnnotatorFactory, RatingFactory

pytestmark = pytest.mark.django_db

MMAU_RECORDS = [
    {
        "id": "mmau-1",
        "audio_id": "./test-mini-audios/mmau-1.wav",
        "question": "Identify the source of the speaking voice.",
        "choices": ["Man", "Woman", "Child", "Robot"],
        "answer": "Man",
        "dataset": "AudioSet",
        "task": "sound",
        "split": "test-mini",
        "category": "Reasoning",
        "sub-category": "Acoustic Source Inference",
        "difficulty": "medium",
    },
    {
        "id": "mmau-2",
        "audio_id": "./test-mini-audios/mmau-2.wav",
        "question": "What happens first?",
        "choices": ["A door closes", "A dog barks"],
        "answer": "A dog barks",
        "dataset": "Clotho",
        "task": "music",
        "split": "test-mini",
        "category": ["Reasoning"],
        "sub-category": "Temporal Event Reasoning",
        "difficulty": "hard",
    },
]

MMAR_RECORDS = [
    {
        "id": "mmar-1",
        "audio_path": "./audio/mmar-1.wav",
        "question": "What type of natural environment might this music come from?",
        "choices": ["Mountain Canyon", "Open Grassland"],
        "answer": "Open Grassland",
        "modality": "music",
        "category": "Cultural Layer",
        "sub-category": "Professional Knowledge and Reasoning",
        "language": None,
        "source": "youtube",
        "url": "https://www.youtube.com/watch?v=x",
        "timestamp": "00:01:32,00:02:02",
        "thinking": "Throat singing carries well over open landscapes.",
        "cue": ["Throat Singing"],
        "rubric": [],
    },
    {
        "id": "mmar-2",
        "audio_path": "./audio/clip-two.wav",
        "question": "Does the man think there is too much food?",
        "choices": ["Too little", "Too much"],
        "answer": "Too little",
        "modality": "mix-sound-speech",
        "category": "Semantic Layer",
        "sub-category": "Content Analysis",
        "language": "en",
        "thinking": "He asks for more.",
    },
]


def _write_json(path, data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _orca_item(**overrides):
    item = {
        "question": "What type of natural environment might this music come from?",
        "reference": "Open grassland",
        "rationale": "Throat singing and long song point to the steppe.",
        "transcription": "",
        "candidate": "A grassland.",
        "ratings": [5, 4],
        "feedback": [None, None],
    }
    item.update(overrides)
    return item


def _database_state():
    """Row counts of every table an importer writes, plus each question's current version."""
    models = (Benchmark, AudioClip, Question, QuestionVersion, LALM, CandidateAnswer, Rating, get_user_model())
    counts = {model.__name__: model.objects.count() for model in models}
    currents = sorted(Question.objects.values_list("external_id", "current_version_id"))
    texts = sorted(CandidateAnswer.objects.values_list("pk", "text", "valid_rating_count"))
    return counts, currents, texts


@pytest.fixture
def mmar(tmp_path):
    """The two MMAR records above imported as benchmark 'MMAR'."""
    benchmark_import(path=_write_jsonl(tmp_path / "MMAR-meta.jsonl", MMAR_RECORDS), file_format="mmar")
    return Benchmark.objects.get(name="MMAR")


# --- Benchmarks ----------------------------------------------------------------------------------------------


def test_mmau_import_makes_the_correct_choice_the_reference_answer_of_version_1(tmp_path):
    summary = benchmark_import(path=_write_json(tmp_path / "mmau.json", MMAU_RECORDS), file_format="mmau")

    assert (summary.benchmark.name, summary.created, summary.versions_created) == ("MMAU test-mini", 2, 2)
    question = Question.objects.get(external_id="mmau-1")
    version = question.current_version
    assert (version.number, version.source) == (1, QuestionVersion.Source.IMPORT)
    assert (version.question_text, version.reference_answer, version.rationale) == (
        "Identify the source of the speaking voice.",
        "Man",
        "",
    )
    assert (question.modality, question.modality_detail) == ("sound", "sound")
    assert (question.category, question.sub_category) == ("Reasoning", "Acoustic Source Inference")
    assert question.choices == ["Man", "Woman", "Child", "Robot"]
    assert question.extra == {"dataset": "AudioSet", "split": "test-mini", "difficulty": "medium"}
    assert question.audio_ref == "./test-mini-audios/mmau-1.wav"
    assert Question.objects.get(external_id="mmau-2").category == "Reasoning"  # given as ["Reasoning"]


def test_mmar_import_normalises_mixed_modalities_and_takes_thinking_as_the_rationale(mmar):
    mixed = Question.objects.get(external_id="mmar-2")
    assert (mixed.modality, mixed.modality_detail) == ("mixed", "mix-sound-speech")
    assert mixed.has_speech
    assert mixed.current_version.rationale == "He asks for more."
    music = Question.objects.get(external_id="mmar-1")
    assert music.modality == "music"
    assert music.extra["cue"] == ["Throat Singing"] and music.extra["language"] is None
    assert "thinking" not in music.extra


def test_importing_the_same_benchmark_again_changes_nothing(tmp_path, mmar):
    before = _database_state()
    summary = benchmark_import(path=tmp_path / "MMAR-meta.jsonl", file_format="mmar")
    assert (summary.created, summary.updated, summary.unchanged, summary.versions_created) == (0, 0, 2, 0)
    assert _database_state() == before


def test_a_changed_reference_answer_makes_a_new_current_version_that_keeps_a_later_transcript(tmp_path, mmar):
    question = Question.objects.get(external_id="mmar-2")
    question_version_create(
        question=question, source=QuestionVersion.Source.TRANSCRIPTION, transcript="I want more food."
    )
    changed = [MMAR_RECORDS[0], {**MMAR_RECORDS[1], "answer": "Too little food"}]

    summary = benchmark_import(path=_write_jsonl(tmp_path / "MMAR-v2.jsonl", changed), file_format="mmar")

    assert (summary.updated, summary.unchanged, summary.versions_created) == (1, 1, 1)
    question.refresh_from_db()
    version = question.current_version
    assert version.number == 3
    assert version.reference_answer == "Too little food"
    assert version.transcript == "I want more food."
    assert version.reason == "Benchmark import MMAR-v2.jsonl (mmar): changed reference answer"


def test_reimporting_an_unchanged_benchmark_keeps_later_versions_current(tmp_path, mmar):
    question = Question.objects.get(external_id="mmar-1")
    expert = question_version_create(question=question, source=QuestionVersion.Source.EXPERT, reference_answer="Steppe")
    benchmark_import(path=tmp_path / "MMAR-meta.jsonl", file_format="mmar")
    question.refresh_from_db()
    assert question.current_version == expert


def _write_wav(path, *, seconds=0.5, sample_rate=16000, channels=1, seed=0):
    frames = np.random.default_rng(seed).uniform(-0.1, 0.1, size=(int(seconds * sample_rate), channels))
    soundfile.write(str(path), frames, sample_rate, subtype="PCM_16")
    return path


def test_audio_dir_links_clips_by_id_or_by_the_audio_path_name(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    audio_dir = tmp_path / "clips"
    audio_dir.mkdir()
    _write_wav(audio_dir / "mmar-1.wav", seconds=1.5, sample_rate=22050, channels=2)
    _write_wav(audio_dir / "clip-two.flac", seconds=0.25)  # named after audio_path's stem, another extension

    path = _write_jsonl(tmp_path / "MMAR-meta.jsonl", MMAR_RECORDS)
    summary = benchmark_import(path=path, file_format="mmar", audio_dir=audio_dir)

    assert summary.audio_linked == 2
    clip = Question.objects.get(external_id="mmar-1").audio
    assert (clip.duration_s, clip.sample_rate, clip.channels, clip.original_name) == (1.5, 22050, 2, "mmar-1.wav")
    assert clip.file.read() == (audio_dir / "mmar-1.wav").read_bytes()
    assert Question.objects.get(external_id="mmar-2").audio.duration_s == 0.25
    again = benchmark_import(path=path, file_format="mmar", audio_dir=audio_dir)
    assert (again.audio_linked, again.unchanged, AudioClip.objects.count()) == (0, 2, 2)


def test_identical_audio_files_are_stored_once(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    audio_dir = tmp_path / "clips"
    audio_dir.mkdir()
    _write_wav(audio_dir / "mmau-1.wav")
    (audio_dir / "mmau-2.wav").write_bytes((audio_dir / "mmau-1.wav").read_bytes())
    benchmark_import(path=_write_json(tmp_path / "mmau.json", MMAU_RECORDS), file_format="mmau", audio_dir=audio_dir)
    assert AudioClip.objects.count() == 1
    assert set(Question.objects.values_list("audio", flat=True)) == {AudioClip.objects.get().pk}


def test_an_unreadable_audio_file_stops_the_import_and_leaves_no_copied_file(tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    audio_dir = tmp_path / "clips"
    audio_dir.mkdir()
    _write_wav(audio_dir / "mmar-1.wav")
    (audio_dir / "mmar-2.wav").write_text("not audio")
    path = _write_jsonl(tmp_path / "MMAR-meta.jsonl", MMAR_RECORDS)
    with pytest.raises(ImportFormatError, match=r"^MMAR-meta.jsonl: line 2: field audio: mmar-2.wav: not readable"):
        benchmark_import(path=path, file_format="mmar", audio_dir=audio_dir)
    assert _database_state()[0]["Question"] == 0
    assert not [p for p in (tmp_path / "media").rglob("*") if p.is_file()]


def test_import_benchmark_command_prints_the_counts(tmp_path, capsys):
    path = _write_json(tmp_path / "mmau.json", MMAU_RECORDS)
    call_command("import_benchmark", "--format", "mmau", "--name", "Mini", str(path))
    assert "Mini: 2 questions created, 0 updated, 0 unchanged" in capsys.readouterr().out


# --- Candidate answers ---------------------------------------------------------------------------------------


def test_candidates_attach_to_the_current_versions_and_create_the_lalm(tmp_path, mmar):
    rows = [{"id": "mmar-1", "answer_prediction": "Grassland"}, {"id": "mmar-2", "answer_prediction": "Too little"}]
    summary = candidate_answers_import(
        path=_write_jsonl(tmp_path / "preds.jsonl", rows), lalm_name="Qwen3-Omni", benchmark_name="MMAR"
    )
    assert (summary.created, summary.unchanged) == (2, 0)
    assert summary.lalm.provider == LALM.Provider.IMPORT
    candidate = CandidateAnswer.objects.get(question_version__question__external_id="mmar-1")
    assert candidate.text == "Grassland"
    assert candidate.question_version == Question.objects.get(external_id="mmar-1").current_version


def test_importing_candidates_again_is_idempotent_and_other_fields_can_be_chosen(tmp_path, mmar):
    rows = [{"id": "mmar-1", "answer_prediction": "Grassland", "short": "G"}]
    path = _write_jsonl(tmp_path / "preds.jsonl", rows)
    candidate_answers_import(path=path, lalm_name="A", benchmark_name="MMAR")
    before = _database_state()
    summary = candidate_answers_import(path=path, lalm_name="A", benchmark_name="MMAR")
    assert (summary.created, summary.updated, summary.unchanged) == (0, 0, 1)
    assert _database_state() == before
    call_command("import_candidates", "--lalm", "B", "--benchmark", "MMAR", "--field", "short", str(path))
    assert CandidateAnswer.objects.get(lalm__name="B").text == "G"


def test_a_changed_candidate_answer_replaces_the_text_only_while_it_has_no_ratings(tmp_path, mmar):
    candidate_answers_import(
        path=_write_jsonl(tmp_path / "a.jsonl", [{"id": "mmar-1", "answer_prediction": "Grassland"}]),
        lalm_name="A",
        benchmark_name="MMAR",
    )
    changed = _write_jsonl(tmp_path / "b.jsonl", [{"id": "mmar-1", "answer_prediction": "Steppe"}])
    assert candidate_answers_import(path=changed, lalm_name="A", benchmark_name="MMAR").updated == 1
    RatingFactory(candidate=CandidateAnswer.objects.get())
    before = _database_state()
    again = _write_jsonl(tmp_path / "c.jsonl", [{"id": "mmar-1", "answer_prediction": "Prairie"}])
    with pytest.raises(ImportFormatError, match="c.jsonl: line 1: field answer_prediction: differs .* has ratings"):
        candidate_answers_import(path=again, lalm_name="A", benchmark_name="MMAR")
    assert _database_state() == before


# --- ORCA annotations ----------------------------------------------------------------------------------------


def test_orca_feedback_codes_map_to_upper_case_and_free_text_becomes_the_comment(tmp_path, mmar):
    data = {
        "mmar-1_M2_1": _orca_item(
            ratings=[2, None, 4],
            feedback=[["r", "a", "the reference is wrong", "listen again"], ["e", "q"], ["u"]],
        )
    }
    summary = ratings_import_orca(path=_write_json(tmp_path / "seed.json", data))

    assert (summary.ratings_created, summary.skipped_unscored) == (3, 0)
    ratings = list(Rating.objects.order_by("id").values_list("annotator__username", "score", "codes", "comment"))
    assert ratings == [
        ("orca-annotator-1", 2, "AR", "the reference is wrong\nlisten again"),
        ("orca-annotator-2", None, "QE", ""),
        ("orca-annotator-3", 4, "U", ""),
    ]
    assert set(Rating.objects.values_list("source", flat=True)) == {Rating.Source.IMPORT}


def test_orca_import_makes_one_new_version_per_question_and_one_candidate_per_item(tmp_path, mmar):
    data = {"mmar-1_M2_1": _orca_item(), "mmar-1_M1_0": _orca_item(candidate="Forest", ratings=[1], feedback=[None])}
    summary = ratings_import_orca(path=_write_json(tmp_path / "seed_108_dev.json", data))

    assert (summary.questions_matched, summary.questions_created, summary.versions_created) == (1, 0, 1)
    question = Question.objects.get(external_id="mmar-1")
    version = question.current_version
    assert (version.number, version.source, version.reason) == (
        2,
        QuestionVersion.Source.IMPORT,
        "ORCA annotations seed_108_dev.json",
    )
    assert (version.reference_answer, version.rationale) == ("Open grassland", _orca_item()["rationale"])
    assert sorted(version.candidates.values_list("lalm__name", "text", "valid_rating_count")) == [
        ("M1_0", "Forest", 1),
        ("M2_1", "A grassland.", 2),
    ]
    assert LALM.objects.get(name="M2_1").provider == LALM.Provider.IMPORT


def test_imported_annotators_have_unusable_passwords_and_the_annotator_role(tmp_path, mmar):
    ratings_import_orca(path=_write_json(tmp_path / "seed.json", {"mmar-1_M2_1": _orca_item()}))
    for username in ("orca-annotator-1", "orca-annotator-2"):
        user = get_user_model().objects.get(username=username)
        assert not user.has_usable_password()
        assert list(user.groups.values_list("name", flat=True)) == ["annotator"]


def test_a_null_score_without_u_or_e_is_skipped_and_counted(tmp_path, mmar):
    data = {"mmar-1_M2_1": _orca_item(ratings=[None, None, 3], feedback=[["candidate answer empty"], ["a"], None])}
    summary = ratings_import_orca(path=_write_json(tmp_path / "seed.json", data))
    assert (summary.ratings_created, summary.skipped_unscored) == (1, 2)
    assert "skipped: unscored without U/E 2" in str(summary)
    rating = Rating.objects.get()
    assert (rating.annotator.username, rating.score) == ("orca-annotator-3", 3)
    assert rating.candidate.valid_rating_count == 1


def test_question_ids_no_benchmark_has_are_created_in_the_named_benchmark(tmp_path, mmar):
    data = {"unknown-9_M2_1": _orca_item()}
    summary = ratings_import_orca(path=_write_json(tmp_path / "seed.json", data), benchmark_name="ORCA extra")
    assert (summary.questions_matched, summary.questions_created, summary.versions_created) == (0, 1, 1)
    question = Question.objects.get(external_id="unknown-9")
    assert question.benchmark.name == "ORCA extra"
    assert question.current_version.number == 1


def test_importing_an_orca_file_again_changes_nothing(tmp_path, mmar):
    path = _write_json(tmp_path / "seed.json", {"mmar-1_M2_1": _orca_item(), "mmar-2_M2_1": _orca_item()})
    ratings_import_orca(path=path)
    before = _database_state()
    summary = ratings_import_orca(path=path)
    assert (summary.versions_created, summary.candidates_created, summary.ratings_created) == (0, 0, 0)
    assert (summary.candidates_existing, summary.ratings_existing) == (2, 4)
    assert _database_state() == before


def test_import_annotations_command_prints_the_summary(tmp_path, mmar, capsys):
    path = _write_json(tmp_path / "seed.json", {"mmar-1_M2_1": _orca_item()})
    call_command("import_annotations", "--format", "orca", str(path))
    out = capsys.readouterr().out
    assert "questions matched 1, created 0" in out and "ratings created 2" in out


# --- Malformed input: one error naming file, place and field; nothing written --------------------------------

ORCA_FILE = "seed_108_dev.json"


def _orca_file(tmp_path, item=None, key="mmar-1_M2_1"):
    data = {"mmar-2_M2_0": _orca_item(), key: item if item is not None else _orca_item()}
    return _write_json(tmp_path / ORCA_FILE, data)


def _raw(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _candidates_file(tmp_path, rows):
    return _write_jsonl(tmp_path / "preds.jsonl", rows)


MALFORMED = {
    "orca score 7": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(ratings=[5, 4, 7], feedback=[None] * 3))),
        "^seed_108_dev.json: key 'mmar-1_M2_1': field ratings\\[2\\]: score 7 is outside 1-5$",
    ),
    "orca score as a string": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(ratings=["3", 4]))),
        "^seed_108_dev.json: key 'mmar-1_M2_1': field ratings\\[0\\]: score '3' is a string, expected an integer",
    ),
    "orca score 2.5": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(ratings=[5, 2.5]))),
        "key 'mmar-1_M2_1': field ratings\\[1\\]: score 2.5 is a number, expected an integer 1-5 or null",
    ),
    "orca unknown code": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(feedback=[None, ["a", "x"]]))),
        "^seed_108_dev.json: key 'mmar-1_M2_1': field feedback\\[1\\]\\[1\\]: unknown feedback code 'x'",
    ),
    "orca missing field": (
        lambda t: ratings_import_orca(path=_orca_file(t, {k: v for k, v in _orca_item().items() if k != "reference"})),
        "^seed_108_dev.json: key 'mmar-1_M2_1': field reference: missing$",
    ),
    "orca wrong type": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(candidate=5))),
        "^seed_108_dev.json: key 'mmar-1_M2_1': field candidate: expected a string, got a number$",
    ),
    "orca feedback of another length": (
        lambda t: ratings_import_orca(path=_orca_file(t, _orca_item(feedback=[None]))),
        "key 'mmar-1_M2_1': field feedback: has 1 entries but ratings has 2",
    ),
    "orca key without a tag": (
        lambda t: ratings_import_orca(path=_orca_file(t, key="mmar-1")),
        "^seed_108_dev.json: key 'mmar-1': key is not '<question id>_<LALM tag>'",
    ),
    "orca bad json": (
        lambda t: ratings_import_orca(path=_raw(t, ORCA_FILE, '{\n  "a_M1_0": {"ratings": [1,]}\n}')),
        "^seed_108_dev.json: line 2 column 28: invalid JSON: Expecting value$",
    ),
    "orca not an object": (
        lambda t: ratings_import_orca(path=_raw(t, ORCA_FILE, "[]")),
        "^seed_108_dev.json: expected a JSON object keyed",
    ),
    "orca one question with two texts": (
        lambda t: ratings_import_orca(
            path=_write_json(
                t / ORCA_FILE, {"mmar-1_M2_1": _orca_item(), "mmar-1_M2_2": _orca_item(rationale="Other")}
            )
        ),
        "^seed_108_dev.json: key 'mmar-1_M2_2': field rationale: differs from key 'mmar-1_M2_1'",
    ),
    "mmau bad json": (
        lambda t: benchmark_import(path=_raw(t, "mmau.json", '[{"id": "a",}]'), file_format="mmau"),
        "^mmau.json: line 1 column 13: invalid JSON: Expecting property name",
    ),
    "mmau missing field": (
        lambda t: benchmark_import(
            path=_write_json(
                t / "mmau.json", [MMAU_RECORDS[0], {k: v for k, v in MMAU_RECORDS[1].items() if k != "answer"}]
            ),
            file_format="mmau",
        ),
        "^mmau.json: index 1 \\(id 'mmau-2'\\): field answer: missing$",
    ),
    "mmar wrong type": (
        lambda t: benchmark_import(
            path=_write_jsonl(t / "m.jsonl", [MMAR_RECORDS[0], {**MMAR_RECORDS[1], "choices": "Too little"}]),
            file_format="mmar",
        ),
        "^m.jsonl: line 2: field choices: expected a list of strings, got a string$",
    ),
    "mmar unknown modality": (
        lambda t: benchmark_import(
            path=_write_jsonl(t / "m.jsonl", [{**MMAR_RECORDS[0], "modality": "video"}]), file_format="mmar"
        ),
        "^m.jsonl: line 1: field modality: unknown modality 'video'",
    ),
    "mmar bad json line": (
        lambda t: benchmark_import(
            path=_raw(t, "MMAR-meta.jsonl", json.dumps(MMAR_RECORDS[0]) + "\n{oops\n"), file_format="mmar"
        ),
        "^MMAR-meta.jsonl: line 2 column 2: invalid JSON: ",
    ),
    "mmar duplicate id": (
        lambda t: benchmark_import(path=_write_jsonl(t / "m.jsonl", [MMAR_RECORDS[0]] * 2), file_format="mmar"),
        "^m.jsonl: line 2: field id: duplicate id \\(first at line 1\\)$",
    ),
    "candidates unknown question id": (
        lambda t: candidate_answers_import(
            path=_candidates_file(
                t, [{"id": "mmar-1", "answer_prediction": "x"}, {"id": "nope", "answer_prediction": "y"}]
            ),
            lalm_name="A",
            benchmark_name="MMAR",
        ),
        "^preds.jsonl: line 2: field id: no question 'nope' in benchmark 'MMAR'$",
    ),
    "candidates unknown benchmark": (
        lambda t: candidate_answers_import(
            path=_candidates_file(t, [{"id": "mmar-1", "answer_prediction": "x"}]), lalm_name="A", benchmark_name="B"
        ),
        "^preds.jsonl: benchmark 'B' does not exist",
    ),
    "candidates missing field": (
        lambda t: candidate_answers_import(
            path=_candidates_file(t, [{"id": "mmar-1", "prediction": "x"}]), lalm_name="A", benchmark_name="MMAR"
        ),
        "^preds.jsonl: line 1: field answer_prediction: missing$",
    ),
    "candidates wrong type": (
        lambda t: candidate_answers_import(
            path=_candidates_file(t, [{"id": "mmar-1", "answer_prediction": None}]),
            lalm_name="A",
            benchmark_name="MMAR",
        ),
        "^preds.jsonl: line 1: field answer_prediction: expected a string, got null$",
    ),
    "candidates line not an object": (
        lambda t: candidate_answers_import(
            path=_raw(t, "preds.jsonl", '["mmar-1"]\n'), lalm_name="A", benchmark_name="MMAR"
        ),
        "^preds.jsonl: line 1: expected a JSON object, got a list$",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_names_file_place_and_field_and_writes_nothing(case, tmp_path, mmar):
    # Earlier imports that a failing import must leave exactly as they are.
    ratings_import_orca(path=_write_json(tmp_path / "earlier.json", {"mmar-2_M1_1": _orca_item()}))
    before = _database_state()
    run, message = MALFORMED[case]
    with pytest.raises(ImportFormatError, match=message):
        run(tmp_path)
    assert _database_state() == before


def test_an_error_found_while_writing_rolls_back_everything_written_before_it(tmp_path, mmar):
    ratings_import_orca(path=_write_json(tmp_path / "earlier.json", {"mmar-2_M1_1": _orca_item()}))
    before = _database_state()
    # The first item is new (version, candidate, ratings are written); the second conflicts with a stored candidate.
    data = {"mmar-1_M2_1": _orca_item(), "mmar-2_M1_1": _orca_item(candidate="Something else")}
    with pytest.raises(ImportFormatError, match="^later.json: key 'mmar-2_M1_1': field candidate: differs from"):
        ratings_import_orca(path=_write_json(tmp_path / "later.json", data))
    assert _database_state() == before


def test_commands_turn_import_errors_into_command_errors(tmp_path, mmar):
    path = _orca_file(tmp_path, _orca_item(ratings=[5, 9]))
    with pytest.raises(CommandError, match="field ratings\\[1\\]: score 9 is outside 1-5"):
        call_command("import_annotations", "--format", "orca", str(path))
    with pytest.raises(CommandError, match="^nothing.jsonl: cannot read the file"):
        call_command("import_benchmark", "--format", "mmar", str(tmp_path / "nothing.jsonl"))
    with pytest.raises(CommandError, match="benchmark 'Nope' does not exist"):
        call_command("import_candidates", "--lalm", "A", "--benchmark", "Nope", str(_candidates_file(tmp_path, [])))


def test_reimport_leaves_other_annotators_ratings_alone_and_recounts_valid_ratings(tmp_path, mmar):
    path = _write_json(tmp_path / "seed.json", {"mmar-1_M2_1": _orca_item(ratings=[5], feedback=[None])})
    ratings_import_orca(path=path)
    candidate = CandidateAnswer.objects.get()
    RatingFactory(candidate=candidate, annotator=AnnotatorFactory())
    summary = ratings_import_orca(path=path)
    assert (summary.ratings_created, summary.ratings_existing) == (0, 1)
    assert Rating.objects.filter(candidate=candidate).count() == 2
    candidate.refresh_from_db()
    assert candidate.valid_rating_count == 2
