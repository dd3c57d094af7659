"""Stage 1 preparation jobs: start, the work of one item, progress, and the staff pages' reads (README,
Layout: ``annotation/jobs/``).

A job is a ``Job`` row (kind transcribe/rationale/candidates) with one ``JobItem`` per question; how items are
claimed, closed, retried, cancelled and sent again is :mod:`annotation.jobs.items`. This module registers what one
item does (ask the provider, store the result in the transaction that closes the item; skip it when the current
question version already has it) and, for a transcription job that packs short clips, how items are packed into
one message per small batch whose clips fit one Whisper window (``transcription_packs``) and done in one provider
call.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.access import STAFF, require_role
from annotation.jobs.items import (
    ACTIVE_JOB_STATUSES,
    ITEM_TASK,
    item_close,
    item_guarded,
    item_skip,
    job_start_items,
)
from annotation.jobs.registry import ItemKind, kind_register
from annotation.models import LALM, Benchmark, Job, JobItem
from annotation.providers.base import Availability

from .audit import audit_record
from .connection_tests import connection_test_refusal
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
        JobStartError: the kind is not a preparation kind, the provider is unavailable (reason given), the
            LALM's latest connection test failed, an id is unknown, or no question fits.
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
    if lalm is not None and (refusal := connection_test_refusal(lalm=lalm)):
        raise JobStartError(refusal[0].upper() + refusal[1:])
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
        job_start_items(job=job, question_pks=questions)
        audit_record(
            actor=created_by, action="job.start", obj=job, new={"kind": kind, "total": job.total, "params": params}
        )
    return job


def _transcription_groups(*, job: Job, rows: list[tuple[int, float | None]]) -> list[list[int]]:
    """Items of a transcription job packed into messages by their clips' durations (:func:`transcription_packs`)."""
    durations = [float("inf") if seconds is None else seconds for _, seconds in rows]
    return [[rows[index][0] for index in pack] for pack in transcription_packs(durations=durations, params=job.params)]


def _preparation_item_work(*, item: JobItem, token: str, job: Job, question) -> str:
    """One claimed preparation item: skip it if its question's current version has the result, else ask the
    provider and store the result."""
    params = job.params or {}
    if preparation_is_done(kind=job.kind, question=question, lalm=job.lalm, overwrite=params.get("overwrite", False)):
        return item_skip(item=item, token=token)
    result = preparation_run(kind=job.kind, question=question, lalm=job.lalm, params=params)
    return _item_store_result(item=item, token=token, job=job, result=result)


def _transcription_batch(*, job: Job, claims: list[tuple[JobItem, str]]) -> dict[int, str]:
    """A claimed batch of transcription items: skip those already done, transcribe the rest in one provider call
    (short clips packed into one Whisper input) and store each item's result in its own transaction; a batch whose
    provider call fails as a whole marks each of its items failed with the message."""
    outcomes: dict[int, str] = {}
    overwrite = (job.params or {}).get("overwrite", False)
    todo = []
    for item, token in claims:
        if preparation_is_done(kind=job.kind, question=item.question, lalm=None, overwrite=overwrite):
            outcomes[item.pk] = item_skip(item=item, token=token)
        else:
            todo.append((item, token))
    if todo:
        try:
            results = preparation_run_transcripts(
                questions=[item.question for item, _ in todo], params=job.params or {}
            )
        except Exception as error:  # noqa: BLE001 - the whole batch failed: each item fails with the message
            results = [error] * len(todo)
        for (item, token), result in zip(todo, results):
            outcomes[item.pk] = item_guarded(
                item=item, token=token, job=job,
                work=functools.partial(_item_store_result, item=item, token=token, job=job, result=result),
            )
    return outcomes


def _item_store_result(*, item: JobItem, token: str, job: Job, result) -> str:
    """Store a provider's result (or raise the error it is) in the transaction that marks the item done."""
    if isinstance(result, Exception):
        raise result
    with transaction.atomic():
        if not item_close(item=item, token=token, status=JobItem.Status.DONE, usage=result.usage):
            return "lost-claim"
        stored = preparation_store(kind=job.kind, question=item.question, lalm=job.lalm, job=job, result=result)
        field = "result_candidate" if job.kind == Job.Kind.CANDIDATES else "result_version"
        JobItem.objects.filter(pk=item.pk).update(**{field: stored})
    return "done"


kind_register(Job.Kind.TRANSCRIBE, task=ITEM_TASK, item=ItemKind(
    work=_preparation_item_work, batch=_transcription_batch, groups=_transcription_groups))
kind_register(Job.Kind.RATIONALE, task=ITEM_TASK, item=ItemKind(work=_preparation_item_work))
kind_register(Job.Kind.CANDIDATES, task=ITEM_TASK, item=ItemKind(work=_preparation_item_work))


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
    """Jobs of the benchmarks ``user`` reads (``annotation.teams.scope``: an expert's team's; an admin's all) and
    jobs of no benchmark, newest first, with benchmark and LALM joined. Raises ``PermissionDenied`` for
    non-staff."""
    from annotation.teams.scope import readable_q

    require_role(user, *STAFF)
    return (Job.objects.filter(Q(benchmark__isnull=True) | readable_q(user=user, path="benchmark"))
            .select_related("benchmark", "lalm", "created_by").order_by("-created_at", "-pk"))


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
