"""Job kinds and how they are sent to a worker: each kind registers its Celery task by name and, for kinds made of
``JobItem`` rows, the work one item (or a batch) needs.

Kinds register from their own app (``annotation.services.jobs`` and ``annotation.services.judging`` at import,
``modelling`` in ``ModellingConfig.ready``), so this package imports no app that may not be imported from
``annotation``. Services never import tasks: :func:`enqueue` sends a task by its name through the Celery app, and
``CELERY_TASK_ROUTES`` (settings) decides its queue.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from celery import current_app
from django.db import transaction


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


def kind_register(kind: str, *, task: str, item: ItemKind | None = None) -> None:
    """Register job kind ``kind``: the Celery task name its work is sent to, and its item work for kinds made of
    ``JobItem`` rows. Registering a kind again replaces it (module reloads, tests)."""
    _TASKS[kind] = task
    if item is not None:
        _ITEM_KINDS[kind] = item


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
    """
    app = current_app._get_current_object()
    if task not in app.tasks:
        app.loader.import_default_modules()  # registers the apps' tasks modules (Django autodiscovery)
    app.signature(task, args=list(args)).apply_async(task_id=task_id, queue=queue)


def enqueue(kind: str, *args, task_id: str | None = None, queue: str | None = None) -> None:
    """Send ``kind``'s task with ``args`` (usually the row's pk) once the current transaction commits, so the
    worker always finds the row (STYLE.md 5). See :func:`task_send` for the queue."""
    task = kind_task(kind)
    transaction.on_commit(lambda: task_send(task, *args, task_id=task_id, queue=queue))
