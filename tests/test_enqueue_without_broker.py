"""A button that queues work while the broker is not there (annotation.jobs.registry): the platform's page saying
what is wrong and what to do (503), never a 500 or a debug page, and no row left queued for a message that was
never sent. The brokers are real: a Redis port nobody listens on, and kombu's filesystem transport in a folder
this test breaks (a file where its folder should be, which even root cannot write into).
"""
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client

from annotation.jobs.items import job_start_items
from annotation.jobs.registry import EnqueueError, task_send
from annotation.models import Job, JobItem
from modelling.leaderboard.crossfit import crossfit_start
from modelling.models import CrossFitRun, TrainingRun
from modelling.services.training import training_run_start
from refinement.models import CorrectionItem
from tests.factories import BenchmarkFactory, LALMFactory, QuestionFactory, RatingFactory, UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("role_groups")]


def _admin_client() -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True, roles=["admin"]))
    return client


def _filesystem_options(folder: Path) -> dict:
    return {"data_folder_in": str(folder / "queue"), "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"), "control_folder": str(folder / "control")}


def _break(folder: Path) -> None:
    """Make ``folder`` unusable for the filesystem broker: a plain file where its message folder must be."""
    folder.mkdir(parents=True, exist_ok=True)
    queue = folder / "queue"
    if queue.is_dir():
        for message in queue.iterdir():
            message.unlink()
        queue.rmdir()
    queue.write_text("not a folder")


@pytest.mark.parametrize(("url", "data"), [
    ("/modelling/quality/refresh/", {}),  # "Recompute now" on Annotator quality
    ("/refinement/flags/evaluate/", {"next": "/dashboard/"}),  # "Evaluate flags now"
    ("/modelling/leaderboard/crossfit/", {"folds": "2", "recipe": "fast"}),
    ("/exports/", {"what": "dataset", "formats": ["orca-jsonl"], "split": "none", "seed": "0"}),
])
def test_a_button_that_queues_work_without_a_broker_answers_with_the_platforms_page(broker_down, settings, url,
                                                                                    data):
    settings.EXPORT_INLINE_MAX_CANDIDATES = 0  # the export goes to a worker, as a large one does
    RatingFactory()
    response = _admin_client().post(url, data, HTTP_REFERER="http://testserver/modelling/quality/")
    assert response.status_code == 503, response.content[:500]
    assert response["Retry-After"] and response["Cache-Control"] == "no-store"
    assert [t.name for t in response.templates][:2] == ["queue_unavailable.html", "_error.html"]
    body = response.content.decode()
    assert "The work could not be queued" in body
    assert "the broker (redis, named by CELERY_BROKER_URL) did not answer" in body
    assert "celery -A config worker" in body and 'class="site-nav"' in body  # what to do, in the site's layout
    assert 'href="http://testserver/modelling/quality/"' in body  # back where the button was
    assert "Traceback" not in body and "127.0.0.1" not in body
    # Nothing was left waiting for a message that never went out.
    assert not CrossFitRun.objects.exists() and not Job.objects.filter(kind=Job.Kind.EXPORT).exists()
    assert not CorrectionItem.objects.exists()


def test_services_refuse_before_writing_when_the_broker_is_down(broker_down):
    with pytest.raises(EnqueueError) as refused:
        training_run_start(config={}, split={}, created_by=None)
    assert "make run" not in refused.value.advice  # a Redis deployment: start Redis and a worker
    assert any("celery -A config worker" in command for command, _ in refused.value.commands)
    with pytest.raises(EnqueueError):
        crossfit_start(folds=2)
    assert not TrainingRun.objects.exists() and not CrossFitRun.objects.exists()


def test_a_send_that_fails_after_the_commit_fails_the_row_with_the_reason(celery_broker, tmp_path):
    """The broker passes the check, then breaks before the message goes out (the race a preflight cannot close):
    the committed row ends FAILED with the reason instead of waiting for ever."""
    folder = tmp_path / "broker"
    celery_broker("filesystem://", **_filesystem_options(folder))
    with pytest.raises(EnqueueError), transaction.atomic():
        transaction.on_commit(lambda: _break(folder))  # runs before the training run's send, registered later
        training_run_start(config={}, split={}, created_by=None)
    run = TrainingRun.objects.get()
    assert run.status == TrainingRun.Status.FAILED and run.finished_at is not None
    assert "FAILED: The task queue did not take the task (training run)" in run.log


@pytest.mark.parametrize("kind", ["import", "connection test"])
def test_a_table_import_or_connection_test_whose_send_fails_after_the_commit_ends_failed(kind, celery_broker,
                                                                                          tmp_path):
    """Both kinds were registered without their row, so a lost send left them queued for ever (an import then
    refused every new one: "A validation or import of this table is running")."""
    import annotation.services.endpoints  # noqa: F401  (registers the kinds as the worker and web do)
    import annotation.services.importers.table_jobs  # noqa: F401
    from annotation.jobs.registry import enqueue
    from annotation.models import ConnectionTest
    from annotation.services.endpoints import CONNECTION_TEST

    folder = tmp_path / "broker"
    celery_broker("filesystem://", **_filesystem_options(folder))
    with pytest.raises(EnqueueError), transaction.atomic():
        transaction.on_commit(lambda: _break(folder))
        if kind == "import":
            row = Job.objects.create(kind=Job.Kind.IMPORT)
            enqueue(Job.Kind.IMPORT, row.pk)
        else:
            row = ConnectionTest.objects.create(lalm=LALMFactory())
            enqueue(CONNECTION_TEST, row.pk)
    row.refresh_from_db()
    assert row.status == "failed" and row.finished_at is not None
    assert "The task queue did not take the task" in row.error


def test_enqueue_refuses_a_kind_without_a_row_it_could_fail():
    from annotation.jobs.registry import enqueue, kind_register

    kind_register("row-less test kind", task="annotation.tasks.no_such_task")
    with pytest.raises(KeyError, match="has no row registered"):
        enqueue("row-less test kind", 1)


def test_items_whose_message_fails_after_the_commit_end_failed_and_can_be_retried(celery_broker, tmp_path):
    folder = tmp_path / "broker"
    celery_broker("filesystem://", **_filesystem_options(folder))
    benchmark = BenchmarkFactory()
    questions = [QuestionFactory(benchmark=benchmark) for _ in range(3)]
    with pytest.raises(EnqueueError), transaction.atomic():
        job = Job.objects.create(kind=Job.Kind.RATIONALE, benchmark=benchmark, total=3)
        transaction.on_commit(lambda: _break(folder))
        job_start_items(job=job, question_pks=[q.pk for q in questions])
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and job.error == "3 of 3 items failed" and job.failed == 3
    errors = set(JobItem.objects.filter(job=job).values_list("status", "error"))
    assert len(errors) == 1
    status, error = errors.pop()
    assert status == JobItem.Status.FAILED and error.startswith("not sent to a worker: The task queue did not take")


def test_the_filesystem_broker_creates_its_folders_and_keeps_the_message_for_a_later_worker(celery_broker, tmp_path):
    """``manage.py runserver`` alone, no var/broker yet: the message is written and waits for a worker."""
    folder = tmp_path / "fresh" / "broker"
    celery_broker("filesystem://", **_filesystem_options(folder))
    task_send("refinement.tasks.flags_refresh_task")
    assert [path.suffix for path in (folder / "queue").iterdir()] == [".msg"]
    assert (folder / "processed").is_dir() and (folder / "control").is_dir()
