"""AI suggestions for corrections: a text model proposes a field, the expert accepts, edits or rejects it.

ORCA paper, section 3.3: "AI tools assist in generating improved content, but human experts validate all changes".
A :class:`~refinement.models.Suggestion` row is created queued; a Celery task (``suggestion_generate_task``) calls
the configured model with the field, the question context and the annotators' feedback (and, for rationales, the
audio when the question has an audio file) and stores the proposal. Nothing reaches a ``QuestionVersion`` unless the
expert saves it through :func:`refinement.services.corrections.correction_save`.

Providers (``REFINEMENT_SUGGESTION_PROVIDER``): ``gemini`` (google-genai, ``GEMINI_API_KEY``, ``GEMINI_BASE_URL``)
or ``openai`` (an OpenAI-compatible server, ``OPENAI_COMPAT_BASE_URL``). The model is
``REFINEMENT_SUGGESTION_MODEL``, or ``GEMINI_MODEL`` / ``OPENAI_COMPAT_MODEL`` when empty. Client construction,
error mapping, retries and the rules on keys and hosts are the Stage 1 providers' (``annotation.providers.setup``).
"""
from __future__ import annotations

import logging
from collections import Counter

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.codes import CODE_DEFINITIONS, CODE_ORDER
from annotation.jobs.registry import enqueue
from annotation.models import Question, Rating
from annotation.providers.base import Availability, Generation, ProviderError
from annotation.providers.setup import (
    GEMINI,
    PROVIDERS,
    chat_for,
    default_model,
    endpoint_availability,
    endpoint_resolve,
)
from annotation.services.audit import audit_record
from refinement.models import CorrectableField, Suggestion
from refinement.selectors import suggestion_of_question

logger = logging.getLogger(__name__)
#: The job kind of an AI suggestion (``RefinementConfig.ready`` registers its task).
SUGGESTION = "suggestion"

SUGGESTION_SYSTEM_PROMPT = (
    "You are a domain expert correcting items of an audio question-answering benchmark. Annotators who rated "
    "candidate answers to this item reported problems. Rewrite only the requested field so that it is correct, "
    "complete and concise. Reply with the corrected text only, without quotes, labels or explanations."
)

FIELD_GUIDANCE = {
    CorrectableField.QUESTION_TEXT: (
        "the question asked about the audio (make it unambiguous; include the answer options "
        "if the question refers to them)"
    ),
    CorrectableField.REFERENCE_ANSWER: "the reference (ground-truth) answer (short and precise)",
    CorrectableField.RATIONALE: "the rationale: a few sentences grounding the reference answer in the audio",
    CorrectableField.TRANSCRIPT: "the transcript of the speech in the audio",
}


def suggestion_model() -> tuple[str, str]:
    """(provider, model name) the suggestions use, from the settings."""
    provider = settings.REFINEMENT_SUGGESTION_PROVIDER
    return provider, settings.REFINEMENT_SUGGESTION_MODEL or (default_model(provider) if provider in PROVIDERS else "")


def suggestion_availability() -> Availability:
    """Whether AI suggestions can be made here, and why not (shown on the correction page); the provider rules are
    :mod:`annotation.providers.setup`'s."""
    provider, model = suggestion_model()
    if provider not in PROVIDERS:
        return Availability(provider, False,
                            f"unknown REFINEMENT_SUGGESTION_PROVIDER {provider!r}; use gemini or openai")
    name = f"Gemini ({model})" if provider == GEMINI else f"OpenAI-compatible ({model or 'no model'})"
    return endpoint_availability(name=name, provider=provider, model=model)


def feedback_summary(*, question: Question) -> str:
    """The annotators' feedback on the question's current version as prompt text: code counts and comments."""
    ratings = Rating.objects.filter(question_version=question.current_version).order_by("id")
    counts = Counter(code for r in ratings for code in r.codes)
    lines = [
        f"- {code} ({CODE_DEFINITIONS[code][0]}): {counts[code]} annotator(s)" for code in CODE_ORDER if counts[code]
    ]
    lines += [f'- comment: "{r.comment}"' for r in ratings if r.comment.strip()]
    return "\n".join(lines) or "- (no feedback recorded)"


def suggestion_prompt(*, question: Question, field: str, instructions: str = "") -> str:
    """The user prompt: the field to rewrite, every text of the current version and the annotators' feedback."""
    version = question.current_version
    parts = [
        f"Field to rewrite: {FIELD_GUIDANCE[CorrectableField(field)]}.",
        f"Question: {version.question_text}",
        f"Reference answer: {version.reference_answer}",
        f"Rationale: {version.rationale or '(none)'}",
    ]
    if version.transcript or field == CorrectableField.TRANSCRIPT:
        parts.append(f"Transcript: {version.transcript or '(none)'}")
    if question.choices:
        parts.append("Answer options: " + "; ".join(str(c) for c in question.choices))
    parts.append(f"Annotators' feedback:\n{feedback_summary(question=question)}")
    if instructions.strip():
        parts.append(f"Expert's instructions: {instructions.strip()}")
    parts.append(f"Current {CorrectableField(field).label.lower()}: {getattr(version, field)}")
    parts.append(f"Write the corrected {CorrectableField(field).label.lower()}.")
    return "\n\n".join(parts)


