"""The ORCA model registry: trained and imported model versions, and which one is active (the one whose predictions
the platform uses).

Registering an ORCA authors' checkpoint is a job (:func:`model_import_start` in the request, cheap checks only;
:func:`model_import_execute` in a worker of ``ORCA_TRAIN_QUEUE``, where torch and the tokenizer are loaded), so a web
process never imports torch. Only folders inside ``ORCA_IMPORT_ROOT`` can be imported (their paths resolved, symlinks
followed, in the request and again in the job); the import records the SHA-256 of the weight files and the tokenizer's
fingerprint, which every later load checks, so a folder changed after the import is refused, never scored with.
Activating a model is a scoring job (``modelling.services.scoring``) that activates it only after it loaded and passed
those checks."""
from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from annotation.forms import errors_text
from annotation.jobs.lifecycle import ACTIVE, run_execute, run_fail, run_finish, run_log, runs_fail_stale
from annotation.services.audit import audit_record
from modelling.models import ModelImport, ModelVersion, TrainingRun
from modelling.services.workers import orca_enqueue

#: The job kind that registers an ORCA authors' checkpoint (``ModellingConfig.ready`` registers its task).
MODEL_IMPORT = "model_import"


def artifact_root() -> Path:
    """Folder of run data and saved models: ``ORCA_ARTIFACT_DIR``, or ``MEDIA_ROOT/orca`` when that is empty."""
    return Path(settings.ORCA_ARTIFACT_DIR) if settings.ORCA_ARTIFACT_DIR else Path(settings.MEDIA_ROOT) / "orca"


def _model_version_register(row: ModelImport) -> ModelVersion:
    """Register the checkpoint of import ``row`` as an inactive model version: the work of the import job
    (:func:`model_import_execute`); it loads torch and the tokenizer, which is why requests only queue it.

    The folder is converted with ``modelling.orca.upstream.import_upstream`` into ``<artifact root>/imported-<name>``
    (our config and head; the LM stays in ``upstream_path``, referenced by absolute path, so keep it in place). The
    paths are checked against ``ORCA_IMPORT_ROOT`` again (a symlink may have changed since the request); the files
    are validated (config.yaml, head shapes, safetensors weights in lm/, tokenizer, a LoRA base model available
    locally) and their SHA-256 and the tokenizer fingerprint recorded; the LM itself is loaded, and all of it checked,
    by the scoring job that activates the version. The row's fields: see :func:`model_import_start`.

    Raises:
        ValidationError: a name taken meanwhile, or a folder that is not a loadable ORCA checkpoint (the message
            names the file and field); nothing is written then.
    """
    from modelling.orca.model import OrcaModelError
    from modelling.orca.upstream import import_upstream

    version = _version_checked(name=row.name, upstream_path=row.upstream_path, source_url=row.source_url,
                               licence=row.licence, user=row.created_by)
    paths = import_paths_checked(upstream_path=row.upstream_path, tokenizer=row.tokenizer, base_model=row.base_model)
    out = _import_folder(row.name)
    try:
        import_upstream(paths["upstream_path"], out, tokenizer=paths["tokenizer"], base_model=paths["base_model"],
                        clamp_threshold=row.clamp_threshold, rationale=row.rationale, check=False)
    except OrcaModelError as exc:
        raise ValidationError({"upstream_path": str(exc)}) from exc
    try:
        with transaction.atomic():
            version.artifact_path = str(out)
            version.metrics = {"imported": {"source_url": row.source_url, "licence": row.licence,
                                            "clamp_threshold": row.clamp_threshold}}
            version.save()
            audit_record(actor=row.created_by, action="model.import", obj=version, old=None,
                         new={"name": row.name, "upstream_path": version.upstream_path,
                              "source_url": row.source_url, "licence": row.licence})
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return version


def import_paths_checked(*, upstream_path: str, tokenizer: str = "", base_model: str = "") -> dict:
    """The import's folders resolved (``~`` expanded, symlinks followed) and each checked to lie inside a folder of
    ``ORCA_IMPORT_ROOT``: the checkpoint folder, the tokenizer folder (given, else ``../tokenizer`` beside the
    checkpoint, where it is looked for) and a LoRA base model folder when given.

    Returns:
        ``{"upstream_path": str, "tokenizer": str | None, "base_model": str | None}`` (None: not given).

    Raises:
        ValidationError: naming the field: imports are off (``ORCA_IMPORT_ROOT`` empty), or a path resolves outside
            every allowed folder.
    """
    roots = [Path(root).expanduser().resolve() for root in settings.ORCA_IMPORT_ROOT]
    if not roots:
        raise ValidationError({"upstream_path": "checkpoint import is off on this server: set ORCA_IMPORT_ROOT to the "
                                                "folder(s) that hold ORCA checkpoints (README, Published ORCA models)"})
    folder = Path(upstream_path).expanduser().resolve()
    paths = {"upstream_path": folder, "tokenizer": Path(tokenizer).expanduser().resolve() if tokenizer else None,
             "base_model": Path(base_model).expanduser().resolve() if base_model else None}
    checked = dict(paths, tokenizer=paths["tokenizer"] or folder.parent / "tokenizer")
    errors = {}
    for field, path in checked.items():
        if path is not None and not any(path.is_relative_to(root) for root in roots):
            given = {"upstream_path": upstream_path, "tokenizer": tokenizer or "../tokenizer",
                     "base_model": base_model}[field]
            errors[field] = (f"{given} resolves to {path}, outside the folders checkpoints may be imported from "
                             f"(ORCA_IMPORT_ROOT: {', '.join(str(r) for r in roots)})")
    if errors:
        raise ValidationError(errors)
    return {key: str(path) if path is not None else None for key, path in paths.items()}


