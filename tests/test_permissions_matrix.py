"""Every role × every URL and API endpoint → allowed or denied (issue 7: roles and permissions).

URLs are collected from the URL resolver, so a new page or endpoint without a row in ``EXPECTED`` fails
``test_every_url_has_an_expectation``: whoever adds a URL decides who may use it here. The Django admin is covered
by its index only (its own permission system guards the rest).

Outcomes: **ok** is any answer below 500 that is not a denial (200, 201, 204, a redirect elsewhere, 400 for an empty
form or body, 405); **deny** is 401, 403, 404 or a redirect to the login page. A 500 always fails.
Each request runs in a savepoint that is rolled back, so a POST (cancel, dismiss, ...) never changes what the next
one sees.
"""
import re
from dataclasses import dataclass

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from annotation.crowd.items import gold_item_mark
from annotation.crowd.models import Study
from annotation.models import Assignment, Job
from refinement.models import CorrectionItem, Suggestion
from tests.factories import (
    AnnotatorFactory,
    AudioClipFactory,
    CandidateAnswerFactory,
    QuestionFactory,
    RatingFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "annotator", "expert", "admin")
ALL = {"annotator", "expert", "admin", "anonymous"}
RATERS = {"annotator", "expert", "admin"}
STAFF = {"expert", "admin"}
ADMIN = {"admin"}
OWNER = {"annotator"}  # the annotator who owns the assignment in the fixture


@dataclass(frozen=True)
class Row:
    """Who may use one URL with one method; ``kwargs`` names fixture objects for the URL's parameters."""

    allowed: frozenset
    kwargs: tuple = ()


def row(allowed, *kwargs) -> Row:
    return Row(frozenset(allowed), tuple(kwargs))


