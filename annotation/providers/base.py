"""What every Stage 1 provider shares: result shapes, error classes, the retry policy and the rate limiter.

Providers (ORCA paper, section 3.1) sit behind three small interfaces:

* ``Transcriber.transcribe(audio_path=...) -> Transcript`` (Stage 1a, Whisper), and ``transcribe_many`` for a
  small batch of clips (one result or error per clip),
* ``RationaleWriter.write_rationale(audio_path=..., question=..., reference_answer=...) -> Generation``
  (Stage 1a, Gemini; prompt of Appendix B.1),
* ``AnswerGenerator.answer(audio_path=..., question=...) -> Generation`` (Stage 1b, an LALM).

A provider raises :class:`TransientProviderError` for errors worth retrying (HTTP 429, 5xx, timeouts, connection
errors) and :class:`PermanentProviderError` for everything else it understands (4xx, malformed replies, missing
audio). :func:`call_with_retry` retries only the transient ones, with exponential backoff and full jitter,
honouring ``Retry-After``.
"""
from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger(__name__)

T = TypeVar("T")


# --- errors -------------------------------------------------------------------------------------------------
class ProviderError(Exception):
    """Base class of the errors providers raise."""


class ProviderUnavailable(ProviderError):
    """The provider is not configured here (no API key, no server URL, model files missing). ``str()`` says why."""


class PermanentProviderError(ProviderError):
    """An error that retrying will not fix: HTTP 4xx other than 429, a malformed reply, unreadable audio."""


class TransientProviderError(ProviderError):
    """An error worth retrying: HTTP 429 or 5xx, a timeout, a dropped connection.

    Attributes:
        retry_after_s: seconds the server asked us to wait (``Retry-After``), or None.
    """

    def __init__(self, message: str, *, retry_after_s: float | None = None):
        super().__init__(message)
        self.retry_after_s = retry_after_s


