"""LALMs and judges set up in forms, and their connection tests: one real request, sent by a worker, to a local fake
server speaking the provider's protocol (the real ``openai`` and ``google-genai`` clients)."""
import base64
import html
import io
import os
import re
import time
import wave

import pytest
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from annotation.models import LALM, AuditEvent, ConnectionTest, Judge
from annotation.services.endpoints import connection_test_start, lalm_save
from tests.factories import UserFactory
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai_compat import FakeOpenAICompat

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(client):
    user = UserFactory(username="boss", is_staff=True, is_superuser=True, roles=["admin"])
    client.force_login(user)
    return user


@pytest.fixture
def server():
    with FakeOpenAICompat(reply=lambda r: "A steady beep.") as fake:
        yield fake


def _lalm_form(**fields) -> dict:
    return {"name": "Qwen2-Audio", "provider": "openai", "model": "qwen2-audio", "audio_input": "on",
            "is_active": "on", **fields}


def test_an_admin_adds_an_lalm_in_the_form_and_it_is_saved_with_its_settings_and_audited(client, admin, server):
    response = client.post(reverse("annotation:lalm-new"), _lalm_form(
        base_url=f"{server.url}/v1", api_key_env="LAB_API_KEY", temperature="0.2", max_tokens="64",
        system_prompt="Answer briefly."))
    lalm = LALM.objects.get(name="Qwen2-Audio")
    assert response.status_code == 302 and response["Location"] == reverse("annotation:lalm-edit", args=[lalm.pk])
    assert lalm.settings == {"model": "qwen2-audio", "base_url": f"{server.url}/v1", "api_key_env": "LAB_API_KEY",
                             "system_prompt": "Answer briefly.", "audio_input": True, "temperature": 0.2,
                             "max_tokens": 64}
    event = AuditEvent.objects.get(action="lalm.create")
    assert event.actor == admin and event.new["settings"]["model"] == "qwen2-audio"
    assert server.requests == []  # saving an LALM asks nothing
    page = client.get(reverse("annotation:lalm-edit", args=[lalm.pk])).content.decode()
    assert 'value="qwen2-audio"' in page and "Test connection" in page


def test_editing_keeps_settings_the_form_does_not_show_and_refuses_what_cannot_work(client, admin, server):
    lalm = LALM.objects.create(name="old", provider="openai",
                               settings={"model": "m", "base_url": f"{server.url}/v1", "custom_flag": 1})
    response = client.post(reverse("annotation:lalm-edit", args=[lalm.pk]), _lalm_form(
        name="old", model="m2", base_url=f"{server.url}/v1"))
    assert response.status_code == 302
    lalm.refresh_from_db()
    assert lalm.settings["custom_flag"] == 1 and lalm.settings["model"] == "m2"
    for fields, message in (
        ({"base_url": "", "model": "m"}, "OPENAI_COMPAT_BASE_URL is not set"),
        ({"base_url": f"{server.url}/v1", "model": ""}, "OPENAI_COMPAT_MODEL is not set"),
        ({"base_url": f"{server.url}/v1", "prompt_template": "Say hi"}, "must contain {question}"),
        ({"base_url": f"{server.url}/v1", "temperature": "7"}, "less than or equal to 2"),
        ({"base_url": "gpu-box:8000"}, "not an http:// or https:// URL"),
    ):
        with override_settings(OPENAI_COMPAT_BASE_URL="", OPENAI_COMPAT_MODEL=""):
            response = client.post(reverse("annotation:lalm-edit", args=[lalm.pk]), _lalm_form(name="old", **fields))
        assert response.status_code == 400, fields
        assert message in html.unescape(response.content.decode()), fields
    lalm.refresh_from_db()
    assert lalm.settings["model"] == "m2"


def test_the_lalm_connection_test_sends_a_tone_from_the_worker_and_shows_the_answer(
    client, admin, server, django_capture_on_commit_callbacks
):
    lalm = LALM.objects.create(name="q", provider="openai", settings={"model": "m", "base_url": f"{server.url}/v1"})
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("annotation:lalm-test", args=[lalm.pk]), HTTP_HX_REQUEST="true")
    test = ConnectionTest.objects.get(lalm=lalm)
    assert response.status_code == 200 and test.status == "queued"
    assert f'hx-get="{reverse("annotation:connection-test", args=[test.pk])}"' in response.content.decode()
    assert server.requests == []  # nothing from the web request
    for callback in callbacks:
        callback()  # the worker's task (eager Celery)
    test.refresh_from_db()
    assert test.status == "done" and test.answer == "A steady beep."
    assert test.endpoint == (f"openai · model m at 127.0.0.1:{server.port} · "
                             "no key sent (OPENAI_COMPAT_API_KEY is not set)")
    [request] = server.chat_requests
    audio = request.json()["messages"][-1]["content"][1]["input_audio"]
    with wave.open(io.BytesIO(base64.b64decode(audio["data"]))) as clip:
        assert (clip.getframerate(), clip.getnframes()) == (16000, 16000)
    partial = client.get(reverse("annotation:connection-test", args=[test.pk]), HTTP_HX_REQUEST="true")
    text = partial.content.decode()
    assert "A steady beep." in text and "hx-trigger" not in text  # finished: polling stops