#: (URL name, method) -> Row. Methods of API routes come from the viewset's actions; pages list theirs.
EXPECTED: dict[tuple[str, str], Row] = {
    # Public
    ("healthz", "GET"): row(ALL),
    ("readyz", "GET"): row(ALL),
    ("login", "GET"): row(ALL),
    ("logout", "POST"): row(ALL),
    ("api-token", "POST"): row(ALL),
    ("api-schema", "GET"): row(RATERS),  # behind login (issue #34): any signed-in user
    ("api-docs", "GET"): row(RATERS),
    ("api-redoc", "GET"): row(RATERS),
    # Workbench (annotation): every role rates; an assignment is its owner's only.
    ("annotation:home", "GET"): row(RATERS),
    ("annotation:next", "GET"): row(RATERS),
    ("annotation:rate", "POST"): row(OWNER, "assignment_pk"),
    ("annotation:skip", "POST"): row(OWNER, "assignment_pk"),
    ("annotation:audio", "GET"): row(RATERS, "clip_pk"),
    # Public: a crowd participant reads them on the study's welcome page before signing in.
    ("annotation:guidelines", "GET"): row(ALL),
    ("annotation:my-ratings", "GET"): row(RATERS),
    ("annotation:rating-edit", "GET"): row(OWNER, "rating_pk"),  # only one's own rating (others: 404)
    ("annotation:rating-edit", "POST"): row(OWNER, "rating_pk"),
    # Read-only staff pages: rating overview, judges and judge-vs-human comparison.
    ("annotation:overview", "GET"): row(STAFF),
    # Where a login lands (redirects by role) and the pipeline dashboard (experts and admins).
    ("start", "GET"): row(RATERS),
    ("dashboard", "GET"): row(STAFF),
    ("annotation:judges", "GET"): row(STAFF),
    ("annotation:judge-compare", "GET"): row(STAFF),
    # Stage 1 and judge jobs: experts read progress; only admins start, retry or cancel (provider quota, compute).
    ("annotation:judges", "POST"): row(ADMIN),
    ("annotation:jobs", "GET"): row(STAFF),
    ("annotation:job-start", "POST"): row(ADMIN),
    ("annotation:job", "GET"): row(STAFF, "job_pk"),
    ("annotation:job-retry", "POST"): row(ADMIN, "job_pk"),
    ("annotation:job-cancel", "POST"): row(ADMIN, "job_pk"),
    # LALMs and judges in forms: experts read the list and test results; admins add, change and test.
    ("annotation:lalms", "GET"): row(STAFF),
    ("annotation:lalm-new", "GET"): row(ADMIN),
    ("annotation:lalm-new", "POST"): row(ADMIN),
    ("annotation:lalm-edit", "GET"): row(ADMIN, "lalm_pk"),
    ("annotation:lalm-edit", "POST"): row(ADMIN, "lalm_pk"),
    ("annotation:lalm-test", "POST"): row(ADMIN, "lalm_pk"),
    ("annotation:judge-new", "GET"): row(ADMIN),
    ("annotation:judge-new", "POST"): row(ADMIN),
    ("annotation:judge-edit", "GET"): row(ADMIN, "judge_pk"),
    ("annotation:judge-edit", "POST"): row(ADMIN, "judge_pk"),
    ("annotation:judge-test", "POST"): row(ADMIN, "judge_pk"),
    ("annotation:connection-test", "GET"): row(STAFF, "connection_test_pk"),
    # People: users and roles, teams, invitations (admins); the one-time password link is public (a bad token
    # answers its own page).
    ("team:users", "GET"): row(ADMIN),
    ("team:user-role", "POST"): row(ADMIN, "annotator_pk"),
    ("team:user-active", "POST"): row(ADMIN, "annotator_pk"),
    ("team:user-link", "POST"): row(ADMIN, "annotator_pk"),
    ("team:teams", "GET"): row(ADMIN),
    ("team:team-set", "POST"): row(ADMIN, "benchmark_pk"),
    ("team:invite", "GET"): row(ADMIN),
    ("team:invite", "POST"): row(ADMIN),
    ("password-set", "GET"): row(ALL, "uidb64", "token"),
    ("password-set", "POST"): row(ALL, "uidb64", "token"),
    ("password-set-done", "GET"): row(ALL),
    # Admin pages: table imports ("New benchmark / Add data").
    ("annotation:imports", "GET"): row(ADMIN),
    ("annotation:imports", "POST"): row(ADMIN),
    ("annotation:import", "GET"): row(ADMIN, "table_import_pk"),
    ("annotation:import", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-preview", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-validate", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-run", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-job", "GET"): row(ADMIN, "table_import_pk"),
    ("annotation:import-mapping", "GET"): row(ADMIN, "table_import_pk"),
    ("annotation:import-mapping", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-audio", "GET"): row(ADMIN, "table_import_pk", "table_import_row"),
    ("annotation:import-allow-missing-audio", "POST"): row(ADMIN, "table_import_pk"),
    ("annotation:import-audio-attach", "GET"): row(ADMIN),
    ("annotation:import-audio-attach", "POST"): row(ADMIN),
    # Admin pages: exports and the audit log.
    ("annotation:exports", "GET"): row(ADMIN),
    ("annotation:export", "GET"): row(ADMIN, "export_pk"),
    ("annotation:export-download", "GET"): row(ADMIN, "export_pk"),
    ("annotation:audit", "GET"): row(ADMIN),
    ("admin:index", "GET"): row(STAFF),
    # Refinement (Stage 3): experts and admins.
    ("refinement:index", "GET"): row(STAFF),
    ("refinement:report", "GET"): row(STAFF),
    ("refinement:flags-evaluate", "POST"): row(STAFF),
    ("refinement:queue", "GET"): row(STAFF, "queue"),
    ("refinement:item", "GET"): row(STAFF, "question_id"),
    ("refinement:claim", "POST"): row(STAFF, "question_id"),
    ("refinement:release", "POST"): row(STAFF, "question_id"),
    ("refinement:send", "POST"): row(STAFF, "question_id"),
    ("refinement:history", "GET"): row(STAFF, "question_id"),
    ("refinement:correct", "POST"): row(STAFF, "question_id"),
    ("refinement:dismiss", "POST"): row(STAFF, "item_id"),
    ("refinement:suggestion", "GET"): row(STAFF, "suggestion_id"),
    # Modelling pages: experts read agreement, runs and predictions; only admins start, activate or cancel runs.
    ("modelling:agreement", "GET"): row(STAFF),
    ("modelling:training_runs", "GET"): row(STAFF),
    ("modelling:training_run_new", "GET"): row(ADMIN),
    ("modelling:training_run_new", "POST"): row(ADMIN),
    ("modelling:training_run", "GET"): row(STAFF, "training_run_pk"),
    ("modelling:training_run_activate", "POST"): row(ADMIN, "training_run_pk"),
    # Registering and activating a checkpoint of the ORCA authors' release: admins only.
    ("modelling:model_import", "GET"): row(ADMIN),
    ("modelling:model_import", "POST"): row(ADMIN),
    ("modelling:model_version_activate", "POST"): row(ADMIN, "imported_model_pk"),
    ("modelling:training_run_cancel", "POST"): row(ADMIN, "training_run_pk"),
    ("modelling:items", "GET"): row(STAFF),
    ("modelling:item", "GET"): row(STAFF, "question_pk"),
    # Routing by predicted disagreement and ORCA as a rater: experts read; only admins switch routing.
    ("modelling:routing", "GET"): row(STAFF),
    ("modelling:routing_switch", "POST"): row(ADMIN),
    ("modelling:rater", "GET"): row(STAFF),
    # Annotator quality names annotators and acts on their accounts: admins only.
    ("modelling:quality", "GET"): row(ADMIN),
    ("modelling:quality_refresh", "POST"): row(ADMIN),
    ("modelling:quality_annotator", "GET"): row(ADMIN, "annotator_pk"),
    ("modelling:quality_annotator_action", "POST"): row(ADMIN, "annotator_pk"),
    # Crowd studies: the entry link is public, but without the platform's ids it is refused (the same 404 for
    # everyone, tests/annotation/test_studies.py opens valid links) and a signed-in user is never switched (403).
    ("crowd:study-entry", "GET"): row(set(), "study_slug"),
    ("crowd:study-entry", "POST"): row(set(), "study_slug"),
    ("crowd:study-done", "GET"): row(RATERS),
    # Studies, gold items and attention checks, the quality policy: admins only.
    ("crowd:studies", "GET"): row(ADMIN),
    ("crowd:study-new", "GET"): row(ADMIN),
    ("crowd:study-new", "POST"): row(ADMIN),
    ("crowd:study-edit", "GET"): row(ADMIN, "study_pk"),
    ("crowd:study-edit", "POST"): row(ADMIN, "study_pk"),
    ("crowd:study-enable", "POST"): row(ADMIN, "study_pk"),
    ("crowd:study-report", "GET"): row(ADMIN, "study_pk"),
    ("crowd:items", "GET"): row(ADMIN),
    ("crowd:items", "POST"): row(ADMIN),
    ("crowd:item", "GET"): row(ADMIN, "quality_item_pk"),
    ("crowd:item", "POST"): row(ADMIN, "quality_item_pk"),
    ("crowd:policy", "GET"): row(ADMIN),
    ("crowd:policy", "POST"): row(ADMIN),
    ("modelling:routing_benchmark", "POST"): row(ADMIN, "benchmark_pk"),
    # The leaderboard: experts and admins read it; only admins start or cancel a cross-fit.
    ("modelling:leaderboard", "GET"): row(STAFF),
    ("modelling:leaderboard_download", "GET"): row(STAFF),
    ("modelling:crossfit_start", "POST"): row(ADMIN),
    ("modelling:crossfit_cancel", "POST"): row(ADMIN, "crossfit_pk"),
    ("api-leaderboard", "GET"): row(STAFF),
    # API: annotation
    ("api-benchmark-list", "GET"): row(RATERS),
    ("api-benchmark-detail", "GET"): row(RATERS, "benchmark_pk"),
    ("api-question-list", "GET"): row(RATERS),
    ("api-question-detail", "GET"): row(RATERS, "question_pk"),
    ("api-lalm-list", "GET"): row(STAFF),  # annotators rate blind
    ("api-lalm-detail", "GET"): row(STAFF, "lalm_pk"),
    ("api-candidate-list", "GET"): row(RATERS),
    ("api-candidate-detail", "GET"): row(RATERS, "candidate_pk"),  # the annotator rated it
    ("api-rating-list", "GET"): row(RATERS),
    ("api-rating-list", "POST"): row(RATERS),
    ("api-rating-detail", "GET"): row(RATERS, "rating_pk"),  # the annotator's own; its question is in a queue
    ("api-assignment-next", "POST"): row(RATERS),
    ("api-judge-rating-list", "GET"): row(STAFF),
    ("api-judge-rating-detail", "GET"): row(STAFF, "judge_rating_pk"),
    ("api-job-list", "GET"): row(STAFF),
    ("api-job-list", "POST"): row(ADMIN),
    ("api-job-detail", "GET"): row(STAFF, "job_pk"),
    ("api-job-cancel", "POST"): row(ADMIN, "job_pk"),
    ("api-export-list", "GET"): row(ADMIN),
    ("api-export-list", "POST"): row(ADMIN),
    ("api-export-detail", "GET"): row(ADMIN, "export_pk"),
    ("api-export-download", "GET"): row(ADMIN, "export_pk"),
    ("api-audit-event-list", "GET"): row(ADMIN),
    ("api-audit-event-detail", "GET"): row(ADMIN, "audit_pk"),
    # API: refinement and modelling (read)
    ("api-correction-item-list", "GET"): row(STAFF),
    ("api-correction-item-detail", "GET"): row(STAFF, "item_id"),
    ("api-correction-list", "GET"): row(STAFF),
    ("api-correction-detail", "GET"): row(STAFF, "correction_pk"),
    ("api-agreement-snapshot-list", "GET"): row(STAFF),
    ("api-agreement-snapshot-detail", "GET"): row(STAFF, "snapshot_pk"),
    ("api-training-run-list", "GET"): row(STAFF),
    ("api-training-run-detail", "GET"): row(STAFF, "training_run_pk"),
    ("api-model-version-list", "GET"): row(STAFF),
    ("api-model-version-detail", "GET"): row(STAFF, "model_version_pk"),
    ("api-prediction-list", "GET"): row(STAFF),
    ("api-prediction-detail", "GET"): row(STAFF, "prediction_pk"),
}

#: Fixture keys named by routes' ``pk`` parameter.
_API_PK = {
    "benchmark": "benchmark_pk", "question": "question_pk", "lalm": "lalm_pk", "candidate": "candidate_pk",
    "rating": "rating_pk", "judge-rating": "judge_rating_pk", "job": "job_pk", "export": "export_pk",
    "audit-event": "audit_pk", "correction-item": "item_id", "correction": "correction_pk",
    "agreement-snapshot": "snapshot_pk", "training-run": "training_run_pk", "model-version": "model_version_pk",
    "prediction": "prediction_pk",
}


def _collect(patterns=None, prefix="", namespace=""):
    """(name, route regex or path, methods or None) for every named URL, the Django admin as its index only."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace or ""
            full_ns = f"{namespace}:{ns}" if namespace and ns else (ns or namespace)
            if ns == "admin":
                yield "admin:index", None, ("GET",)
                continue
            yield from _collect(pattern.url_patterns, prefix + str(pattern.pattern), full_ns)
        elif isinstance(pattern, URLPattern) and pattern.name:
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            actions = getattr(pattern.callback, "actions", None)
            # DRF adds "head" to the actions of a route with "get" once it served a request: not a separate case.
            methods = tuple(m.upper() for m in actions if m != "head") if actions else None
            yield name, prefix + str(pattern.pattern), methods


def _url_cases() -> list[tuple[str, str]]:
    cases = []
    for name, _, methods in _collect():
        if methods is None:
            methods = tuple(m for (n, m) in EXPECTED if n == name) or ("GET",)
        cases.extend((name, method) for method in methods)
    return sorted(set(cases))


def test_every_url_has_an_expectation():
    missing = [case for case in _url_cases() if case not in EXPECTED]
    assert not missing, f"add these (URL name, method) pairs to EXPECTED: {missing}"
    stale = sorted(set(EXPECTED) - set(_url_cases()))
    assert not stale, f"EXPECTED names URLs that no longer exist: {stale}"


@pytest.fixture
def world(tmp_path, settings):
    """One object of each kind, owned so that the table's choices matter."""
    from annotation.models import AuditEvent, ConnectionTest, Judge, JudgeRating
    from annotation.services.exports import export_start
    from modelling.models import AgreementSnapshot, CrossFitRun, ModelVersion, Prediction, TrainingRun
    from refinement.models import Correction, Queue

    settings.EXPORT_DIR = tmp_path
    users = {
        "annotator": AnnotatorFactory(username="m-annotator"),
        "expert": UserFactory(username="m-expert", roles=["expert"], is_staff=True),
        "admin": UserFactory(username="m-admin", roles=["admin"], is_staff=True, is_superuser=True),
    }
    clip = AudioClipFactory()
    question = QuestionFactory(audio=clip)
    candidate = CandidateAnswerFactory(question_version=question.current_version)
    rating = RatingFactory(candidate=candidate, annotator=users["annotator"])
    other = CandidateAnswerFactory(question_version=question.current_version)
    assignment = Assignment.objects.create(
        candidate=other, annotator=users["annotator"], expires_at="2999-01-01T00:00:00Z"
    )
    judge = JudgeRating.objects.create(candidate=candidate, judge_name="j", score=3)
    job = Job.objects.create(kind=Job.Kind.TRANSCRIBE, benchmark=question.benchmark, total=1)
    export = export_start(requested_by=users["admin"], formats=["orca-jsonl"])
    item = CorrectionItem.objects.create(
        question=question, queue=Queue.values[0], question_version=question.current_version
    )
    suggestion = Suggestion.objects.create(question=question, base_version=question.current_version, field="rationale")
    new_version = question.versions.create(number=2, question_text="q?", reference_answer="r", source="expert")
    correction = Correction.objects.create(
        question=question, field="rationale", from_version=question.current_version, to_version=new_version,
        expert=users["expert"], reason="typo",
    )
    snapshot = AgreementSnapshot.objects.create(scope="all", level="interval", alpha=0.5, n_items=1, n_ratings=2)
    run = TrainingRun.objects.create()
    model_version = ModelVersion.objects.create(training_run=run, name="m1", artifact_path="/nonexistent")
    prediction = Prediction.objects.create(candidate=candidate, model_version=model_version, mu=0.5, variance=0.1,
                                           alpha=1, beta=1)
    imported = ModelVersion.objects.create(name="m-imported", artifact_path="/nonexistent",
                                           upstream_path="/nonexistent-upstream")
    study = Study.objects.create(name="m-study", slug="m-study", benchmark=question.benchmark, is_enabled=True,
                                 completion_code="X", external_study_id="65f0a1b2c3d4e5f6a7b8c9d0", max_participants=10)
    judge_row = Judge.objects.create(name="m-judge", provider="openai", model="m")
    from annotation.models import TableImport
    from tests.table_files import write_csv, write_wav

    write_wav(tmp_path / "a.wav")
    draft = TableImport.objects.create(
        benchmark_name="m-import", source_kind="upload", source="t.csv", file_format="csv", rows=1,
        file_path=str(write_csv(tmp_path / "t.csv", ["q", "ref", "answer", "audio"], [("Q", "R", "A", "a.wav")])),
        columns=["q", "ref", "answer", "audio"], audio_root=str(tmp_path),
        mapping={"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
                 "defaults": {"lalm": "m"}})
    objects = {
        "assignment_pk": assignment.pk, "clip_pk": clip.pk, "job_pk": job.pk, "export_pk": export.pk,
        "queue": item.queue, "question_id": question.pk, "item_id": item.pk, "suggestion_id": suggestion.pk,
        "training_run_pk": run.pk, "candidate_pk": candidate.pk, "benchmark_pk": question.benchmark_id,
        "question_pk": question.pk, "lalm_pk": candidate.lalm_id, "rating_pk": rating.pk,
        "judge_rating_pk": judge.pk, "audit_pk": AuditEvent.objects.first().pk, "correction_pk": correction.pk,
        "snapshot_pk": snapshot.pk, "model_version_pk": model_version.pk, "prediction_pk": prediction.pk,
        "annotator_pk": users["annotator"].pk, "study_slug": study.slug, "study_pk": study.pk,
        "quality_item_pk": gold_item_mark(candidate=CandidateAnswerFactory(question_version=question.current_version),
                                          min_score=4, max_score=5).pk,
        "crossfit_pk": CrossFitRun.objects.create(folds=2).pk, "imported_model_pk": imported.pk,
        "judge_pk": judge_row.pk, "connection_test_pk": ConnectionTest.objects.create(judge=judge_row).pk,
        "uidb64": "MQ", "token": "set-password",
        "table_import_pk": draft.pk, "table_import_row": 1,
    }
    return users, objects


def _concrete_url(name: str, route: str | None, kwargs: tuple, objects: dict) -> str:
    if route is None:
        return "/admin/"
    if route.startswith("^") or "(?P<" in route or "$" in route:  # a router regex
        url = "/" + route.replace("^", "").replace("$", "")
        resource = re.match(r"api-(.+?)-(list|detail|[a-z]+)$", name)
        key = _API_PK.get(resource.group(1)) if resource else None
        return re.sub(r"\(\?P<pk>[^)]*\)", str(objects.get(key, 0)), url)
    url = "/" + route
    for parameter, key in zip(re.findall(r"<(?:\w+:)?(\w+)>", route), kwargs, strict=True):
        url = re.sub(rf"<(?:\w+:)?{parameter}>", str(objects[key]), url)
    return url


def _outcome(name: str, response) -> str:
    if response.status_code >= 500:
        return f"server error {response.status_code}"
    if response.status_code in (401, 403, 404):
        return "deny"
    # Logging out lands on the login page by design; any other trip there is a denial (the admin's too).
    if name != "logout" and response.status_code in (301, 302) and "login/" in response.get("Location", ""):
        return "deny"
    return "ok"


@pytest.mark.parametrize("role", ROLES)
def test_each_role_gets_exactly_what_the_matrix_allows(role, world):
    users, objects = world
    client = Client()
    if role != "anonymous":
        client.force_login(users[role])
    routes = {name: route for name, route, _ in _collect()}
    wrong = []
    for name, method in _url_cases():
        if (name, method) not in EXPECTED:
            continue  # test_every_url_has_an_expectation names it
        expected_row = EXPECTED[(name, method)]
        url = _concrete_url(name, routes[name], expected_row.kwargs, objects)
        with transaction.atomic():
            response = getattr(client, method.lower())(url)
            transaction.set_rollback(True)
        outcome = _outcome(name, response)
        expected = "ok" if role in expected_row.allowed else "deny"
        if outcome != expected:
            wrong.append(f"{method} {url} ({name}): expected {expected}, got {outcome} ({response.status_code})")
        if role != "anonymous" and name == "logout":
            client.force_login(users[role])
    assert not wrong, "\n".join(wrong)