def _root_cause(error: BaseException) -> BaseException:
    """The exception of ``error``'s chain (``__cause__``, else ``__context__``) that says what went wrong: the
    innermost operating-system error under the client library's wrappers (openai's "Connection error." → httpx →
    httpcore → ConnectionRefusedError); without one, an error raised ``from None`` (a deliberate message, such as
    the outbound guard's "the host ... does not resolve", whose context is noise); else the innermost."""
    chain, seen = [error], {id(error)}
    while (inner := error.__cause__ or error.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        chain.append(inner)
        error = inner
    for candidate in reversed(chain):
        if isinstance(candidate, OSError):
            return candidate
    for candidate in chain:
        if candidate.__suppress_context__ and candidate.__cause__ is None:
            return candidate
    return chain[-1]


def _cause_in_words(root: BaseException, *, host: str, timeout_s: float | None) -> str:
    import socket
    import ssl

    if isinstance(root, ConnectionRefusedError):
        return "connection refused: nothing listens on that port (is the server running, is the port right?)"
    if isinstance(root, socket.gaierror):
        return f"the host name {host!r} does not resolve ({root.strerror or root}): check the spelling, DNS or VPN"
    if isinstance(root, TimeoutError) or "timeout" in type(root).__name__.lower() or "timed out" in str(root):
        within = f" within {timeout_s:g} s" if timeout_s else ""
        return f"no answer{within} (the server is busy, unreachable through a firewall, or the timeout is too short)"
    if isinstance(root, ssl.SSLError):
        return f"the TLS handshake failed ({root.reason or root}): is it an https server, with a valid certificate?"
    if isinstance(root, OSError) and root.strerror:
        return root.strerror[0].lower() + root.strerror[1:]
    return f"{type(root).__name__}: {root}" if str(root) else type(root).__name__


def transport_error_text(error: BaseException, *, who: str, url: str = "", timeout_s: float | None = None) -> str:
    """A connection or timeout error of an HTTP client library in words: who was asked, at which host and port,
    and the cause the operating system gave (refused, name not resolved, timed out, TLS) — not the library's bare
    "APIConnectionError: Connection error.".

    ``url``: the request's URL, used when ``error`` (an httpx or openai error carrying ``.request``) has none.
    E.g. "OpenAI-compatible server at 127.0.0.1:9 (http://127.0.0.1:9/v1/chat/completions): cannot connect:
    connection refused: nothing listens on that port (…)".
    """
    from urllib.parse import urlsplit

    request = None
    try:
        request = getattr(error, "request", None)
    except RuntimeError:  # httpx raises when the error was made without a request
        request = None
    target = str(getattr(request, "url", "") or url)
    parts = urlsplit(target)
    host = parts.hostname or ""
    try:
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        port = None
    where = f" at {host}:{port}" if host and port else f" at {host}" if host else ""
    root = _root_cause(error)
    timed_out = "timeout" in type(error).__name__.lower() or "timeout" in type(root).__name__.lower()
    cause = _cause_in_words(root, host=host, timeout_s=timeout_s)
    if timed_out and not cause.startswith("no answer"):
        cause = f"no answer in time ({cause})"
    verb = "" if cause.startswith("no answer") else "cannot connect: "
    return f"{who}{where}{f' ({target})' if target else ''}: {verb}{cause}"


def retry_after_seconds(headers) -> float | None:
    """Parse a ``Retry-After`` header (delta-seconds or an HTTP date) from a mapping of headers; None if absent."""
    if headers is None:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


# --- results ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Segment:
    """One Whisper segment: ``start``/``end`` in seconds from the clip's start, ``text`` stripped."""

    start: float
    end: float
    text: str

    def as_dict(self) -> dict:
        return {"start": round(self.start, 3), "end": round(self.end, 3), "text": self.text}


@dataclass(frozen=True)
class Transcript:
    """A transcription: ``text`` (segments joined by spaces), ISO-639-1 ``language`` (may be ''), ``segments``."""

    text: str
    language: str
    segments: list[Segment] = field(default_factory=list)
    usage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Generation:
    """A text from a model: ``text``, the ``model`` that wrote it and ``usage`` (token counts as the API gives)."""

    text: str
    model: str
    usage: dict = field(default_factory=dict)


# --- interfaces ---------------------------------------------------------------------------------------------
class Transcriber(Protocol):
    name: str

    def transcribe(self, *, audio_path: str) -> Transcript: ...

    def transcribe_many(
        self, *, audio_paths: list[str], pack_s: float = 0.0, gap_s: float = 1.0
    ) -> list[Transcript | ProviderError]: ...


class RationaleWriter(Protocol):
    name: str

    def write_rationale(self, *, audio_path: str, question: str, reference_answer: str) -> Generation: ...


class AnswerGenerator(Protocol):
    name: str

    def answer(self, *, audio_path: str, question: str) -> Generation: ...


# --- retry policy -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter for transient errors.

    Attempt n (1-based) that fails waits ``uniform(0, min(max_s, base_s * 2**(n-1)))`` seconds, or the server's
    ``Retry-After`` when that is longer (capped at ``max_s``). After ``max_attempts`` attempts the last
    :class:`TransientProviderError` is raised.
    """

    max_attempts: int = 5
    base_s: float = 2.0
    max_s: float = 60.0

    @classmethod
    def from_settings(cls) -> RetryPolicy:
        """The policy from ``PREPARATION_MAX_ATTEMPTS``, ``PREPARATION_BACKOFF_BASE_S``,
        ``PREPARATION_BACKOFF_MAX_S``."""
        return cls(
            max_attempts=settings.PREPARATION_MAX_ATTEMPTS,
            base_s=settings.PREPARATION_BACKOFF_BASE_S,
            max_s=settings.PREPARATION_BACKOFF_MAX_S,
        )

    def delay(self, *, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        backoff = random.uniform(0, min(self.max_s, self.base_s * 2 ** (attempt - 1)))
        if retry_after_s is not None:
            backoff = max(backoff, min(self.max_s, retry_after_s))
        return backoff


def call_with_retry(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy,
    limiter: RateLimiter | None = None,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, TransientProviderError, float], None] | None = None,
) -> T:
    """Call ``fn`` until it returns, retrying :class:`TransientProviderError` only (never other exceptions).

    Each attempt first takes a slot from ``limiter``. ``on_retry(attempt, error, delay_s)`` is called before each
    wait (for logging and tests).

    Raises:
        TransientProviderError: still failing after ``policy.max_attempts`` attempts (message says how many).
        PermanentProviderError, ProviderUnavailable: at once.
    """
    attempt = 0
    while True:
        attempt += 1
        if limiter is not None:
            limiter.acquire(sleep=sleep)
        try:
            return fn()
        except TransientProviderError as error:
            if attempt >= policy.max_attempts:
                attempts = f"{attempt} attempt{'s' if attempt != 1 else ''}"
                raise TransientProviderError(
                    f"{error} (gave up after {attempts})", retry_after_s=error.retry_after_s
                ) from error
            wait = policy.delay(attempt=attempt, retry_after_s=error.retry_after_s)
            logger.info("transient provider error (attempt %d): %s; retrying in %.1f s", attempt, error, wait)
            if on_retry is not None:
                on_retry(attempt, error, wait)
            sleep(wait)


# --- rate limit ---------------------------------------------------------------------------------------------
class RateLimiter:
    """At most ``per_minute`` requests per wall-clock minute for one provider key (0 or less: no limit).

    Counts live in Django's cache, so the limit is shared by every process that shares the cache (Redis or
    database cache in production); with the default local-memory cache it holds per process.
    """

    def __init__(self, *, key: str, per_minute: int, clock: Callable[[], float] = time.time):
        self.key = key
        self.per_minute = per_minute
        self.clock = clock

    def acquire(self, *, sleep: Callable[[float], None] = time.sleep) -> None:
        """Block until a request slot in the current minute is free, then take it."""
        if self.per_minute <= 0:
            return
        while True:
            now = self.clock()
            window = int(now // 60)
            cache_key = f"provider-rate:{self.key}:{window}"
            cache.add(cache_key, 0, timeout=120)
            try:
                used = cache.incr(cache_key)
            except ValueError:  # expired between add and incr
                continue
            if used <= self.per_minute:
                return
            sleep(max(0.05, (window + 1) * 60 - now))


@dataclass(frozen=True)
class Availability:
    """Whether a provider can run here: ``ok`` and, when not, the ``reason`` shown to users."""

    name: str
    ok: bool
    reason: str = ""
