"""Providers with their real client libraries (google-genai, openai) against fake servers on 127.0.0.1."""
import time
from email.utils import formatdate

import pytest
from django.test import override_settings

from annotation.models import LALM
from annotation.providers.answers import answer_availability, answer_generator_for
from annotation.providers.base import (
    PermanentProviderError,
    RateLimiter,
    RetryPolicy,
    TransientProviderError,
    call_with_retry,
    retry_after_seconds,
)
from annotation.providers.gemini import GeminiAudioChat
from annotation.providers.rationale import (
    RATIONALE_SYSTEM_PROMPT,
    rationale_availability,
    rationale_writer_from_settings,
)
from annotation.providers.transcribers import transcriber_availability
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini, error_body
from tests.fakes.openai_compat import FakeOpenAICompat

FAST_RETRIES = {"PREPARATION_MAX_ATTEMPTS": 4, "PREPARATION_BACKOFF_BASE_S": 0.01, "PREPARATION_BACKOFF_MAX_S": 5.0}


@pytest.fixture
def wav(tmp_path):
    import numpy as np
    import soundfile

    path = tmp_path / "clip.wav"
    soundfile.write(path, (0.1 * np.sin(np.arange(8000) * 0.05)).astype("float32"), 16000)
    return path


@pytest.fixture
def gemini():
    with FakeGemini() as fake, override_settings(
        GEMINI_API_KEY="test-key", GEMINI_BASE_URL=fake.url, RATIONALE_PROVIDER="gemini", **FAST_RETRIES
    ):
        yield fake


@pytest.fixture
def openai_server():
    with FakeOpenAICompat() as fake:
        yield fake


def test_gemini_rationale_uploads_the_audio_and_sends_the_appendix_b1_prompt(gemini, wav):
    writer = rationale_writer_from_settings()

    generation = writer.write_rationale(audio_path=str(wav), question="Who speaks?", reference_answer="A woman")

    assert generation.text == "The speaker clearly says the answer in the audio."
    assert generation.usage == {"prompt_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    assert list(gemini.uploads.values()) == [wav.read_bytes()]
    body = gemini.generate_requests[0].json()
    parts = body["contents"][0]["parts"]
    assert "concise grounding rationale" in parts[0]["text"]
    assert "Question: Who speaks?\nAnswer: A woman" in parts[0]["text"]
    assert parts[1]["fileData"]["file_uri"].endswith("/files/audio1")
    assert body["systemInstruction"]["parts"][0]["text"] == RATIONALE_SYSTEM_PROMPT
    assert gemini.generate_requests[0].headers["x-goog-api-key"] == "test-key"


def test_gemini_retries_429_honouring_retry_after_and_500_then_succeeds(gemini, wav):
    gemini.script(
        "generate",
        Reply(429, error_body(429, "RESOURCE_EXHAUSTED", "quota"), {"Retry-After": "1"}),
        Reply(500, error_body(500, "INTERNAL", "boom")),
    )
    started = time.monotonic()

    generation = rationale_writer_from_settings().write_rationale(
        audio_path=str(wav), question="Q?", reference_answer="A"
    )

    assert generation.text.startswith("The speaker")
    assert len(gemini.generate_requests) == 3
    assert time.monotonic() - started >= 1.0  # waited at least the server's Retry-After


def test_gemini_malformed_body_is_a_permanent_error_without_retry(gemini, wav):
    gemini.script("generate", Reply(200, "{this is not json"))

    with pytest.raises(PermanentProviderError, match="malformed reply"):
        rationale_writer_from_settings().write_rationale(audio_path=str(wav), question="Q?", reference_answer="A")
    assert len(gemini.generate_requests) == 1


def test_gemini_bad_request_is_permanent_and_names_the_status(gemini, wav):
    gemini.script("generate", Reply(400, error_body(400, "INVALID_ARGUMENT", "audio too long")))

    with pytest.raises(PermanentProviderError, match="HTTP 400 audio too long"):
        rationale_writer_from_settings().write_rationale(audio_path=str(wav), question="Q?", reference_answer="A")
    assert len(gemini.generate_requests) == 1


def test_gemini_gives_up_after_max_attempts_of_server_errors(gemini, wav):
    gemini.script("generate", *[Reply(503, error_body(503, "UNAVAILABLE", "overloaded"))] * 4)

    with pytest.raises(TransientProviderError, match="gave up after 4 attempts"):
        rationale_writer_from_settings().write_rationale(audio_path=str(wav), question="Q?", reference_answer="A")
    assert len(gemini.generate_requests) == 4


def test_gemini_upload_failure_is_retried(gemini, wav):
    gemini.script("upload", Reply(503, error_body(503, "UNAVAILABLE", "try later")))

    generation = rationale_writer_from_settings().write_rationale(
        audio_path=str(wav), question="Q", reference_answer="A"
    )

    assert generation.text
    assert len(gemini.generate_requests) == 1


def test_gemini_timeout_is_transient(wav):
    with FakeGemini() as fake:
        fake.script("generate", Reply(200, {}, delay_s=2.0))
        chat = GeminiAudioChat(
            api_key="k", model="m", base_url=fake.url, timeout_s=0.5, policy=RetryPolicy(max_attempts=1)
        )
        with pytest.raises(TransientProviderError, match=r"at 127\.0\.0\.1:\d+ \(.*\): no answer within 0\.5 s"):
            chat.generate(audio_path=str(wav), system="s", prompt="p")


@pytest.mark.django_db
def test_openai_compatible_lalm_sends_the_question_with_input_audio(openai_server, wav):
    lalm = LALM.objects.create(
        name="qwen2-audio",
        provider=LALM.Provider.OPENAI,
        settings={"base_url": f"{openai_server.url}/v1", "model": "Qwen2-Audio-7B-Instruct", "temperature": 0.0},
    )

    generation = answer_generator_for(lalm=lalm).answer(audio_path=str(wav), question="What is the sound?")

    assert generation.text == "A man is speaking about the weather."
    assert generation.usage == {"prompt_tokens": 40, "output_tokens": 8, "total_tokens": 48}
    body = openai_server.chat_requests[0].json()
    assert body["model"] == "Qwen2-Audio-7B-Instruct"
    assert body["temperature"] == 0.0
    content = body["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "What is the sound?"}
    assert content[1]["type"] == "input_audio"
    assert content[1]["input_audio"]["format"] == "wav"
    import base64

    assert base64.b64decode(content[1]["input_audio"]["data"]) == wav.read_bytes()


@pytest.mark.django_db
@override_settings(**FAST_RETRIES)
def test_openai_compatible_retries_429_and_503_but_not_400(openai_server, wav):
    lalm = LALM.objects.create(
        name="vllm", provider=LALM.Provider.OPENAI, settings={"base_url": f"{openai_server.url}/v1", "model": "m"}
    )
    generator = answer_generator_for(lalm=lalm)
    openai_server.script(
        "chat",
        Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}),
        Reply(503, {"error": {"message": "loading"}}),
    )
    assert generator.answer(audio_path=str(wav), question="Q").text
    assert len(openai_server.chat_requests) == 3

    openai_server.script("chat", Reply(400, {"error": {"message": "audio format not supported"}}))
    with pytest.raises(PermanentProviderError, match="HTTP 400"):
        generator.answer(audio_path=str(wav), question="Q")
    assert len(openai_server.chat_requests) == 4


