"""The life of a job made of items (Stage 1 preparation, LLM judge runs): one ``Job`` row, one ``JobItem`` per
question, one Celery message per item or per small batch (README, Layout: ``annotation/jobs/``).

Guarantees, per item also inside a batch:

* each item's result is written in the transaction that moves the item from ``running`` to ``done``
  (:func:`item_close`), guarded by the claim token of the execution that holds it, so a duplicated or redelivered
  message never writes twice;
* an item is claimed with a conditional update (pending, or running under the same Celery message — a redelivery
  after the worker died — or running with a claim older than ``PREPARATION_ITEM_LEASE_S``), never for a cancelled
  job (:func:`job_item_claim`);
* what an item does is its kind's registered work (:mod:`annotation.jobs.registry`); an error it raises fails the
  item with the message (a ``ProviderError`` after the provider's own retries, or any unexpected error), and an
  ``IntegrityError`` skips it (the result appeared meanwhile);
* the job ends ``done``, or ``failed`` with "<n> of <total> items failed", when no item is open
  (:func:`job_finish_if_complete`); failed and stuck items can be sent again (:func:`job_retry_failed`), items
  whose worker went silent are sent again by beat (:func:`job_items_requeue_stale`), and :func:`job_cancel` stops the
  pending ones.
"""
from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotation.models import Job, JobItem
from annotation.providers.base import ProviderError
from annotation.services.audit import audit_record
from config.observability import job_log_context

from .registry import EnqueueError, broker_check, kind_items, task_send

logger = logging.getLogger(__name__)

ACTIVE_JOB_STATUSES = (Job.Status.QUEUED, Job.Status.RUNNING)
OPEN_ITEM_STATUSES = (JobItem.Status.PENDING, JobItem.Status.RUNNING)
#: The Celery tasks that work items: one item per message, or a batch of items packed into one message.
ITEM_TASK = "annotation.tasks.job_item_task"
BATCH_TASK = "annotation.tasks.job_items_task"
#: Selects the item with what its work reads.
_ITEM_RELATED = ("job__lalm", "question__current_version", "question__audio")


def _lease_start():
    return timezone.now() - timedelta(seconds=settings.PREPARATION_ITEM_LEASE_S)


def items_enqueue(*, job: Job, items) -> int:
    """Send ``items`` once the transaction commits: one message per item, or per batch where the job's kind packs
    items (its registered ``groups``, e.g. short clips into one Whisper window), on the job's queue
    (``params["queue"]``, else the default queue). Every item of a message gets that message's fresh Celery task id,
    so a redelivered message can reclaim its items. Returns the number of items.

    Call inside the job's transaction. The broker is checked first (:func:`~annotation.jobs.registry.broker_check`):
    when it is not there, ``EnqueueError`` rolls the transaction back and no job is left waiting. Pending items whose
    message still fails after the commit end failed with the reason ("Retry failed items" sends them again), and
    ``EnqueueError`` propagates from the commit.
    """
    broker_check()
    rows = list(items.order_by("pk").values_list("pk", "question__audio__duration_s"))
    kind = kind_items(job.kind)
    groups = kind.groups(job=job, rows=rows) if kind.groups else [[item_pk] for item_pk, _ in rows]
    messages = []
    for group in groups:
        task_id = str(uuid.uuid4())
        JobItem.objects.filter(pk__in=group).update(task_id=task_id)
        messages.append((group, task_id))
    queue = job.params.get("queue") or settings.CELERY_TASK_DEFAULT_QUEUE

    def send():
        for sent, (group, task_id) in enumerate(messages):
            try:
                if len(group) == 1:
                    task_send(ITEM_TASK, group[0], task_id=task_id, queue=queue)
                else:
                    task_send(BATCH_TASK, group, task_id=task_id, queue=queue)
            except EnqueueError as error:
                _items_fail_unsent(job_pk=job.pk, item_pks=[pk for g, _ in messages[sent:] for pk in g],
                                   reason=str(error))
                raise

    transaction.on_commit(send)
    return len(rows)


def _items_fail_unsent(*, job_pk: int, item_pks: list[int], reason: str) -> None:
    """Fail the pending items among ``item_pks`` whose message could not be sent, count them on the job, and close
    the job when nothing else is open."""
    now = timezone.now()
    with transaction.atomic():
        n = JobItem.objects.filter(pk__in=item_pks, status=JobItem.Status.PENDING).update(
            status=JobItem.Status.FAILED, error=f"not sent to a worker: {reason}"[:5000], finished_at=now)
        Job.objects.filter(pk=job_pk).update(failed=F("failed") + n)
    job_finish_if_complete(job_pk=job_pk)


