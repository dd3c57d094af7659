"""Stage 1 jobs: start, process items, retry failed items, cancel, progress (ARCHITECTURE.md, jobs).

A job is a ``Job`` row (kind transcribe/rationale/candidates) with one ``JobItem`` per question and one Celery
message per item (``annotation.tasks.job_item_task``), or, for a transcription job that packs short clips, one
message per small batch of items whose clips fit one Whisper window (``annotation.tasks.job_items_task``; see
``transcription_packs``). Guarantees, per item also inside a batch:

* each item's result is written in the transaction that moves the item from ``running`` to ``done``, guarded by
  the claim token of the execution that holds it, so a duplicated or redelivered message never writes twice;
* an item is claimed with a conditional update (pending, or running under the same Celery message — a redelivery
  after the worker died — or running with a claim older than ``PREPARATION_ITEM_LEASE_S``);
* items already done for the current question version are skipped (see ``preparation_is_done``);
* transient provider errors are retried inside the item by the provider's retry policy; what still fails, and
  every permanent error, marks the item failed with the message; a batch that fails as a whole marks each of its
  items failed with the message (each can be retried).
"""
from __future__ import annotations

import functools
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from annotation.access import STAFF, require_role
from annotation.models import LALM, Benchmark, Job, JobItem
from annotation.providers.base import Availability, ProviderError

from .audit import audit_record
from .preparation import (
    PREPARATION_KINDS,
    preparation_availability,
    preparation_is_done,
    preparation_run,
    preparation_run_transcripts,
    preparation_store,
    questions_for_preparation,
    transcription_pack_params,
    transcription_packs,
)

logger = logging.getLogger(__name__)

ACTIVE_JOB_STATUSES = (Job.Status.QUEUED, Job.Status.RUNNING)
OPEN_ITEM_STATUSES = (JobItem.Status.PENDING, JobItem.Status.RUNNING)


class JobStartError(ValueError):
    """A job cannot be started: unknown kind, provider unavailable (with the reason), no items, bad ids."""


def job_queue(*, kind: str, params: dict) -> str:
    """Celery queue for a job's items: ``PREPARATION_GPU_QUEUE`` for Whisper when set, else the default queue."""
    if kind == Job.Kind.TRANSCRIBE and settings.PREPARATION_GPU_QUEUE:
        return settings.PREPARATION_GPU_QUEUE
    return settings.CELERY_TASK_DEFAULT_QUEUE


def job_start(
    *,
    kind: str,
    benchmark: Benchmark,
    lalm: LALM | None = None,
    external_ids: list[str] | None = None,
    all_modalities: bool = False,
    overwrite: bool = False,
    backend: str = "",
    model: str = "",
    provider: str = "",
    created_by=None,
) -> Job:
    """Create a Stage 1 job and its items and enqueue one Celery task per item (after the commit).

    Args:
        kind: ``transcribe``, ``rationale`` or ``candidates``.
        lalm: the LALM to ask (candidates only).
        external_ids: only these questions (benchmark ids); default all that fit the kind.
        all_modalities: transcribe non-speech questions too.
        overwrite: write a new transcript/rationale even where the current version has one.
        backend, model: transcriber overrides (default ``WHISPER_BACKEND``/``WHISPER_MODEL``).
        provider: rationale provider override (default ``RATIONALE_PROVIDER``).

    Returns:
        The job (status queued, ``total`` = number of items).

    Raises:
        JobStartError: the kind is not a preparation kind, the provider is unavailable (reason given), an id is
            unknown, or no question fits.
    """
    if kind not in PREPARATION_KINDS:
        raise JobStartError(f"{kind!r} is not one of {', '.join(PREPARATION_KINDS)}")
    if kind != Job.Kind.CANDIDATES:
        lalm = None
    params = {"all_modalities": all_modalities, "overwrite": overwrite}
    params.update({k: v for k, v in {"backend": backend, "model": model, "provider": provider}.items() if v})
    if external_ids:
        params["external_ids"] = list(external_ids)
    if kind == Job.Kind.TRANSCRIBE:
        params.update(transcription_pack_params(backend=backend))
    availability = preparation_availability(kind=kind, lalm=lalm, params=params)
    if not availability.ok:
        raise JobStartError(f"{availability.name} is unavailable: {availability.reason}")
    params["provider_name"] = availability.name
    try:
        questions = list(
            questions_for_preparation(
                kind=kind, benchmark=benchmark, external_ids=external_ids, all_modalities=all_modalities
            ).values_list("pk", flat=True)
        )
    except ValueError as error:
        raise JobStartError(str(error)) from error
    if not questions:
        raise JobStartError(f"no question of {benchmark.name!r} fits a {kind} job")
    params["queue"] = job_queue(kind=kind, params=params)
    with transaction.atomic():
        job = Job.objects.create(
            kind=kind, benchmark=benchmark, lalm=lalm, params=params, total=len(questions), created_by=created_by
        )
        JobItem.objects.bulk_create([JobItem(job=job, question_id=pk) for pk in questions])
        _enqueue(job=job, items=JobItem.objects.filter(job=job))
        audit_record(actor=created_by, action="job.start", obj=job, new={"kind": kind, "total": job.total, "params": params})
    return job


