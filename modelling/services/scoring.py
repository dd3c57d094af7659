"""Scoring jobs: a model version scores every current candidate answer, as a row with progress; activating a model
is such a job too, so a model is activated only after a worker has loaded it and it passed its checks.

A ``ScoringRun`` is created QUEUED (:func:`scoring_run_start`, from a request, beat or a retraining run) and sent to
``ORCA_TRAIN_QUEUE`` when a worker serves it, else to the default queue with a note (``workers.orca_queue``). The
worker (:func:`scoring_run_execute`) loads the model with ``modelling.orca.load_orca``, which checks the SHA-256 of
the model's files and its tokenizer fingerprint (``modelling/orca/integrity.py``); a model failing them ends the
job FAILED with the reason and, for an activation, is **not** activated. Otherwise an activation makes the version
the active one (:func:`~modelling.services.registry.model_version_activate`), and the job scores the candidate answers
the model has not scored in chunks, writing ``done``/``total`` and a heartbeat after each (the ORCA runs page shows the
bar). Heavy imports (torch, ``modelling.orca``) happen in the worker only.
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.jobs.lifecycle import (
    ACTIVE,
    run_execute,
    run_fail,
    run_finish,
    run_heartbeat,
    run_log,
    runs_fail_stale,
)
from annotation.services.audit import audit_record
from modelling.models import ModelVersion, ScoringRun, TrainingRun
from modelling.services.predictions import candidates_without_prediction, predictions_model, predictions_score
from modelling.services.registry import model_version_activate
from modelling.services.workers import orca_device, orca_enqueue

#: The job kind of a scoring run (``ModellingConfig.ready`` registers its task).
SCORING_RUN = "scoring_run"


def scoring_run_start(*, version: ModelVersion | None = None, run: TrainingRun | None = None, activate: bool = False,
                      user=None) -> ScoringRun:
    """Queue a scoring job of a model version (give the ``version``, or the DONE training ``run`` that trained it);
    with ``activate`` the job makes it the active model once it loaded and passed its checks.

    A plain scoring job (``activate`` False) of a version that already has a scoring job queued or running (plain,
    or an activation, which scores too) returns that one: the model is never loaded twice to score the same answers.
    Runs in a request: no model is loaded here.

    Raises:
        ValidationError: the run is not DONE or has no registered model.
    """
    if (run is None) == (version is None):
        raise ValueError("give exactly one of run and version")
    if run is not None:
        if run.status != TrainingRun.Status.DONE:
            raise ValidationError(f"training run #{run.pk} is {run.status}; only a finished (done) run can be "
                                  "activated")
        version = ModelVersion.objects.filter(training_run=run).first()
        if version is None:
            raise ValidationError(f"training run #{run.pk} has no registered model")
    with transaction.atomic():
        if not activate:
            pending = ScoringRun.objects.filter(model_version=version, status__in=ACTIVE).first()
            if pending is not None:
                return pending
        row = ScoringRun.objects.create(model_version=version, activate=activate, created_by=user)
        run_log(ScoringRun, row.pk, f"queued: {'check and activate ' if activate else 'score with '}{version.name}")
        if activate:
            audit_record(actor=user, action="model.activate.start", obj=version, old=None,
                         new={"scoring_run": row.pk, "name": version.name})
        orca_enqueue(SCORING_RUN, ScoringRun, row.pk)
    return row


def scoring_run_execute(*, run_id: int, task_id: str = "") -> ScoringRun | None:
    """Claim a queued scoring job and do it (module docstring); returns the row as it ended, or None when it was not
    queued (a redelivered message). A model that fails its checks ends the job FAILED ("FAILED: not activated: …"
    for an activation) and stays inactive."""

    def work(row: ScoringRun) -> None:
        from modelling.orca import OrcaModelError

        version = row.model_version
        device, note = orca_device(settings.ORCA_DEVICE)
        if note:
            run_log(ScoringRun, row.pk, note)
        try:
            predictions_model(path=version.artifact_path, device=device, reload=row.activate)
        except OrcaModelError as exc:
            run_log(ScoringRun, row.pk, f"FAILED: {'not activated: ' if row.activate else ''}{exc}")
            run_fail(ScoringRun, row.pk)
            return
        run_log(ScoringRun, row.pk, f"loaded {version.name} on {device}: files and tokenizer fingerprint as saved")
        if row.activate:
            model_version_activate(version=version, user=row.created_by)
            run_log(ScoringRun, row.pk, f"activated {version.name}")
        total = candidates_without_prediction(model_version=version).count()
        run_heartbeat(ScoringRun, row.pk, total=total, device=device)

        def progress(done: int) -> None:
            run_heartbeat(ScoringRun, row.pk, done=done)  # raises RunStopped when cancelled

        written = predictions_score(model_version=version, device=device, progress=progress)
        run_log(ScoringRun, row.pk, f"scored {written} candidate answers")
        run_finish(ScoringRun, row.pk, done=written, total=max(total, written))

    return run_execute(ScoringRun, run_id, task_id=task_id, work=work, what="scoring run")


def scoring_runs_fail_stale(*, now=None) -> int:
    """Fail RUNNING scoring jobs silent for ``ORCA_STALE_MINUTES`` (a worker lost mid-job); returns how many."""
    return runs_fail_stale(ScoringRun, now=now or timezone.now(), minutes=settings.ORCA_STALE_MINUTES)


def scoring_runs_recent(*, limit: int = 10) -> list[ScoringRun]:
    """The latest scoring jobs with their model versions, newest first (the ORCA runs page)."""
    return list(ScoringRun.objects.select_related("model_version")[:limit])


def scoring_run_activation_latest(*, version: ModelVersion) -> ScoringRun | None:
    """The latest activating scoring job of ``version`` (a run's page shows whether its activation passed)."""
    return ScoringRun.objects.filter(model_version=version, activate=True).first()