def test_a_gemini_lalm_is_tested_through_the_files_api_and_generate_content(client, admin,
                                                                            django_capture_on_commit_callbacks):
    with FakeGemini(reply=lambda r: "A tone.") as fake, override_settings(GEMINI_API_KEY="g-key",
                                                                           GEMINI_BASE_URL=fake.url):
        lalm = lalm_save(lalm=None, name="gem", provider="gemini", settings_={"model": "gemini-2.5-flash"},
                         actor=admin)
        with django_capture_on_commit_callbacks(execute=True):
            client.post(reverse("annotation:lalm-test", args=[lalm.pk]))
        assert len(fake.uploads) == 1 and len(fake.generate_requests) == 1
        assert fake.generate_requests[0].headers["x-goog-api-key"] == "g-key"
    test = ConnectionTest.objects.get(lalm=lalm)
    assert (test.status, test.answer) == ("done", "A tone.")
    assert "key from GEMINI_API_KEY" in test.endpoint


def test_a_failing_server_is_asked_once_and_the_error_is_shown(client, admin, server,
                                                               django_capture_on_commit_callbacks):
    server.script("chat", Reply(503, {"error": {"message": "overloaded"}}))
    lalm = LALM.objects.create(name="q", provider="openai", settings={"model": "m", "base_url": f"{server.url}/v1"})
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("annotation:lalm-test", args=[lalm.pk]))
    test = ConnectionTest.objects.get(lalm=lalm)
    assert response["Location"] == reverse("annotation:connection-test", args=[test.pk])
    assert test.status == "failed" and "HTTP 503" in test.error and "overloaded" in test.error
    assert len(server.chat_requests) == 1  # a test is one try, not a job's retries
    assert "HTTP 503" in client.get(response["Location"]).content.decode()


def _tested(client, lalm, callbacks_fixture) -> ConnectionTest:
    with callbacks_fixture(execute=True):
        client.post(reverse("annotation:lalm-test", args=[lalm.pk]))
    return ConnectionTest.objects.get(lalm=lalm)


def test_a_test_of_a_closed_port_names_host_port_and_cause_and_shows_where_it_was_sent(
        client, admin, django_capture_on_commit_callbacks):
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    lalm = LALM.objects.create(name="q", provider="openai",
                               settings={"model": "m", "base_url": f"http://127.0.0.1:{port}/v1"})
    test = _tested(client, lalm, django_capture_on_commit_callbacks)
    assert test.status == "failed"
    assert test.error.startswith(f"OpenAI-compatible server at 127.0.0.1:{port} "
                                 f"(http://127.0.0.1:{port}/v1/chat/completions): cannot connect: connection refused")
    assert "Connection error" not in test.error and "APIConnectionError" not in test.error
    # Where it went and what it asked, as on a test that passed.
    assert test.endpoint == f"openai · model m at 127.0.0.1:{port} · no key sent (OPENAI_COMPAT_API_KEY is not set)"
    assert test.request.startswith("What do you hear in this audio clip?")
    page = html.unescape(client.get(reverse("annotation:connection-test", args=[test.pk])).content.decode())
    assert f"Sent to:</strong> openai · model m at 127.0.0.1:{port}" in page and "connection refused" in page


def test_a_host_that_does_not_resolve_is_named_with_the_cause(admin, monkeypatch):
    from annotation.providers.base import TransientProviderError
    from annotation.providers.openai_compat import OpenAICompatAudioChat

    chat = OpenAICompatAudioChat(base_url="http://gpu-box.invalid:8000/v1", model="m", timeout_s=5)
    chat.policy = type(chat.policy)(max_attempts=1)
    with pytest.raises(TransientProviderError) as caught:
        chat.generate(audio_path=None, system="", prompt="hi")
    assert str(caught.value).startswith("OpenAI-compatible server at gpu-box.invalid:8000 (")
    assert "the host name 'gpu-box.invalid' does not resolve" in str(caught.value)