def _enqueue(*, job: Job, items) -> int:
    """Send ``items`` once the transaction commits: one message per item, or per small batch of a transcription job
    that packs clips (:func:`transcription_packs` over the clips' durations). Every item of a message gets that
    message's fresh Celery task id, so a redelivered message can reclaim its items. Returns the number of items."""
    from annotation.tasks import job_item_task, job_items_task

    rows = list(items.order_by("pk").values_list("pk", "question__audio__duration_s"))
    if job.kind == Job.Kind.TRANSCRIBE:
        durations = [float("inf") if seconds is None else seconds for _, seconds in rows]
        groups = [[rows[index][0] for index in pack] for pack in transcription_packs(durations=durations, params=job.params)]
    else:
        groups = [[item_pk] for item_pk, _ in rows]
    messages = []
    for group in groups:
        task_id = str(uuid.uuid4())
        JobItem.objects.filter(pk__in=group).update(task_id=task_id)
        messages.append((group, task_id))
    queue = job.params.get("queue") or settings.CELERY_TASK_DEFAULT_QUEUE

    def send():
        for group, task_id in messages:
            if len(group) == 1:
                job_item_task.apply_async(args=[group[0]], task_id=task_id, queue=queue)
            else:
                job_items_task.apply_async(args=[group], task_id=task_id, queue=queue)

    transaction.on_commit(send)
    return len(rows)


def _job_finish_if_complete(*, job_pk: int) -> None:
    """Close the job when no item is pending or running; call after the item's transaction committed."""
    if JobItem.objects.filter(job_id=job_pk, status__in=OPEN_ITEM_STATUSES).exists():
        return
    job = Job.objects.get(pk=job_pk)
    status = Job.Status.FAILED if job.failed else Job.Status.DONE
    error = f"{job.failed} of {job.total} items failed" if job.failed else ""
    Job.objects.filter(pk=job_pk, status__in=ACTIVE_JOB_STATUSES).update(
        status=status, finished_at=timezone.now(), heartbeat_at=timezone.now(), error=error
    )


def _item_close(*, item: JobItem, token: str, status: str, error: str = "", usage: dict | None = None, **result) -> bool:
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


