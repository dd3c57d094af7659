"""The table importer (annotation.services.importers.table) and ``manage.py import_table``: every format, both
layouts, the mapping's errors with row and column and nothing written, idempotent re-import, audio from a folder,
a zip, a URL, the file storage and bytes, and imported ratings from import-only accounts."""
import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from annotation.models import (
    LALM,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    ImportAccount,
    Question,
    QuestionVersion,
    Rating,
    TableImport,
)
from annotation.services.assignment import assignment_next_for_annotator
from annotation.services.importers import TableImportError, table_import
from annotation.services.importers.table_guess import mapping_guess, rating_scale_guess
from annotation.services.importers.table_mapping import mapping_parse
from annotation.services.versions import question_version_create
from tests.factories import AnnotatorFactory, BenchmarkFactory, QuestionFactory
from tests.table_files import (
    NEWCOMER_COLUMNS,
    NEWCOMER_MAPPING,
    NEWCOMER_ROWS,
    serving,
    write_csv,
    write_table,
    write_wav,
    write_wav_folder,
    zip_folder,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def wavs(tmp_path) -> Path:
    return write_wav_folder(tmp_path / "wavs")


@pytest.fixture
def newcomer_csv(tmp_path) -> Path:
    return write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)


def _store() -> dict:
    """Row counts of everything an import writes."""
    return {"benchmarks": Benchmark.objects.count(), "questions": Question.objects.count(),
            "versions": QuestionVersion.objects.count(), "lalms": LALM.objects.count(),
            "candidates": CandidateAnswer.objects.count(), "ratings": Rating.objects.count(),
            "users": get_user_model().objects.count(), "clips": AudioClip.objects.count(),
            "imports": TableImport.objects.count()}


def _snapshot(benchmark: str = "B") -> list[tuple]:
    """Everything the newcomer's import makes in ``benchmark``, as comparable tuples (formats must agree on it)."""
    candidates = CandidateAnswer.objects.filter(question_version__question__benchmark__name=benchmark)
    return sorted(
        (c.question_version.question.external_id, c.question_version.question_text,
         c.question_version.reference_answer, c.lalm.name, c.text, tuple(sorted(r.score for r in c.ratings.all())),
         c.question_version.question.audio.sha256 if c.question_version.question.audio else None)
        for c in candidates.select_related("question_version__question__audio", "lalm")
    )


def test_a_newcomers_csv_and_wav_folder_become_questions_candidate_answers_and_ratings(newcomer_csv, wavs):
    summary = table_import(path=newcomer_csv, benchmark_name="My benchmark", mapping=NEWCOMER_MAPPING,
                           audio_root=wavs)
    assert (summary.questions_created, summary.candidates_created, summary.ratings_created) == (3, 9, 9)
    assert summary.lalms == ["Gemini", "Qwen2-Audio", "SALMONN"] == summary.lalms_created
    bench = Benchmark.objects.get(name="My benchmark")
    # Without question_id, the three LALMs' answers to one (audio, question) are one question.
    questions = Question.objects.filter(benchmark=bench).select_related("current_version", "audio")
    assert sorted(q.current_version.question_text for q in questions) == [
        "How many people speak?", "What animal is barking?", "What instrument plays?"]
    assert {q.audio.original_name for q in questions} == {"dog.wav", "talk.wav", "piano.wav"}
    assert all(q.audio.duration_s == pytest.approx(0.2) for q in questions)
    # Scores 0 / 0.5 / 1 are ratings 1 / 3 / 5, source "import", counted on their candidate answers.
    scores = {(r.candidate.lalm.name, r.candidate.question_version.question_text): r.score
              for r in Rating.objects.select_related("candidate__lalm", "candidate__question_version")}
    assert scores[("Qwen2-Audio", "What animal is barking?")] == 5
    assert scores[("SALMONN", "What animal is barking?")] == 1
    assert scores[("Gemini", "What animal is barking?")] == 3
    assert set(Rating.objects.values_list("source", flat=True)) == {Rating.Source.IMPORT}
    assert set(CandidateAnswer.objects.values_list("valid_rating_count", "target_ratings")) == {(1, 1)}
    # Each question has its own random key (the queue's order within a priority level) and its 3 answers share it.
    keys = list(CandidateAnswer.objects.values_list("random_key", "question_version__question__random_key"))
    assert all(own == question for own, question in keys) and len({k for k, _ in keys}) == 3
    assert all(0 <= key < 1 for key, _ in keys)
    record = TableImport.objects.get()
    assert record.mapping["columns"]["lalm"] == "model" and record.benchmark == bench
    assert record.summary["candidates_created"] == 9


