"""Blind rating, checked on what annotators are actually sent: every page and API endpoint an annotator may use,
for two annotators, with the other annotator, an expert and an admin active around them.

The endpoints come from ``tests/test_permissions_matrix.py``: its ``EXPECTED`` table must name every URL of
``config/urls.py`` and the API routers (``test_every_url_has_an_expectation``), and every row an annotator is
allowed is fetched here, so a new endpoint an annotator can reach is checked without anyone remembering to.

No response to an annotator may contain: another person's rating (their comment, their username), an LALM name,
a count of ratings (``valid_rating_count``), a judge's score or explanation, an ORCA prediction (mu, variance,
alpha, beta), or the expert named in a correction's reason. JSON bodies also may not carry keys that name those
things, whatever their values.
"""
import json

import pytest
from django.db import transaction
from django.test import Client

from annotation.crowd.models import Study
from annotation.models import Assignment, CandidateAnswer, JudgeRating
from annotation.services.versions import question_version_create, ratings_invalidate_for_version
from tests.factories import (
    AnnotatorFactory,
    AudioClipFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)
from tests.test_permissions_matrix import EXPECTED, _collect, _concrete_url, _url_cases

pytestmark = pytest.mark.django_db

ANNOTATORS = ("ann-one", "ann-two")
EXPERT = "expert-zed"
LALM_NAMES = ("Hidden-LALM-Alpha", "Hidden-LALM-Beta", *(f"Hidden-LALM-{name}" for name in (*ANNOTATORS, EXPERT)))
#: A rating count nothing else on a page could show (the cached count is set to it directly).
COUNT = 987654
JUDGE = ("judge-model-qx", "judge explanation qx", "1.234", "2.3456")
PREDICTION = ("0.123456", "0.0654321", "7.7777", "3.3333")
#: Keys a JSON response to an annotator must never carry.
FORBIDDEN_KEYS = {"lalm", "valid_rating_count", "judge_name", "expected_score", "explanation", "mu", "variance",
                  "alpha", "beta", "versions", "reason"}


def _comment(username: str) -> str:
    return f"private comment of {username}"


@pytest.fixture
def world(tmp_path, settings):
    """Two annotators who each rated one shared candidate answer and hold an open assignment on another; an
    expert who rated too and corrected an earlier version; judge scores and an ORCA prediction on everything."""
    from modelling.models import ModelVersion, Prediction, TrainingRun

    settings.MEDIA_ROOT = tmp_path
    users = {name: AnnotatorFactory(username=name) for name in ANNOTATORS}
    users[EXPERT] = UserFactory(username=EXPERT, roles=["expert"], is_staff=True)
    users["admin-zed"] = UserFactory(username="admin-zed", roles=["admin"], is_staff=True, is_superuser=True)

    question = QuestionFactory(audio=AudioClipFactory(), benchmark__target_ratings=10)
    old = CandidateAnswerFactory(question_version=question.current_version, lalm__name=LALM_NAMES[0])
    for name in (*ANNOTATORS, EXPERT):
        RatingFactory(candidate=old, annotator=users[name], comment=_comment(name) + " (old)")
    question_version_create(question=question, source="expert", created_by=users[EXPERT],
                            reason=f"Expert correction by {EXPERT}", rationale="corrected")
    ratings_invalidate_for_version(version=old.question_version,
                                   reason=f"Question corrected in v2 (rationale) by {EXPERT}: wrong")

    shared = CandidateAnswerFactory(question_version=question.current_version, lalm__name=LALM_NAMES[1])
    study = Study.objects.create(name="blind-study", slug="blind-study", benchmark=question.benchmark,
                                 is_enabled=True, completion_code="X",
                                 external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=10)
    objects = {"clip_pk": question.audio_id, "question_pk": question.pk, "candidate_pk": shared.pk,
               "benchmark_pk": question.benchmark_id, "study_slug": study.slug}
    for name in (*ANNOTATORS, EXPERT):
        rating = RatingFactory(candidate=shared, annotator=users[name], comment=_comment(name), score=4)
        own = CandidateAnswerFactory(question_version=question.current_version, lalm__name=f"Hidden-LALM-{name}")
        assignment = Assignment.objects.create(candidate=own, annotator=users[name],
                                               expires_at="2999-01-01T00:00:00Z")
        objects[name] = {"rating_pk": rating.pk, "assignment_pk": assignment.pk, "own_candidate": own.pk}
    CandidateAnswer.objects.update(valid_rating_count=COUNT)

    # A study link annotators may open (crowd:study-entry).
    study = Study.objects.create(name="c-study", slug="c-study", benchmark=question.benchmark, is_enabled=True,
                                 completion_code="X", external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=10)
    objects["study_slug"] = study.slug
    objects.update(uidb64="MQ", token="set-password")  # the public password-link pages (an invalid link)

    run = TrainingRun.objects.create()
    model = ModelVersion.objects.create(training_run=run, name="orca-m", artifact_path="/nonexistent", is_active=True)
    for candidate in CandidateAnswer.objects.all():
        JudgeRating.objects.create(candidate=candidate, judge_name=JUDGE[0], explanation=JUDGE[1],
                                   score=float(JUDGE[2]), expected_score=float(JUDGE[3]))
        Prediction.objects.create(candidate=candidate, model_version=model, mu=float(PREDICTION[0]),
                                  variance=float(PREDICTION[1]), alpha=float(PREDICTION[2]),
                                  beta=float(PREDICTION[3]))
    return users, objects


