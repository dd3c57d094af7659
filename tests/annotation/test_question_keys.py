"""The random key is the question's (issue #35, question-level design): every LALM's answer to a question shares
it, through imports, re-imports and new versions, and migration 0014 gives existing data one key per question."""
import importlib

import pytest
from django.apps import apps

from annotation.models import CandidateAnswer, Question
from annotation.services.importers import table_import
from annotation.services.versions import question_version_create, version_supersede
from tests.factories import CandidateAnswerFactory, LALMFactory, QuestionFactory
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, write_csv, write_wav_folder

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _keys() -> dict[int, set[float]]:
    """{question pk: the set of its answers' keys (all versions)}, each checked against the question's own."""
    out: dict[int, set[float]] = {}
    for qid, key, own in CandidateAnswer.objects.values_list(
            "question_version__question_id", "random_key", "question_version__question__random_key"):
        assert key == own
        out.setdefault(qid, set()).add(key)
    return out


def test_an_import_and_a_reimport_give_every_answer_its_questions_key(tmp_path):
    wavs = write_wav_folder(tmp_path / "wavs")
    path = write_csv(tmp_path / "b.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    table_import(path=path, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    first = dict(Question.objects.values_list("external_id", "random_key"))
    assert len(set(first.values())) == 3 and all(len(keys) == 1 for keys in _keys().values())
    # Re-import: a fourth LALM answers every question, and one reference changes (a new version of its question).
    rows = [*NEWCOMER_ROWS, *[(q, ref, "Llama", "Something.", "0", audio) for q, ref, _, _, _, audio in
                              NEWCOMER_ROWS[::3]]]
    rows = [(q, "A grand piano." if ref == "A piano." else ref, *rest) for q, ref, *rest in rows]
    path = write_csv(tmp_path / "b2.csv", NEWCOMER_COLUMNS, rows)
    table_import(path=path, benchmark_name="B", mapping=NEWCOMER_MAPPING, audio_root=wavs)
    assert dict(Question.objects.values_list("external_id", "random_key")) == first  # never redrawn
    assert CandidateAnswer.objects.filter(lalm__name="Llama").count() == 3
    assert Question.objects.filter(versions__number=2).exists()
    assert all(len(keys) == 1 for keys in _keys().values())


def test_a_correction_keeps_the_key_and_the_copied_answers_take_it():
    question = QuestionFactory()
    old = question.current_version
    CandidateAnswerFactory(question_version=old, lalm=LALMFactory())
    CandidateAnswerFactory(question_version=old, lalm=LALMFactory())
    new = question_version_create(question=question, source="expert", reference_answer="Changed.")
    _, copied = version_supersede(old=old, new=new, reason="corrected")
    assert len(copied) == 2
    question.refresh_from_db()
    assert _keys() == {question.pk: {question.random_key}}


def test_migration_0014_gives_existing_answers_one_key_per_question():
    """Answers with per-answer keys (as before 0014): each question takes its oldest answer's key, every answer
    its question's; a question without answers keeps a fresh uniform key."""
    questions = [QuestionFactory() for _ in range(4)]
    lalms = [LALMFactory() for _ in range(3)]
    answers = [CandidateAnswerFactory(question_version=q.current_version, lalm=lalm)
               for q in questions[:3] for lalm in lalms]
    for i, a in enumerate(answers):  # the old design: a key per answer
        a.random_key = (i + 0.5) / len(answers)
    CandidateAnswer.objects.bulk_update(answers, ["random_key"])
    migration = importlib.import_module("annotation.migrations.0014_question_random_key")
    migration.share_keys(apps, None)
    keys = _keys()
    for q in questions[:3]:
        oldest = min((a for a in answers if a.question_version_id == q.current_version_id), key=lambda a: a.pk)
        assert keys[q.pk] == {oldest.random_key}
    assert 0 <= Question.objects.get(pk=questions[3].pk).random_key < 1
