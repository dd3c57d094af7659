"""Answer generators for Stage 1b (ORCA paper, section 3.1): an LALM is asked the question with the audio.

Each ``LALM`` row names its provider and settings, so adding a model is a form in the browser (``/lalms/``), not
code.
``LALM.settings`` keys (all optional):

* ``model``: the model name (Gemini: default ``GEMINI_MODEL``; OpenAI-compatible: required);
* ``base_url``: the server (OpenAI-compatible: required unless ``OPENAI_COMPAT_BASE_URL`` is set; Gemini: a
  proxy or test server, default Google's);
* ``api_key_env``: the name of the environment variable holding the key (default ``GEMINI_API_KEY`` /
  ``OPENAI_COMPAT_API_KEY``), matching ``PROVIDER_API_KEY_ENV_PATTERN``; keys are never stored in the database,
  and a key goes only to the hosts it is bound to (:mod:`.setup`);
* ``requests_per_minute``: rate limit for this LALM (default the provider's setting);
* ``system_prompt``, ``prompt_template`` (``{question}`` is replaced), ``temperature``, ``max_tokens``;
* ``audio_input`` (OpenAI-compatible, default true): false sends the question without the clip, for a text-only
  model (a no-audio baseline, or a text LLM served by llama.cpp, which accepts no ``input_audio`` parts).

LALMs with provider ``import`` have their answers imported from JSONL (``annotation.services.importers``).
"""
from __future__ import annotations

from annotation.models import LALM

from .base import Availability, Generation, ProviderUnavailable
from .setup import chat_for, endpoint_availability, endpoint_resolve

DEFAULT_PROMPT_TEMPLATE = "{question}"


def answer_availability(*, lalm: LALM) -> Availability:
    """Whether ``lalm`` can be asked for candidate answers here, and why not (:mod:`.setup` decides)."""
    name = f"{lalm.name} ({lalm.get_provider_display()})"
    if lalm.provider == LALM.Provider.IMPORT:
        return Availability(name, False, "answers of this LALM are imported from JSONL, not generated")
    return endpoint_availability(name=name, provider=lalm.provider, conf=lalm.settings)


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


def answer_generator_for(*, lalm: LALM, policy=None) -> ChatAnswerGenerator:
    """The answer generator for an LALM row (``policy``: the retry policy, default the settings').

    Raises:
        ProviderUnavailable: the LALM cannot be asked here (reason in the message).
    """
    availability = answer_availability(lalm=lalm)
    if not availability.ok:
        raise ProviderUnavailable(availability.reason)
    conf = lalm.settings or {}
    chat = chat_for(endpoint_resolve(provider=lalm.provider, conf=conf), conf=conf, policy=policy,
                    temperature=conf.get("temperature"), max_tokens=conf.get("max_tokens"),
                    audio_input=bool(conf.get("audio_input", True)))
    return ChatAnswerGenerator(
        name=availability.name,
        chat=chat,
        system_prompt=conf.get("system_prompt", ""),
        prompt_template=conf.get("prompt_template") or DEFAULT_PROMPT_TEMPLATE,
    )
