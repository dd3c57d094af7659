"""Shared by the management commands that start jobs: follow a job's progress until it ends."""
import time

from django.core.management.base import CommandError

from annotation.models import Job


def job_follow(*, job: Job, stdout, interval_s: float = 2.0) -> Job:
    """Print ``job``'s progress every ``interval_s`` seconds until it is no longer queued or running.

    Returns the finished job. Raises ``CommandError`` with the job's error when it failed.
    """
    from annotation.services.jobs import job_progress

    while True:
        job.refresh_from_db()
        progress = job_progress(job=job)
        stdout.write(
            f"  {job.status}: {progress.done}/{progress.total} done, {progress.failed} failed ({progress.percent} %)"
        )
        if job.status not in (Job.Status.QUEUED, Job.Status.RUNNING):
            break
        time.sleep(interval_s)
    if job.status == Job.Status.FAILED:
        raise CommandError(job.error)
    return job