def job_item_claim(*, item_pk: int, task_id: str) -> str | None:
    """Claim a job item for this execution; returns the claim token, or None when it is not ours to do.

    Claimable: pending; running under the same Celery message (redelivered after its worker died); or running with
    a claim older than ``PREPARATION_ITEM_LEASE_S``. Never for a cancelled job.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.PREPARATION_ITEM_LEASE_S)
    token = uuid.uuid4().hex
    claimable = (
        Q(status=JobItem.Status.PENDING)
        | Q(status=JobItem.Status.RUNNING, task_id=task_id)
        | Q(status=JobItem.Status.RUNNING, claimed_at__lt=stale)
    )
    claimed = (
        JobItem.objects.filter(claimable, pk=item_pk)
        .exclude(job__status=Job.Status.CANCELLED)
        .update(status=JobItem.Status.RUNNING, claim_token=token, claimed_at=now, task_id=task_id, attempts=F("attempts") + 1)
    )
    return token if claimed else None


def job_item_process(*, item_pk: int, task_id: str) -> str:
    """Do one job item: claim it, skip it if already done, call the provider, store the result.

    Returns:
        The outcome: ``done``, ``skipped``, ``failed``, ``not-claimed`` (done elsewhere, cancelled or gone) or
        ``lost-claim`` (another execution took the item over; it will write the result).
    """
    token = job_item_claim(item_pk=item_pk, task_id=task_id)
    if token is None:
        return "not-claimed"
    item = JobItem.objects.select_related("job__lalm", "question__current_version", "question__audio").get(pk=item_pk)
    job, question = item.job, item.question
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING, started_at=now)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=now)
    outcome = _item_work(item=item, token=token, job=job, question=question)
    _job_finish_if_complete(job_pk=job.pk)
    return outcome


def job_items_process(*, item_pks: list[int], task_id: str) -> dict[int, str]:
    """Do a small batch of items of one job sent as one message: claim each, skip those already done, transcribe
    the rest in one provider call (short clips packed into one Whisper input) and store each item's result in its
    own transaction.

    Items of other kinds are done one by one as :func:`job_item_process` does. A batch whose provider call fails as
    a whole marks each of its items failed with the message.

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
    items = JobItem.objects.select_related("job__lalm", "question__current_version", "question__audio").in_bulk(list(claims))
    job = items[next(iter(claims))].job
    now = timezone.now()
    Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED).update(status=Job.Status.RUNNING, started_at=now)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=now)
    todo = []
    for item_pk, token in claims.items():
        item = items[item_pk]
        if job.kind != Job.Kind.TRANSCRIBE:
            outcomes[item_pk] = _item_work(item=item, token=token, job=job, question=item.question)
        elif preparation_is_done(kind=job.kind, question=item.question, lalm=None,
                                 overwrite=(job.params or {}).get("overwrite", False)):
            outcomes[item_pk] = _item_skip(item=item, token=token)
        else:
            todo.append((item, token))
    if todo:
        try:
            results = preparation_run_transcripts(questions=[item.question for item, _ in todo], params=job.params or {})
        except Exception as error:  # noqa: BLE001 - the whole batch failed: each item fails with the message
            results = [error] * len(todo)
        for (item, token), result in zip(todo, results):
            outcomes[item.pk] = _item_guarded(
                item=item, token=token, job=job,
                work=functools.partial(_item_store_result, item=item, token=token, job=job, result=result),
            )
    _job_finish_if_complete(job_pk=job.pk)
    return outcomes


def _item_work(*, item: JobItem, token: str, job: Job, question) -> str:
    def work() -> str:
        if job.kind == Job.Kind.JUDGE:
            # Judge runs reuse this machinery; their per-question work lives in annotation.services.judging.
            from .judging import judge_item_work

            return judge_item_work(item=item, token=token, job=job, question=question)
        params = job.params or {}
        if preparation_is_done(kind=job.kind, question=question, lalm=job.lalm, overwrite=params.get("overwrite", False)):
            return _item_skip(item=item, token=token)
        result = preparation_run(kind=job.kind, question=question, lalm=job.lalm, params=params)
        return _item_store_result(item=item, token=token, job=job, result=result)

    return _item_guarded(item=item, token=token, job=job, work=work)


def _item_skip(*, item: JobItem, token: str) -> str:
    return "skipped" if _item_close(item=item, token=token, status=JobItem.Status.SKIPPED) else "lost-claim"


def _item_store_result(*, item: JobItem, token: str, job: Job, result) -> str:
    """Store a provider's result (or raise the error it is) in the transaction that marks the item done."""
    if isinstance(result, Exception):
        raise result
    with transaction.atomic():
        if not _item_close(item=item, token=token, status=JobItem.Status.DONE, usage=result.usage):
            return "lost-claim"
        stored = preparation_store(kind=job.kind, question=item.question, lalm=job.lalm, job=job, result=result)
        field = "result_candidate" if job.kind == Job.Kind.CANDIDATES else "result_version"
        JobItem.objects.filter(pk=item.pk).update(**{field: stored})
    return "done"


def _item_guarded(*, item: JobItem, token: str, job: Job, work) -> str:
    """Run ``work()`` (returns the outcome) for a claimed item; an error it raises decides the outcome instead:
    skipped on an ``IntegrityError``, failed with the message on a provider or unexpected error."""
    try:
        return work()
    except IntegrityError:
        # The LALM's answer for this version appeared meanwhile (an import or another job): nothing left to do.
        return _item_skip(item=item, token=token)
    except ProviderError as error:
        message = str(error)
    except Exception as error:  # noqa: BLE001 - an unexpected error must not leave the item running forever
        logger.exception("job %s item %s failed unexpectedly", job.pk, item.pk)
        message = f"unexpected error: {type(error).__name__}: {error}"
    logger.info("job %s item %s failed: %s", job.pk, item.pk, message)
    return "failed" if _item_close(item=item, token=token, status=JobItem.Status.FAILED, error=message) else "lost-claim"


