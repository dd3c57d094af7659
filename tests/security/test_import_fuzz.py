"""Import files fuzzed with hypothesis: truncated JSON, wrong types, huge strings, unknown codes, scores out of range,
duplicate ids. Every importer either succeeds or raises ``ImportFormatError`` naming the file, and then the
database is exactly as before (annotation.services.importers). Bounded: few examples, a deadline per example.
"""
import copy
import itertools
import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.models import LALM, AudioClip, AuditEvent, Benchmark, CandidateAnswer, Question, QuestionVersion, Rating
from annotation.services.importers import (
    ImportFormatError,
    benchmark_import,
    candidate_answers_import,
    ratings_import_orca,
)

pytestmark = pytest.mark.django_db

FUZZ = settings(
    max_examples=30,
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
_names = itertools.count()

MMAU = [
    {"id": "fz-mmau-1", "audio_id": "./a/1.wav", "question": "Who speaks?", "choices": ["Man", "Woman"],
     "answer": "Man", "task": "speech", "category": "Reasoning", "sub-category": "Speaker"},
    {"id": "fz-mmau-2", "audio_id": "./a/2.wav", "question": "What is heard?", "choices": ["Dog", "Cat"],
     "answer": "Dog", "task": "sound", "category": ["Perception"], "sub-category": "Events"},
]
MMAR = [
    {"id": "fz-mmar-1", "audio_path": "./a/3.wav", "question": "Which place?", "choices": ["Hills", "Sea"],
     "answer": "Sea", "modality": "mix-sound-speech", "category": "Semantic", "sub-category": "Scene",
     "thinking": "Waves and gulls."},
]
ORCA = {
    "fz-orca-1_M1_1": {"question": "Who speaks?", "reference": "A man", "rationale": "Low voice.",
                       "transcription": "", "candidate": "A man.", "ratings": [5, 4, None],
                       "feedback": [None, ["a", "too short"], ["u"]]},
    "fz-orca-2_M2_1": {"question": "What is heard?", "reference": "A dog", "rationale": "Barks.",
                       "transcription": "woof", "candidate": "A cat.", "ratings": [1, 2],
                       "feedback": [["r"], None]},
}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)
not_a_string = json_values.filter(lambda value: not isinstance(value, str))
huge_text = st.integers(min_value=250, max_value=200_000).map(lambda n: "x" * n)


def database_state():
    """Row counts of everything an importer writes."""
    models = (Benchmark, AudioClip, Question, QuestionVersion, LALM, CandidateAnswer, Rating, AuditEvent,
              get_user_model())
    return {model.__name__: model.objects.count() for model in models}


def write(tmp_path, suffix: str, content: str):
    path = tmp_path / f"fuzz-{next(_names)}.{suffix}"
    path.write_text(content, encoding="utf-8")
    return path


def jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def import_is_clean_or_refused(run, path, *, must_fail: bool):
    """Run one import: success leaves its rows; ImportFormatError names the file and leaves the database unchanged."""
    before = database_state()
    try:
        run(path)
    except ImportFormatError as error:
        assert error.file and str(error).startswith(error.file), str(error)
        assert error.problem
        assert database_state() == before, f"a refused import wrote rows: {error}"
        return error
    assert not must_fail, f"{path.name} was accepted"
    return None


def mmau(path):
    return benchmark_import(path=path, file_format="mmau", name="Fuzz MMAU")


def mmar(path):
    return benchmark_import(path=path, file_format="mmar", name="Fuzz MMAR")


def orca(path):
    return ratings_import_orca(path=path, benchmark_name="Fuzz ORCA")


# --- Truncated files ----------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_truncated_files_are_refused_or_import_a_whole_prefix(tmp_path, data):
    kind = data.draw(st.sampled_from(["mmau", "mmar", "orca"]))
    text = {"mmau": json.dumps(MMAU), "mmar": jsonl(MMAR), "orca": json.dumps(ORCA)}[kind]
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    runner = {"mmau": mmau, "mmar": mmar, "orca": orca}[kind]
    # A JSON document cut anywhere is invalid; JSONL cut just after or just before a line's newline is a shorter
    # valid file (its last record is complete).
    must_fail = kind != "mmar" or not (cut == 0 or text[:cut].endswith("\n") or text[cut] == "\n")
    error = import_is_clean_or_refused(runner, write(tmp_path, "json", text[:cut]), must_fail=must_fail and cut > 0)
    if cut == 0 and kind == "mmar":
        return
    if error is not None and kind != "mmar":
        assert "invalid JSON" in error.problem or "expected" in error.problem


# --- Wrong types, huge strings, unknown modality -------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_a_benchmark_field_of_the_wrong_type_is_refused(tmp_path, data):
    file_format = data.draw(st.sampled_from(["mmau", "mmar"]))
    records = copy.deepcopy(MMAU if file_format == "mmau" else MMAR)
    index = data.draw(st.integers(min_value=0, max_value=len(records) - 1))
    field = data.draw(
        st.sampled_from(["id", "question", "answer", "choices", "task" if file_format == "mmau" else "modality"])
    )
    value = data.draw(json_values.filter(lambda v: not isinstance(v, list) or not all(isinstance(s, str) for s in v))
                      if field == "choices" else not_a_string)
    records[index][field] = value
    content = json.dumps(records) if file_format == "mmau" else jsonl(records)
    error = import_is_clean_or_refused(mmau if file_format == "mmau" else mmar, write(tmp_path, "json", content),
                                       must_fail=True)
    assert error.field.startswith(field), str(error)
    assert error.where, str(error)


