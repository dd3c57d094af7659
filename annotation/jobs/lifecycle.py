"""The life of a long job kept as one row: claim, heartbeat, finish, fail, cancel, fail when silent.

Generic over the run models' common fields: ``status`` (``queued`` → ``running`` → ``done`` / ``failed`` /
``cancelled``, the values of ``Job.Status`` and ``modelling.TrainingRun.Status``), ``started_at``,
``heartbeat_at``, ``finished_at`` and ``task_id``; ``log`` where the model has one (:func:`run_log`). Every state
change is a conditional update on the status it leaves, so a duplicated or redelivered message (Celery delivers
a message again when the worker holding it died: ``acks_late``), a user's cancel and the stale reaper never
overwrite each other; a run whose worker died without a word (killed at the hard time limit, out of memory, the
machine gone) keeps no heartbeat, and :func:`runs_fail_stale` ends it. Used by export jobs
(``annotation.services.exports``), ORCA training runs and cross-fits (``modelling``); Stage 1 and judge items,
which are many rows per job, live in :mod:`annotation.jobs.items`.
"""
from __future__ import annotations

import logging
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db.models import F, Model, Value
from django.db.models.functions import Concat
from django.utils import timezone

from config.observability import job_log_context

logger = logging.getLogger(__name__)

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
ACTIVE = (QUEUED, RUNNING)
#: Seconds between heartbeat writes (and cancellation checks) of a long computation (ORCA training, cross-fits).
HEARTBEAT_EVERY_S = 10.0
#: Seconds a queued job, run or test may wait before its panel asks whether a worker is running (an idle worker
#: takes a message within a second or two; 15 s leaves room for a busy one without leaving a newcomer guessing).
WAITING_FOR_WORKER_S = 15


def run_waiting_for_worker(*, queued_at: datetime | None, now: datetime | None = None) -> bool:
    """True when a row queued at ``queued_at`` (None: not queued, e.g. running) has waited more than
    :data:`WAITING_FOR_WORKER_S` seconds: no worker reads its queue, or all are busy. Pages then show
    ``templates/_waiting_for_worker.html`` (every job panel, through ``{% load jobs %}``'s ``waiting_for_worker``
    filter; the dashboard's running work)."""
    return queued_at is not None and (now or timezone.now()) - queued_at > timedelta(seconds=WAITING_FOR_WORKER_S)


class RunStopped(Exception):
    """Raised inside a run's work when its row is no longer running (a user cancelled it); ends the work early."""


def run_claim(model: type[Model], pk: int, *, task_id: str | None = None, **match) -> bool:
    """QUEUED → RUNNING with ``started_at`` and ``heartbeat_at`` now (and ``task_id`` when given); False when the
    row is not queued (a duplicate or redelivered message, a cancelled or finished run, or gone). ``match``
    narrows the row further (e.g. ``kind="export"``)."""
    now = timezone.now()
    fields = {"status": RUNNING, "started_at": now, "heartbeat_at": now}
    if task_id is not None:
        fields["task_id"] = task_id
    return model.objects.filter(pk=pk, status=QUEUED, **match).update(**fields) == 1


def run_heartbeat(model: type[Model], pk: int, **fields) -> None:
    """Write ``heartbeat_at`` (and ``fields``, e.g. progress) on a running row.

    Raises:
        RunStopped: the row is no longer running (cancelled by a user, or failed by the stale reaper), so the
            work stops at its next heartbeat.
    """
    if not model.objects.filter(pk=pk, status=RUNNING).update(heartbeat_at=timezone.now(), **fields):
        raise RunStopped(f"{model._meta.verbose_name} {pk} is no longer running")


def run_finish(model: type[Model], pk: int, **fields) -> bool:
    """RUNNING → DONE with ``finished_at``/``heartbeat_at`` now and ``fields``; False when it was cancelled
    meanwhile."""
    now = timezone.now()
    return model.objects.filter(pk=pk, status=RUNNING).update(
        status=DONE, finished_at=now, heartbeat_at=now, **fields
    ) == 1


