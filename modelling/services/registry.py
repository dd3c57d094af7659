"""The ORCA model registry: which trained model is active (the one whose predictions the platform uses)."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.services.audit import audit_record
from modelling.models import ModelVersion, TrainingRun


def model_version_activate(*, run: TrainingRun, user=None) -> ModelVersion:
    """Make the model of a DONE run the active one, deactivating every other in the same transaction.

    Once committed, a batch job scores every candidate answer on its question's current version with the new model
    (``predictions_score_task`` on ``ORCA_TRAIN_QUEUE``). The database allows at most one active version
    (partial unique constraint), so concurrent activations cannot leave two active.

    Raises:
        ValidationError: the run is not DONE or has no registered model.
    """
    from modelling.services.training import training_queue
    from modelling.tasks import predictions_score_task

    if run.status != TrainingRun.Status.DONE:
        raise ValidationError(f"training run #{run.pk} is {run.status}; only a finished (done) run can be activated")
    with transaction.atomic():
        try:
            version = ModelVersion.objects.select_for_update().get(training_run=run)
        except ModelVersion.DoesNotExist:
            raise ValidationError(f"training run #{run.pk} has no registered model") from None
        previous = list(ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).values_list("name", flat=True))
        ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).update(is_active=False)
        version.is_active = True
        version.activated_at = timezone.now()
        version.activated_by = user
        version.save(update_fields=["is_active", "activated_at", "activated_by"])
        audit_record(actor=user, action="model.activate", obj=version, old={"active": previous}, new={"active": [version.name]})
        queue = training_queue()
        transaction.on_commit(lambda: predictions_score_task.apply_async(args=[version.pk], queue=queue))
    return version
