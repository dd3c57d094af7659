"""Login lockout (django-axes) and API throttles (DRF): ``/api/auth/token/`` is locked out like the login form, both
count per client address behind a known number of reverse proxies, and a forged ``X-Forwarded-For`` changes nothing.
"""
import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.test import Client, RequestFactory

from annotation.api.throttles import TokenObtainThrottle
from config.proxies import client_ip
from tests.factories import AnnotatorFactory

pytestmark = pytest.mark.django_db

PROXY = "172.18.0.1"  # the reverse proxy, as gunicorn sees it


@pytest.fixture
def axes_on(settings):
    settings.AXES_ENABLED = True
    from axes.models import AccessAttempt

    AccessAttempt.objects.all().delete()
    for name in ("annotator", "expert", "admin"):
        Group.objects.get_or_create(name=name)


def _token(client: Client, username: str, password: str, **headers):
    return client.post("/api/auth/token/", {"username": username, "password": password},
                       content_type="application/json", **headers)


def test_the_token_endpoint_is_locked_out_like_the_login_form(axes_on, settings):
    AnnotatorFactory(username="rater")  # password "pw"
    AnnotatorFactory(username="other")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert _token(client, "rater", "wrong").status_code == 400
    locked = _token(client, "rater", "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.json()["detail"]
    assert int(locked["Retry-After"]) == int(settings.AXES_COOLOFF_TIME * 3600)
    # The right password does not help while locked, neither here nor at the login form.
    assert _token(client, "rater", "pw").status_code == 429
    assert client.post("/accounts/login/", {"username": "rater", "password": "pw"}).status_code == 429
    # Another account from the same address is not locked out.
    assert _token(client, "other", "pw").status_code == 200


def test_failures_at_the_login_form_and_the_token_endpoint_add_up(axes_on, settings):
    AnnotatorFactory(username="rater")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 2):
        assert client.post("/accounts/login/", {"username": "rater", "password": "wrong"}).status_code == 200
    assert _token(client, "rater", "wrong").status_code == 400
    assert _token(client, "rater", "wrong").status_code == 429
    assert client.post("/accounts/login/", {"username": "rater", "password": "pw"}).status_code == 429


def test_behind_one_proxy_a_forged_forwarded_for_neither_bypasses_nor_spreads_a_lockout(axes_on, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    AnnotatorFactory(username="rater")
    attacker = Client(REMOTE_ADDR=PROXY)
    for attempt in range(settings.AXES_FAILURE_LIMIT):
        # The attacker writes a new address each time; the proxy appends the one it really saw.
        forwarded = f"10.0.0.{attempt}, 198.51.100.7"
        response = _token(attacker, "rater", "wrong", HTTP_X_FORWARDED_FOR=forwarded)
    assert response.status_code == 429
    assert _token(attacker, "rater", "pw", HTTP_X_FORWARDED_FOR="203.0.113.99, 198.51.100.7").status_code == 429
    # The account's owner, behind the same proxy from another address, still logs in.
    owner = Client(REMOTE_ADDR=PROXY)
    assert _token(owner, "rater", "pw", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 200


def test_token_requests_are_throttled_per_client_address(monkeypatch, settings):
    monkeypatch.setattr(TokenObtainThrottle, "THROTTLE_RATES", {"auth-token": "3/minute"})
    cache.clear()
    settings.TRUSTED_PROXY_COUNT = 1
    AnnotatorFactory(username="rater")
    client = Client(REMOTE_ADDR=PROXY)
    for attempt in range(3):
        assert _token(
            client, "rater", "wrong", HTTP_X_FORWARDED_FOR=f"10.0.0.{attempt}, 198.51.100.7"
        ).status_code == 400
    throttled = _token(client, "rater", "pw", HTTP_X_FORWARDED_FOR="10.9.9.9, 198.51.100.7")
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) > 0
    assert _token(client, "rater", "pw", HTTP_X_FORWARDED_FOR="203.0.113.5").status_code == 200
    cache.clear()


@pytest.mark.parametrize(("count", "remote", "forwarded", "expected"), [
    (0, "203.0.113.5", None, "203.0.113.5"),
    (0, "203.0.113.5", "1.2.3.4", "203.0.113.5"),  # no proxy: the header is the client's own text
    (1, PROXY, "203.0.113.5", "203.0.113.5"),
    (1, PROXY, "1.2.3.4, 203.0.113.5", "203.0.113.5"),  # forged left part ignored
    (2, PROXY, "1.2.3.4, 203.0.113.5, 10.0.0.2", "203.0.113.5"),
    (2, PROXY, "203.0.113.5", PROXY),  # fewer entries than proxies: not written by them
    (1, PROXY, None, PROXY),
    (1, PROXY, "2001:db8::1", "2001:db8::1"),
])
def test_client_ip_takes_the_address_the_outermost_trusted_proxy_saw(settings, count, remote, forwarded, expected):
    settings.TRUSTED_PROXY_COUNT = count
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    assert client_ip(RequestFactory().get("/", REMOTE_ADDR=remote, **headers)) == expected
