"""Provider keys and outbound requests (annotation.providers.setup), checked with the real OpenAI and Gemini clients
against local fake servers.

* settings.api_key_env on an LALM or judge may only name variables matching PROVIDER_API_KEY_ENV_PATTERN, or an
  admin could name DATABASE_URL or DJANGO_SECRET_KEY and have it sent as a bearer token to any base_url;
* a default key (GEMINI_API_KEY, OPENAI_COMPAT_API_KEY) goes only to its provider's host or the hosts
  PROVIDER_KEY_HOSTS binds to it (it used to follow any base_url), and redirects are not followed;
* a base_url typed into a row may not reach private, loopback or link-local hosts unless PROVIDER_PRIVATE_NETWORKS
  allows the network (the test settings allow loopback for the fake servers; these tests empty it);
* the Django admin no longer edits these rows (its JSON forms skipped the checks and probed from the web process).
"""
import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import override_settings
from django.urls import reverse

from annotation.models import LALM, Judge
from annotation.outbound import url_address_problem
from annotation.providers.answers import answer_availability, answer_generator_for
from annotation.providers.base import PermanentProviderError, ProviderUnavailable
from annotation.providers.setup import endpoint_resolve, key_host_bindings, key_may_go_to
from annotation.services.judging import judge_availability, judge_client_for, judge_setup_problems
from tests.factories import UserFactory
from tests.fakes.base import Reply
from tests.fakes.gemini import FakeGemini
from tests.fakes.openai_compat import FakeOpenAICompat

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("network_guard")]

SECRET = "postgres://admin:hunter2@db/orca"


def _row(model, conf):
    extra = {"model": "m"} if model is Judge else {}
    return model(name="m", provider="openai", settings=conf, **extra)


@pytest.fixture
def secret_env(monkeypatch):
    monkeypatch.setenv("ORCA_TEST_DB_URL", SECRET)
    monkeypatch.setenv("LAB_API_KEY", "sk-lab")


@pytest.mark.parametrize("model", [LALM, Judge])
@pytest.mark.parametrize("name", ["DATABASE_URL", "DJANGO_SECRET_KEY", "ORCA_TEST_DB_URL", "x_api_key", "A B_API_KEY"])
def test_a_row_naming_a_variable_outside_the_pattern_is_refused_at_creation(model, name):
    row = _row(model, {"base_url": "http://127.0.0.1:9/v1", "api_key_env": name})
    with pytest.raises(ValidationError) as excinfo:
        row.full_clean()
    message = excinfo.value.message_dict["settings"][0]
    assert repr(name) in message and "'*_API_KEY'" in message and "PROVIDER_API_KEY_ENV_PATTERN" in message


@pytest.mark.parametrize("model", [LALM, Judge])
def test_a_matching_variable_or_none_is_accepted(model):
    for conf in ({"api_key_env": "LAB_API_KEY"}, {}, {"api_key_env": ""}):
        _row(model, conf).full_clean()


