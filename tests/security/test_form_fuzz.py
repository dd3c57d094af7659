"""Fuzz the HTML form endpoints (what schemathesis does for the API): no input may cause a server error.

Every page and form post that parses request input is driven by hypothesis with hostile values (non-numbers where
numbers are expected, Unicode digits such as '²' that str.isdigit() accepts but int() refuses, NUL characters that
PostgreSQL refuses in text, huge numbers, very long text), as the role that may use it. A bad value must give a
4xx, a page with the form's errors, or be ignored; never a 5xx. The test client re-raises a view's exception, so an
unhandled error fails the test with its traceback.
"""
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotation.crowd.items import gold_item_mark
from annotation.crowd.models import RatingInvalidation, Study
from annotation.models import Assignment
from refinement.models import CorrectionItem, Queue
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, RatingFactory, UserFactory

pytestmark = pytest.mark.django_db

HOSTILE = st.one_of(
    st.sampled_from(["", "0", "-1", "1", "2", "²", "١٢", "1e3", "1.5", "99999999999999999999", "\x00", "a\x00b",
                     "preview", "save", "suggest:rationale", "accept:1", "reject:x", "accept:²", "on", "true",
                     "speech", "reference", "orca-jsonl", "none", "dataset", "rationale", "U", "QARUE", "x" * 5000]),
    st.text(max_size=40),
)
FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow])


@pytest.fixture
def world(tmp_path, settings):
    """An annotator with an open assignment and a rating, an expert, an admin, a flagged question."""
    settings.EXPORT_DIR = tmp_path
    settings.EXPORT_INLINE_MAX_CANDIDATES = 0  # exports go to the (never committed) worker queue
    candidate = CandidateAnswerFactory()
    question = candidate.question_version.question
    annotator = AnnotatorFactory()
    assignment = Assignment.objects.create(candidate=candidate, annotator=annotator,
                                           expires_at=timezone.now() + timedelta(hours=1))
    rating = RatingFactory(annotator=annotator)
    flag = CorrectionItem.objects.create(question=question, queue=Queue.values[0],
                                         question_version=question.current_version)
    clients = {}
    for role, user in (("annotator", annotator), ("expert", UserFactory(roles=["expert"])),
                       ("admin", UserFactory(roles=["admin"], is_staff=True))):
        clients[role] = Client()
        clients[role].force_login(user)
    study = Study.objects.create(name="fuzz", slug="fuzz", benchmark=question.benchmark, completion_code="X")
    item = gold_item_mark(candidate=CandidateAnswerFactory(question_version=question.current_version),
                          min_score=4, max_score=5)
    return {"clients": clients, "assignment": assignment.pk, "rating": rating.pk, "question": question.pk,
            "flag": flag.pk, "benchmark": question.benchmark_id, "annotator": annotator.pk, "study": study.pk,
            "item": item.pk}


#: (role, method, URL template, field names): every form endpoint that parses input.
ENDPOINTS = [
    ("annotator", "get", "/rate/next/", ["benchmark"]),
    ("annotator", "post", "/rate/{assignment}/submit/",
     ["score", "codes", "comment", "seconds_on_task", "audio_seconds_played"]),
    ("annotator", "post", "/rate/{assignment}/skip/", ["reason"]),
    ("annotator", "get", "/ratings/", ["page"]),
    ("annotator", "post", "/ratings/{rating}/edit/", ["score", "codes", "comment"]),
    ("expert", "get", "/overview/", ["benchmark"]),
    ("admin", "get", "/judges/compare/", ["benchmark"]),
    ("admin", "post", "/judges/", ["judge", "benchmark", "questions"]),
    ("expert", "get", "/refinement/queue/reference/", ["benchmark", "modality", "category"]),
    ("expert", "post", "/refinement/item/{question}/release/", ["force"]),
    ("expert", "post", "/refinement/item/{question}/send/", ["queue", "note"]),
    ("expert", "post", "/refinement/flag/{flag}/dismiss/", ["reason"]),
    ("expert", "post", "/refinement/item/{question}/correct/",
     ["base_version", "action", "reason", "queue", "instructions", "question_text", "reference_answer", "rationale",
      "transcript", "suggestion_rationale", "suggestion_transcript"]),
    ("expert", "get", "/refinement/item/{question}/correct/", ["queue"]),
    ("expert", "get", "/modelling/agreement/", ["level"]),
    ("expert", "get", "/modelling/routing/", ["reason", "page"]),
    ("expert", "get", "/modelling/rater/", ["level", "version"]),
    ("expert", "get", "/modelling/items/", ["page"]),
    ("admin", "post", "/modelling/routing/switch/", ["action", "enabled"]),
    ("admin", "get", "/audit/", ["action", "object_type", "actor", "object_id", "page"]),
    ("admin", "post", "/jobs/start/", ["kind", "benchmark", "lalm", "questions", "all_modalities", "overwrite"]),
    ("admin", "post", "/exports/", ["what", "benchmark", "formats", "split", "seed", "held_out_lalms",
                                    "include_invalid", "licence", "benchmark_format"]),
    ("admin", "post", "/modelling/quality/{annotator}/action/", ["action", "reason", "invalidation"]),
    ("admin", "post", "/quality/studies/new/", ["name", "slug", "benchmark", "platform", "external_study_id",
                                                "participant_param", "quota", "max_participants", "completion_code",
                                                "completion_url", "reward_per_item", "is_enabled"]),
    ("admin", "post", "/quality/studies/{study}/enabled/", ["enabled", "next"]),
    ("admin", "get", "/quality/items/", ["q", "candidate", "question"]),
    ("admin", "post", "/quality/items/", ["kind", "gold-candidate", "gold-min_score", "gold-max_score",
                                          "gold-expected_codes", "attention-question", "attention-expected_score",
                                          "attention-text"]),
    ("admin", "post", "/quality/items/{item}/", ["min_score", "max_score", "expected_codes", "is_active"]),
    ("admin", "get", "/quality/policy/", ["edit"]),
    ("admin", "post", "/quality/policy/", ["form", "policy-warn_score", "policy-qualification_items",
                                           "rates-benchmark", "rates-gold_rate", "rates-min_seconds"]),
]


@pytest.mark.parametrize("role,method,url,fields", ENDPOINTS, ids=[f"{m} {u}" for _r, m, u, _f in ENDPOINTS])
@FUZZ
@given(data=st.data())
def test_no_form_input_causes_a_server_error(world, role, method, url, fields, data):
    values = {name: data.draw(HOSTILE, label=name) for name in fields if data.draw(st.booleans(), label=f"send {name}")}
    client = world["clients"][role]
    path = url.format(**world)
    if method == "get":
        response = client.get(path, values)
    else:
        response = client.post(path, values)
    assert response.status_code < 500, (path, values, response.status_code)


def test_the_reliability_action_reads_its_numbers_with_a_form(world):
    """``int("²")`` raised in the annotator action's hand-written parsing (issue 28, item 6): now a message."""
    client = world["clients"]["admin"]
    url = f"/modelling/quality/{world['annotator']}/action/"
    for value in ("²", "١٢", "99999999999999999999", "-1", "x"):
        response = client.post(url, {"action": "undo", "invalidation": value}, follow=True)
        assert response.status_code == 200 and "invalidation" in response.content.decode()
    action = RatingInvalidation.objects.create(annotator_id=world["annotator"], reason="r", rating_ids=[])
    response = client.post(url, {"action": "undo", "invalidation": str(action.pk)}, follow=True)
    assert "count again" in response.content.decode()
    assert client.post(url, {"action": "explode"}, follow=True).status_code == 200