def _forbidden_texts(me: str) -> list[str]:
    others = [name for name in (*ANNOTATORS, EXPERT, "admin-zed") if name != me]
    return [*others, *(_comment(name) for name in others), *LALM_NAMES, str(COUNT), *JUDGE, *PREDICTION]


def _keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {key for item in value.values() for key in _keys(item)}
    if isinstance(value, list):
        return {key for item in value for key in _keys(item)}
    return set()


def _bodies(objects: dict, me: str) -> dict:
    """Requests that do something real, so the answer has content to check (other POSTs are sent empty)."""
    mine = objects[me]
    return {
        ("api-rating-list", "POST"): {"candidate": mine["own_candidate"], "assignment": mine["assignment_pk"],
                                      "score": 3, "codes": "R"},
        ("api-assignment-next", "POST"): {},
        ("api-token", "POST"): {"username": me, "password": "pw"},
        ("annotation:rate", "POST"): {"score": "3"},
        ("annotation:rating-edit", "POST"): {"score": "2"},
    }


def _annotator_cases() -> list[tuple[str, str]]:
    return [case for case in _url_cases() if case in EXPECTED and EXPECTED[case].allowed & {"annotator"}]


def test_the_matrix_covers_the_rating_flow():
    cases = set(_annotator_cases())
    assert {("annotation:next", "GET"), ("annotation:rate", "POST"), ("api-assignment-next", "POST"),
            ("api-rating-list", "POST"), ("api-rating-list", "GET"), ("api-question-list", "GET"),
            ("api-candidate-list", "GET"), ("annotation:my-ratings", "GET")} <= cases


@pytest.mark.parametrize("me", ANNOTATORS)
def test_no_annotator_response_shows_others_ratings_lalms_counts_judges_or_predictions(me, world):
    users, objects = world
    keys = {**objects, **objects[me]}
    client = Client()
    client.force_login(users[me])
    routes = {name: route for name, route, _ in _collect()}
    bodies = _bodies(objects, me)
    leaks, checked = [], []
    for name, method in _annotator_cases():
        url = _concrete_url(name, routes[name], EXPECTED[(name, method)].kwargs, keys)
        with transaction.atomic():
            if method == "GET":
                response = client.get(url)
            else:
                response = client.post(url, json.dumps(bodies.get((name, method), {})),
                                       content_type="application/json") if name.startswith("api-") else \
                    client.post(url, bodies.get((name, method), {}))
            transaction.set_rollback(True)
        if name == "logout":
            client.force_login(users[me])
        assert response.status_code < 500, f"{method} {url}: {response.status_code}"
        body = b"".join(response.streaming_content) if response.streaming else response.content
        text = body.decode(errors="replace")
        checked.append(f"{method} {url} {response.status_code}")
        leaks += [f"{method} {url}: {marker!r}" for marker in _forbidden_texts(me) if marker in text]
        if response.get("Content-Type", "").startswith("application/json") and text:
            leaks += [f"{method} {url}: key {key!r}" for key in sorted(_keys(json.loads(text)) & FORBIDDEN_KEYS)]
    assert not leaks, "\n".join(leaks)
    # The flow really ran: an item was shown, rated in the browser and through the API, and read back.
    assert any(line.startswith("GET /rate/next/ 200") for line in checked), checked
    assert any(line.startswith("POST /api/ratings/ 201") for line in checked), checked
    assert any(line.startswith(f"GET /api/ratings/{objects[me]['rating_pk']}/ 200") for line in checked), checked


def test_the_same_requests_show_staff_what_annotators_do_not_see(world):
    """The markers are real: an admin's answers to the same kind of requests do contain them."""
    users, objects = world
    client = Client()
    client.force_login(users["admin-zed"])
    candidate = client.get(f"/api/candidates/{objects['candidate_pk']}/").json()
    assert candidate["lalm"] == LALM_NAMES[1] and candidate["valid_rating_count"] == COUNT
    ratings = client.get("/api/ratings/?page_size=100").content.decode()
    assert _comment(ANNOTATORS[1]) in ratings and f"by {EXPERT}" in ratings
    judges = client.get("/api/judge-ratings/").content.decode()
    assert JUDGE[1] in judges and JUDGE[2] in judges
    assert PREDICTION[0] in client.get("/api/predictions/").content.decode()
