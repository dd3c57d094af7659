"""The schema-only client (``annotation.api.example_client``) against a live server: the issue's "a script using
only the OpenAPI schema can list questions and submit a rating as an annotator"."""
import json

import pytest
from django.contrib.auth.models import Group

from annotation.api import example_client
from annotation.models import AuditEvent, Rating
from annotation.services.accounts import ROLES
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def role_groups(transactional_db):
    """Transactional tests run on tables other such tests flushed: recreate the role groups of migration 0002."""
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def test_the_schema_only_client_lists_questions_and_rates_one_item(live_server, role_groups, capsys):
    annotator = AnnotatorFactory(username="ada")  # password "pw"
    question = QuestionFactory(external_id="mmau-7", version__question_text="Which instrument plays the melody?")
    candidate = CandidateAnswerFactory(question_version=question.current_version, text="A violin.")

    status = example_client.main(["--base-url", live_server.url, "--username", "ada", "--password", "pw",
                                  "--score", "5", "--codes", "r"])

    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["questions"] == 1
    assert printed["first_questions"] == [
        {"id": question.pk, "external_id": "mmau-7", "question": "Which instrument plays the melody?"}
    ]
    rating = Rating.objects.get()
    assert (rating.annotator, rating.candidate, rating.score, rating.codes) == (annotator, candidate, 5, "R")
    assert printed["rated"] == {"rating": rating.pk, "candidate": candidate.pk, "score": 5, "codes": "R"}
    assert AuditEvent.objects.filter(action="rating.submit", actor=annotator).count() == 1


def test_the_client_reports_nothing_to_rate_and_wrong_passwords(live_server, role_groups, capsys):
    AnnotatorFactory(username="bo")

    assert example_client.main(["--base-url", live_server.url, "--username", "bo", "--password", "pw"]) == 0
    assert json.loads(capsys.readouterr().out) == {"questions": 0, "first_questions": [], "rated": None}

    assert example_client.main(["--base-url", live_server.url, "--username", "bo", "--password", "wrong"]) == 1
    assert "HTTP 400" in capsys.readouterr().err
