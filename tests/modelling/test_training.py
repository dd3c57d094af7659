"""ORCA training runs without training: settings validation, queueing, activation, stale reaper, retraining rules."""
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from modelling.models import ModelVersion, ScoringRun, TrainingRun, WorkerNode
from modelling.services.registry import model_version_activate
from modelling.services.scoring import scoring_run_execute, scoring_run_start
from modelling.services.training import (
    DEFAULT_CONFIG,
    model_version_register,
    retrain_should_activate,
    training_config_clean,
    training_retrain_if_due,
    training_run_cancel,
    training_run_execute,
    training_run_promote_if_not_worse,
    training_run_start,
    training_runs_fail_stale,
    valid_rating_counts_by_benchmark,
)
from modelling.services.workers import orca_device, worker_register
from tests.factories import RatingFactory, UserFactory

pytestmark = pytest.mark.django_db

SPLIT = {"kind": "unseen_questions", "seed": 108}


def done_run(*, dev_rho: float | None = 0.7, source_rating_count: int = 0) -> TrainingRun:
    """A finished run with a registered (inactive) model; no artefact on disk (nothing here loads it)."""
    run = TrainingRun.objects.create(
        config=training_config_clean(config={}), status=TrainingRun.Status.DONE, artifact_path="/nonexistent",
        metrics={"dev": {"unclamped": {"rho": dev_rho}, "clamped": {"rho": dev_rho}}},
        source_rating_count=source_rating_count,
    )
    model_version_register(run=run)
    return run


def test_config_defaults_fill_in_and_bad_values_name_their_field(settings):
    settings.ORCA_BASE_MODEL = "smollm2"
    clean = training_config_clean(config={"epochs": 2})
    assert clean["epochs"] == 2 and clean["base_model"] == "smollm2" and clean["head"] == "beta"
    with pytest.raises(ValidationError) as exc:
        training_config_clean(config={"head": "gauss", "epochs": 0, "lr": 2.0, "colour": "red"})
    assert set(exc.value.message_dict) == {"colour"}
    with pytest.raises(ValidationError) as exc:
        training_config_clean(config={"head": "gauss", "epochs": 0, "lr": 2.0, "rationale": "yes"})
    assert set(exc.value.message_dict) == {"head", "epochs", "lr", "rationale"}


def test_the_platform_defaults_are_the_cli_and_bench_recipe():
    from modelling.orca import OrcaConfig, TrainConfig

    model, opt = OrcaConfig(), TrainConfig()
    for key in ("base_model", "head", "max_length", "rationale", "question", "transcript"):
        assert DEFAULT_CONFIG[key] == getattr(model, key), key
    for key in ("epochs", "lr", "batch_size", "freeze_layers", "lora_rank", "var_weight", "device"):
        assert DEFAULT_CONFIG[key] == getattr(opt, key), key
    assert opt.select_epoch == "last"
    with pytest.raises(ValidationError) as exc:
        training_config_clean(config={"freeze_layers": -1, "var_weight": "high", "lora_rank": 2.5})
    assert set(exc.value.message_dict) == {"freeze_layers", "var_weight", "lora_rank"}


def test_start_creates_a_queued_run_and_enqueues_it_after_commit(django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    from modelling import tasks

    # Record the message instead of training (the run itself is exercised in test_training_e2e.py). No queue is
    # chosen here: CELERY_TASK_ROUTES routes it (test_orca_tasks_go_to_the_orca_train_queue_through_the_routes).
    monkeypatch.setattr(tasks.training_run_task, "apply_async",
                        lambda args, kwargs=None, **options: sent.append((list(args), options.get("queue"))))
    user = UserFactory()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        run = training_run_start(config={"epochs": 1}, split=SPLIT, created_by=user)
    assert run.status == TrainingRun.Status.QUEUED and run.created_by == user and run.split_seed == 108
    assert sent == []  # nothing is sent before the transaction commits
    for callback in callbacks:
        callback()
    assert sent == [([run.pk], None)]


def test_orca_tasks_go_to_the_orca_train_queue_through_the_routes():
    """The env setting ORCA_TRAIN_QUEUE builds CELERY_TASK_ROUTES: training, cross-fits and scoring go to its queue,
    other tasks to the default queue (a fresh process, as a worker or web process reads its environment)."""
    script = (
        "import django; django.setup()\n"
        "from config.celery import app\n"
        "for name in ('modelling.tasks.training_run_task', 'modelling.tasks.crossfit_task',\n"
        "             'modelling.tasks.scoring_run_task', 'modelling.tasks.model_import_task',\n"
        "             'annotation.tasks.export_job_task'):\n"
        "    print(app.amqp.router.route({}, name)['queue'].name)\n"
    )
    queues = {}
    for value in ("gpu", ""):
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "ORCA_TRAIN_QUEUE": value}
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120,
                              cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 0, done.stderr
        queues[value] = done.stdout.split()
    assert queues == {"gpu": ["gpu"] * 4 + ["default"], "": ["default"] * 5}


