"""Property-based run of every API operation from the OpenAPI schema (schemathesis): no server errors.

Bounded: a few examples per operation (``SCHEMATHESIS_MAX_EXAMPLES``, default 2), as an admin with a token, so every
operation is reachable; the whole run stays well under a minute.
"""
import json
import os

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token

from config.wsgi import application
from tests.factories import RatingFactory, UserFactory


def _schema():
    """The schema ``/api/schema/`` serves (to logged-in users only), made in-process by drf-spectacular's generator,
    with the WSGI app to call."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    raw = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))
    loaded = schemathesis.openapi.from_dict(raw)
    loaded.app = application
    return loaded


schema = _schema()


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """schemathesis calls the WSGI app directly, whose request signals would close the test's (atomic) connection
    on PostgreSQL; Django's own test client disconnects them the same way."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def admin_token(db, tmp_path, settings):
    settings.EXPORT_DIR = tmp_path
    RatingFactory()
    admin = UserFactory(roles=["admin"], is_staff=True, is_superuser=True)
    return Token.objects.create(user=admin).key


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "2")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_api_operation_answers_with_a_server_error(case, admin_token):
    response = case.call(headers={"Authorization": f"Token {admin_token}"})
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
    )
