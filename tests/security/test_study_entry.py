"""Crowd entry links are throttled per client address (``config.proxies.client_ip``), and a forged
``X-Forwarded-For`` neither bypasses nor spreads the limit. The other entry-link guarantees (welcome page, start by
POST with CSRF, no switching a signed-in user, one 404 for every refusal, per-platform ids) are in
``tests/annotation/test_studies.py``."""
import pytest
from django.test import Client
from django.urls import reverse

from annotation.crowd.models import Study, StudyParticipant
from tests.factories import BenchmarkFactory, CandidateAnswerFactory, QuestionFactory

pytestmark = pytest.mark.django_db

PROXY = "172.18.0.1"
PARAMS = {"PROLIFIC_PID": "5f1a2b3c4d5e6f7a8b9c0d1e", "STUDY_ID": "65f0a1b2c3d4e5f6a7b8c9d0"}


@pytest.fixture
def study():
    benchmark = BenchmarkFactory()
    CandidateAnswerFactory(question_version=QuestionFactory(benchmark=benchmark).current_version)
    return Study.objects.create(name="pilot", slug="pilot", benchmark=benchmark, is_enabled=True, quota=2,
                                completion_code="X", external_study_id=PARAMS["STUDY_ID"], max_participants=100)


def test_entry_links_are_throttled_per_client_address(settings, study):
    settings.STUDY_ENTRY_THROTTLE = "3/minute"
    url = reverse("crowd:study-entry", args=[study.slug])
    one, other = Client(REMOTE_ADDR="198.51.100.7"), Client(REMOTE_ADDR="198.51.100.8")
    # Unknown slugs count too: scripting guesses costs the same as opening the real link.
    assert one.get(reverse("crowd:study-entry", args=["guess"]), PARAMS).status_code == 404
    assert one.get(url, PARAMS).status_code == 200
    assert one.post(url + f"?PROLIFIC_PID={PARAMS['PROLIFIC_PID']}&STUDY_ID={PARAMS['STUDY_ID']}").status_code == 302
    throttled = Client(REMOTE_ADDR="198.51.100.7").get(url, {**PARAMS, "PROLIFIC_PID": "a" * 24})
    assert throttled.status_code == 429 and int(throttled["Retry-After"]) >= 1
    assert Client(REMOTE_ADDR="198.51.100.7").post(
        url + f"?PROLIFIC_PID={'a' * 24}&STUDY_ID={PARAMS['STUDY_ID']}").status_code == 429
    assert StudyParticipant.objects.count() == 1
    assert other.get(url, PARAMS).status_code == 200  # another address is not affected


def test_a_forged_forwarded_for_does_not_escape_the_entry_throttle(settings, study):
    settings.STUDY_ENTRY_THROTTLE = "2/minute"
    settings.TRUSTED_PROXY_COUNT = 1
    url = reverse("crowd:study-entry", args=[study.slug])
    client = Client(REMOTE_ADDR=PROXY)
    for forged in ("10.0.0.1", "10.0.0.2"):
        assert client.get(url, PARAMS, HTTP_X_FORWARDED_FOR=f"{forged}, 203.0.113.9").status_code == 200
    assert client.get(url, PARAMS, HTTP_X_FORWARDED_FOR="10.0.0.3, 203.0.113.9").status_code == 429
    # Another client behind the same proxy has its own count.
    assert client.get(url, PARAMS, HTTP_X_FORWARDED_FOR="203.0.113.10").status_code == 200
