"""Blind rating and least privilege through the API: annotators never read an LALM name, a count of ratings, a
question's status, its other versions or an expert's name; experts and admins do."""
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.models import Question
from annotation.services.versions import question_version_create, ratings_invalidate_for_version
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, RatingFactory, UserFactory

pytestmark = pytest.mark.django_db


def _client(user) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")


def test_an_annotators_next_item_and_candidates_name_no_lalm_and_no_rating_count():
    candidate = CandidateAnswerFactory(lalm__name="Secret-LALM-7B", valid_rating_count=2)
    annotator = _client(AnnotatorFactory())

    item = annotator.post("/api/assignments/next/", {}, content_type="application/json").json()
    assert item["candidate"]["id"] == candidate.pk
    assert "lalm" not in item["candidate"] and "valid_rating_count" not in item["candidate"]
    assert "status" not in item["question"] and "reason" not in item["question_version"]
    for response in (annotator.get("/api/candidates/"), annotator.get(f"/api/candidates/{candidate.pk}/")):
        assert response.status_code == 200
        assert "Secret-LALM-7B" not in response.content.decode()
        assert "valid_rating_count" not in response.content.decode()

    expert = _client(UserFactory(roles=["expert"])).get(f"/api/candidates/{candidate.pk}/").json()
    assert expert["lalm"] == "Secret-LALM-7B" and expert["valid_rating_count"] == 2


def test_only_experts_and_admins_list_lalms_or_filter_by_lalm_or_status():
    rating = RatingFactory(candidate__lalm__name="M1")
    annotator = _client(rating.annotator)
    assert annotator.get("/api/lalms/").status_code == 403
    assert annotator.get(f"/api/lalms/{rating.candidate.lalm_id}/").status_code == 403
    for url in ("/api/candidates/?lalm=M1", "/api/ratings/?lalm=M1", "/api/candidates/?status=active",
                "/api/questions/?status=active"):
        refused = annotator.get(url)
        assert refused.status_code == 403, url
        assert "Only experts and admins may filter by" in refused.json()["detail"]
    assert annotator.get("/api/ratings/?is_valid=true").json()["count"] == 1  # other filters still work

    for role in ("expert", "admin"):
        staff = _client(UserFactory(roles=[role]))
        assert [lalm["name"] for lalm in staff.get("/api/lalms/").json()["results"]] == ["M1"]
        assert staff.get("/api/candidates/?lalm=M1").json()["count"] == 1
        assert staff.get("/api/candidates/?lalm=other").json()["count"] == 0


def test_annotators_read_only_the_questions_they_rated_at_the_version_they_rated():
    annotator = AnnotatorFactory()
    question = QuestionFactory(version__question_text="Which bird sings?")
    RatingFactory(annotator=annotator, candidate=CandidateAnswerFactory(question_version=question.current_version))
    question_version_create(question=question, source="expert", reason="Expert correction by m-expert: wrong bird",
                            question_text="Which bird sings first?")
    QuestionFactory(version__question_text="Someone else's question")
    api = _client(annotator)

    page = api.get("/api/questions/").json()
    assert page["count"] == 1
    (seen,) = page["results"]
    assert seen["id"] == question.pk
    assert seen["version"]["number"] == 1 and seen["version"]["question_text"] == "Which bird sings?"
    assert not {"status", "versions", "current_version"} & set(seen)
    assert "reason" not in seen["version"]
    detail = api.get(f"/api/questions/{question.pk}/")
    assert detail.json() == seen
    assert "first?" not in detail.content.decode() and "m-expert" not in detail.content.decode()
    other = Question.objects.exclude(pk=question.pk).get()
    assert api.get(f"/api/questions/{other.pk}/").status_code == 404

    expert = _client(UserFactory(roles=["expert"])).get(f"/api/questions/{question.pk}/").json()
    assert [v["number"] for v in expert["versions"]] == [1, 2] and expert["status"] == "active"
    assert expert["current_version"]["reason"].startswith("Expert correction by m-expert")


def test_an_assigned_question_shows_at_the_assigned_version():
    candidate = CandidateAnswerFactory()
    api = _client(AnnotatorFactory())
    assert api.get("/api/questions/").json()["count"] == 0
    api.post("/api/assignments/next/", {}, content_type="application/json")
    (seen,) = api.get("/api/questions/").json()["results"]
    assert seen["version"]["id"] == candidate.question_version_id


def test_an_annotators_invalidated_rating_does_not_name_the_expert():
    expert = UserFactory(username="dr-expert", roles=["expert"])
    rating = RatingFactory()
    question = rating.question_version.question
    question_version_create(question=question, source="expert", created_by=expert, rationale="better")
    ratings_invalidate_for_version(version=rating.question_version,
                                   reason="Question corrected in v2 (rationale) by dr-expert: wrong rationale")

    mine = _client(rating.annotator).get(f"/api/ratings/{rating.pk}/")
    assert mine.json()["is_valid"] is False
    assert "no longer counts" in mine.json()["invalid_reason"]
    assert "dr-expert" not in mine.content.decode()
    listed = _client(rating.annotator).get("/api/ratings/").content.decode()
    assert "dr-expert" not in listed

    admin = _client(UserFactory(roles=["admin"])).get(f"/api/ratings/{rating.pk}/").json()
    assert "by dr-expert" in admin["invalid_reason"]