@pytest.mark.parametrize("fmt", ["csv", "tsv", "json", "jsonl", "parquet", "hf"])
def test_every_format_gives_the_same_benchmark(tmp_path, wavs, fmt):
    path = write_table(tmp_path / "table", fmt, NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    table_import(path=path, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    reference_rows = _snapshot()
    assert len(reference_rows) == 9
    assert TableImport.objects.get().file_format == fmt
    # The CSV import of the same rows into a second benchmark finds the same questions, answers and ratings.
    csv_path = write_table(tmp_path / "again", "csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    table_import(path=csv_path, benchmark_name="C", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert _snapshot("C") == reference_rows


def test_json_numbers_lists_and_nested_keys_are_read_as_the_mapping_says(tmp_path):
    data = [{"meta": {"id": 7, "cat": ["Reasoning", "Sound"]}, "q": "Which?", "ref": "This one.",
             "choices": ["This one.", "That one."], "answers": {"m": "That one."}, "score": 0.5}]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(data))
    mapping = {"columns": {"question_id": "meta.id", "category": "meta.cat", "question": "q", "reference": "ref",
                           "choices": "choices", "candidate": "answers.m", "rating": "score"},
               "defaults": {"lalm": "M", "modality": "sound"}, "rating_scale": {"min": 0, "max": 1}}
    table_import(path=path, benchmark_name="B", mapping=mapping)
    question = Question.objects.get()
    assert (question.external_id, question.category, question.choices) == (
        "7", "Reasoning, Sound", ["This one.", "That one."])
    assert (question.modality, question.modality_detail) == ("sound", "sound")
    assert Rating.objects.get().score == 3  # 0.5 on 0–1 is 3 on 1–5


def test_the_wide_layout_has_one_row_per_question_and_one_column_per_lalm(tmp_path):
    path = write_csv(tmp_path / "wide.csv", ["id", "question", "reference", "qwen", "qwen_score", "salmonn"], [
        ("a", "What is heard?", "Rain.", "Rain falling.", "5", "Applause."),
        ("b", "Who speaks?", "A child.", "A child.", "4", ""),  # SALMONN gave no answer to b
    ])
    mapping = {"layout": "wide", "columns": {"question_id": "id", "question": "question", "reference": "reference"},
               "lalms": {"qwen": {"candidate": "qwen", "rating": "qwen_score"}, "salmonn": "salmonn"},
               "rating_scale": {"min": 1, "max": 5}}
    summary = table_import(path=path, benchmark_name="W", mapping=mapping)
    assert (summary.questions_created, summary.candidates_created, summary.ratings_created) == (2, 3, 2)
    rows = sorted(CandidateAnswer.objects.values_list("question_version__question__external_id", "lalm__name",
                                                      "text", "valid_rating_count"))
    assert rows == [("a", "qwen", "Rain falling.", 1), ("a", "salmonn", "Applause.", 0), ("b", "qwen", "A child.", 1)]


def test_several_raters_become_several_import_only_accounts_that_cannot_log_in(tmp_path, client):
    path = write_csv(tmp_path / "rated.csv", ["id", "q", "ref", "lalm", "answer", "rating", "worker"], [
        ("1", "Q1", "R1", "m", "A1", "4", "alice@example.org"),
        ("1", "Q1", "R1", "m", "A1", "2", "bob@example.org"),
        ("2", "Q2", "R2", "m", "A2", "5", "alice@example.org"),
    ])
    mapping = {"columns": {"question_id": "id", "question": "q", "reference": "ref", "lalm": "lalm",
                           "candidate": "answer", "rating": "rating", "rater": "worker"},
               "rating_scale": {"min": 1, "max": 5}}
    summary = table_import(path=path, benchmark_name="B", mapping=mapping)
    assert (summary.raters, summary.rater_accounts_created, summary.ratings_created) == (2, 2, 3)
    accounts = list(ImportAccount.objects.select_related("user"))
    assert len(accounts) == 2
    for account in accounts:
        user = account.user
        assert user.username.startswith("imported-") and "alice" not in user.username
        assert not user.is_active and not user.has_usable_password() and not user.groups.exists()
        assert "example.org" not in account.key and account.namespace == "B"
        assert not client.login(username=user.username, password="")
    per_rater = {a.user_id: sorted(a.user.ratings.values_list("score", flat=True)) for a in accounts}
    assert sorted(per_rater.values()) == [[2], [4, 5]]
    # The same rater ids in another file of the same namespace are the same accounts.
    other = write_csv(tmp_path / "more.csv", ["id", "q", "ref", "lalm", "answer", "rating", "worker"],
                      [("3", "Q3", "R3", "m", "A3", "1", "bob@example.org")])
    summary = table_import(path=other, benchmark_name="B", mapping=mapping)
    assert (summary.raters, summary.rater_accounts_created) == (1, 0)


def test_ratings_without_a_rater_column_share_one_import_account(newcomer_csv, wavs):
    table_import(path=newcomer_csv, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert ImportAccount.objects.count() == 1
    assert Rating.objects.values("annotator").distinct().count() == 1


def _problems(excinfo) -> list[str]:
    return [str(p) for p in excinfo.value.problems]


def test_an_unknown_column_is_refused_naming_the_mapping_key_and_the_tables_columns(newcomer_csv, wavs):
    mapping = {**NEWCOMER_MAPPING, "columns": {**NEWCOMER_MAPPING["columns"], "reference": "answer_key"}}
    before = _store()
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=newcomer_csv, benchmark_name="B", mapping=mapping, audio_root=wavs)
    assert _problems(excinfo) == ["mapping columns.reference: unknown column 'answer_key' (the table has: question, "
                                  "reference, model, response, score, audio)"]
    assert _store() == before


def test_an_unmapped_required_field_is_refused_and_nothing_is_written(newcomer_csv, wavs):
    before = _store()
    for columns, expected in [
        ({k: v for k, v in NEWCOMER_MAPPING["columns"].items() if k != "candidate"},
         "mapping columns.candidate: unmapped required field: the candidate answer"),
        ({k: v for k, v in NEWCOMER_MAPPING["columns"].items() if k != "reference"},
         "mapping columns.reference: unmapped required field: reference (the benchmark is new, so its questions "
         "are created from the table)"),
        ({k: v for k, v in NEWCOMER_MAPPING["columns"].items() if k != "lalm"},
         "mapping columns.lalm: unmapped required field: map the LALM column or give defaults.lalm"),
    ]:
        with pytest.raises(TableImportError) as excinfo:
            table_import(path=newcomer_csv, benchmark_name="B", mapping={**NEWCOMER_MAPPING, "columns": columns},
                         audio_root=wavs)
        assert expected in _problems(excinfo)
    assert _store() == before


def test_a_value_outside_the_scale_is_refused_with_its_row_column_and_value_and_nothing_is_written(tmp_path, wavs):
    rows = [*NEWCOMER_ROWS[:3], ("How many people speak?", "Two.", "Qwen2-Audio", "Two people.", "0.7", "talk.wav"),
            *NEWCOMER_ROWS[4:7], ("What instrument plays?", "A piano.", "SALMONN", "Piano.", "yes", "piano.wav")]
    path = write_csv(tmp_path / "bad.csv", NEWCOMER_COLUMNS, rows)
    before = _store()
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert _problems(excinfo) == [
        "row 4: column 'score': value '0.7': not on the rating scale (0, 0.5, 1)",
        "row 8: column 'score': value 'yes': not on the rating scale (0, 0.5, 1)",
    ]
    assert _store() == before
    assert not (Path(tmp_path / "media") / "audio").exists()  # no audio file was stored either


def test_a_linear_scale_refuses_values_outside_min_and_max():
    mapping = mapping_parse({**NEWCOMER_MAPPING, "rating_scale": {"min": 0, "max": 100}})
    assert [mapping.rating_scale.score(v) for v in ("0", 12.4, "12.5", 50, "100")] == [1, 1, 2, 3, 5]
    with pytest.raises(ValueError, match="outside the rating scale 0–100"):
        mapping.rating_scale.score("101")


def test_a_rating_column_without_a_scale_is_refused():
    mapping = {k: v for k, v in NEWCOMER_MAPPING.items() if k != "rating_scale"}
    with pytest.raises(TableImportError) as excinfo:
        mapping_parse(mapping)
    assert _problems(excinfo) == ['mapping rating_scale: a rating column needs a rating_scale: a table like '
                                  '{"0": 1, "0.5": 3, "1": 5} or {"min": 0, "max": 1}']


def test_mapping_typos_and_bad_values_are_all_reported_at_once():
    with pytest.raises(TableImportError) as excinfo:
        mapping_parse({"layout": "tall", "columns": {"refrence": "x", "question": 3}, "rating_scale": {"0": 6},
                       "imported_ratings": "never", "extra": 1})
    problems = _problems(excinfo)
    assert "mapping extra: unknown key (expected layout, columns, lalms, defaults, rating_scale, imported_ratings, " \
           "rater_namespace, split, format, preset, description, question_key, missing_audio, candidate_metadata, " \
           "match, unmatched, judge, optional)" in problems
    assert "mapping layout: 'tall' is not long or wide" in problems
    assert any(p.startswith("mapping columns.refrence: unknown field") for p in problems)
    assert "mapping columns.question: expected a column name or a list of them, got 3" in problems
    assert "mapping rating_scale: '0' maps to 6; every value must be an integer 1–5" in problems
    assert "mapping imported_ratings: 'never' is not complete or need_k" in problems


def test_rows_that_contradict_each_other_are_refused_with_both_rows(tmp_path):
    path = write_csv(tmp_path / "t.csv", ["id", "q", "ref", "lalm", "answer", "score"], [
        ("1", "Q1", "R1", "m", "A", "1"),
        ("1", "Q1", "Another reference", "m2", "B", "1"),  # same question, other reference
        ("1", "Q1", "R1", "m", "A different answer", "1"),  # same LALM and question, other answer
        ("1", "Q1", "R1", "m", "A", "0"),  # a second rating by the one import account
        ("", "Q2", "R2", "m", "A", "1"),
    ])
    mapping = {"columns": {"question_id": "id", "question": "q", "reference": "ref", "lalm": "lalm",
                           "candidate": "answer", "rating": "score"}, "rating_scale": {"0": 1, "1": 5}}
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="B", mapping=mapping)
    assert _problems(excinfo) == [
        "row 2: column 'ref': value 'Another reference': differs from row 1 of the same question ('R1')",
        "row 3: column 'answer': value 'A different answer': differs from the candidate answer of LALM 'm' to the "
        "same question in row 1",
        "row 4: column 'score': value '0': a second rating of LALM 'm''s answer by the file (no rater column: one "
        "import account) (first in row 1)",
        "row 5: column 'id': value '': empty: every row needs its question's id",
    ]
    assert Benchmark.objects.count() == 0


def test_importing_the_same_table_again_updates_nothing_and_duplicates_nothing(newcomer_csv, wavs):
    table_import(path=newcomer_csv, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    before = {**_store(), "imports": 2}
    snapshot = _snapshot()
    summary = table_import(path=newcomer_csv, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert (summary.questions_created, summary.questions_updated, summary.questions_unchanged) == (0, 0, 3)
    assert (summary.candidates_created, summary.candidates_unchanged) == (0, 9)
    assert (summary.ratings_created, summary.ratings_updated, summary.ratings_unchanged) == (0, 0, 9)
    assert _store() == before and _snapshot() == snapshot
    assert set(CandidateAnswer.objects.values_list("valid_rating_count", flat=True)) == {1}


def test_a_reimport_updates_changed_ratings_unrated_answers_and_question_texts(tmp_path):
    columns = ["id", "q", "ref", "lalm", "answer", "score"]
    mapping = {"columns": {"question_id": "id", "question": "q", "reference": "ref", "lalm": "lalm",
                           "candidate": "answer", "rating": "score"}, "rating_scale": {"min": 1, "max": 5}}
    first = write_csv(tmp_path / "v1.csv", columns, [("1", "Q1", "R1", "m", "A", "4"), ("2", "Q2", "R2", "m", "B", "")])
    table_import(path=first, benchmark_name="B", mapping=mapping)
    second = write_csv(tmp_path / "v2.csv", columns, [("1", "Q1", "R1 (fixed)", "m", "A", "2"),
                                                      ("2", "Q2", "R2", "m", "B, edited", "")])
    summary = table_import(path=second, benchmark_name="B", mapping=mapping)
    assert (summary.questions_updated, summary.versions_created) == (1, 1)
    question = Question.objects.select_related("current_version").get(external_id="1")
    assert (question.current_version.number, question.current_version.reference_answer) == (2, "R1 (fixed)")
    assert question.current_version.reason == "Table import v2.csv: changed reference answer"
    # The answer to the changed question is a new candidate answer on version 2 with the new rating.
    assert list(Rating.objects.filter(candidate__question_version=question.current_version).values_list(
        "score", flat=True)) == [2]
    assert CandidateAnswer.objects.get(question_version__question__external_id="2").text == "B, edited"
    assert summary.candidates_updated == 1


def test_a_changed_answer_that_was_rated_already_is_refused(tmp_path):
    columns = ["id", "q", "ref", "lalm", "answer"]
    mapping = {"columns": {"question_id": "id", "question": "q", "reference": "ref", "lalm": "lalm",
                           "candidate": "answer"}}
    table_import(path=write_csv(tmp_path / "a.csv", columns, [("1", "Q", "R", "m", "old")]), benchmark_name="B",
                 mapping=mapping)
    from tests.factories import RatingFactory

    RatingFactory(candidate=CandidateAnswer.objects.get(), score=4)
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=write_csv(tmp_path / "b.csv", columns, [("1", "Q", "R", "m", "new")]), benchmark_name="B",
                     mapping=mapping)
    assert _problems(excinfo) == ["row 1: column 'answer': value 'new': differs from the stored candidate answer of "
                                  "LALM 'm', which was rated already (it is not overwritten)"]
    assert CandidateAnswer.objects.get().text == "old"


def test_a_reimport_never_undoes_an_experts_correction(tmp_path):
    columns = ["id", "q", "ref", "lalm", "answer"]
    mapping = {"columns": {"question_id": "id", "question": "q", "reference": "ref", "lalm": "lalm",
                           "candidate": "answer"}}
    path = write_csv(tmp_path / "a.csv", columns, [("1", "Q", "R", "m", "A")])
    table_import(path=path, benchmark_name="B", mapping=mapping)
    question = Question.objects.get()
    question_version_create(question=question, source=QuestionVersion.Source.EXPERT, reference_answer="R, corrected")
    summary = table_import(path=path, benchmark_name="B", mapping=mapping)
    assert summary.versions_created == 0
    question.refresh_from_db()
    assert question.current_version.reference_answer == "R, corrected"


def test_questions_by_position_match_the_benchmarks_import_order(tmp_path):
    bench = BenchmarkFactory(name="Existing")
    ids = [QuestionFactory(benchmark=bench, external_id=f"z{n}").external_id for n in range(3)]
    path = write_csv(tmp_path / "log.csv", ["doc", "pred"], [("2", "third"), ("0", "first")])
    mapping = {"columns": {"position": "doc", "candidate": "pred"}, "defaults": {"lalm": "M"}}
    table_import(path=path, benchmark_name="Existing", mapping=mapping)
    assert sorted(CandidateAnswer.objects.values_list("question_version__question__external_id", "text")) == [
        (ids[0], "first"), (ids[2], "third")]
    bad = write_csv(tmp_path / "bad.csv", ["doc", "pred"], [("3", "x")])
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=bad, benchmark_name="Existing", mapping=mapping)
    assert _problems(excinfo) == ["row 1: column 'doc': value '3': no question at this position: the benchmark has 3 "
                                  "(positions count from 0)"]


def test_answers_to_unknown_question_ids_without_question_texts_are_refused(tmp_path):
    bench = BenchmarkFactory(name="Existing")
    QuestionFactory(benchmark=bench, external_id="known")
    path = write_csv(tmp_path / "answers.csv", ["id", "answer"], [("known", "yes"), ("unknown", "no")])
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="Existing",
                     mapping={"columns": {"question_id": "id", "candidate": "answer"}, "defaults": {"lalm": "M"}})
    assert _problems(excinfo) == [
        "row 2: column 'question': no question 'unknown' in the benchmark yet, and its question is not mapped",
        "row 2: column 'reference': no question 'unknown' in the benchmark yet, and its reference is not mapped"]


