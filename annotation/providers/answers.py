"""Answer generators for Stage 1b (ORCA paper, section 3.1): an LALM is asked the question with the audio.

Each ``LALM`` row names its provider and settings, so adding a model is a form in the admin, not code.
``LALM.settings`` keys (all optional):

* ``model``: the model name (Gemini: default ``GEMINI_MODEL``; OpenAI-compatible: required);
* ``base_url``: the server (OpenAI-compatible: required unless ``OPENAI_COMPAT_BASE_URL`` is set; Gemini: a
  proxy or test server, default Google's);
* ``api_key_env``: the name of the environment variable holding the key (default ``GEMINI_API_KEY`` /
  ``OPENAI_COMPAT_API_KEY``), matching ``PROVIDER_API_KEY_ENV_PATTERN`` (:mod:`.keys`); keys are never stored in
  the database;
* ``requests_per_minute``: rate limit for this LALM (default the provider's setting);
* ``system_prompt``, ``prompt_template`` (``{question}`` is replaced), ``temperature``, ``max_tokens``;
* ``audio_input`` (OpenAI-compatible, default true): false sends the question without the clip, for a text-only
  model (a no-audio baseline, or a text LLM served by llama.cpp, which accepts no ``input_audio`` parts).

LALMs with provider ``import`` have their answers imported from JSONL (``annotation.services.importers``).
"""
from __future__ import annotations

from django.conf import settings

from annotation.models import LALM

from .base import Availability, Generation, ProviderUnavailable, RateLimiter, RetryPolicy
from .gemini import GeminiAudioChat
from .keys import api_key_env_error, api_key_from_env
from .openai_compat import OpenAICompatAudioChat

DEFAULT_PROMPT_TEMPLATE = "{question}"


def _api_key(lalm: LALM, default: str) -> str:
    return api_key_from_env(provider_settings=lalm.settings, default=default)


def answer_availability(*, lalm: LALM) -> Availability:
    """Whether ``lalm`` can be asked for candidate answers here, and why not."""
    conf = lalm.settings or {}
    name = f"{lalm.name} ({lalm.get_provider_display()})"
    if lalm.provider == LALM.Provider.IMPORT:
        return Availability(name, False, "answers of this LALM are imported from JSONL, not generated")
    if key_error := api_key_env_error(conf):
        return Availability(name, False, key_error)
    if lalm.provider == LALM.Provider.GEMINI:
        if not _api_key(lalm, settings.GEMINI_API_KEY):
            return Availability(name, False, f"{conf.get('api_key_env') or 'GEMINI_API_KEY'} is not set")
        return Availability(name, True)
    if lalm.provider == LALM.Provider.OPENAI:
        if not (conf.get("base_url") or settings.OPENAI_COMPAT_BASE_URL):
            return Availability(name, False, "no base_url in the LALM's settings and OPENAI_COMPAT_BASE_URL is not set")
        if not (conf.get("model") or settings.OPENAI_COMPAT_MODEL):
            return Availability(name, False, "no model in the LALM's settings and OPENAI_COMPAT_MODEL is not set")
        return Availability(name, True)
    return Availability(name, False, f"unknown provider {lalm.provider!r}")


class ChatAnswerGenerator:
    """An :class:`~annotation.providers.base.AnswerGenerator` over a Gemini or OpenAI-compatible audio chat."""

    def __init__(self, *, name: str, chat, system_prompt: str = "", prompt_template: str = DEFAULT_PROMPT_TEMPLATE):
        self.name = name
        self.chat = chat
        self.system_prompt = system_prompt
        self.prompt_template = prompt_template

    def answer(self, *, audio_path: str, question: str) -> Generation:
        """The LALM's candidate answer to ``question`` about the audio."""
        prompt = self.prompt_template.replace("{question}", question.strip())
        return self.chat.generate(audio_path=audio_path, system=self.system_prompt, prompt=prompt)


def answer_generator_for(*, lalm: LALM) -> ChatAnswerGenerator:
    """The answer generator for an LALM row.

    Raises:
        ProviderUnavailable: the LALM cannot be asked here (reason in the message).
    """
    availability = answer_availability(lalm=lalm)
    if not availability.ok:
        raise ProviderUnavailable(availability.reason)
    conf = lalm.settings or {}
    policy = RetryPolicy.from_settings()
    common = {
        "timeout_s": float(conf.get("timeout_s", settings.PREPARATION_REQUEST_TIMEOUT_S)),
        "policy": policy,
        "temperature": conf.get("temperature"),
    }
    if lalm.provider == LALM.Provider.GEMINI:
        chat = GeminiAudioChat(
            api_key=_api_key(lalm, settings.GEMINI_API_KEY),
            model=conf.get("model") or settings.GEMINI_MODEL,
            base_url=conf.get("base_url") or settings.GEMINI_BASE_URL,
            limiter=RateLimiter(
                key="gemini", per_minute=int(conf.get("requests_per_minute", settings.GEMINI_REQUESTS_PER_MINUTE))
            ),
            **common,
        )
    else:
        base_url = conf.get("base_url") or settings.OPENAI_COMPAT_BASE_URL
        chat = OpenAICompatAudioChat(
            base_url=base_url,
            model=conf.get("model") or settings.OPENAI_COMPAT_MODEL,
            api_key=_api_key(lalm, settings.OPENAI_COMPAT_API_KEY),
            limiter=RateLimiter(
                key=f"openai:{base_url}",
                per_minute=int(conf.get("requests_per_minute", settings.OPENAI_COMPAT_REQUESTS_PER_MINUTE)),
            ),
            max_tokens=conf.get("max_tokens"),
            audio_input=bool(conf.get("audio_input", True)),
            **common,
        )
    return ChatAnswerGenerator(
        name=availability.name,
        chat=chat,
        system_prompt=conf.get("system_prompt", ""),
        prompt_template=conf.get("prompt_template", DEFAULT_PROMPT_TEMPLATE),
    )
