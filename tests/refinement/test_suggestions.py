"""AI suggestions through the real google-genai and openai clients against fake servers on 127.0.0.1."""
import json

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from refinement.models import Correction, Suggestion
from refinement.services.corrections import correction_save
from refinement.services.suggestions import suggestion_reject, suggestion_request
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, RatingFactory
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini, error_body
from tests.fakes.openai_compat import FakeOpenAICompat

pytestmark = pytest.mark.django_db

FAST_RETRIES = {"PREPARATION_MAX_ATTEMPTS": 2, "PREPARATION_BACKOFF_BASE_S": 0.01, "PREPARATION_BACKOFF_MAX_S": 0.05}


@pytest.fixture
def flagged_question():
    question = QuestionFactory()
    candidate = CandidateAnswerFactory(question_version=question.current_version)
    RatingFactory(candidate=candidate, score=2, codes="R", comment="There are two dogs, not one.")
    return question


def test_gemini_suggestion_is_stored_for_review_and_nothing_is_saved(
    flagged_question, django_capture_on_commit_callbacks
):
    expert = AnnotatorFactory(roles=["expert"])
    with FakeGemini(reply=lambda request: "Two dogs barking") as fake, override_settings(
        GEMINI_API_KEY="test-key", GEMINI_BASE_URL=fake.url, REFINEMENT_SUGGESTION_PROVIDER="gemini", **FAST_RETRIES
    ):
        with django_capture_on_commit_callbacks(execute=True):
            suggestion = suggestion_request(question=flagged_question, field="reference_answer", requested_by=expert)
        suggestion.refresh_from_db()
        assert suggestion.status == Suggestion.Status.DONE
        assert suggestion.proposed_text == "Two dogs barking"
        [request] = fake.generate_requests
        body = json.dumps(request.json())
        assert "There are two dogs, not one." in body  # the annotators' comment
        assert "Reference answer incorrect" in body  # code R with its Appendix A label
        assert "A dog barking" in body  # the current reference answer
    flagged_question.refresh_from_db()
    assert flagged_question.current_version.number == 1  # nothing saved without an expert's accept
    assert flagged_question.current_version.reference_answer == "A dog barking"

    result = correction_save(
        question=flagged_question,
        base_version=flagged_question.current_version,
        texts={"reference_answer": suggestion.proposed_text},
        expert=expert,
        reason="AI suggestion accepted",
        suggestions={"reference_answer": suggestion},
    )
    suggestion.refresh_from_db()
    assert suggestion.status == Suggestion.Status.ACCEPTED
    assert Correction.objects.get().suggestion == suggestion
    assert result.version.reference_answer == "Two dogs barking"


def test_gemini_error_marks_the_suggestion_failed_with_the_message(
    flagged_question, django_capture_on_commit_callbacks
):
    expert = AnnotatorFactory(roles=["expert"])
    with FakeGemini() as fake, override_settings(
        GEMINI_API_KEY="test-key", GEMINI_BASE_URL=fake.url, REFINEMENT_SUGGESTION_PROVIDER="gemini", **FAST_RETRIES
    ):
        fake.script("generate", Reply(400, error_body(400, "INVALID_ARGUMENT", "bad prompt")))
        with django_capture_on_commit_callbacks(execute=True):
            suggestion = suggestion_request(question=flagged_question, field="rationale", requested_by=expert)
    suggestion.refresh_from_db()
    assert suggestion.status == Suggestion.Status.FAILED
    assert "400" in suggestion.error


def test_openai_compatible_suggestion_and_reject(flagged_question, django_capture_on_commit_callbacks):
    expert = AnnotatorFactory(roles=["expert"])
    with FakeOpenAICompat(reply=lambda request: "How many dogs bark in the clip?") as fake, override_settings(
        OPENAI_COMPAT_BASE_URL=f"{fake.url}/v1", OPENAI_COMPAT_MODEL="fake-llm",
        REFINEMENT_SUGGESTION_PROVIDER="openai", **FAST_RETRIES,
    ):
        with django_capture_on_commit_callbacks(execute=True):
            suggestion = suggestion_request(question=flagged_question, field="question_text", requested_by=expert)
        assert len(fake.chat_requests) == 1
    suggestion.refresh_from_db()
    assert suggestion.proposed_text == "How many dogs bark in the clip?"
    suggestion_reject(suggestion=suggestion, expert=expert)
    assert suggestion.status == Suggestion.Status.REJECTED
    flagged_question.refresh_from_db()
    assert flagged_question.current_version.number == 1


def test_suggestion_without_a_configured_provider_is_refused(flagged_question, settings):
    settings.GEMINI_API_KEY = ""
    settings.REFINEMENT_SUGGESTION_PROVIDER = "gemini"
    with pytest.raises(ValidationError, match="GEMINI_API_KEY"):
        suggestion_request(question=flagged_question, field="rationale", requested_by=None)
    assert not Suggestion.objects.exists()
