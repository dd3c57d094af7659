"""The OpenAPI schema, Swagger UI and Redoc are behind login (issue #34 item 6): anonymous requests get 403 (the
schema) or the login page (the docs pages); any signed-in user, by session or token, reads them."""
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token

from tests.factories import AnnotatorFactory

pytestmark = pytest.mark.django_db


def test_anonymous_requests_get_no_schema_and_no_docs(client):
    schema = client.get("/api/schema/?format=json")
    assert schema.status_code in (401, 403) and b'"paths"' not in schema.content
    for url in ("/api/docs/", "/api/redoc/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_a_signed_in_user_reads_the_schema_and_docs(client):
    annotator = AnnotatorFactory()
    token = Token.objects.create(user=annotator).key
    assert '"paths"' in client.get("/api/schema/?format=json", HTTP_AUTHORIZATION=f"Token {token}").content.decode()
    client.force_login(annotator)
    assert client.get("/api/docs/").status_code == 200 and client.get("/api/redoc/").status_code == 200