@FUZZ
@given(data=st.data(), text=huge_text)
def test_huge_ids_are_refused_and_huge_texts_are_stored_whole(tmp_path, data, text):
    records = copy.deepcopy(MMAU)
    field = data.draw(st.sampled_from(["id", "category", "question", "answer"]))
    records[0][field] = text
    error = import_is_clean_or_refused(mmau, write(tmp_path, "json", json.dumps(records)),
                                       must_fail=field in ("id", "category"))
    if error is not None:
        assert error.field == field and "longer than" in error.problem
    else:
        assert QuestionVersion.objects.filter(
            **{"question_text" if field == "question" else "reference_answer": text}
        ).exists()


@FUZZ
@given(label=st.text(min_size=0, max_size=30).filter(
    lambda s: s.strip().lower() not in ("speech", "sound", "music", "mixed")
    and not s.strip().lower().startswith("mix-")))
def test_an_unknown_modality_is_refused(tmp_path, label):
    records = copy.deepcopy(MMAR)
    records[0]["modality"] = label
    error = import_is_clean_or_refused(mmar, write(tmp_path, "jsonl", jsonl(records)), must_fail=True)
    assert error.field == "modality"


# --- ORCA annotations: scores, codes, types -----------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_orca_scores_out_of_range_or_of_the_wrong_type_are_refused(tmp_path, data):
    items = copy.deepcopy(ORCA)
    score = data.draw(st.integers().filter(lambda n: not 1 <= n <= 5)
                      | st.floats(allow_nan=True) | st.booleans() | st.text(max_size=3))
    key = data.draw(st.sampled_from(sorted(items)))
    position = data.draw(st.integers(min_value=0, max_value=len(items[key]["ratings"]) - 1))
    items[key]["ratings"][position] = score
    error = import_is_clean_or_refused(orca, write(tmp_path, "json", json.dumps(items)), must_fail=True)
    assert (error.where, error.field) == (f"key {key!r}", f"ratings[{position}]"), str(error)


@FUZZ
@given(data=st.data())
def test_orca_unknown_feedback_codes_are_refused(tmp_path, data):
    items = copy.deepcopy(ORCA)
    code = data.draw(st.characters(exclude_characters="qaruesQARUE", exclude_categories=["Z", "Cc", "Cs"]))
    key = data.draw(st.sampled_from(sorted(items)))
    items[key]["feedback"][0] = [code]
    error = import_is_clean_or_refused(orca, write(tmp_path, "json", json.dumps(items)), must_fail=True)
    assert error.field == "feedback[0][0]", str(error)


@FUZZ
@given(data=st.data())
def test_orca_fields_of_the_wrong_type_are_refused(tmp_path, data):
    items = copy.deepcopy(ORCA)
    key = data.draw(st.sampled_from(sorted(items)))
    field = data.draw(st.sampled_from(["question", "reference", "rationale", "candidate", "ratings", "feedback"]))
    value = data.draw(not_a_string if field not in ("ratings", "feedback") else
                      json_values.filter(lambda v: not isinstance(v, list)))
    items[key][field] = value
    error = import_is_clean_or_refused(orca, write(tmp_path, "json", json.dumps(items)), must_fail=True)
    assert error.field.startswith(field) and error.where == f"key {key!r}", str(error)


@FUZZ
@given(document=json_values)
def test_any_json_document_is_imported_or_refused_cleanly(tmp_path, document):
    for runner, content in ((orca, json.dumps(document)), (mmau, json.dumps(document)), (mmar, json.dumps(document))):
        import_is_clean_or_refused(runner, write(tmp_path, "json", content), must_fail=False)


# --- Duplicate ids -----------------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_duplicate_ids_are_refused(tmp_path, data):
    kind = data.draw(st.sampled_from(["mmau", "mmar", "candidates"]))
    if kind == "candidates":
        benchmark_import(path=write(tmp_path, "jsonl", jsonl(MMAR)), file_format="mmar", name="Fuzz MMAR")
        rows = [
            {"id": "fz-mmar-1", "answer_prediction": "Sea"},
            {"id": "fz-mmar-1", "answer_prediction": data.draw(st.text(max_size=10))},
        ]
        run = lambda path: candidate_answers_import(path=path, lalm_name="fuzz-lalm", benchmark_name="Fuzz MMAR")  # noqa: E731
        content = jsonl(rows)
    else:
        records = copy.deepcopy(MMAU if kind == "mmau" else MMAR)
        records.append(copy.deepcopy(records[0]) | {"question": data.draw(st.text(max_size=10))})
        run = mmau if kind == "mmau" else mmar
        content = json.dumps(records) if kind == "mmau" else jsonl(records)
    error = import_is_clean_or_refused(run, write(tmp_path, "json", content), must_fail=True)
    assert "duplicate" in error.problem.lower() or "more than once" in error.problem.lower(), str(error)
