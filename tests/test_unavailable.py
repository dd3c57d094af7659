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
