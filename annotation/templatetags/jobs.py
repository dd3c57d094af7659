"""``{% load jobs %}``: what every job panel shares. ``row|waiting_for_worker`` is True for a queued job, run, test or
suggestion that no worker has started for :data:`annotation.jobs.lifecycle.WAITING_FOR_WORKER_S` seconds; the panel
then includes ``templates/_waiting_for_worker.html`` (the "Is a worker running?" hint), and as it polls every second
or two the hint appears without a reload.
"""
from django import template

from annotation.jobs.lifecycle import QUEUED, run_waiting_for_worker

register = template.Library()


@register.filter
def waiting_for_worker(row) -> bool:
    """``row`` (any model with ``status`` and ``created_at``: a Job, TrainingRun, ConnectionTest, Suggestion) is
    queued and has waited longer than ``WAITING_FOR_WORKER_S``."""
    if row is None or getattr(row, "status", None) != QUEUED:
        return False
    return run_waiting_for_worker(queued_at=getattr(row, "created_at", None))


@register.filter
def waited(queued_at) -> str:
    """How long ago ``queued_at`` was, in seconds under a minute ("20 s"), else as Django's ``timesince``."""
    from django.utils import timezone
    from django.utils.timesince import timesince

    seconds = (timezone.now() - queued_at).total_seconds()
    return f"{max(0, int(seconds))} s" if seconds < 60 else timesince(queued_at)