@override_settings(OPENAI_COMPAT_MODEL="served-model", RATIONALE_PROVIDER="openai", **FAST_RETRIES)
def test_openai_compatible_rationale_writer_uses_the_server_from_settings(openai_server, wav):
    with override_settings(OPENAI_COMPAT_BASE_URL=f"{openai_server.url}/v1"):
        generation = rationale_writer_from_settings().write_rationale(
            audio_path=str(wav), question="Q?", reference_answer="A"
        )
    assert generation.text
    body = openai_server.chat_requests[0].json()
    assert body["messages"][0] == {"role": "system", "content": RATIONALE_SYSTEM_PROMPT}


@pytest.mark.django_db
@override_settings(GEMINI_API_KEY="", OPENAI_COMPAT_BASE_URL="", OPENAI_COMPAT_MODEL="")
def test_unconfigured_providers_are_unavailable_with_the_reason():
    assert rationale_availability(provider="gemini").reason == "GEMINI_API_KEY is not set"
    assert rationale_availability(provider="openai").reason == "OPENAI_COMPAT_BASE_URL is not set"
    gemini_lalm = LALM.objects.create(name="g", provider=LALM.Provider.GEMINI)
    assert not answer_availability(lalm=gemini_lalm).ok
    server_lalm = LALM.objects.create(name="s", provider=LALM.Provider.OPENAI)
    assert "base_url" in answer_availability(lalm=server_lalm).reason
    imported = LALM.objects.create(name="i", provider=LALM.Provider.IMPORT)
    assert "imported" in answer_availability(lalm=imported).reason
    assert "unknown WHISPER_BACKEND" in transcriber_availability(backend="nope").reason
    assert transcriber_availability(backend="faster-whisper", model="tiny.en").ok


def test_retry_after_accepts_seconds_and_http_dates():
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert 25 <= retry_after_seconds({"Retry-After": formatdate(time.time() + 30, usegmt=True)}) <= 31
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None


def test_backoff_grows_exponentially_with_jitter_and_honours_retry_after():
    policy = RetryPolicy(max_attempts=5, base_s=1.0, max_s=8.0)
    for attempt, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 8.0)]:
        delays = [policy.delay(attempt=attempt, retry_after_s=None) for _ in range(200)]
        assert 0 <= min(delays) and max(delays) <= cap
        assert max(delays) > cap / 2  # jitter spreads over the whole range
    assert policy.delay(attempt=1, retry_after_s=5) >= 5
    assert policy.delay(attempt=1, retry_after_s=500) == 8.0  # capped


def test_only_transient_errors_are_retried():
    calls, waits = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise TransientProviderError("429", retry_after_s=2)
        return "ok"

    assert call_with_retry(flaky, policy=RetryPolicy(5, 0.01, 10), sleep=waits.append) == "ok"
    assert len(calls) == 3 and all(w >= 2 for w in waits)

    def broken():
        calls.append(1)
        raise PermanentProviderError("400")

    calls.clear()
    with pytest.raises(PermanentProviderError):
        call_with_retry(broken, policy=RetryPolicy(5, 0.01, 10), sleep=waits.append)
    assert len(calls) == 1


def test_rate_limiter_waits_for_the_next_minute_past_the_limit():
    from django.core.cache import cache

    cache.clear()
    now = [600.0]
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(key="test", per_minute=3, clock=lambda: now[0])
    for _ in range(3):
        limiter.acquire(sleep=sleep)
    assert waits == []
    limiter.acquire(sleep=sleep)
    assert waits == [60.0]
