"""Gemini with audio through ``google-genai``: upload the clip with the Files API, then ``generate_content``.

Used by the Gemini rationale writer (ORCA paper, Appendix B.1) and by Gemini LALMs. Errors are mapped onto
:mod:`annotation.providers.base`: HTTP 408/429/5xx, timeouts and dropped connections are transient (with the
server's ``Retry-After``); other HTTP errors, malformed replies and empty answers are permanent. The client's own
retries are off (``retry_options`` unset), so :func:`~annotation.providers.base.call_with_retry` decides.
"""
from __future__ import annotations

import time
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

AUDIO_MIME_TYPES = {".wav": "audio/wav", ".mp3": "audio/mp3", ".flac": "audio/flac", ".ogg": "audio/ogg"}
TRANSIENT_HTTP = {408, 429, 500, 502, 503, 504}


def audio_mime_type(path: str) -> str:
    """MIME type Gemini accepts for an audio file, from its extension (default ``audio/wav``)."""
    return AUDIO_MIME_TYPES.get(Path(path).suffix.lower(), "audio/wav")


def _transport_errors() -> tuple[type[Exception], ...]:
    """Timeout and transport error classes of httpx and its fork httpx2 (google-genai uses either)."""
    import importlib

    classes: list[type[Exception]] = []
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        classes += [module.TimeoutException, module.TransportError]
    return tuple(classes)


def _map_error(error: Exception, *, what: str, url: str = "", timeout_s: float | None = None) -> Exception:
    from google.genai import errors

    if isinstance(error, errors.APIError):
        headers = getattr(getattr(error, "response", None), "headers", None)
        message = f"Gemini {what}: HTTP {error.code} {error.message or error.status or ''}".strip()
        if error.code in TRANSIENT_HTTP:
            return TransientProviderError(message, retry_after_s=retry_after_seconds(headers))
        return PermanentProviderError(message)
    if isinstance(error, _transport_errors()):
        from annotation.outbound import connect_refusal

        if refusal := connect_refusal(error):  # the address is not allowed: no retry will change that
            return PermanentProviderError(f"Gemini {what}: {refusal}")
        return TransientProviderError(transport_error_text(error, who=f"Gemini {what}", url=url,
                                                           timeout_s=timeout_s))
    if isinstance(error, (ValueError, KeyError, TypeError, IndexError, AttributeError)):
        return PermanentProviderError(f"Gemini {what}: malformed reply ({type(error).__name__}: {error})")
    return error


class GeminiAudioChat:
    """One Gemini model asked about one audio clip.

    Args:
        api_key: the Gemini API key. base_url: '' for Google's endpoint, or another server (tests, proxies).
        model: e.g. ``gemini-2.5-flash``. timeout_s: per request. policy/limiter: retries and rate limit.

    ``guarded`` (set by :func:`annotation.providers.setup.chat_for` for a row's own base URL): the client connects
    only to addresses :func:`annotation.outbound.guarded_transport` allows.
    """

    guarded = False

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        base_url: str = "",
        timeout_s: float = 120,
        policy: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        temperature: float | None = None,
    ):
        self.api_key = api_key
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.limiter = limiter
        self.temperature = temperature

    def client(self):
        from google import genai
        from google.genai import types

        # No redirects: an allowed host must not bounce the request, and its key, elsewhere (providers.setup).
        client_args = {"follow_redirects": False}
        if self.guarded:  # a base URL typed into a row: connect only to addresses annotation.outbound allows
            from annotation.outbound import guarded_transport

            client_args["transport"] = guarded_transport()
        options = types.HttpOptions(timeout=int(self.timeout_s * 1000), base_url=self.base_url or None,
                                    client_args=client_args)
        return genai.Client(api_key=self.api_key, http_options=options)

    def _call(self, fn, *, what: str):
        def attempt():
            try:
                return fn()
            except Exception as error:  # noqa: BLE001 - mapped to our error classes, others re-raised
                mapped = _map_error(error, what=what, url=self.base_url, timeout_s=self.timeout_s)
                if mapped is error:
                    raise
                raise mapped from error

        return call_with_retry(attempt, policy=self.policy, limiter=self.limiter)

    def generate(self, *, audio_path: str | None, system: str, prompt: str) -> Generation:
        """Ask ``prompt`` under ``system`` ('' for none), with the audio at ``audio_path`` uploaded first and sent
        after the text part, or text only when ``audio_path`` is None (judges, suggestions without audio).

        Returns:
            The reply text (stripped), the model and ``usage`` = {prompt_tokens, output_tokens, total_tokens}.

        Raises:
            TransientProviderError: still failing after the retries. PermanentProviderError: as described above.
        """
        from google.genai import types

        client = self.client()
        contents: list = [prompt]
        if audio_path is not None:
            contents.append(self._upload(client, audio_path))
        config = types.GenerateContentConfig(system_instruction=system or None, temperature=self.temperature)

        def generate():
            response = client.models.generate_content(model=self.model, contents=contents, config=config)
            text = response.text  # raises ValueError on some malformed candidates
            if not text or not text.strip():
                reason = response.candidates[0].finish_reason if response.candidates else "no candidates"
                raise PermanentProviderError(f"Gemini generate_content: empty answer (finish reason {reason})")
            return response, text

        response, text = self._call(generate, what="generate_content")
        meta = response.usage_metadata
        usage = {}
        if meta is not None:
            usage = {
                "prompt_tokens": meta.prompt_token_count,
                "output_tokens": meta.candidates_token_count,
                "total_tokens": meta.total_token_count,
            }
        return Generation(text=text.strip(), model=response.model_version or self.model, usage=usage)

    def _upload(self, client, audio_path: str):
        """Upload the clip with the Files API, wait while Gemini processes it; the audio part of the request."""
        from google.genai import types

        mime = audio_mime_type(audio_path)
        uploaded = self._call(
            lambda: client.files.upload(file=str(audio_path), config={"mime_type": mime}), what="file upload"
        )
        deadline = time.monotonic() + self.timeout_s
        while getattr(uploaded, "state", None) == types.FileState.PROCESSING and time.monotonic() < deadline:
            time.sleep(1)
            uploaded = self._call(lambda uploaded=uploaded: client.files.get(name=uploaded.name), what="file status")
        if getattr(uploaded, "state", None) == types.FileState.FAILED:
            raise PermanentProviderError(f"Gemini could not process the uploaded audio {uploaded.name}")
        return types.Part.from_uri(file_uri=uploaded.uri, mime_type=uploaded.mime_type or mime)
