"""Rationale writers for Stage 1a (ORCA paper, section 3.1 and Appendix B.1).

Gemini (default ``gemini-2.5-flash``) or an OpenAI-compatible server with audio input is given the audio, the
question and the reference answer, and writes a concise rationale grounding the answer in the audio.
"""
from __future__ import annotations

from django.conf import settings

from .base import Availability, Generation, ProviderUnavailable
from .gemini import GeminiAudioChat
from .openai_compat import OpenAICompatAudioChat
from .setup import GEMINI, OPENAI, chat_for, endpoint_availability, endpoint_resolve

#: System prompt, verbatim from ORCA paper, Appendix B.1 (Figure 6).
RATIONALE_SYSTEM_PROMPT = (
    "You are an expert at analyzing audio, describing it, and writing clear explanations and rationales for "
    "answers given the question with regard to the audio."
)
#: User prompt template, from ORCA paper, Appendix B.1 (Figure 6); the audio is attached as a separate part.
RATIONALE_USER_PROMPT = (
    "Listen to the provided audio carefully and provide a concise grounding rationale/audio description for the "
    "following question-answer pair. Try to write at least a few sentences without going into unnecessary "
    "detail.\nQuestion: {question}\nAnswer: {answer}"
)


def rationale_prompt(*, question: str, reference_answer: str) -> str:
    """The Appendix B.1 user prompt for one question and its reference answer."""
    return RATIONALE_USER_PROMPT.format(question=question.strip(), answer=reference_answer.strip())


class ChatRationaleWriter:
    """A :class:`~annotation.providers.base.RationaleWriter` over a Gemini or OpenAI-compatible audio chat."""

    def __init__(self, *, name: str, chat: GeminiAudioChat | OpenAICompatAudioChat):
        self.name = name
        self.chat = chat

    def write_rationale(self, *, audio_path: str, question: str, reference_answer: str) -> Generation:
        """Write the rationale; raises the errors of the underlying chat (see ``annotation.providers.base``)."""
        prompt = rationale_prompt(question=question, reference_answer=reference_answer)
        return self.chat.generate(audio_path=audio_path, system=RATIONALE_SYSTEM_PROMPT, prompt=prompt)


def _rationale_name(provider: str) -> str:
    if provider == GEMINI:
        return f"Gemini ({settings.GEMINI_MODEL})"
    if provider == OPENAI:
        return f"OpenAI-compatible ({settings.OPENAI_COMPAT_MODEL or 'no model'})"
    return provider


def rationale_availability(*, provider: str = "") -> Availability:
    """Whether the rationale provider (``RATIONALE_PROVIDER`` unless given) is configured, and why not."""
    provider = provider or settings.RATIONALE_PROVIDER
    if provider not in (GEMINI, OPENAI):
        return Availability(provider, False, f"unknown RATIONALE_PROVIDER {provider!r}; use gemini or openai")
    return endpoint_availability(name=_rationale_name(provider), provider=provider)


def rationale_writer_from_settings(*, provider: str = "") -> ChatRationaleWriter:
    """The configured rationale writer (the operator's ``GEMINI_*`` / ``OPENAI_COMPAT_*`` settings).

    Raises:
        ProviderUnavailable: not configured (the message says which setting is missing).
    """
    provider = provider or settings.RATIONALE_PROVIDER
    availability = rationale_availability(provider=provider)
    if not availability.ok:
        raise ProviderUnavailable(availability.reason)
    return ChatRationaleWriter(name=availability.name, chat=chat_for(endpoint_resolve(provider=provider)))
