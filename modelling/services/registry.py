"""The ORCA model registry: trained and imported model versions, and which one is active (the one whose predictions
the platform uses)."""
from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from annotation.jobs.registry import enqueue
from annotation.services.audit import audit_record
from modelling.models import ModelVersion, TrainingRun

#: The job kind that scores candidate answers with a model version (``ModellingConfig.ready`` registers its task).
PREDICTIONS_SCORE = "predictions_score"


def artifact_root() -> Path:
    """Folder of run data and saved models: ``ORCA_ARTIFACT_DIR``, or ``MEDIA_ROOT/orca`` when that is empty."""
    return Path(settings.ORCA_ARTIFACT_DIR) if settings.ORCA_ARTIFACT_DIR else Path(settings.MEDIA_ROOT) / "orca"


def model_version_import(
    *,
    name: str,
    upstream_path: str,
    source_url: str = "",
    licence: str = "",
    tokenizer: str = "",
    base_model: str = "",
    clamp_threshold: float | None = None,
    rationale: bool = True,
    user=None,
) -> ModelVersion:
    """Register a checkpoint of the ORCA authors' release (``orca_score``) as an inactive model version.

    The folder is converted with ``modelling.orca.upstream.import_upstream`` into ``<artifact root>/imported-<name>``
    (our config and head; the LM stays in ``upstream_path``, referenced by absolute path, so keep it in place). The
    files are validated (config.yaml, head shapes, lm/, tokenizer, a LoRA base model available locally); the LM
    itself is loaded by the scoring job when the version is activated.

    Args:
        name: unique display name; upstream_path: their model folder (``best/model``).
        source_url, licence: provenance shown beside the model.
        tokenizer: tokenizer folder ("" = ``upstream_path/../tokenizer``); base_model: local base LM of a LoRA
            adapter ("" = the one its adapter_config.json names).
        clamp_threshold: their σ² threshold for clamping μ (None = none); rationale: the model reads the rationale.
        user: the admin registering it (audited).

    Raises:
        ValidationError: a taken name, a bad URL, or a folder that is not a loadable ORCA checkpoint (the message
            names the file and field); nothing is written then.
    """
    from modelling.orca.model import OrcaModelError
    from modelling.orca.upstream import import_upstream

    name = name.strip()
    if ModelVersion.objects.filter(name=name).exists():
        raise ValidationError({"name": f"a model named {name!r} exists already"})
    version = ModelVersion(name=name, upstream_path=str(Path(upstream_path).expanduser()), source_url=source_url,
                           licence=licence, registered_by=user, artifact_path="-")
    version.full_clean(exclude=["artifact_path"])
    out = artifact_root() / f"imported-{slugify(name) or 'model'}"
    if out.exists():
        raise ValidationError({"name": f"the folder {out} exists already; choose another name"})
    try:
        import_upstream(upstream_path, out, tokenizer=tokenizer or None, base_model=base_model or None,
                        clamp_threshold=clamp_threshold, rationale=rationale, check=False)
    except OrcaModelError as exc:
        raise ValidationError({"upstream_path": str(exc)}) from exc
    try:
        with transaction.atomic():
            version.artifact_path = str(out)
            version.metrics = {"imported": {"source_url": source_url, "licence": licence,
                                            "clamp_threshold": clamp_threshold}}
            version.save()
            audit_record(actor=user, action="model.import", obj=version, old=None,
                         new={"name": name, "upstream_path": version.upstream_path, "source_url": source_url,
                              "licence": licence})
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return version


def model_version_activate(*, run: TrainingRun | None = None, version: ModelVersion | None = None,
                           user=None) -> ModelVersion:
    """Make a model version the active one (give the DONE ``run`` that trained it, or the ``version`` itself, e.g. an
    imported checkpoint), deactivating every other in the same transaction.

    Once committed, a batch job scores every candidate answer on its question's current version with the new model
    (``predictions_score_task``, routed to ``ORCA_TRAIN_QUEUE`` by ``CELERY_TASK_ROUTES``). The database allows at most
    one active version (partial unique constraint), so concurrent activations cannot leave two active.

    Raises:
        ValidationError: the run is not DONE or has no registered model.
    """
    if (run is None) == (version is None):
        raise ValueError("give exactly one of run and version")
    if run is not None and run.status != TrainingRun.Status.DONE:
        raise ValidationError(f"training run #{run.pk} is {run.status}; only a finished (done) run can be activated")
    with transaction.atomic():
        try:
            if run is not None:
                version = ModelVersion.objects.select_for_update().get(training_run=run)
            else:
                version = ModelVersion.objects.select_for_update().get(pk=version.pk)
        except ModelVersion.DoesNotExist:
            raise ValidationError(f"training run #{run.pk} has no registered model") from None
        previous = list(
            ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).values_list("name", flat=True)
        )
        ModelVersion.objects.filter(is_active=True).exclude(pk=version.pk).update(is_active=False)
        version.is_active = True
        version.activated_at = timezone.now()
        version.activated_by = user
        version.save(update_fields=["is_active", "activated_at", "activated_by"])
        audit_record(
            actor=user, action="model.activate", obj=version, old={"active": previous}, new={"active": [version.name]}
        )
        enqueue(PREDICTIONS_SCORE, version.pk)
    return version