def test_audio_from_a_zip_file_whose_files_sit_in_a_folder(tmp_path, newcomer_csv, wavs):
    archive = zip_folder(wavs, tmp_path / "audio.zip", prefix="my_benchmark/wavs/")
    summary = table_import(path=newcomer_csv, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=archive)
    assert (summary.audio_files, summary.audio_linked) == (3, 3)
    assert set(Question.objects.values_list("audio__original_name", flat=True)) == {"dog.wav", "talk.wav", "piano.wav"}


def test_missing_unreadable_and_escaping_audio_paths_are_refused_per_row(tmp_path, wavs):
    (wavs / "broken.wav").write_bytes(b"RIFF not really a wav")
    path = write_csv(tmp_path / "t.csv", ["q", "ref", "answer", "audio"], [
        ("Q1", "R", "A", "dog.wav"), ("Q2", "R", "A", "missing.wav"), ("Q3", "R", "A", "broken.wav"),
        ("Q4", "R", "A", "../secret.wav"),
    ])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="B", mapping=mapping, audio_root=wavs)
    problems = _problems(excinfo)
    assert problems[0] == ("row 2: column 'audio': value 'missing.wav': audio not found: not a file under the audio "
                           "root, not an http(s) URL, not a key in the file storage")
    assert problems[1].startswith("row 3: column 'audio': value 'broken.wav': broken.wav: not readable as audio")
    assert problems[2] == "row 4: column 'audio': value '../secret.wav': the audio path must stay under the audio root"
    assert Question.objects.count() == 0