def job_item_claim(*, item_pk: int, task_id: str) -> str | None:
    """Claim a job item for this execution; returns the claim token, or None when it is not ours to do.

    Claimable: pending; running under the same Celery message (redelivered after its worker died); or running with
    a claim older than ``PREPARATION_ITEM_LEASE_S``. Never for a cancelled job.
    """
    token = uuid.uuid4().hex
    claimable = (
        Q(status=JobItem.Status.PENDING)
        | Q(status=JobItem.Status.RUNNING, task_id=task_id)
        | Q(status=JobItem.Status.RUNNING, claimed_at__lt=_lease_start())
    )
    claimed = (
        JobItem.objects.filter(claimable, pk=item_pk)
        .exclude(job__status=Job.Status.CANCELLED)
        .update(status=JobItem.Status.RUNNING, claim_token=token, claimed_at=timezone.now(), task_id=task_id,
                attempts=F("attempts") + 1)
    )
    return token if claimed else None


def item_close(*, item: JobItem, token: str, status: str, error: str = "", usage: dict | None = None, **result) -> bool:
    """Move a running item held by ``token`` to ``status`` and count it on the job; False if the claim was lost.

    Call inside a transaction when a result is written with it.
    """
    now = timezone.now()
    moved = JobItem.objects.filter(pk=item.pk, status=JobItem.Status.RUNNING, claim_token=token).update(
        status=status, error=error[:5000], usage=usage or {}, finished_at=now, **result
    )
    if not moved:
        return False
    counter = "failed" if status == JobItem.Status.FAILED else "done"
    Job.objects.filter(pk=item.job_id).update(**{counter: F(counter) + 1}, heartbeat_at=now)
    return True


def item_skip(*, item: JobItem, token: str) -> str:
    """Close a claimed item as skipped (nothing left to do for it); returns ``skipped`` or ``lost-claim``."""
    return "skipped" if item_close(item=item, token=token, status=JobItem.Status.SKIPPED) else "lost-claim"


def item_guarded(*, item: JobItem, token: str, job: Job, work) -> str:
    """Run ``work()`` (returns the outcome) for a claimed item; an error it raises decides the outcome instead:
    skipped on an ``IntegrityError``, failed with the message on a provider or unexpected error."""
    try:
        return work()
    except IntegrityError:
        # The item's result appeared meanwhile (an import or another job): nothing left to do.
        return item_skip(item=item, token=token)
    except ProviderError as error:
        message = str(error)
    except Exception as error:  # noqa: BLE001 - an unexpected error must not leave the item running forever
        logger.exception("job %s item %s failed unexpectedly", job.pk, item.pk)
        message = f"unexpected error: {type(error).__name__}: {error}"
    logger.info("job %s item %s failed: %s", job.pk, item.pk, message)
    return "failed" if item_close(item=item, token=token, status=JobItem.Status.FAILED, error=message) else "lost-claim"


def _job_started(job: Job) -> None:
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING, started_at=now)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=now)


def job_finish_if_complete(*, job_pk: int) -> None:
    """Close the job when no item is pending or running; call after the item's transaction committed."""
    if JobItem.objects.filter(job_id=job_pk, status__in=OPEN_ITEM_STATUSES).exists():
        return
    job = Job.objects.get(pk=job_pk)
    status = Job.Status.FAILED if job.failed else Job.Status.DONE
    error = f"{job.failed} of {job.total} items failed" if job.failed else ""
    Job.objects.filter(pk=job_pk, status__in=ACTIVE_JOB_STATUSES).update(
        status=status, finished_at=timezone.now(), heartbeat_at=timezone.now(), error=error
    )


def job_item_process(*, item_pk: int, task_id: str) -> str:
    """Do one job item: claim it, run its kind's work guarded, close the job when it was the last open item.

    Returns:
        The outcome: ``done``, ``skipped``, ``failed``, ``not-claimed`` (done elsewhere, cancelled or gone) or
        ``lost-claim`` (another execution took the item over; it will write the result).
    """
    token = job_item_claim(item_pk=item_pk, task_id=task_id)
    if token is None:
        return "not-claimed"
    item = JobItem.objects.select_related(*_ITEM_RELATED).get(pk=item_pk)
    job = item.job
    with job_log_context(job.pk, kind=job.kind):
        _job_started(job)
        work = kind_items(job.kind).work
        outcome = item_guarded(item=item, token=token, job=job,
                               work=lambda: work(item=item, token=token, job=job, question=item.question))
        job_finish_if_complete(job_pk=job.pk)
    return outcome


