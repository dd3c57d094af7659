"""REST API: token auth, pagination, filters, scoped reads, writes through the browser's services, exports."""
import io
import zipfile

import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, AuditEvent, Job, Rating
from tests.factories import (
    AnnotatorFactory,
    BenchmarkFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
    handed_out_ago,
)

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    token = Token.objects.create(user=user)
    return Client(HTTP_AUTHORIZATION=f"Token {token.key}")


def test_an_annotator_with_a_token_gets_an_item_and_rates_it_through_rating_submit():
    candidate = CandidateAnswerFactory(text="A dog.")
    annotator = AnnotatorFactory()
    api = _client(annotator)

    item = api.post("/api/assignments/next/", {}, content_type="application/json")
    assert item.status_code == 200 and item.json()["candidate"]["id"] == candidate.pk
    body = {"candidate": candidate.pk, "assignment": item.json()["id"], "score": 4, "codes": "ar", "comment": "ok"}
    created = api.post("/api/ratings/", body, content_type="application/json")
    assert created.status_code == 201, created.json()
    assert created.json()["codes"] == "AR" and created.json()["source"] == "api"
    again = api.post("/api/ratings/", body, content_type="application/json")
    assert again.status_code == 200 and again.json()["id"] == created.json()["id"]  # idempotent, like the browser
    candidate.refresh_from_db()
    assert candidate.valid_rating_count == 1
    event = AuditEvent.objects.get(action="rating.submit")
    assert event.actor == annotator and event.new["score"] == 4


def test_a_rating_shows_the_servers_time_on_task_read_only_beside_the_clients():
    candidate = CandidateAnswerFactory()
    api = _client(AnnotatorFactory())
    item = api.post("/api/assignments/next/", {}, content_type="application/json").json()
    handed_out_ago(Assignment.objects.get(pk=item["id"]), seconds=42)
    body = {"candidate": candidate.pk, "assignment": item["id"], "score": 4, "seconds_on_task": 1.0,
            "server_seconds_on_task": 9999}
    created = api.post("/api/ratings/", body, content_type="application/json").json()
    assert created["seconds_on_task"] == 1.0 and 42 <= created["server_seconds_on_task"] < 50
    listed = api.get("/api/ratings/").json()["results"][0]
    assert listed["server_seconds_on_task"] == created["server_seconds_on_task"]
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    field = schema["components"]["schemas"]["Rating"]["properties"]["server_seconds_on_task"]
    assert field["readOnly"] is True and "measured by the server" in field["description"]
    assert "server_seconds_on_task" not in schema["components"]["schemas"]["RatingSubmitRequest"]["properties"]


def test_a_bad_rating_gets_a_400_naming_the_field():
    candidate = CandidateAnswerFactory()
    api = _client(AnnotatorFactory())
    api.post("/api/assignments/next/", {}, content_type="application/json")
    response = api.post("/api/ratings/", {"candidate": candidate.pk, "score": None, "codes": "A"},
                        content_type="application/json")
    assert response.status_code == 400 and "score" in response.json()
    response = api.post("/api/ratings/", {"candidate": candidate.pk, "score": 3, "codes": "X"},
                        content_type="application/json")
    assert response.status_code == 400 and "codes" in response.json()


def test_annotators_see_only_their_own_ratings_and_admins_see_all():
    mine = RatingFactory()
    RatingFactory()
    annotator_view = _client(mine.annotator).get("/api/ratings/").json()
    assert [r["id"] for r in annotator_view["results"]] == [mine.pk]
    admin_view = _client(UserFactory(roles=["admin"])).get("/api/ratings/").json()
    assert admin_view["count"] == 2


def test_questions_are_paginated_and_filtered_by_benchmark_modality_and_category():
    bench = BenchmarkFactory()
    for i in range(3):
        QuestionFactory(benchmark=bench, modality="speech", category="Counting", external_id=f"s{i}")
    QuestionFactory(benchmark=bench, modality="music", category="Genre")
    QuestionFactory()
    api = _client(UserFactory(roles=["expert"]))
    page = api.get("/api/questions/", {"benchmark": bench.pk, "modality": "speech", "page_size": 2}).json()
    assert page["count"] == 3 and {q["modality"] for q in page["results"]} == {"speech"}
    assert api.get("/api/questions/", {"category": "Genre"}).json()["count"] == 1
    detail = api.get(f"/api/questions/{page['results'][0]['id']}/").json()
    assert [v["number"] for v in detail["versions"]] == [1]