def test_the_form_shows_the_error_and_creates_nothing(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    response = client.post(reverse("annotation:judge-new"), {
        "name": "leaky", "provider": "openai", "model": "m", "prompt_variant": "full", "mode": "generate",
        "base_url": "http://evil.example/v1", "api_key_env": "DATABASE_URL", "is_active": "on",
    })
    assert response.status_code == 400
    assert "is not allowed" in response.content.decode()
    assert not Judge.objects.filter(name="leaky").exists()


def test_the_django_admin_cannot_add_or_change_lalms_and_judges(client):
    """The admin's JSON forms bypassed these checks (and sent a probe from the web process): read-only now."""
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    judge = Judge.objects.create(name="j", provider="openai", model="m")
    assert client.post("/admin/annotation/judge/add/", {"name": "x"}).status_code == 403
    assert client.post(f"/admin/annotation/judge/{judge.pk}/change/", {"name": "x"}).status_code == 403
    assert client.post("/admin/annotation/lalm/add/", {"name": "x"}).status_code == 403


def test_a_row_saved_past_the_check_never_sends_the_variable(secret_env):
    """A row written without full_clean (an old row, a raw update): unavailable with the reason, no client is
    built, and the fake server never receives a request."""
    with FakeOpenAICompat(reply=lambda r: "Score: 5") as fake:
        conf = {"base_url": f"{fake.url}/v1", "api_key_env": "ORCA_TEST_DB_URL", "model": "m"}
        judge = Judge.objects.create(name="leaky", provider=Judge.Provider.OPENAI, model="m", settings=conf)
        lalm = LALM.objects.create(name="leaky", provider=LALM.Provider.OPENAI, settings=conf)
        for availability in (judge_availability(judge=judge), answer_availability(lalm=lalm)):
            assert not availability.ok and "'ORCA_TEST_DB_URL' is not allowed" in availability.reason
        with pytest.raises(ProviderUnavailable, match="is not allowed"):
            judge_client_for(judge=judge)
        with pytest.raises(ProviderUnavailable, match="is not allowed"):
            answer_generator_for(lalm=lalm)
        assert fake.requests == []


def test_an_allowed_variable_is_sent_as_the_key(secret_env):
    with FakeOpenAICompat(reply=lambda r: "Score: 4") as fake, override_settings(
            PROVIDER_KEY_HOSTS="LAB_API_KEY=127.0.0.1"):  # over http: a private host the test settings allow
        judge = Judge.objects.create(name="lab", provider=Judge.Provider.OPENAI, model="m",
                                     settings={"base_url": f"{fake.url}/v1", "api_key_env": "LAB_API_KEY",
                                               "logprobs": False})
        judge_client_for(judge=judge).judge(prompt="Rate this. Score:")
        assert fake.requests[-1].headers["authorization"] == "Bearer sk-lab"


def test_the_pattern_is_configurable():
    with override_settings(PROVIDER_API_KEY_ENV_PATTERN="ORCA_*_TOKEN"):
        Judge(name="m", provider="openai", model="m", settings={"api_key_env": "ORCA_LAB_TOKEN"}).full_clean()
        with pytest.raises(ValidationError):
            Judge(name="m", provider="openai", model="m", settings={"api_key_env": "LAB_API_KEY"}).full_clean()


# --- keys bound to their hosts ------------------------------------------------------------------------------------
DEFAULT_KEYS = {"GEMINI_API_KEY": "g-default-key", "OPENAI_COMPAT_API_KEY": "sk-default-key"}


@pytest.fixture
def elsewhere():
    """A server that is not any key's host: what a row's base_url may point at."""
    with FakeOpenAICompat(reply=lambda r: "Score: 4") as fake:
        yield fake


def test_a_gemini_judge_pointing_elsewhere_never_gets_the_default_key(elsewhere):
    """A judge row with provider gemini and base_url elsewhere used to send GEMINI_API_KEY there."""
    with override_settings(GEMINI_BASE_URL="", **DEFAULT_KEYS):
        judge = Judge.objects.create(name="g", provider="gemini", model="gemini-2.5-flash",
                                     settings={"base_url": elsewhere.url})
        lalm = LALM.objects.create(name="g", provider="gemini", settings={"base_url": elsewhere.url})
        for availability in (judge_availability(judge=judge), answer_availability(lalm=lalm)):
            assert not availability.ok
            assert f"GEMINI_API_KEY is not sent to 127.0.0.1:{elsewhere.port}" in availability.reason
            assert "generativelanguage.googleapis.com" in availability.reason
        with pytest.raises(ProviderUnavailable, match="is not sent to"):
            judge_client_for(judge=judge)
    assert elsewhere.requests == []


def test_an_openai_row_pointing_elsewhere_is_sent_no_default_key(elsewhere):
    """OPENAI_COMPAT_API_KEY belongs to OPENAI_COMPAT_BASE_URL's host; a row's other server gets no key (a local
    server needs none), where it used to get the default key."""
    with override_settings(OPENAI_COMPAT_BASE_URL="https://models.lab.example/v1", **DEFAULT_KEYS):
        judge = Judge.objects.create(name="o", provider="openai", model="m",
                                     settings={"base_url": f"{elsewhere.url}/v1", "logprobs": False})
        judge_client_for(judge=judge).judge(prompt="Rate. Score:")
    assert elsewhere.requests[-1].headers["authorization"] == "Bearer not-needed"


def test_a_binding_setting_lets_the_default_key_go_to_a_listed_host(elsewhere):
    bindings = {"OPENAI_COMPAT_API_KEY": [f"127.0.0.1:{elsewhere.port}"]}
    with override_settings(OPENAI_COMPAT_BASE_URL="", PROVIDER_KEY_HOSTS=bindings, **DEFAULT_KEYS):
        judge = Judge.objects.create(name="o", provider="openai", model="m",
                                     settings={"base_url": f"{elsewhere.url}/v1", "logprobs": False})
        judge_client_for(judge=judge).judge(prompt="Rate. Score:")
    assert elsewhere.requests[-1].headers["authorization"] == "Bearer sk-default-key"


def test_the_binding_setting_parses_entries_and_refuses_malformed_ones():
    with override_settings(PROVIDER_KEY_HOSTS="GEMINI_API_KEY=proxy.lab.org;LAB_API_KEY=gpu-box:8000,10.0.0.5"):
        assert key_host_bindings() == {"GEMINI_API_KEY": [("proxy.lab.org", None)],
                                       "LAB_API_KEY": [("gpu-box", 8000), ("10.0.0.5", None)]}
        assert key_may_go_to(variable="LAB_API_KEY", url="https://gpu-box:8000/v1")
        assert not key_may_go_to(variable="LAB_API_KEY", url="https://gpu-box:9000/v1")
        assert not key_may_go_to(variable="LAB_API_KEY", url="http://gpu-box:8000/v1")  # a key over http: no
        with override_settings(PROVIDER_PRIVATE_NETWORKS=["10.0.0.0/8"]):  # ...unless to an allowed private host
            assert key_may_go_to(variable="LAB_API_KEY", url="http://10.0.0.5:8000/v1")
        assert key_may_go_to(variable="GEMINI_API_KEY", url="https://proxy.lab.org")
        assert key_may_go_to(variable="GEMINI_API_KEY", url="https://generativelanguage.googleapis.com")
        assert not key_may_go_to(variable="GEMINI_API_KEY", url="https://elsewhere.example")
        assert not key_may_go_to(variable="OTHER_API_KEY", url="https://anywhere.example")  # not listed: nowhere
    with override_settings(PROVIDER_KEY_HOSTS="GEMINI_API_KEY"), pytest.raises(ImproperlyConfigured):
        key_host_bindings()


def test_naming_a_bound_variable_for_another_host_is_refused_at_save_and_at_use(secret_env, elsewhere):
    with override_settings(PROVIDER_KEY_HOSTS="LAB_API_KEY=gpu-box.lab.example", **DEFAULT_KEYS):
        for name in ("LAB_API_KEY", "GEMINI_API_KEY"):
            judge = Judge(name="j", provider="openai", model="m",
                          settings={"base_url": f"{elsewhere.url}/v1", "api_key_env": name})
            problems = judge_setup_problems(judge=judge)
            assert f"{name} is not sent to 127.0.0.1:{elsewhere.port}" in problems["api_key_env"]
            judge.save()
            assert not judge_availability(judge=judge).ok
            judge.delete()
    assert elsewhere.requests == []


def test_redirects_are_not_followed_so_a_key_cannot_be_bounced_elsewhere(secret_env, elsewhere):
    with FakeOpenAICompat() as allowed:
        allowed.script("chat", Reply(307, {}, {"Location": f"{elsewhere.url}/v1/chat/completions"}))
        judge = Judge.objects.create(name="r", provider="openai", model="m",
                                     settings={"base_url": f"{allowed.url}/v1", "api_key_env": "LAB_API_KEY",
                                               "logprobs": False})
        with override_settings(PREPARATION_MAX_ATTEMPTS=1, PROVIDER_KEY_HOSTS=f"LAB_API_KEY=127.0.0.1:{allowed.port}"
                               ), pytest.raises(PermanentProviderError, match="307"):
            judge_client_for(judge=judge).judge(prompt="Rate. Score:")
    with FakeGemini() as gemini, override_settings(GEMINI_BASE_URL=gemini.url, PREPARATION_MAX_ATTEMPTS=1,
                                                   **DEFAULT_KEYS):
        gemini.script("generate", Reply(307, {}, {"Location": f"{elsewhere.url}/v1beta/models/m:generateContent"}))
        judge = Judge.objects.create(name="rg", provider="gemini", model="m")
        with pytest.raises(PermanentProviderError, match="307"):
            judge_client_for(judge=judge).judge(prompt="Rate. Score:")
        assert gemini.generate_requests[0].headers["x-goog-api-key"] == "g-default-key"
    assert elsewhere.requests == []


# --- private, loopback and link-local hosts ---------------------------------------------------------------------
@pytest.mark.parametrize(("url", "kind"), [
    ("http://127.0.0.1:{port}/v1", "loopback"),
    ("http://localhost:{port}/v1", "loopback"),
    ("http://169.254.169.254/latest", "link-local"),
    ("http://10.1.2.3:8000/v1", "private or reserved"),
    ("http://[::1]:{port}/v1", "loopback"),
])
def test_a_row_may_not_point_at_a_private_host_unless_the_setting_allows_its_network(url, kind, elsewhere, client):
    url = url.format(port=elsewhere.port)
    with override_settings(PROVIDER_PRIVATE_NETWORKS=[]):
        lalm = LALM.objects.create(name="p", provider="openai", settings={"base_url": url, "model": "m"})
        availability = answer_availability(lalm=lalm)
        assert not availability.ok and f"a {kind} address" in availability.reason
        assert "PROVIDER_PRIVATE_NETWORKS" in availability.reason
        client.force_login(UserFactory(is_staff=True, is_superuser=True))
        response = client.post(reverse("annotation:lalm-new"), {
            "name": "p2", "provider": "openai", "model": "m", "base_url": url, "audio_input": "on", "is_active": "on"})
        assert response.status_code == 400 and "PROVIDER_PRIVATE_NETWORKS" in response.content.decode()
    assert elsewhere.requests == []
    with override_settings(PROVIDER_PRIVATE_NETWORKS=["127.0.0.0/8", "::1/128", "10.0.0.0/8", "169.254.0.0/16"]):
        assert answer_availability(lalm=lalm).ok


def test_the_operators_own_server_settings_are_trusted(elsewhere):
    with override_settings(PROVIDER_PRIVATE_NETWORKS=[], OPENAI_COMPAT_BASE_URL=f"{elsewhere.url}/v1"):
        lalm = LALM.objects.create(name="local", provider="openai", settings={"model": "m"})
        assert answer_availability(lalm=lalm).ok


def test_a_host_that_does_not_resolve_or_a_non_http_url_is_refused():
    assert "does not resolve" in url_address_problem("http://no-such-host.invalid/v1")
    assert "not an http:// or https:// URL" in url_address_problem("file:///etc/passwd")
    assert "not an http:// or https:// URL" in url_address_problem("gpu-box:8000")


def test_a_gemini_lalm_without_a_key_is_not_accepted_silently(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    with override_settings(GEMINI_API_KEY=""):
        response = client.post(reverse("annotation:lalm-new"), {
            "name": "gem", "provider": "gemini", "audio_input": "on", "is_active": "on"})
    assert response.status_code == 400
    assert "GEMINI_API_KEY is not set" in response.content.decode()
    assert not LALM.objects.filter(name="gem").exists()


# --- keys over https only, and only to listed hosts (issue #34 item 6) --------------------------------------------
PUBLIC = "93.184.216.34"  # what the test's host names resolve to (network_guard: nothing is connected to)


def test_a_bound_key_is_not_sent_over_http_even_to_its_hosts_https_port(monkeypatch, network_guard):
    """The binding compared host and port only: http://bound-host:443 got the key, unencrypted."""
    network_guard.resolves("bound-host.test", [PUBLIC])
    monkeypatch.setenv("LAB_API_KEY", "sk-lab")
    with override_settings(PROVIDER_KEY_HOSTS="LAB_API_KEY=bound-host.test", PROVIDER_PRIVATE_NETWORKS=[]):
        judge = Judge(name="j", provider="openai", model="m",
                      settings={"base_url": "http://bound-host.test:443/v1", "api_key_env": "LAB_API_KEY"})
        assert judge_setup_problems(judge=judge)["api_key_env"].startswith(
            "LAB_API_KEY is not sent to bound-host.test:443 over http: it is bound to bound-host.test (https, ")
        judge.settings["base_url"] = "https://bound-host.test/v1"
        assert judge_setup_problems(judge=judge) == {}
    with override_settings(OPENAI_COMPAT_BASE_URL="https://bound-host.test/v1", PROVIDER_PRIVATE_NETWORKS=[],
                           **DEFAULT_KEYS):
        endpoint = endpoint_resolve(provider="openai", conf={"base_url": "http://bound-host.test:443/v1", "model": "m"})
        assert endpoint.api_key == "" and "over http" in endpoint.note
        assert endpoint_resolve(provider="openai", conf={"model": "m"}).api_key == "sk-default-key"
    assert network_guard.refused == []


def test_a_key_variable_no_setting_lists_goes_to_no_host(monkeypatch, network_guard):
    """Any *_API_KEY that PROVIDER_KEY_HOSTS did not list was sent wherever its row pointed (fail open)."""
    network_guard.resolves("api.other.test", [PUBLIC])
    monkeypatch.setenv("OTHER_API_KEY", "sk-other")
    judge = Judge(name="j", provider="openai", model="m",
                  settings={"base_url": "https://api.other.test/v1", "api_key_env": "OTHER_API_KEY"})
    problem = judge_setup_problems(judge=judge)["api_key_env"]
    assert problem.startswith("OTHER_API_KEY is not sent to api.other.test:443: it is bound to no host")
    assert "PROVIDER_KEY_HOSTS" in problem
    with override_settings(PROVIDER_KEY_HOSTS="OTHER_API_KEY=api.other.test"):
        assert judge_setup_problems(judge=judge) == {}
    assert network_guard.refused == []