def job_items_process(*, item_pks: list[int], task_id: str) -> dict[int, str]:
    """Do a batch of items of one job sent as one message: claim each, then run the kind's batch work over the
    claimed ones (or each one's work as :func:`job_item_process` does).

    Returns:
        ``{item pk: outcome}`` with the outcomes of :func:`job_item_process`.
    """
    outcomes: dict[int, str] = {}
    claims: dict[int, str] = {}
    for item_pk in item_pks:
        token = job_item_claim(item_pk=item_pk, task_id=task_id)
        if token is None:
            outcomes[item_pk] = "not-claimed"
        else:
            claims[item_pk] = token
    if not claims:
        return outcomes
    items = JobItem.objects.select_related(*_ITEM_RELATED).in_bulk(list(claims))
    job = items[next(iter(claims))].job
    with job_log_context(job.pk, kind=job.kind):
        _job_started(job)
        kind = kind_items(job.kind)
        pairs = [(items[pk], token) for pk, token in claims.items()]
        if kind.batch is not None:
            outcomes.update(kind.batch(job=job, claims=pairs))
        else:
            for item, token in pairs:
                outcomes[item.pk] = item_guarded(
                    item=item, token=token, job=job,
                    work=lambda item=item, token=token: kind.work(
                        item=item, token=token, job=job, question=item.question
                    ),
                )
        job_finish_if_complete(job_pk=job.pk)
    return outcomes


def job_items_requeue_stale() -> int:
    """Send again the items whose worker went silent: running, claimed more than ``PREPARATION_ITEM_LEASE_S`` ago.

    Beat runs this (``job_items_requeue_stale_task``) for brokers that lose a dead worker's message (kombu's
    ``filesystem://``); the lease is longer than the task's hard time limit, so the old execution is gone.
    Returns the number of items sent again.
    """
    stale = _lease_start()
    sent = 0
    jobs = Job.objects.filter(
        status__in=ACTIVE_JOB_STATUSES, items__status=JobItem.Status.RUNNING, items__claimed_at__lt=stale
    ).distinct()
    for job in jobs:
        with transaction.atomic():
            items = JobItem.objects.filter(job=job, status=JobItem.Status.RUNNING, claimed_at__lt=stale)
            sent += items_enqueue(job=job, items=items)
    return sent


def job_retry_failed(*, job: Job, actor=None) -> int:
    """Send failed items, and items stuck pending or running past the lease, again; reopen the job.

    ``actor`` (the user, None for the system) is written to the audit log (``job.retry``) when items are sent.

    Returns:
        The number of items enqueued again (0 for a cancelled job, which stays cancelled).
    """
    stale = _lease_start()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.status == Job.Status.CANCELLED:
            return 0
        failed = job.items.filter(status=JobItem.Status.FAILED)
        n_failed = failed.update(status=JobItem.Status.PENDING, error="", claim_token="")
        stuck = job.items.filter(
            Q(status=JobItem.Status.PENDING) | Q(status=JobItem.Status.RUNNING, claimed_at__lt=stale)
        )
        stuck.filter(status=JobItem.Status.RUNNING).update(status=JobItem.Status.PENDING, claim_token="")
        items = job.items.filter(status=JobItem.Status.PENDING)
        if not items.exists():
            return 0
        Job.objects.filter(pk=job.pk).update(
            failed=F("failed") - n_failed, status=Job.Status.RUNNING, finished_at=None, error=""
        )
        sent = items_enqueue(job=job, items=items)
        audit_record(actor=actor, action="job.retry", obj=job, old={"status": job.status},
                     new={"status": Job.Status.RUNNING, "items_sent": sent})
        return sent


def job_cancel(*, job: Job, actor=None) -> int:
    """Cancel a queued or running job: pending items become cancelled (items already running finish).

    ``actor`` (the user, None for the system) is written to the audit log (``job.cancel``, old → new status).

    Returns:
        The number of items cancelled (0 when the job had already ended).
    """
    with transaction.atomic():
        ended = Job.objects.filter(pk=job.pk, status__in=ACTIVE_JOB_STATUSES).update(
            status=Job.Status.CANCELLED, finished_at=timezone.now(), error="cancelled"
        )
        if not ended:
            return 0
        cancelled = JobItem.objects.filter(job_id=job.pk, status=JobItem.Status.PENDING).update(
            status=JobItem.Status.CANCELLED, finished_at=timezone.now()
        )
        audit_record(actor=actor, action="job.cancel", obj=job, old={"status": job.status},
                     new={"status": Job.Status.CANCELLED, "items_cancelled": cancelled})
        return cancelled


def job_start_items(*, job: Job, question_pks: list[int]) -> int:
    """Create one pending item per question of a just-created job and send them after the commit (call inside the
    job's transaction); returns how many."""
    JobItem.objects.bulk_create([JobItem(job=job, question_id=pk) for pk in question_pks])
    return items_enqueue(job=job, items=JobItem.objects.filter(job=job))
