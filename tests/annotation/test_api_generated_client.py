"""A client generated from the live ``/api/schema/`` by ``openapi-python-client`` (the most used Python generator)
imports, and drives the rating flow against a live server: token → next assignment → rating → my ratings.

With DRF's default parsers every write endpoint declared JSON, form and multipart bodies, and the generated modules
of the token, job-start and rating endpoints did not import (``body: X | X | X | Unset``); the API now takes JSON
only, so each request body has one content type. The generator runs offline; its ruff post-hooks are switched off
by its config file (formatting is not what is tested).
"""
import importlib
import json
import pkgutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.authtoken.models import Token

from annotation.models import Rating
from annotation.services.accounts import ROLES
from tests.factories import AnnotatorFactory, CandidateAnswerFactory

pytestmark = pytest.mark.django_db(transaction=True)

PACKAGE = "orca_generated_client"


@pytest.fixture
def role_groups(transactional_db):
    """Transactional tests run on tables other such tests flushed: recreate the role groups of migration 0002."""
    for name in ROLES:
        Group.objects.get_or_create(name=name)


@pytest.fixture
def generated_client(live_server, tmp_path):
    """Download the live schema (as a logged-in user: it is not public), generate a client package from it and put
    it on ``sys.path``."""
    reader = get_user_model().objects.create_user("schema-reader")
    request = urllib.request.Request(f"{live_server.url}/api/schema/?format=json",
                                     headers={"Authorization": f"Token {Token.objects.create(user=reader).key}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        schema = json.load(response)
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    (tmp_path / "config.yaml").write_text(
        f"post_hooks: []\npackage_name_override: {PACKAGE}\nproject_name_override: orca-generated-client\n"
    )
    generator = Path(sys.executable).with_name("openapi-python-client")
    result = subprocess.run(
        [str(generator), "generate", "--path", "schema.json", "--config", "config.yaml", "--output-path", "out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr, result.stdout + result.stderr
    sys.path.insert(0, str(tmp_path / "out"))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(tmp_path / "out"))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def test_every_request_body_has_one_content_type(client):
    client.force_login(get_user_model().objects.create_user("schema-reader"))
    schema = client.get("/api/schema/?format=json").json()
    bodies = {
        f"{method.upper()} {path}": sorted(operation["requestBody"]["content"])
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict) and "requestBody" in operation
    }
    assert bodies, "no operation with a request body: the schema is not what this test expects"
    assert {op: types for op, types in bodies.items() if types != ["application/json"]} == {}


def test_a_generated_client_rates_an_item_through_the_live_api(generated_client, live_server, role_groups):
    # Every generated module imports (the token, job-start and rating modules did not before).
    for module in pkgutil.walk_packages(generated_client.__path__, PACKAGE + "."):
        importlib.import_module(module.name)
    from orca_generated_client import AuthenticatedClient, Client
    from orca_generated_client.api.assignments import assignments_next_create
    from orca_generated_client.api.auth import auth_token_create
    from orca_generated_client.api.ratings import ratings_create, ratings_list
    from orca_generated_client.models import AuthTokenRequest, NextAssignmentRequest, RatingSubmitRequest

    annotator = AnnotatorFactory(username="gen-ada")  # password "pw"
    candidate = CandidateAnswerFactory(text="A violin plays the melody.", lalm__name="Never-Shown-LALM")

    anonymous = Client(base_url=live_server.url, raise_on_unexpected_status=False)
    token = auth_token_create.sync_detailed(client=anonymous, body=AuthTokenRequest(username="gen-ada", password="pw"))
    assert token.status_code == 200, token.content
    api = AuthenticatedClient(base_url=live_server.url, token=token.parsed.token, prefix="Token")

    item = assignments_next_create.sync_detailed(client=api, body=NextAssignmentRequest())
    assert item.status_code == 200, item.content
    assert item.parsed.candidate.id == candidate.pk and item.parsed.candidate.text == "A violin plays the melody."
    assert b"Never-Shown-LALM" not in item.content

    body = RatingSubmitRequest(candidate=candidate.pk, assignment=item.parsed.id, score=4, codes="R",
                               comment="reference misses the horn")
    created = ratings_create.sync_detailed(client=api, body=body)
    assert created.status_code == 201, created.content
    assert (created.parsed.score, created.parsed.codes, created.parsed.candidate) == (4, "R", candidate.pk)
    repeated = ratings_create.sync_detailed(client=api, body=body)
    assert repeated.status_code == 200 and repeated.parsed.id == created.parsed.id  # idempotent

    bad = ratings_create.sync_detailed(client=api, body=RatingSubmitRequest(candidate=candidate.pk, score=9))
    assert bad.status_code == 400 and "score" in json.loads(bad.content)

    mine = ratings_list.sync_detailed(client=api)
    assert mine.status_code == 200
    assert mine.parsed.count == 1 and mine.parsed.results[0].id == created.parsed.id
    rating = Rating.objects.get()
    assert (rating.annotator, rating.candidate, rating.score, rating.source) == (annotator, candidate, 4, "api")
