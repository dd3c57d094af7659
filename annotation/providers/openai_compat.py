"""OpenAI-compatible chat servers with audio input (vLLM serving Qwen2-Audio, Ollama, llama.cpp, ...).

The clip is sent inline as an ``input_audio`` content part (base64, format ``wav`` or ``mp3``) through the
``openai`` client with ``base_url``. Errors are mapped like :mod:`annotation.providers.gemini`; the client's own
retries are off (``max_retries=0``) so :func:`~annotation.providers.base.call_with_retry` decides.
"""
from __future__ import annotations

import base64
from pathlib import Path

from .base import (
    Generation,
    PermanentProviderError,
    RateLimiter,
    RetryPolicy,
    TransientProviderError,
    call_with_retry,
    retry_after_seconds,
    transport_error_text,
)

#: How much of a reply that is not JSON an error quotes.
_QUOTE_CHARS = 160


def _map_error(error: Exception, *, url: str = "", timeout_s: float | None = None) -> Exception:
    import openai

    if isinstance(error, openai.APIStatusError):
        message = f"OpenAI-compatible server at {error.request.url}: HTTP {error.status_code} {error.message}"
        if error.status_code in (408, 429) or error.status_code >= 500:
            return TransientProviderError(message, retry_after_s=retry_after_seconds(error.response.headers))
        return PermanentProviderError(message)
    if isinstance(error, (openai.APITimeoutError, openai.APIConnectionError)):
        from annotation.outbound import connect_refusal

        if refusal := connect_refusal(error):  # the address is not allowed: no retry will change that
            return PermanentProviderError(f"OpenAI-compatible server: {refusal}")
        return TransientProviderError(transport_error_text(error, who="OpenAI-compatible server", url=url,
                                                           timeout_s=timeout_s))
    if isinstance(
        error, (openai.APIResponseValidationError, ValueError, KeyError, TypeError, IndexError, AttributeError)
    ):
        return PermanentProviderError(f"OpenAI-compatible server: malformed reply ({type(error).__name__}: {error})")
    return error


def _not_json(raw, body: str) -> str:
    """Why a reply that is not JSON cannot be read (the openai client hands such a body back as a plain string):
    where it came from, its status and type, its first characters, and the usual cause."""
    kind = raw.headers.get("content-type") or "no content type"
    quoted = " ".join(body.split())[:_QUOTE_CHARS]
    return (f"OpenAI-compatible server at {raw.http_request.url}: answered HTTP {raw.status_code} with {kind}, "
            f"not the JSON of a chat completion ({quoted!r}). Is the base URL the API's root, usually ending in "
            "/v1 (e.g. http://gpu-box:8000/v1), and not a web page?")


def audio_content_part(audio_path: str) -> dict:
    """The ``input_audio`` content part for a file (``wav`` unless the extension is ``.mp3``)."""
    data = base64.b64encode(Path(audio_path).read_bytes()).decode("ascii")
    fmt = "mp3" if Path(audio_path).suffix.lower() == ".mp3" else "wav"
    return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}


class OpenAICompatAudioChat:
    """One model on an OpenAI-compatible server asked about one audio clip.

    Args:
        base_url: e.g. ``http://gpu-box:8000/v1``. api_key: '' when the server needs none. model: served name.
        audio_input: send the clip (default); False sends the prompt alone, for a text-only model (a baseline,
            or a text LLM on a server such as llama.cpp that accepts no ``input_audio`` parts).

    ``guarded`` (set by :func:`annotation.providers.setup.chat_for` for a row's own base URL): the client connects
    only to addresses :func:`annotation.outbound.guarded_transport` allows.
    """

    guarded = False

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout_s: float = 120,
        policy: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        audio_input: bool = True,
    ):
        self.audio_input = audio_input
        self.base_url = base_url
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.limiter = limiter
        self.temperature = temperature
        self.max_tokens = max_tokens

    def complete(self, *, messages: list[dict], allow_empty: bool = False, **extra):
        """One chat completion with this class's client, retry policy, rate limit and error mapping.

        ``extra`` goes to ``chat.completions.create`` (e.g. ``logprobs=True, top_logprobs=5``); ``temperature`` and
        ``max_tokens`` default to the instance's. Returns ``(response, text)`` with the first choice's text
        ('' allowed only with ``allow_empty``, e.g. a one-token reply read for its log-probabilities).

        Raises:
            TransientProviderError: still failing after the retries. PermanentProviderError: 4xx, malformed, empty.
        """
        import openai

        # No redirects: an allowed host must not bounce the request, and its key, elsewhere (providers.setup).
        transport = {}
        if self.guarded:  # a base URL typed into a row: connect only to addresses annotation.outbound allows
            from annotation.outbound import guarded_transport

            transport["transport"] = guarded_transport(library="httpx2")  # the openai client's httpx fork
        client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key or "not-needed", max_retries=0, timeout=self.timeout_s,
            http_client=openai.DefaultHttpxClient(follow_redirects=False, timeout=self.timeout_s, **transport),
        )
        if self.temperature is not None:
            extra.setdefault("temperature", self.temperature)
        if self.max_tokens is not None:
            extra.setdefault("max_tokens", self.max_tokens)

        def attempt():
            try:
                raw = client.chat.completions.with_raw_response.create(model=self.model, messages=messages, **extra)
                response = raw.parse()
                if isinstance(response, str):
                    raise PermanentProviderError(_not_json(raw, response))
                text = response.choices[0].message.content or ""
            except PermanentProviderError:
                raise
            except Exception as error:  # noqa: BLE001 - mapped to our error classes, others re-raised
                mapped = _map_error(error, url=f"{self.base_url.rstrip('/')}/chat/completions",
                                    timeout_s=self.timeout_s)
                if mapped is error:
                    raise
                raise mapped from error
            if not allow_empty and not text.strip():
                raise PermanentProviderError("OpenAI-compatible server: empty answer")
            return response, text

        return call_with_retry(attempt, policy=self.policy, limiter=self.limiter)

    def generate(self, *, audio_path: str | None, system: str, prompt: str) -> Generation:
        """Ask ``prompt`` under ``system`` ('' for none) with the audio at ``audio_path`` (None, or an instance
        made with ``audio_input=False``: the text alone); returns the reply text, model and ``usage`` tokens.

        Raises:
            TransientProviderError: still failing after the retries. PermanentProviderError: 4xx, malformed.
        """
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        if self.audio_input and audio_path is not None:
            messages.append(
                {"role": "user", "content": [{"type": "text", "text": prompt}, audio_content_part(audio_path)]}
            )
        else:
            messages.append({"role": "user", "content": prompt})
        response, text = self.complete(messages=messages)
        return Generation(text=text.strip(), model=response.model or self.model, usage=usage_of(response))


def usage_of(response) -> dict:
    """``{prompt_tokens, output_tokens, total_tokens}`` of a chat completion ({} when the server sent none)."""
    if response.usage is None:
        return {}
    return {
        "prompt_tokens": response.usage.prompt_tokens,
        "output_tokens": response.usage.completion_tokens,
        "total_tokens": response.usage.total_tokens,
    }
