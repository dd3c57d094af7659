"""Whether an LALM's or a judge's jobs may start, judged by its latest connection test.

Kept apart from :mod:`annotation.services.endpoints` (which runs the tests) so the job services that ask it
(``annotation.services.jobs``, ``annotation.services.judging``) import no module that imports them.
"""
from __future__ import annotations

from django.utils import timezone

from annotation.models import LALM, ConnectionTest, Judge


def connection_test_refusal(*, lalm: LALM | None = None, judge: Judge | None = None) -> str:
    """Why a job of ``lalm`` or ``judge`` must not start ('' when it may): its latest connection test failed, so
    every request of the job would fail the same way (an unreachable server, a missing key) and spend its items'
    attempts. A newer test that is queued or running, or that passed, lifts the refusal; a row never tested is not
    refused (a job is its first use)."""
    target = lalm if lalm is not None else judge
    latest = ConnectionTest.objects.filter(**({"lalm": lalm} if lalm is not None else {"judge": judge})).first()
    if latest is None or latest.status != ConnectionTest.Status.FAILED:
        return ""
    when = timezone.localtime(latest.finished_at or latest.created_at).strftime("%Y-%m-%d %H:%M")
    return (f"the last connection test of {target.name!r} (#{latest.pk}, {when}) failed: {latest.error} "
            "Fix its settings, then press Test connection on its page; a job can start once a test passes.")