@pytest.fixture
def wav_server(tmp_path):
    with serving({"/clips/tone.wav": write_wav(tmp_path / "tone.wav").read_bytes()}) as base:
        yield base


def test_audio_from_urls_file_storage_keys_and_bytes(tmp_path, wav_server):
    stored = default_storage.save("benchmarks/in-storage.wav", ContentFile(
        write_wav(tmp_path / "stored.wav", pitch=800).read_bytes()))
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = write_csv(tmp_path / "audio.csv", ["q", "ref", "answer", "audio"], [
        ("By URL?", "R", "A", f"{wav_server}/clips/tone.wav"), ("By key?", "R", "A", stored)])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    summary = table_import(path=path, benchmark_name="B", mapping=mapping)
    assert summary.audio_linked == 2
    in_bytes = tmp_path / "bytes.parquet"
    pq.write_table(pa.Table.from_pylist([{"q": "By bytes?", "ref": "R", "answer": "A",
                                          "audio": write_wav(tmp_path / "b.wav", pitch=900).read_bytes()}]), in_bytes)
    table_import(path=in_bytes, benchmark_name="B", mapping=mapping)
    clips = {q.current_version.question_text: q.audio for q in Question.objects.select_related("audio",
                                                                                              "current_version")}
    assert clips["By URL?"].original_name == "tone.wav"
    assert clips["By key?"].file.name == stored  # the stored object is used as it is, not copied
    assert clips["By bytes?"].duration_s == pytest.approx(0.2)
    missing = tmp_path / "missing.csv"
    write_csv(missing, ["q", "ref", "answer", "audio"], [("Gone?", "R", "A", f"{wav_server}/clips/gone.wav")])
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=missing, benchmark_name="B", mapping=mapping)
    assert _problems(excinfo) == [f"row 1: column 'audio': value '{wav_server}/clips/gone.wav': the URL answered "
                                  "HTTP 404"]


