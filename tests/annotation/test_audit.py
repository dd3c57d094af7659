"""The audit trail (issue 7): writes by people and jobs each leave one ``AuditEvent`` (who, what, old → new),
whichever interface (browser, API, command) made them."""
import json

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.urls import reverse

from annotation.models import Assignment, AuditEvent, Job
from annotation.services.assignment import assignment_skip
from annotation.services.audit import audit_events_for_user
from annotation.services.importers import candidate_answers_import
from modelling.models import TrainingRun
from modelling.services.training import training_run_cancel, training_run_start
from refinement.models import CorrectionItem, Queue
from refinement.services.queues import item_dismiss
from tests.factories import AnnotatorFactory, CandidateAnswerFactory, QuestionFactory, UserFactory

pytestmark = pytest.mark.django_db


def _admin():
    return UserFactory(username="boss", roles=["admin"], is_staff=True)


def test_cancelling_a_job_in_the_browser_and_through_the_api_each_writes_exactly_one_event():
    admin = _admin()
    browser_job = Job.objects.create(kind=Job.Kind.TRANSCRIBE, total=1)
    api_job = Job.objects.create(kind=Job.Kind.TRANSCRIBE, total=1)
    client = Client()
    client.force_login(admin)

    assert client.post(reverse("annotation:job-cancel", args=[browser_job.pk])).status_code == 302
    assert client.post(f"/api/jobs/{api_job.pk}/cancel/").status_code == 200
    client.post(reverse("annotation:job-cancel", args=[browser_job.pk]))  # already ended: nothing changes

    events = AuditEvent.objects.filter(action="job.cancel").order_by("id")
    assert [(e.object_id, e.actor, e.old, e.new["status"]) for e in events] == [
        (str(browser_job.pk), admin, {"status": "queued"}, "cancelled"),
        (str(api_job.pk), admin, {"status": "queued"}, "cancelled"),
    ]


def test_skipping_an_assignment_records_the_annotator_and_the_reason():
    annotator = AnnotatorFactory()
    assignment = Assignment.objects.create(
        candidate=CandidateAnswerFactory(), annotator=annotator, expires_at="2999-01-01T00:00:00Z"
    )
    assignment_skip(assignment=assignment, reason="audio will not play")
    assignment_skip(assignment=assignment, reason="again")  # already skipped: unchanged, no second event

    event = AuditEvent.objects.get(action="assignment.skip")
    assert event.actor == annotator and event.object_id == str(assignment.pk)
    assert event.old == {"status": "open"} and event.new == {"status": "skipped", "skip_reason": "audio will not play"}


def test_dismissing_a_flag_records_the_claim_and_the_dismissal():
    expert = UserFactory(roles=["expert"], is_staff=True)
    question = QuestionFactory()
    item = CorrectionItem.objects.create(question=question, queue=Queue.values[0],
                                         question_version=question.current_version)
    item_dismiss(item=item, expert=expert, reason="genuine disagreement -- keep")

    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["question.claim", "correction_item.dismiss", "question.release"]
    dismissal = AuditEvent.objects.get(action="correction_item.dismiss")
    assert dismissal.actor == expert and dismissal.new["reason"] == "genuine disagreement -- keep"


def test_an_import_writes_one_event_with_its_counts(tmp_path):
    question = QuestionFactory(external_id="x1")
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"id": "x1", "answer_prediction": "a dog barks"}) + "\n", encoding="utf-8")

    candidate_answers_import(path=path, lalm_name="Qwen2-Audio", benchmark_name=question.benchmark.name)

    event = AuditEvent.objects.get(action="import.candidates")
    assert event.actor is None and event.actor_label == "import answers.jsonl"
    assert event.new == {"file": "answers.jsonl", "created": 1, "updated": 0, "unchanged": 0}


def test_starting_and_cancelling_a_training_run_are_audited(django_capture_on_commit_callbacks):
    admin = _admin()
    with django_capture_on_commit_callbacks(execute=False):  # queue only
        run = training_run_start(config={}, split={"kind": "unseen_questions", "seed": 3}, created_by=admin)
    assert training_run_cancel(run=run, user=admin)

    start, cancel = AuditEvent.objects.filter(object_type="modelling.trainingrun").order_by("id")
    assert start.action == "training_run.start" and start.actor == admin and start.new["split_seed"] == 3
    assert cancel.action == "training_run.cancel" and cancel.old == {"status": TrainingRun.Status.QUEUED}


def test_only_admins_read_the_audit_log():
    with pytest.raises(PermissionDenied):
        audit_events_for_user(user=UserFactory(roles=["expert"], is_staff=True))
    assert audit_events_for_user(user=_admin()).count() == 0