def run_fail(model: type[Model], pk: int, **fields) -> bool:
    """RUNNING → FAILED with ``finished_at`` now and ``fields`` (e.g. ``error``); False when it had already ended."""
    return model.objects.filter(pk=pk, status=RUNNING).update(status=FAILED, finished_at=timezone.now(), **fields) == 1


def run_fail_unsent(model: type[Model], pk: int, *, reason: str) -> bool:
    """QUEUED → FAILED when the row's task message could not be sent (the broker refused it after the row was
    committed): ``finished_at`` now, ``reason`` in its ``error`` field or, for models with a ``log``, as the log's
    "FAILED: <reason>" line. False when the row was no longer queued (a worker got an earlier message)."""
    names = {f.name for f in model._meta.get_fields()}
    fields = {"status": FAILED}
    if "finished_at" in names:
        fields["finished_at"] = timezone.now()
    if "error" in names:
        fields["error"] = reason
    if not model.objects.filter(pk=pk, status=QUEUED).update(**fields):
        return False
    if "log" in names:
        run_log(model, pk, f"FAILED: {reason}")
    return True


def run_cancel(model: type[Model], pk: int, **fields) -> str | None:
    """QUEUED or RUNNING → CANCELLED with ``finished_at`` now and ``fields``; returns the status it had, or None
    when it had already ended. A queued run is then never claimed; a running one stops at its next heartbeat."""
    before = model.objects.filter(pk=pk).values_list("status", flat=True).first()
    if not model.objects.filter(pk=pk, status__in=ACTIVE).update(
        status=CANCELLED, finished_at=timezone.now(), **fields
    ):
        return None
    return before


def run_log(model: type[Model], pk: int, line: str) -> None:
    """Append ``"<UTC time> <line>"`` to the row's ``log`` in the database (no read-modify-write race)."""
    stamp = timezone.now().strftime("%Y-%m-%d %H:%M:%S")
    model.objects.filter(pk=pk).update(log=Concat(F("log"), Value(f"{stamp} {line}\n")))


def run_execute(model: type[Model], pk: int, *, task_id: str, work: Callable[[Model], None], what: str):
    """Claim a queued row and run ``work(row)`` under its log context; returns the row as it ended, or None when it
    was not claimable.

    ``work`` ends the row DONE itself (:func:`run_finish`). :class:`RunStopped` (a cancel) logs "stopped: the
    <what> was cancelled" and sets ``finished_at``; any other exception fails the row with the message and
    traceback in its log. Log records of the work carry the row's id and model name (``job_log_context``).
    """
    if not run_claim(model, pk, task_id=task_id):
        return None
    row = model.objects.get(pk=pk)
    with job_log_context(pk, kind=model._meta.model_name):
        try:
            work(row)
        except RunStopped:
            run_log(model, pk, f"stopped: the {what} was cancelled")
            model.objects.filter(pk=pk).update(finished_at=timezone.now())
        except Exception as exc:  # noqa: BLE001 - any failure must end the row FAILED with its traceback
            logger.exception("%s %s failed", model._meta.verbose_name, pk)
            run_log(model, pk, f"FAILED: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            run_fail(model, pk)
    row.refresh_from_db()
    return row


def runs_fail_stale(model: type[Model], *, now: datetime, minutes: int) -> int:
    """Fail every RUNNING row without a heartbeat for ``minutes`` before ``now`` (a worker killed by the hard time
    limit, out of memory or a machine going away), logging "FAILED: no heartbeat for <minutes> minutes (worker
    lost or killed)"; returns how many."""
    cutoff = now - timedelta(minutes=minutes)
    reason = f"no heartbeat for {minutes} minutes (worker lost or killed)"
    failed = 0
    for pk in model.objects.filter(status=RUNNING, heartbeat_at__lt=cutoff).values_list("pk", flat=True):
        if model.objects.filter(pk=pk, status=RUNNING, heartbeat_at__lt=cutoff).update(status=FAILED, finished_at=now):
            failed += 1
            run_log(model, pk, f"FAILED: {reason}")
    return failed
