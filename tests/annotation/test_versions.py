"""Question versions: a change is a new row; ratings on the old version can be invalidated but are kept."""
import pytest

from annotation.models import QuestionVersion, Rating
from annotation.services.versions import question_version_create, ratings_invalidate_for_version
from tests.factories import CandidateAnswerFactory, QuestionFactory, RatingFactory

pytestmark = pytest.mark.django_db


def test_a_new_version_copies_unchanged_fields_and_becomes_current():
    question = QuestionFactory(version__rationale="old rationale")
    first = question.current_version
    second = question_version_create(
        question=question, source=QuestionVersion.Source.EXPERT, reason="fix", reference_answer="A cat meowing"
    )
    question.refresh_from_db()
    assert question.current_version == second
    assert (second.number, second.reference_answer, second.rationale) == (2, "A cat meowing", "old rationale")
    first.refresh_from_db()
    assert first.reference_answer == "A dog barking"


def test_unknown_fields_are_refused():
    with pytest.raises(ValueError, match="not versioned"):
        question_version_create(question=QuestionFactory(), source="expert", category="x")


def test_invalidation_keeps_the_ratings_and_refreshes_the_counts():
    candidate = CandidateAnswerFactory()
    RatingFactory(candidate=candidate)
    RatingFactory(candidate=candidate)
    candidate.valid_rating_count = 2
    candidate.save()
    other = RatingFactory()

    assert ratings_invalidate_for_version(version=candidate.question_version, reason="reference corrected") == 2

    candidate.refresh_from_db()
    assert candidate.valid_rating_count == 0
    assert list(Rating.objects.filter(candidate=candidate).values_list("is_valid", "invalid_reason")) == [
        (False, "reference corrected")
    ] * 2
    other.refresh_from_db()
    assert other.is_valid


def _with_whisper_metadata(question):
    QuestionVersion.objects.filter(pk=question.current_version_id).update(
        transcript="old words", transcript_language="en",
        transcript_segments=[{"start": 0.0, "end": 1.0, "text": "old words"}],
    )
    question.refresh_from_db()
    return question


def test_an_import_that_brings_a_new_transcript_empties_the_old_language_and_segments(tmp_path):
    """The one difference between the importers' version carry-over and question_version_create (both
    annotation.services.versions.version_values): an ORCA file's transcript text comes without Whisper's language
    and segments, and those of the old text are not carried onto it."""
    import json

    from annotation.services.importers import ratings_import_orca_jsonl

    question = _with_whisper_metadata(QuestionFactory(external_id="q-import"))
    old = question.current_version
    line = {"id": "q-import_M2_1", "question": old.question_text, "reference": old.reference_answer,
            "rationale": old.rationale, "transcription": "new words", "candidate": "A dog", "ratings": [4]}
    path = tmp_path / "orca.jsonl"
    path.write_text(json.dumps(line) + "\n")
    ratings_import_orca_jsonl(path=path, benchmark_name=question.benchmark.name)
    question.refresh_from_db()
    new = question.current_version
    assert (new.number, new.transcript, new.transcript_language, new.transcript_segments) == (2, "new words", "", [])


def test_a_correction_of_the_transcript_keeps_the_audio_language_and_drops_the_old_words_timing():
    """Whisper's segments timed the old words, so a corrected text does not carry them; the detected language is
    the audio's and stays. A correction of another field carries both over unchanged."""
    question = _with_whisper_metadata(QuestionFactory())
    new = question_version_create(question=question, source=QuestionVersion.Source.EXPERT, transcript="new words")
    assert (new.transcript, new.transcript_language, new.transcript_segments) == ("new words", "en", [])
    _with_whisper_metadata(question)
    other = question_version_create(question=question, source=QuestionVersion.Source.EXPERT, reference_answer="B")
    assert (other.transcript, other.transcript_language) == ("old words", "en")
    assert other.transcript_segments == [{"start": 0.0, "end": 1.0, "text": "old words"}]