def test_a_server_answering_a_web_page_is_told_apart_from_a_chat_completion(
        client, admin, server, django_capture_on_commit_callbacks):
    """The cause of "AttributeError: 'str' object has no attribute 'choices'": a base URL that answers 200 with a
    web page (the server's UI, a proxy's login page) instead of JSON; the openai client hands such a body back as a
    string."""
    server.script("chat", Reply(200, "<!doctype html><html><body><h1>Welcome to the GPU box</h1></body></html>",
                                headers={"Content-Type": "text/html; charset=utf-8"}))
    lalm = LALM.objects.create(name="q", provider="openai", settings={"model": "m", "base_url": f"{server.url}/v1"})
    test = _tested(client, lalm, django_capture_on_commit_callbacks)
    assert test.status == "failed" and "AttributeError" not in test.error and "'choices'" not in test.error
    assert test.error.startswith(f"OpenAI-compatible server at {server.url}/v1/chat/completions: answered HTTP 200 "
                                 "with text/html; charset=utf-8, not the JSON of a chat completion")
    assert "Welcome to the GPU box" in test.error and "usually ending in /v1" in test.error
    assert test.endpoint.startswith("openai · model m at 127.0.0.1:")


def test_a_named_key_variable_that_is_not_set_is_named_as_unset(client, admin, server, monkeypatch,
                                                                django_capture_on_commit_callbacks):
    monkeypatch.delenv("LAB_API_KEY", raising=False)
    response = client.post(reverse("annotation:lalm-new"), _lalm_form(base_url=f"{server.url}/v1",
                                                                      api_key_env="LAB_API_KEY"), follow=True)
    page = html.unescape(response.content.decode())
    assert "The key variable LAB_API_KEY is not set on the server, so no key is sent" in page
    lalm = LALM.objects.get(name="Qwen2-Audio")
    test = _tested(client, lalm, django_capture_on_commit_callbacks)
    assert test.endpoint.endswith("· no key sent (LAB_API_KEY is not set)")
    assert 'LAB_API_KEY <span class="muted">(not set on the server: no key sent)</span>' in html.unescape(
        client.get(reverse("annotation:lalms")).content.decode())
    monkeypatch.setenv("LAB_API_KEY", "k")
    assert "not set on the server" not in client.get(reverse("annotation:lalms")).content.decode()


def test_form_errors_name_settings_by_their_labels_not_their_keys(client, admin, server):
    response = client.post(reverse("annotation:lalm-new"), _lalm_form(base_url=f"{server.url}/v1",
                                                                      api_key_env="DATABASE_URL"))
    errors = " ".join(re.findall(r'class="field-error"[^>]*>([^<]*)<', html.unescape(response.content.decode())))
    assert response.status_code == 400 and errors.startswith("Key variable 'DATABASE_URL' is not allowed")
    assert not re.search(r"\bapi_key_env\b", errors, re.IGNORECASE)
    with override_settings(PROVIDER_PRIVATE_NETWORKS=[]):
        response = client.post(reverse("annotation:lalm-new"), _lalm_form(base_url=f"{server.url}/v1"))
    errors = " ".join(re.findall(r'class="field-error"[^>]*>([^<]*)<', html.unescape(response.content.decode())))
    assert errors.startswith(f"Base URL '{server.url}/v1'") and not re.search(r"\bbase_url\b", errors, re.I)


def test_a_generate_judge_is_tested_with_its_own_prompt_and_the_score_it_would_read(
    client, admin, django_capture_on_commit_callbacks
):
    with FakeOpenAICompat(reply=lambda r: "The candidate names the capital.\nScore: 5") as fake:
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("annotation:judge-new"), {
                "name": "j", "provider": "openai", "model": "m", "prompt_variant": "full", "mode": "generate",
                "base_url": f"{fake.url}/v1", "logprobs": "on", "is_active": "on"})
            judge = Judge.objects.get(name="j")
            assert response.status_code == 302 and not judge.connection_tests.exists()  # generate: on request
            client.post(reverse("annotation:judge-test", args=[judge.pk]))
        prompt = fake.chat_requests[0].json()["messages"][0]["content"]
    test = judge.connection_tests.get()
    assert "<candidate_answer>Paris</candidate_answer>" in prompt
    assert test.status == "done" and test.answer.endswith("Score read: 5") and test.error == ""


def test_an_import_lalm_has_nothing_to_test(admin):
    lalm = LALM.objects.create(name="file", provider="import")
    with pytest.raises(Exception, match="imported"):
        connection_test_start(lalm=lalm, actor=admin)


def test_experts_see_test_results_but_only_admins_test(client, server):
    lalm = LALM.objects.create(name="q", provider="openai", settings={"model": "m", "base_url": f"{server.url}/v1"})
    test = ConnectionTest.objects.create(lalm=lalm, status="failed", error="HTTP 401 bad key")
    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    assert "HTTP 401 bad key" in client.get(reverse("annotation:connection-test", args=[test.pk])).content.decode()
    assert client.post(reverse("annotation:lalm-test", args=[lalm.pk])).status_code == 403
    page = client.get(reverse("annotation:lalms")).content.decode()
    assert "q" in page and "Add an LALM" not in page


