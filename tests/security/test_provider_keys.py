"""settings.api_key_env on an LALM or judge may only name variables matching PROVIDER_API_KEY_ENV_PATTERN.

Otherwise an admin could name DATABASE_URL or DJANGO_SECRET_KEY and have it sent as a bearer token to any base_url.
Refused at creation (the models' clean(), run by the admin) and at use (availability and client construction),
checked against a real OpenAI client pointed at a local fake server.
"""
import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from annotation.models import LALM, Judge
from annotation.providers.answers import answer_availability, answer_generator_for
from annotation.providers.base import ProviderUnavailable
from annotation.services.judging import judge_availability, judge_client_for
from tests.factories import UserFactory
from tests.fakes.openai_compat import FakeOpenAICompat

pytestmark = pytest.mark.django_db

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


def test_the_admin_form_shows_the_error_and_creates_nothing(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    response = client.post("/admin/annotation/judge/add/", {
        "name": "leaky", "provider": "openai", "model": "m", "prompt_variant": "full",
        "settings": '{"base_url": "http://evil.example/v1", "api_key_env": "DATABASE_URL"}', "is_active": "on",
    })
    assert response.status_code == 200
    assert "is not allowed" in response.content.decode()
    assert not Judge.objects.filter(name="leaky").exists()


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
    with FakeOpenAICompat(reply=lambda r: "Score: 4") as fake:
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