def _sent_to(monkeypatch) -> list:
    """Record (args, queue) of every training-run message instead of sending it."""
    from modelling import tasks

    sent = []
    monkeypatch.setattr(tasks.training_run_task, "apply_async",
                        lambda args, kwargs=None, **options: sent.append((list(args), options.get("queue"))))
    return sent


def test_without_a_live_worker_on_the_orca_queue_a_run_goes_to_the_cpu_workers_with_a_note(
    settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.ORCA_TRAIN_QUEUE = "gpu"
    sent = _sent_to(monkeypatch)
    # A GPU worker that stopped refreshing its row 5 minutes ago is gone.
    long_ago = timezone.now() - timedelta(minutes=5)
    WorkerNode.objects.create(hostname="gpu@old", queues=["gpu"], cuda=True, started_at=long_ago,
                              last_seen_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True):
        run = training_run_start(config={}, split=SPLIT)
    run.refresh_from_db()
    assert sent == [([run.pk], "default")]
    assert "no worker serving the 'gpu' queue (ORCA_TRAIN_QUEUE)" in run.log and "sent to the 'default'" in run.log

    worker_register(hostname="gpu@host", queues=["gpu"], cuda=True, device_name="NVIDIA H100")
    with django_capture_on_commit_callbacks(execute=True):
        second = training_run_start(config={}, split=SPLIT)
    assert sent[-1] == ([second.pk], "gpu") and "no worker serving" not in TrainingRun.objects.get(pk=second.pk).log


def test_a_worker_without_cuda_trains_on_its_cpu_and_says_so():
    import torch

    device, note = orca_device("cuda")
    if torch.cuda.is_available():
        assert (device, note) == ("cuda", "")
    else:
        assert device == "cpu" and "this worker has no CUDA device" in note
    assert orca_device("cpu") == ("cpu", "")


def test_a_held_out_lalm_split_needs_lalms():
    with pytest.raises(ValidationError) as exc:
        training_run_start(config={}, split={"kind": "held_out_lalms", "seed": 1})
    assert "held_out_lalms" in exc.value.message_dict


def test_a_run_is_claimed_once():
    run = TrainingRun.objects.create(config=training_config_clean(config={}), status=TrainingRun.Status.RUNNING)
    assert training_run_execute(run_id=run.pk) is None  # already running: a redelivered message does nothing
    assert training_run_execute(run_id=run.pk + 1000) is None  # gone


def test_a_run_without_rated_data_fails_with_the_reason_in_its_log():
    run = TrainingRun.objects.create(config=training_config_clean(config={}))
    run = training_run_execute(run_id=run.pk, task_id="t-1")
    assert run.status == TrainingRun.Status.FAILED and run.task_id == "t-1"
    assert "no candidate answer with a scored valid rating" in run.log and "Traceback" in run.log
    assert run.finished_at is not None


def test_activation_keeps_exactly_one_model_active():
    first, second = done_run(), done_run()
    user = UserFactory()
    model_version_activate(run=first, user=user)
    version = model_version_activate(run=second, user=user)
    assert list(ModelVersion.objects.filter(is_active=True)) == [version]
    assert version.activated_by == user and version.activated_at is not None
    model_version_activate(run=first, user=user)
    assert list(ModelVersion.objects.filter(is_active=True).values_list("training_run", flat=True)) == [first.pk]


def test_the_database_refuses_a_second_active_model():
    first, second = done_run(), done_run()
    model_version_activate(run=first)
    with pytest.raises(IntegrityError), transaction.atomic():
        ModelVersion.objects.filter(pk=second.model_version.pk).update(is_active=True)


def test_only_a_finished_run_can_be_activated():
    run = TrainingRun.objects.create(config={}, status=TrainingRun.Status.RUNNING)
    with pytest.raises(ValidationError, match="only a finished"):
        model_version_activate(run=run)


def test_the_reaper_fails_runs_with_a_stale_heartbeat_only(settings):
    settings.ORCA_STALE_MINUTES = 30
    now = timezone.now()
    stale = TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, heartbeat_at=now - timedelta(minutes=31))
    alive = TrainingRun.objects.create(status=TrainingRun.Status.RUNNING, heartbeat_at=now - timedelta(minutes=5))
    queued = TrainingRun.objects.create(status=TrainingRun.Status.QUEUED)
    assert training_runs_fail_stale(now=now) == 1
    for run in (stale, alive, queued):
        run.refresh_from_db()
    assert stale.status == TrainingRun.Status.FAILED and "no heartbeat for 30 minutes" in stale.log
    assert alive.status == TrainingRun.Status.RUNNING and queued.status == TrainingRun.Status.QUEUED
    assert training_runs_fail_stale(now=now) == 0


