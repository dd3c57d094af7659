"""Jobs whose worker went silent are ended by the periodic tasks, run by a real Celery beat and worker.

- A training run RUNNING without a heartbeat for longer than ``ORCA_STALE_MINUTES`` is marked FAILED
  (``modelling.tasks.training_runs_fail_stale_task``); a run with a fresh heartbeat is left alone.
- A Stage 1 item RUNNING past ``PREPARATION_ITEM_LEASE_S`` whose message is gone (a broker that lost it) is sent
  again (``annotation.tasks.job_items_requeue_stale_task``) and finished once.
"""
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Job, JobItem, QuestionVersion
from annotation.services.jobs import job_start
from modelling.models import TrainingRun
from tests.fakes.openai_compat import FakeOpenAICompat

from .conftest import process_env, questions_with_audio, start_worker, stop, wait_for, worker_settings

pytestmark = [pytest.mark.worker, pytest.mark.faults]

BEAT_EVERY_SECOND = {
    "orca-training-runs-fail-stale": {"task": "modelling.tasks.training_runs_fail_stale_task", "schedule": 1.0},
    "requeue-stale-job-items": {"task": "annotation.tasks.job_items_requeue_stale_task", "schedule": 1.0},
}


def test_beat_fails_silent_training_runs_and_resends_silent_stage1_items(
    postgres, private_redis, celery_app_on, tmp_path
):
    now = timezone.now()
    silent = TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, heartbeat_at=now - timedelta(hours=2),
                                        started_at=now - timedelta(hours=3))
    alive = TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, heartbeat_at=now + timedelta(minutes=5),
                                       started_at=now)

    app = celery_app_on(private_redis.url)
    bench = questions_with_audio(tmp_path, n=1, name="stale")
    with FakeOpenAICompat(reply=lambda request: "Grounded rationale.") as server:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("django.conf.settings.RATIONALE_PROVIDER", "openai")
            mp.setattr("django.conf.settings.OPENAI_COMPAT_BASE_URL", f"{server.url}/v1")
            mp.setattr("django.conf.settings.OPENAI_COMPAT_MODEL", "fake-audio-model")
            job = job_start(kind=Job.Kind.RATIONALE, benchmark=bench)
        # A worker took the item two hours ago and died; its broker lost the message.
        with app.connection_for_write() as conn:
            conn.default_channel.client.flushdb()
        JobItem.objects.filter(job=job).update(
            status=JobItem.Status.RUNNING, claimed_at=now - timedelta(hours=2), claim_token="dead", attempts=1
        )
        Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)

        module = worker_settings(
            tmp_path, CELERY_BEAT_SCHEDULE=BEAT_EVERY_SECOND, RATIONALE_PROVIDER="openai",
            OPENAI_COMPAT_BASE_URL=f"{server.url}/v1", OPENAI_COMPAT_MODEL="fake-audio-model",
            ORCA_ARTIFACT_DIR=str(tmp_path / "orca"),
        )
        log = tmp_path / "worker.log"
        worker = start_worker(env=process_env(tmp_path, broker_url=private_redis.url, settings_module=module),
                              log=log, beat=True)
        try:
            wait_for(lambda: TrainingRun.objects.get(pk=silent.pk).status == TrainingRun.Status.FAILED,
                     timeout_s=60, what="the silent training run to be failed", log=log)
            wait_for(lambda: Job.objects.get(pk=job.pk).status == Job.Status.DONE,
                     timeout_s=60, what="the silent Stage 1 item to be redone", log=log)
        finally:
            stop(worker)

    silent.refresh_from_db()
    assert silent.finished_at is not None
    assert TrainingRun.objects.get(pk=alive.pk).status == TrainingRun.Status.RUNNING
    item = JobItem.objects.get(job=job)
    assert (item.status, item.attempts) == (JobItem.Status.DONE, 2)
    assert item.question.versions.filter(source=QuestionVersion.Source.RATIONALE).count() == 1
