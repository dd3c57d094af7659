"""Celery tasks of the annotation app: thin wrappers that call one service each."""
from celery import shared_task

from annotation.jobs.items import job_item_process, job_items_process, job_items_requeue_stale
from annotation.services.assignment import assignment_expire_stale
from annotation.services.endpoints import connection_test_run, connection_tests_fail_stale
from annotation.services.exports import export_run, exports_reclaim_stale
from annotation.services.importers.table_jobs import table_import_run, table_imports_fail_stale


@shared_task(ignore_result=True)
def assignment_expire_task() -> int:
    """Expire open assignments past their ``expires_at`` (beat runs it every 60 s); returns how many."""
    return assignment_expire_stale()


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=1800, time_limit=1900)
def job_item_task(self, job_item_pk: int) -> str:
    """Do one Stage 1 or judge job item (transcript, rationale, candidate answer, judge ratings); returns the
    outcome.

    Re-runnable: the service claims the item conditionally, so a redelivered message after a worker died, or a
    duplicate, never writes a second result.
    """
    return job_item_process(item_pk=job_item_pk, task_id=self.request.id)


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=1800, time_limit=1900)
def job_items_task(self, job_item_pks: list[int]) -> dict[int, str]:
    """Do a small batch of Stage 1 job items in one provider call (short clips packed into one Whisper input);
    returns each item's outcome.

    Re-runnable like ``job_item_task``: every item is claimed conditionally under this message's id and its result
    written in its own transaction.
    """
    return job_items_process(item_pks=job_item_pks, task_id=self.request.id)


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=3600, time_limit=3700)
def export_job_task(job_pk: int) -> str:
    """Run one dataset or benchmark export job (``Job(kind="export")``); returns its final status.

    Re-runnable: the service claims the job with a conditional update, so a duplicate message does nothing.
    """
    return export_run(job_pk=job_pk)


@shared_task(ignore_result=True)
def job_items_requeue_stale_task() -> int:
    """Send again Stage 1 job items whose worker went silent past the lease (beat, every 5 minutes)."""
    return job_items_requeue_stale()


@shared_task(ignore_result=True)
def exports_reclaim_stale_task() -> int:
    """Send again (or fail) export jobs whose worker went silent past ``EXPORT_LEASE_S`` (beat, every 5 minutes)."""
    return exports_reclaim_stale()


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=300, time_limit=330)
def connection_test_task(self, connection_test_pk: int) -> str:
    """Send one LALM's or judge's model one real request and store the answer or the error (the "test connection"
    button); returns the test's final status, or "gone" for a duplicate message or a deleted row."""
    test = connection_test_run(test_pk=connection_test_pk, task_id=self.request.id)
    return test.status if test is not None else "gone"


@shared_task(ignore_result=True)
def connection_tests_fail_stale_task() -> int:
    """Fail connection tests no worker took, or whose worker died, within ``CONNECTION_TEST_LOST_AFTER_S`` (beat,
    every minute)."""
    return connection_tests_fail_stale()


@shared_task(acks_late=True, ignore_result=True, soft_time_limit=3600, time_limit=3700)
def table_import_job_task(job_pk: int) -> str:
    """Run one table validation or import job (``Job(kind="import")``); returns its final status.

    Re-runnable: the service claims the job with a conditional update, so a duplicate message does nothing.
    """
    return table_import_run(job_pk=job_pk)


@shared_task(ignore_result=True)
def table_imports_fail_stale_task() -> int:
    """Fail table imports whose worker went silent past ``IMPORT_LEASE_S`` (beat, every 5 minutes)."""
    return table_imports_fail_stale()