def test_an_audio_url_may_not_reach_a_private_address_unless_allowed(tmp_path, wav_server, settings):
    settings.PROVIDER_PRIVATE_NETWORKS = []
    path = write_csv(tmp_path / "audio.csv", ["q", "ref", "answer", "audio"],
                     [("By URL?", "R", "A", f"{wav_server}/clips/tone.wav")])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=path, benchmark_name="B", mapping=mapping)
    [problem] = _problems(excinfo)
    assert problem.startswith(f"row 1: column 'audio': value '{wav_server}/clips/tone.wav': {wav_server}/clips/"
                              "tone.wav is not allowed: 127.0.0.1 is a loopback address (127.0.0.1)")
    assert Question.objects.count() == 0
    settings.PROVIDER_PRIVATE_NETWORKS = ["127.0.0.0/8"]
    assert table_import(path=path, benchmark_name="B", mapping=mapping).audio_linked == 1


def test_a_datasets_folder_with_an_audio_feature_brings_its_audio_bytes(tmp_path):
    import datasets

    wav = write_wav(tmp_path / "clip.wav")
    dataset = datasets.Dataset.from_dict({"question": ["What?"], "answer": ["A tone."], "pred": ["A beep."],
                                          "audio": [str(wav)]}).cast_column("audio", datasets.Audio(decode=False))
    dataset = dataset.map(lambda row: {"audio": {"bytes": Path(row["audio"]["path"]).read_bytes(), "path": None}})
    folder = tmp_path / "hf"
    datasets.DatasetDict({"test": dataset}).save_to_disk(str(folder))
    assert "audio.bytes" in mapping_guess(["question", "audio.bytes", "audio.path"]).values()
    mapping = {"columns": {"question": "question", "reference": "answer", "candidate": "pred",
                           "audio": "audio.bytes"}, "defaults": {"lalm": "M"}}
    table_import(path=folder, benchmark_name="HF", mapping=mapping)
    assert Question.objects.get().audio.sha256 == AudioClip.objects.get().sha256