def suggestion_request(*, question: Question, field: str, requested_by, instructions: str = "") -> Suggestion:
    """Queue an AI suggestion for ``field`` of the question's current version; the task runs after commit.

    Raises:
        ValidationError: unknown field, no current version, or the provider is not configured (reason given).
    """
    if field not in CorrectableField.values:
        expected = ", ".join(CorrectableField.values)
        raise ValidationError({"field": f"unknown field {field!r} (expected one of {expected})"})
    if question.current_version_id is None:
        raise ValidationError({"question": f"{question} has no version yet."})
    availability = suggestion_availability()
    if not availability.ok:
        raise ValidationError(f"AI suggestions are unavailable: {availability.reason}.")
    provider, model = suggestion_model()
    with transaction.atomic():
        suggestion = Suggestion.objects.create(
            question=question,
            base_version_id=question.current_version_id,
            field=field,
            provider=provider,
            model_name=model,
            instructions=(instructions or "").strip(),
            requested_by=requested_by,
        )
        audit_record(actor=requested_by, action="suggestion.request", obj=suggestion, new={"field": field})
        enqueue(SUGGESTION, suggestion.pk)
    return suggestion


def _audio_path(question: Question) -> str | None:
    if question.audio_id and question.audio.file:
        try:
            return question.audio.file.path
        except (NotImplementedError, ValueError):
            return None
    return None


def _generate(*, provider: str, model: str, system: str, prompt: str, audio_path: str | None) -> Generation:
    """One call to the text model (with audio when ``audio_path``); errors as ``annotation.providers.base``."""
    chat = chat_for(endpoint_resolve(provider=provider, model=model))
    return chat.generate(audio_path=audio_path, system=system, prompt=prompt)


def suggestion_generate(*, suggestion_pk: int) -> Suggestion | None:
    """Run one queued suggestion: claim it (queued -> running), call the model, store ``done`` or ``failed``.

    The slow call runs outside any transaction. Returns None when the row is gone or another worker claimed it.
    Provider errors end as status ``failed`` with the message; other exceptions propagate (a bug, not a fault).
    """
    claimed = Suggestion.objects.filter(pk=suggestion_pk, status=Suggestion.Status.QUEUED).update(
        status=Suggestion.Status.RUNNING
    )
    if claimed != 1:
        return None
    suggestion = Suggestion.objects.select_related("question__audio", "question__current_version").get(pk=suggestion_pk)
    question = suggestion.question
    prompt = suggestion_prompt(question=question, field=suggestion.field, instructions=suggestion.instructions)
    audio_path = _audio_path(question) if suggestion.field == CorrectableField.RATIONALE else None
    try:
        generation = _generate(
            provider=suggestion.provider,
            model=suggestion.model_name,
            system=SUGGESTION_SYSTEM_PROMPT,
            prompt=prompt,
            audio_path=audio_path,
        )
    except ProviderError as error:
        logger.warning("suggestion %s failed: %s", suggestion_pk, error)
        Suggestion.objects.filter(pk=suggestion_pk).update(
            status=Suggestion.Status.FAILED, error=str(error), prompt=prompt, finished_at=timezone.now()
        )
    else:
        Suggestion.objects.filter(pk=suggestion_pk).update(
            status=Suggestion.Status.DONE,
            proposed_text=generation.text,
            model_name=generation.model,
            prompt=prompt,
            finished_at=timezone.now(),
        )
    suggestion.refresh_from_db()
    return suggestion


def suggestion_for_review(*, question: Question, suggestion_id: str) -> Suggestion:
    """The AI suggestion ``suggestion_id`` (a string from a form) of ``question``, if it is ready for review (DONE):
    only such a proposal may be accepted into the form or rejected.

    Raises:
        ValidationError: no such suggestion of this question, or it is not (or no longer) ready for review.
    """
    suggestion = suggestion_of_question(question=question, suggestion_id=suggestion_id)
    if suggestion is None or suggestion.status != Suggestion.Status.DONE:
        raise ValidationError("That suggestion is not ready for review.")
    return suggestion


def suggestion_reject(*, suggestion: Suggestion, expert) -> Suggestion:
    """Reject a proposal (nothing is saved). Raises ValidationError unless it is ready for review."""
    with transaction.atomic():
        updated = Suggestion.objects.filter(pk=suggestion.pk, status=Suggestion.Status.DONE).update(
            status=Suggestion.Status.REJECTED, decided_at=timezone.now()
        )
        if updated != 1:
            raise ValidationError("Only a suggestion that is ready for review can be rejected.")
        audit_record(actor=expert, action="suggestion.reject", obj=suggestion, old={"status": Suggestion.Status.DONE},
                     new={"status": Suggestion.Status.REJECTED})
    suggestion.refresh_from_db()
    return suggestion
