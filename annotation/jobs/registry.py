"""Job kinds and how they are sent to a worker: each kind registers its Celery task by name and, for kinds made of
``JobItem`` rows, the work one item (or a batch) needs.

Kinds register from their own app (``annotation.services.jobs`` and ``annotation.services.judging`` at import,
``modelling`` in ``ModellingConfig.ready``), so this package imports no app that may not be imported from
``annotation``. Services never import tasks: :func:`enqueue` sends a task by its name through the Celery app, and
``CELERY_TASK_ROUTES`` (settings) decides its queue.

Every message of the platform leaves through :func:`task_send`, so a broker that is not there (Redis down, the
embedded ``filesystem://`` folder unwritable) is one error everywhere: :class:`EnqueueError`, which says what is
wrong and what to do, and which ``config.unavailable.ServiceUnavailableMiddleware`` answers with the platform's
page (503). No row is left queued for a message that was never sent: :func:`enqueue` checks the broker before the
caller's transaction commits (refused: the transaction rolls back, nothing is written), and a send that still fails
after the commit ends the kind's row FAILED with the reason (:func:`annotation.jobs.lifecycle.run_fail_unsent`).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from celery import current_app
from django.db import transaction
from django.db.models import Model

from annotation.jobs.lifecycle import run_fail_unsent
from config.celery import broker_advice, broker_folders_ensure, broker_problem, broker_reachable

logger = logging.getLogger(__name__)


class EnqueueError(Exception):
    """A task message could not be handed to the Celery broker.

    ``str(error)`` (= ``problem``) says what is wrong, ``advice`` what to do and ``commands`` the commands that do
    it (``[(command, what it starts)]``), all written for the person who pressed the button (no host, user or
    password); ``detail`` is the underlying error, for the log only.
    """

    def __init__(self, problem: str, *, detail: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.advice, self.commands = broker_advice()
        self.detail = detail


@dataclass(frozen=True)
class ItemKind:
    """How the items of one ``Job.Kind`` are worked.

    ``work(item, token, job, question) -> outcome`` does one claimed item and closes it
    (:func:`annotation.jobs.items.item_close`); errors it raises fail the item. ``batch(job, claims) -> {pk:
    outcome}`` does a claimed batch sent as one message (``claims``: ``[(item, token)]``), and ``groups(job, rows)
    -> [[item pk, ...], ...]`` packs items into such batches (``rows``: ``[(item pk, audio seconds or None)]``);
    both None for one message per item.
    """

    work: Callable[..., str]
    batch: Callable[..., dict[int, str]] | None = None
    groups: Callable[..., list[list[int]]] | None = None


_TASKS: dict[str, str] = {}
_ITEM_KINDS: dict[str, ItemKind] = {}
_ROWS: dict[str, type[Model]] = {}


def kind_register(kind: str, *, task: str, item: ItemKind | None = None, row: type[Model] | None = None) -> None:
    """Register job kind ``kind``: the Celery task name its work is sent to, its item work for kinds made of
    ``JobItem`` rows, and ``row``, the model of the row :func:`enqueue`'s first argument names (a ``Job``, a
    ``TrainingRun``: ``status``/``finished_at`` as in :mod:`annotation.jobs.lifecycle`), failed when its message
    cannot be sent. Registering a kind again replaces it (module reloads, tests)."""
    _TASKS[kind] = task
    if item is not None:
        _ITEM_KINDS[kind] = item
    if row is not None:
        _ROWS[kind] = row


def kind_task(kind: str) -> str:
    """The Celery task name registered for ``kind``. Raises ``KeyError`` naming the kind when none is."""
    try:
        return _TASKS[kind]
    except KeyError:
        raise KeyError(f"no job kind {kind!r} is registered (registered: {', '.join(sorted(_TASKS))})") from None


def kind_items(kind: str) -> ItemKind:
    """The item work registered for ``kind``. Raises ``KeyError`` naming the kind when none is."""
    try:
        return _ITEM_KINDS[kind]
    except KeyError:
        raise KeyError(f"job kind {kind!r} has no item work registered") from None


def task_send(task: str, *args, task_id: str | None = None, queue: str | None = None) -> None:
    """Send Celery task ``task`` (its dotted name) with ``args`` now, on ``queue`` when given, else where
    ``CELERY_TASK_ROUTES`` routes it (the default queue when no route names it).

    The task module is imported by the worker (autodiscovery) and by this process on first use, so eager mode
    (tests) runs it in process as ``task.delay`` would.

    Raises:
        EnqueueError: the broker did not take the message (unreachable, refused, no folder). In eager mode (tests)
            the task runs here and its own exceptions propagate unchanged.
    """
    app = current_app._get_current_object()
    if task not in app.tasks:
        app.loader.import_default_modules()  # registers the apps' tasks modules (Django autodiscovery)
    signature = app.signature(task, args=list(args))
    if app.conf.task_always_eager:
        signature.apply_async(task_id=task_id, queue=queue)
        return
    try:
        broker_folders_ensure(app.conf)  # the filesystem broker's folders, should they be gone (no-op otherwise)
        signature.apply_async(task_id=task_id, queue=queue)
    except Exception as exc:  # noqa: BLE001 - transports raise many kinds; any of them means "not sent"
        logger.warning("task %s not sent: %s: %s", task, type(exc).__name__, exc)
        raise EnqueueError(f"The task queue did not take the task ({_task_label(task)}): {broker_problem()}",
                           detail=f"{type(exc).__name__}: {exc}") from exc


def broker_check() -> None:
    """Raise :class:`EnqueueError` unless the broker can take a message now (``config.celery.broker_reachable``:
    the filesystem broker's folders are there and writable, a broker server answers within 2 s); nothing is
    checked in eager mode. Called before a row's transaction commits, so a refused button writes nothing."""
    if current_app.conf.task_always_eager:
        return
    try:
        broker_reachable()
    except Exception as exc:  # noqa: BLE001 - transports raise many kinds; any of them means "not reachable"
        logger.warning("broker check failed: %s: %s", type(exc).__name__, exc)
        raise EnqueueError(f"The task queue is not reachable: {broker_problem()}",
                           detail=f"{type(exc).__name__}: {exc}") from exc


def _task_label(task: str) -> str:
    return task.rsplit(".", 1)[-1].removesuffix("_task").replace("_", " ")


def enqueue(kind: str, *args, task_id: str | None = None, queue: str | None = None) -> None:
    """Send ``kind``'s task with ``args`` (usually the row's pk) once the current transaction commits, so the
    worker always finds the row (a message sent before the commit can reach a worker while the row is still
    invisible to it, or for a row a rollback removed). See :func:`task_send` for the queue.

    Call inside the transaction that creates (or re-queues) the row. The broker is checked now: when it is not
    there, :class:`EnqueueError` is raised and the caller's transaction rolls back, so no row waits for a message
    that never comes. Should the send still fail after the commit, the kind's registered row (``args[0]``) ends
    FAILED with the reason and :class:`EnqueueError` propagates from the commit.

    Raises:
        KeyError: ``kind`` is not registered, or registered without ``row`` (its row could never be failed: it
            would stay queued for ever after a lost send). Kinds made of items send through
            :func:`annotation.jobs.items.items_enqueue`.
    """
    task = kind_task(kind)
    row = _ROWS.get(kind)
    if row is None:
        raise KeyError(f"job kind {kind!r} has no row registered (kind_register(..., row=...)): enqueue fails that "
                       "row when its message cannot be sent")
    broker_check()

    def send() -> None:
        try:
            task_send(task, *args, task_id=task_id, queue=queue)
        except EnqueueError as error:
            run_fail_unsent(row, args[0], reason=str(error))
            raise

    transaction.on_commit(send)
