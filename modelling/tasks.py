"""Celery tasks of the modelling app: thin wrappers around services."""
import logging

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model

from modelling.leaderboard.crossfit import crossfit_execute, crossfits_fail_stale
from modelling.reliability.services import reliability_refresh, reliability_refresh_if_changed
from modelling.services.agreement_cache import agreement_reports_warm
from modelling.services.predictions import predictions_pending_for_active
from modelling.services.rater import rater_snapshots_write
from modelling.services.registry import model_import_execute, model_imports_fail_stale
from modelling.services.routing import routing_refresh
from modelling.services.scoring import scoring_run_execute, scoring_run_start, scoring_runs_fail_stale
from modelling.services.snapshots import agreement_snapshots_refresh
from modelling.services.training import training_retrain_if_due, training_run_execute, training_runs_fail_stale

logger = logging.getLogger(__name__)

#: Options of the tasks that train (a training run, a cross-fit): one message per row, acknowledged after the run,
#: limited to ORCA_TRAIN_TIME_LIMIT_S (the hard limit 5 minutes later); the row's claim makes a redelivery a no-op.
ORCA_RUN_TASK = {
    "bind": True, "acks_late": True, "ignore_result": True,
    "soft_time_limit": settings.ORCA_TRAIN_TIME_LIMIT_S, "time_limit": settings.ORCA_TRAIN_TIME_LIMIT_S + 300,
}


@shared_task(soft_time_limit=600, time_limit=660)
def agreement_snapshot_task(force: bool = False) -> int:
    """Write agreement snapshots when enough new valid ratings arrived (beat, every 5 min) or always (nightly).

    Also warms the agreement page's cached statistics. Returns the number of snapshot rows written. See
    ``modelling.services.snapshots`` for the design.
    """
    written = agreement_snapshots_refresh(force=force)
    if written:
        logger.info("wrote %d agreement snapshots (force=%s)", len(written), force)
    # The agreement page reads its statistics from the cache; filling it here spares the first visitor after new
    # ratings the computation (a no-op when the ratings have not changed since).
    agreement_reports_warm()
    return len(written)


@shared_task(**ORCA_RUN_TASK)
def training_run_task(self, training_run_pk: int) -> str:
    """Train one ORCA run (``modelling.services.training.training_run_execute``); returns its final status.

    Re-runnable: the service claims the run conditionally, so a redelivered message is a no-op ("skipped").
    """
    return _final_status(training_run_execute(run_id=training_run_pk, task_id=self.request.id or ""))


@shared_task(bind=True, acks_late=True, ignore_result=True, soft_time_limit=1800, time_limit=1860)
def model_import_task(self, model_import_pk: int) -> str:
    """Register one ORCA authors' checkpoint (``modelling.services.registry.model_import_execute``); returns its
    final status ("skipped" for a redelivered message)."""
    return _final_status(model_import_execute(import_id=model_import_pk, task_id=self.request.id or ""))


@shared_task(**ORCA_RUN_TASK)
def scoring_run_task(self, scoring_run_pk: int) -> str:
    """Do one scoring job (``modelling.services.scoring.scoring_run_execute``: load and check the model, activate it
    when asked, score with progress); returns its final status ("skipped" for a redelivered message)."""
    run = scoring_run_execute(run_id=scoring_run_pk, task_id=self.request.id or "")
    if run is not None and run.status == run.Status.DONE and run.done:
        routing_refresh_task.delay()  # new predictions: re-route (a no-op while routing is off)
    return _final_status(run)


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=90)
def predictions_score_new_task() -> bool:
    """Beat: when candidate answers lack a prediction of the active model, queue a scoring job for it (unless one is
    queued or running; it goes to ``ORCA_TRAIN_QUEUE`` when a worker serves it: the model is loaded there, not in
    this light task). Returns whether the active model has a scoring job queued or running now."""
    version = predictions_pending_for_active()
    if version is None:
        return False
    scoring_run_start(version=version)  # returns the pending job instead when there is one
    return True


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=90)
def training_runs_fail_stale_task() -> int:
    """Beat: fail RUNNING training runs, cross-fits, checkpoint imports and scoring jobs without a heartbeat for
    ``ORCA_STALE_MINUTES``; returns how many."""
    return training_runs_fail_stale() + crossfits_fail_stale() + model_imports_fail_stale() + scoring_runs_fail_stale()


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=150)
def training_retrain_task() -> int | None:
    """Beat: start a retraining run when ``ORCA_RETRAIN_EVERY`` new valid ratings arrived; returns its id or None."""
    run = training_retrain_if_due()
    return run.pk if run is not None else None


@shared_task(ignore_result=True, soft_time_limit=300, time_limit=330)
def routing_refresh_task() -> int:
    """Beat (every minute) and after scoring: re-evaluate routing by predicted disagreement where a new active
    model, new predictions or new ratings call for it (``modelling.services.routing.routing_refresh``); returns how
    many candidate answers changed."""
    result = routing_refresh()
    return result.changed if result is not None else 0


@shared_task(ignore_result=True, soft_time_limit=300, time_limit=330)
def rater_snapshot_task() -> int:
    """Beat (hourly): snapshot ORCA-as-a-rater agreement of the active model (``modelling.services.rater``);
    returns the number of snapshot rows written."""
    return len(rater_snapshots_write())


@shared_task(ignore_result=True, soft_time_limit=900, time_limit=960)
def reliability_refresh_task(by_id: int | None = None) -> int:
    """Recompute the rater reliability signals and apply the warn/pause thresholds (beat: every 15 minutes, only
    when the data changed; the admins' "Recompute now" with ``by_id``, the admin, always, naming them in the audit
    of status changes).

    Returns the number of annotators paused. See ``modelling.reliability.services.reliability_refresh``.
    """
    if by_id is None:
        run = reliability_refresh_if_changed()
        if run is None:
            return 0
    else:
        run = reliability_refresh(by=get_user_model().objects.filter(pk=by_id).first())
    if run.paused or run.warned:
        logger.info("reliability: %d annotators, warned %s, paused %s", run.annotators, run.warned, run.paused)
    return len(run.paused)


@shared_task(**ORCA_RUN_TASK)
def crossfit_task(self, crossfit_pk: int) -> str:
    """Run one cross-fit (``modelling.leaderboard.crossfit.crossfit_execute``); returns its final status.

    Re-runnable: the service claims the run conditionally, so a redelivered message is a no-op ("skipped").
    """
    return _final_status(crossfit_execute(run_id=crossfit_pk, task_id=self.request.id or ""))


def _final_status(run) -> str:
    """The status a run ended with, or "skipped" when this message did not claim it."""
    return run.status if run is not None else "skipped"