def job_items_requeue_stale() -> int:
    """Send again the items whose worker went silent: running, claimed more than ``PREPARATION_ITEM_LEASE_S`` ago.

    Beat runs this (``job_items_requeue_stale_task``) for brokers that lose a dead worker's message (kombu's
    ``filesystem://``); the lease is longer than the task's hard time limit, so the old execution is gone.
    Returns the number of items sent again.
    """
    stale = timezone.now() - timedelta(seconds=settings.PREPARATION_ITEM_LEASE_S)
    sent = 0
    jobs = Job.objects.filter(
        status__in=ACTIVE_JOB_STATUSES, items__status=JobItem.Status.RUNNING, items__claimed_at__lt=stale
    ).distinct()
    for job in jobs:
        with transaction.atomic():
            items = JobItem.objects.filter(job=job, status=JobItem.Status.RUNNING, claimed_at__lt=stale)
            sent += _enqueue(job=job, items=items)
    return sent


def job_retry_failed(*, job: Job, actor=None) -> int:
    """Send failed items, and items stuck pending or running past the lease, again; reopen the job.

    ``actor`` (the user, None for the system) is written to the audit log (``job.retry``) when items are sent.

    Returns:
        The number of items enqueued again (0 for a cancelled job, which stays cancelled).
    """
    stale = timezone.now() - timedelta(seconds=settings.PREPARATION_ITEM_LEASE_S)
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
        sent = _enqueue(job=job, items=items)
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


@dataclass(frozen=True)
class JobProgress:
    """A job's progress for the progress page.

    ``done`` includes ``skipped`` items; ``percent`` is (done + failed) / total in 0–100; ``rate_per_min`` is
    finished items per minute since the job started (None before); ``eta_s`` is seconds left at that rate.
    """

    total: int
    done: int
    skipped: int
    failed: int
    running: int
    pending: int
    cancelled: int
    percent: float
    rate_per_min: float | None
    eta_s: float | None


def job_progress(*, job: Job) -> JobProgress:
    """Progress of ``job`` counted from its items (one aggregate query)."""
    counts = JobItem.objects.filter(job=job).aggregate(
        **{status: Count("pk", filter=Q(status=status)) for status in JobItem.Status.values}
    )
    done = counts["done"] + counts["skipped"]
    finished = done + counts["failed"]
    total = job.total or sum(counts.values())
    percent = 100.0 * finished / total if total else 100.0
    rate = eta = None
    if job.started_at and finished:
        end = job.finished_at or timezone.now()
        minutes = max((end - job.started_at).total_seconds() / 60, 1e-6)
        rate = finished / minutes
        remaining = counts["pending"] + counts["running"]
        eta = remaining / rate * 60 if job.status in ACTIVE_JOB_STATUSES else 0.0
    return JobProgress(
        total=total,
        done=done,
        skipped=counts["skipped"],
        failed=counts["failed"],
        running=counts["running"],
        pending=counts["pending"],
        cancelled=counts["cancelled"],
        percent=round(percent, 1),
        rate_per_min=round(rate, 2) if rate is not None else None,
        eta_s=round(eta, 1) if eta is not None else None,
    )


# --- selectors for the staff pages --------------------------------------------------------------------------
def job_list_for_staff(*, user):
    """All jobs, newest first, with benchmark and LALM joined. Raises ``PermissionDenied`` for non-staff."""
    require_role(user, *STAFF)
    return Job.objects.select_related("benchmark", "lalm", "created_by").order_by("-created_at", "-pk")


def job_for_staff(*, user, job_pk: int) -> Job:
    """One job. Raises ``PermissionDenied`` for non-staff, ``Job.DoesNotExist`` when absent."""
    return job_list_for_staff(user=user).get(pk=job_pk)


def provider_availabilities() -> list[tuple[str, Availability]]:
    """(role, availability) for the transcriber, the rationale writer and every generating LALM, for the pages."""
    from annotation.providers.answers import answer_availability

    rows = [
        ("Transcripts", preparation_availability(kind=Job.Kind.TRANSCRIBE)),
        ("Rationales", preparation_availability(kind=Job.Kind.RATIONALE)),
    ]
    for lalm in LALM.objects.exclude(provider=LALM.Provider.IMPORT).order_by("name"):
        rows.append(("Candidate answers", answer_availability(lalm=lalm)))
    return rows