def test_a_test_no_worker_took_or_whose_worker_died_is_failed_by_beat_and_never_sent_later(client, admin, server):
    """Lost tests were shown as lost but stayed queued/running for ever; beat now fails them with the reason."""
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from annotation.services.endpoints import (
        CONNECTION_TEST_LOST_AFTER_S,
        connection_test_run,
        connection_tests_fail_stale,
    )
    from annotation.tasks import connection_tests_fail_stale_task

    lalm = LALM.objects.create(name="q", provider="openai", settings={"model": "m", "base_url": f"{server.url}/v1"})
    now = timezone.now()
    long_ago = now - timedelta(seconds=CONNECTION_TEST_LOST_AFTER_S + 1)
    tests = {name: ConnectionTest.objects.create(lalm=lalm, status=status) for name, status in (
        ("never taken", "queued"), ("fresh", "queued"), ("worker died", "running"), ("taken late", "running"))}
    ConnectionTest.objects.filter(pk__in=[t.pk for t in tests.values() if t != tests["fresh"]]).update(
        created_at=long_ago)
    ConnectionTest.objects.filter(pk=tests["worker died"].pk).update(started_at=long_ago, heartbeat_at=long_ago)
    ConnectionTest.objects.filter(pk=tests["taken late"].pk).update(started_at=now, heartbeat_at=now)

    assert connection_tests_fail_stale(now=now) == 2
    state = {name: ConnectionTest.objects.get(pk=t.pk) for name, t in tests.items()}
    assert {name: t.status for name, t in state.items()} == {
        "never taken": "failed", "fresh": "queued", "worker died": "failed", "taken late": "running"}
    assert state["never taken"].error.startswith("No worker took this test within 400 s")
    assert "stopped answering" in state["worker died"].error and state["worker died"].finished_at == now
    assert connection_tests_fail_stale(now=now) == 0
    # The message of the failed test, delivered after all, claims nothing and sends nothing.
    assert connection_test_run(test_pk=state["never taken"].pk) is None and server.requests == []
    page = client.get(reverse("annotation:connection-test", args=[state["worker died"].pk])).content.decode()
    assert "stopped answering" in page and 'hx-trigger="every 1s"' not in page
    # Beat runs it every minute.
    beat = {entry["task"]: entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert beat[connection_tests_fail_stale_task.name] == 60.0


# --- a real worker ------------------------------------------------------------------------------------------------
def _redis_broker_url() -> str | None:
    url = os.environ.get("CELERY_BROKER_URL", "")
    return url if url.startswith("redis://") else None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_the_connection_test_runs_in_a_celery_worker_not_the_web_process(client, tmp_path, monkeypatch):
    """The web request only queues the test; a real worker process (Redis broker, PostgreSQL) sends the request."""
    from tests.annotation.test_jobs_worker import reset_pools, start_worker, wait_for

    broker = _redis_broker_url()
    if broker is None or connection.vendor != "postgresql":
        pytest.skip("needs CELERY_BROKER_URL=redis://... and DATABASE_URL=postgres://... (a worker shares them)")
    from config.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    app.conf.broker_url, app.conf.task_always_eager = broker, False
    reset_pools(app)
    with app.connection_for_write() as conn:
        conn.default_channel.client.flushdb()
    # A superuser is an admin without the role group (a transactional test may run after one that flushed groups).
    client.force_login(UserFactory(username="boss", is_staff=True, is_superuser=True))
    db = connection.settings_dict
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "CELERY_BROKER_URL": broker,
           "DATABASE_URL": f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{db['HOST']}:{db['PORT']}/{db['NAME']}"}
    log = tmp_path / "worker.log"
    worker = None
    try:
        with FakeOpenAICompat(reply=lambda r: "Heard a tone.") as fake:
            lalm = LALM.objects.create(name="q", provider="openai",
                                       settings={"model": "m", "base_url": f"{fake.url}/v1"})
            response = client.post(reverse("annotation:lalm-test", args=[lalm.pk]))
            assert response.status_code == 302
            test = ConnectionTest.objects.get(lalm=lalm)
            time.sleep(0.5)
            assert test.status == "queued" and fake.requests == []  # no worker yet: nothing was sent
            worker = start_worker(env=env, log=log)
            wait_for(lambda: ConnectionTest.objects.get(pk=test.pk).status in ("done", "failed"), timeout_s=90,
                     what="the worker to run the connection test", log=log)
            test.refresh_from_db()
            assert (test.status, test.answer) == ("done", "Heard a tone."), test.error
            assert test.task_id and len(fake.chat_requests) == 1
    finally:
        if worker is not None:
            worker.kill()
            worker.wait(timeout=10)
        reset_pools(app)
        app.conf.broker_url, app.conf.task_always_eager = saved