def test_cancelling_stops_a_queued_run_from_starting():
    run = TrainingRun.objects.create(config=training_config_clean(config={}))
    assert training_run_cancel(run=run, user=UserFactory(username="ann"))
    assert training_run_execute(run_id=run.pk) is None
    run.refresh_from_db()
    assert run.status == TrainingRun.Status.CANCELLED and "cancelled by ann" in run.log
    assert not training_run_cancel(run=run)


@pytest.mark.parametrize(
    "new, active, expected",
    [(0.71, 0.70, True), (0.70, 0.70, True), (0.69, 0.70, False), (None, 0.70, False), (0.5, None, True),
     (float("nan"), 0.7, False)],
)
def test_a_retrained_model_is_activated_only_when_its_dev_rho_is_not_worse(new, active, expected):
    assert retrain_should_activate(new_rho=new, active_rho=active) is expected


def test_promotion_starts_activating_a_better_retrain_and_keeps_the_active_model_otherwise():
    active = done_run(dev_rho=0.70)
    model_version_activate(run=active)
    worse = done_run(dev_rho=0.65)
    assert not training_run_promote_if_not_worse(run=worse)
    assert ModelVersion.objects.get(is_active=True).training_run == active
    assert "not activated" in TrainingRun.objects.get(pk=worse.pk).log
    assert not ScoringRun.objects.exists()
    better = done_run(dev_rho=0.72)
    assert training_run_promote_if_not_worse(run=better)
    # Activation is a scoring job that checks the saved model first; until it has run, the old model stays active.
    job = ScoringRun.objects.get()
    assert job.activate and job.model_version == better.model_version and job.status == ScoringRun.Status.QUEUED
    assert ModelVersion.objects.get(is_active=True).training_run == active
    assert f"scoring run #{job.pk} checks the saved model first" in TrainingRun.objects.get(pk=better.pk).log


def test_a_model_whose_folder_fails_its_checks_is_never_activated():
    active = done_run(dev_rho=0.70)
    model_version_activate(run=active)
    broken = done_run(dev_rho=0.90)  # its artifact folder does not exist
    job = scoring_run_start(run=broken, activate=True, user=UserFactory())
    job = scoring_run_execute(run_id=job.pk, task_id="t-9")
    assert job.status == ScoringRun.Status.FAILED
    assert job.failure.startswith("not activated: /nonexistent is not an ORCA model folder")
    assert ModelVersion.objects.get(is_active=True).training_run == active
    assert scoring_run_execute(run_id=job.pk) is None  # a redelivered message does nothing


def test_a_plain_scoring_request_joins_the_activation_job_that_scores_the_same_version():
    run = done_run(dev_rho=0.80)
    activation = scoring_run_start(run=run, activate=True, user=UserFactory())
    assert scoring_run_start(version=activation.model_version) == activation  # the beat's request: no second load
    assert ScoringRun.objects.count() == 1


def test_retraining_starts_only_after_enough_new_valid_ratings(settings, django_capture_on_commit_callbacks):
    settings.ORCA_RETRAIN_EVERY = 3
    assert training_retrain_if_due() is None  # no active model yet
    active = done_run(source_rating_count=0)
    active.config = training_config_clean(config={"epochs": 3, "head": "multinomial"})
    active.split_seed = 5
    active.save()
    model_version_activate(run=active)
    RatingFactory.create_batch(2)
    assert training_retrain_if_due() is None  # 2 < 3 new ratings
    RatingFactory(score=None, codes="U")  # not scored: does not count
    assert training_retrain_if_due() is None
    RatingFactory()
    with django_capture_on_commit_callbacks(execute=False):
        run = training_retrain_if_due()
    assert run is not None and run.trigger == TrainingRun.Trigger.RETRAIN and run.created_by is None
    # The active run's split is not recorded (a run from before splits were): it retrains from the base model with
    # the same settings, weighting up the benchmarks it has seen fewer than half of the ratings of (all of them here).
    assert run.parent is None and run.split_seed == 5
    assert run.config == active.config | {"group_weights": {
        f"benchmark={name}": 4.0 for name in valid_rating_counts_by_benchmark()}}
    assert training_retrain_if_due() is None  # one run at a time
