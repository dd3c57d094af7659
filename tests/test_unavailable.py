"""Database unavailable mid-request: 503 with Retry-After (not 500), no detail leaked, and the next request works.

The outage is real: a second connection terminates this process's PostgreSQL backend (``pg_terminate_backend``),
so the view's next query fails exactly as it does when PostgreSQL restarts.
"""
import psycopg
import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from annotation.services.accounts import ROLES
from tests.factories import AnnotatorFactory, CandidateAnswerFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="terminates a PostgreSQL backend"),
]


def _terminate_own_backend() -> None:
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0] is True


@pytest.fixture
def annotator_client(settings):
    settings.SERVICE_UNAVAILABLE_RETRY_AFTER_S = 7
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    CandidateAnswerFactory()
    client = Client()
    client.force_login(AnnotatorFactory())
    return client


@pytest.mark.parametrize("path,json", [("/rate/next/", False), ("/api/lalms/", True)])
def test_a_lost_database_connection_is_a_503_with_retry_after_and_the_next_request_works(annotator_client, path,
                                                                                        json):
    _terminate_own_backend()
    response = annotator_client.get(path, HTTP_ACCEPT="application/json" if json else "text/html")
    assert response.status_code == 503
    assert response["Retry-After"] == "7" and response["Cache-Control"] == "no-store"
    body = response.content.decode()
    assert "briefly unavailable" in body.lower()
    for leak in ("terminat", "psycopg", "OperationalError", connection.settings_dict["NAME"]):
        assert leak not in body
    if json:
        assert response.json()["detail"].startswith("The service is briefly unavailable")
    # At the end of a request Django drops a connection that errored and is unusable (close_old_connections,
    # which the test client leaves out); the next request then reconnects.
    connection.close_if_unusable_or_obsolete()
    assert annotator_client.get("/rate/next/").status_code == 200


def test_an_unreachable_broker_is_a_503_with_retry_after(broker_down, settings, tmp_path):
    """An admin starts an export the worker should run through the API: the broker does not answer, so the answer
    is a 503 saying so and what to do, and no export job is left queued."""
    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_INLINE_MAX_CANDIDATES = 0
    for name in ROLES:
        Group.objects.get_or_create(name=name)
    from tests.factories import RatingFactory, UserFactory

    RatingFactory()
    client = Client()
    client.force_login(UserFactory(roles=["admin"]))
    response = client.post("/api/exports/", {"formats": ["orca-jsonl"]}, content_type="application/json")
    assert response.status_code == 503, response.content[:300]
    body = response.json()
    assert response["Retry-After"] and body["detail"].startswith("The task queue is not reachable")
    assert "worker" in body["advice"] and "127.0.0.1" not in str(body)
    from annotation.models import Job

    assert not Job.objects.filter(kind=Job.Kind.EXPORT).exists()


def _session_then_outage(request):
    """A view that changes the session and then loses its database connection: the session is saved after the
    view returned, by ``SessionMiddleware``, where no ``process_exception`` sees the error."""
    from django.http import HttpResponse

    request.session["seen"] = request.session.get("seen", 0) + 1
    _terminate_own_backend()
    return HttpResponse("rendered before the session was saved")


def _boom(request):
    raise RuntimeError("a bug, not an outage")


def test_an_outage_while_the_session_is_saved_after_the_view_is_a_503_too(settings):
    import sys
    import types

    from django.urls import clear_url_caches, path

    import config.urls

    # The project's own URLs and handler500, plus the view above.
    module = types.ModuleType("tests_session_outage_urls")
    module.urlpatterns = [path("session-outage/", _session_then_outage), path("boom/", _boom),
                          *config.urls.urlpatterns]
    module.handler500 = config.urls.handler500
    sys.modules[module.__name__] = module
    settings.ROOT_URLCONF = module.__name__
    clear_url_caches()
    try:
        client = Client(raise_request_exception=False)
        response = client.get("/session-outage/", HTTP_ACCEPT="text/html")
        assert response.status_code == 503
        assert response["Retry-After"] == str(settings.SERVICE_UNAVAILABLE_RETRY_AFTER_S)
        assert "briefly unavailable" in response.content.decode().lower()
        connection.close_if_unusable_or_obsolete()
        # Any other error stays Django's plain 500.
        response = client.get("/boom/")
        assert response.status_code == 500 and "Retry-After" not in response
    finally:
        del sys.modules[module.__name__]
        clear_url_caches()