def test_imported_answers_count_as_complete_or_still_need_k_ratings_here(newcomer_csv, wavs, settings):
    settings.ANNOTATION_TARGET_RATINGS = 2
    annotator = AnnotatorFactory()
    table_import(path=newcomer_csv, benchmark_name="Complete", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert assignment_next_for_annotator(annotator=annotator) is None  # rated once elsewhere: complete
    table_import(path=newcomer_csv, benchmark_name="Needs k", audio_root=wavs,
                 mapping={**NEWCOMER_MAPPING, "imported_ratings": "need_k"})
    needs_k = CandidateAnswer.objects.filter(question_version__question__benchmark__name="Needs k")
    assert set(needs_k.values_list("valid_rating_count", "target_ratings")) == {(1, 3)}  # 1 imported + k = 2
    assignment = assignment_next_for_annotator(annotator=annotator)
    assert assignment is not None and assignment.candidate in needs_k


def test_the_command_prints_what_it_created_and_a_dry_run_writes_nothing(tmp_path, newcomer_csv, wavs):
    mapping_file = tmp_path / "mapping.json"
    mapping_file.write_text(json.dumps(NEWCOMER_MAPPING))
    before = _store()
    out = StringIO()
    call_command("import_table", str(newcomer_csv), "--benchmark", "My benchmark", "--mapping", str(mapping_file),
                 "--audio-root", str(wavs), "--dry-run", stdout=out)
    assert _store() == before
    assert "dry run, nothing written" in out.getvalue()
    assert "questions: 3 created" in out.getvalue() and "candidate answers: 9 created" in out.getvalue()
    out = StringIO()
    call_command("import_table", str(newcomer_csv), "--benchmark", "My benchmark", "--mapping", str(mapping_file),
                 "--audio-root", str(wavs), stdout=out)
    text = out.getvalue()
    assert "my_benchmark.csv -> benchmark 'My benchmark' (new)" in text
    assert "LALMs: 3 (Gemini, Qwen2-Audio, SALMONN); new: Gemini, Qwen2-Audio, SALMONN" in text
    assert "ratings: 9 created, 0 updated, 0 unchanged, from 1 rater (1 new import-only account)" in text
    assert "audio: 3 files, newly linked to 3 questions" in text
    out = StringIO()
    call_command("import_table", str(newcomer_csv), "--benchmark", "My benchmark", "--mapping", str(mapping_file),
                 "--audio-root", str(wavs), stdout=out)
    assert "candidate answers: 0 created, 0 updated, 9 unchanged" in out.getvalue()


def test_the_command_lists_every_bad_row_and_writes_nothing(tmp_path, wavs):
    rows = [("Q", "R", "m", "A", "2", "dog.wav"), ("Q2", "R", "m", "A", "1", "nope.wav"),
            ("Q3", "R", "", "A", "1", "dog.wav")]
    path = write_csv(tmp_path / "bad.csv", NEWCOMER_COLUMNS, rows)
    mapping_file = tmp_path / "mapping.json"
    mapping_file.write_text(json.dumps(NEWCOMER_MAPPING))
    err = StringIO()
    with pytest.raises(CommandError, match="bad.csv: 3 problem"):
        call_command("import_table", str(path), "--benchmark", "B", "--mapping", str(mapping_file),
                     "--audio-root", str(wavs), stderr=err)
    assert err.getvalue().splitlines() == [
        "bad.csv: 3 problems",
        "row 1: column 'score': value '2': not on the rating scale (0, 0.5, 1)",
        "row 2: column 'audio': value 'nope.wav': audio not found: not a file under the audio root, not an http(s) "
        "URL, not a key in the file storage",
        "row 3: column 'model': value '': empty: every row needs its LALM",
    ]
    assert Benchmark.objects.count() == 0
    mapping_file.write_text("{not json")
    with pytest.raises(CommandError, match="line 1: invalid JSON"):
        call_command("import_table", str(path), "--benchmark", "B", "--mapping", str(mapping_file))


def test_a_saved_mapping_is_reused_from_the_import_record(tmp_path, newcomer_csv, wavs):
    table_import(path=newcomer_csv, benchmark_name="First", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    saved = TableImport.objects.get().mapping
    assert mapping_parse(saved).document() == saved  # the saved document reads back unchanged
    mapping_file = tmp_path / "saved.json"
    mapping_file.write_text(json.dumps(saved))
    call_command("import_table", str(newcomer_csv), "--benchmark", "Second", "--mapping", str(mapping_file),
                 "--audio-root", str(wavs), stdout=StringIO())
    assert CandidateAnswer.objects.filter(question_version__question__benchmark__name="Second").count() == 9


def test_column_names_and_rating_values_guess_the_mapping():
    assert mapping_guess(list(NEWCOMER_COLUMNS)) == {
        "question": "question", "reference": "reference", "audio": "audio", "lalm": "model",
        "candidate": "response", "rating": "score"}
    assert mapping_guess(["Question ID", "Ground Truth", "audio_path", "Model Output", "annotator_id"]) == {
        "question_id": "Question ID", "reference": "Ground Truth", "audio": "audio_path",
        "candidate": "Model Output", "rater": "annotator_id"}
    assert rating_scale_guess(["0", "0.5", "1", ""]) == {"0": 1, "0.5": 3, "1": 5}
    assert rating_scale_guess(["1", "3", "5"]) == {str(k): k for k in range(1, 6)}
    assert rating_scale_guess([0, 37.5, 100]) == {"min": 0, "max": 100}
    assert rating_scale_guess(["good", "bad"]) is None