def test_candidates_filter_by_lalm_and_annotators_see_only_their_items():
    rated = RatingFactory(candidate__lalm__name="M1_1")
    CandidateAnswerFactory(lalm__name="M2_1")
    expert = _client(UserFactory(roles=["expert"]))
    assert expert.get("/api/candidates/", {"lalm": "M2_1"}).json()["count"] == 1
    assert expert.get("/api/candidates/").json()["count"] == 2
    annotator = _client(rated.annotator).get("/api/candidates/").json()
    assert [c["id"] for c in annotator["results"]] == [rated.candidate_id]


def test_an_admin_starts_an_export_and_downloads_it(tmp_path, settings):
    settings.EXPORT_DIR = tmp_path
    RatingFactory()
    api = _client(UserFactory(roles=["admin"]))
    started = api.post("/api/exports/", {"formats": ["orca-jsonl", "csv"], "split": "unseen-questions"},
                       content_type="application/json")
    assert started.status_code == 201, started.json()
    job = started.json()
    assert job["status"] == "done" and job["download_url"].endswith(f"/api/exports/{job['id']}/download/")
    status = api.get(f"/api/exports/{job['id']}/").json()
    assert status["params"]["result"]["rows"] == 1
    download = api.get(f"/api/exports/{job['id']}/download/")
    assert download.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).namelist()
    assert "README.md" in names and "train.csv" in names
    assert _client(AnnotatorFactory()).get(f"/api/exports/{job['id']}/download/").status_code == 403


def test_an_admin_cancels_a_job_and_the_audit_log_records_it():
    admin = UserFactory(roles=["admin"])
    job = Job.objects.create(kind=Job.Kind.TRANSCRIBE, total=3)
    api = _client(admin)
    response = api.post(f"/api/jobs/{job.pk}/cancel/")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    events = api.get("/api/audit-events/", {"action": "job.cancel"}).json()["results"]
    assert events[0]["old"] == {"status": "queued"} and events[0]["actor_label"] == admin.username
    assert _client(UserFactory(roles=["expert"])).post(f"/api/jobs/{job.pk}/cancel/").status_code == 403


def test_a_job_start_error_is_a_400_with_the_reason():
    bench = BenchmarkFactory()
    response = _client(UserFactory(roles=["admin"])).post(
        "/api/jobs/", {"kind": "rationale", "benchmark": bench.pk}, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["detail"]


def test_the_token_endpoint_and_the_schema_and_docs_are_served_without_a_cdn():
    UserFactory(username="ann", roles=["annotator"])
    client = Client()
    token = client.post("/api/auth/token/", {"username": "ann", "password": "pw"}, content_type="application/json")
    assert token.status_code == 200 and token.json()["token"]
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json",
                        HTTP_AUTHORIZATION=f"Token {token.json()['token']}")  # behind login (tests/security)
    assert schema.status_code == 200 and "/api/ratings/" in schema.json()["paths"]
    client.force_login(UserFactory(username="ann-docs", roles=["annotator"]))
    for url in ("/api/docs/", "/api/redoc/"):
        page = client.get(url).content.decode()
        assert "cdn.jsdelivr.net" not in page and "/static/drf_spectacular_sidecar/" in page


def test_ratings_submitted_in_the_browser_and_the_api_are_the_same_rows():
    candidate = CandidateAnswerFactory()
    api = _client(AnnotatorFactory())
    api.post("/api/assignments/next/", {}, content_type="application/json")
    api.post("/api/ratings/", {"candidate": candidate.pk, "score": None, "codes": "U"}, content_type="application/json")
    assert Rating.objects.get().codes == "U"


def test_experts_see_ratings_of_questions_in_a_refinement_queue_but_not_others():
    from refinement.models import CorrectionItem, Queue

    queued = RatingFactory()
    RatingFactory()
    question = queued.candidate.question_version.question
    CorrectionItem.objects.create(question=question, queue=Queue.values[0], question_version=question.current_version)
    expert = _client(UserFactory(roles=["expert"]))
    assert [r["id"] for r in expert.get("/api/ratings/").json()["results"]] == [queued.pk]