def _import_folder(name: str) -> Path:
    return artifact_root() / f"imported-{slugify(name) or 'model'}"


def _version_checked(*, name: str, upstream_path: str, source_url: str, licence: str, user) -> ModelVersion:
    """The unsaved model version a registration would create, checked: a free name, a valid URL, a free target
    folder (checked when the import is queued, and again when it runs: the name may have been taken meanwhile).

    Raises:
        ValidationError: naming the field.
    """
    if ModelVersion.objects.filter(name=name).exists():
        raise ValidationError({"name": f"a model named {name!r} exists already"})
    version = ModelVersion(name=name, upstream_path=upstream_path, source_url=source_url, licence=licence,
                           registered_by=user, artifact_path="-")
    version.full_clean(exclude=["artifact_path"])
    if _import_folder(name).exists():
        raise ValidationError({"name": f"the folder {_import_folder(name)} exists already; choose another name"})
    return version


def model_import_start(
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
) -> ModelImport:
    """Queue the registration of a checkpoint of the ORCA authors' release (``orca_score``) as an inactive model
    version (:func:`model_import_execute` does it in a worker).

    Args:
        name: unique display name; upstream_path: their model folder (``best/model``).
        source_url, licence: provenance shown beside the model.
        tokenizer: tokenizer folder ("" = ``upstream_path/../tokenizer``); base_model: local base LM of a LoRA
            adapter ("" = the one its adapter_config.json names).
        clamp_threshold: their σ² threshold for clamping μ (None = none); rationale: the model reads the rationale.
        user: the admin registering it (audited).

    Checks here what needs no model loaded: a free name (no model version, no queued or running import of it), a
    valid URL, folders inside ``ORCA_IMPORT_ROOT`` (:func:`import_paths_checked`), an existing folder, a free target
    folder. The files themselves are checked by the job (:func:`model_import_execute`); a failed import shows why on
    the ORCA runs page.

    Raises:
        ValidationError: naming the field; nothing is written then.
    """
    name = name.strip()
    if ModelImport.objects.filter(name=name, status__in=ACTIVE).exists():
        raise ValidationError({"name": f"a checkpoint named {name!r} is being registered already"})
    folder = Path(upstream_path).expanduser()
    _version_checked(name=name, upstream_path=str(folder), source_url=source_url, licence=licence, user=user)
    import_paths_checked(upstream_path=upstream_path, tokenizer=tokenizer, base_model=base_model)
    if not folder.is_dir():
        raise ValidationError({"upstream_path": f"{folder} is not a folder on this server"})
    with transaction.atomic():
        row = ModelImport.objects.create(
            name=name, upstream_path=str(folder), source_url=source_url, licence=licence, tokenizer=tokenizer,
            base_model=base_model, clamp_threshold=clamp_threshold, rationale=rationale, created_by=user,
        )
        audit_record(actor=user, action="model.import.start", obj=row, old=None,
                     new={"name": name, "upstream_path": row.upstream_path})
        orca_enqueue(MODEL_IMPORT, ModelImport, row.pk)
    return row


def model_import_execute(*, import_id: int, task_id: str = "") -> ModelImport | None:
    """Run a queued import (:func:`_model_version_register`); returns the row as it ended, or None when it was not
    queued (a redelivered message). A checkpoint that does not load ends the row FAILED with the reason in its log
    ("FAILED: Upstream path: …/config.yaml is missing"), and nothing else is written."""

    def work(row: ModelImport) -> None:
        try:
            version = _model_version_register(row)
        except ValidationError as exc:
            run_log(ModelImport, row.pk, f"FAILED: {errors_text(exc)}")
            run_fail(ModelImport, row.pk)
            return
        run_log(ModelImport, row.pk, f"registered model version {version.name} ({version.artifact_path})")
        run_finish(ModelImport, row.pk, model_version=version)

    return run_execute(ModelImport, import_id, task_id=task_id, work=work, what="checkpoint import")


def model_imports_fail_stale(*, now=None) -> int:
    """Fail RUNNING imports silent for ``ORCA_STALE_MINUTES`` (a worker lost mid-import); returns how many."""
    return runs_fail_stale(ModelImport, now=now or timezone.now(), minutes=settings.ORCA_STALE_MINUTES)


def model_imports_unregistered(limit: int = 10) -> list[ModelImport]:
    """The latest checkpoint imports that registered no model version (queued, running, failed or cancelled),
    newest first (the ORCA runs page lists the registered ones as model versions)."""
    return list(ModelImport.objects.filter(model_version__isnull=True)[:limit])


def model_version_activate(*, run: TrainingRun | None = None, version: ModelVersion | None = None,
                           user=None) -> ModelVersion:
    """Make a model version the active one (give the DONE ``run`` that trained it, or the ``version`` itself, e.g. an
    imported checkpoint), deactivating every other in the same transaction: the switch itself.

    Called by the activating scoring job once the model loaded and passed its checks
    (``modelling.services.scoring.scoring_run_execute``); requests start that job with ``scoring_run_start(...,
    activate=True)`` instead, so a model that fails its checks is never activated. The job then scores every
    candidate answer. The database allows at most one active version (partial unique constraint), so concurrent
    activations cannot leave two active.

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
    return version
