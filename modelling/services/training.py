"""ORCA training runs in the platform: start, execute, cancel, reap stale runs, retrain periodically.

A run is a row first (``TrainingRun``, QUEUED), then a Celery task (``modelling.tasks.training_run_task``, routed to
``ORCA_TRAIN_QUEUE`` by ``CELERY_TASK_ROUTES``) claims it with a conditional update (QUEUED → RUNNING; the lifecycle is
:mod:`annotation.jobs.lifecycle`), exports the split data with annotation's export service, calls
``modelling.orca.train`` with a progress callback (epoch, loss, dev ρ; heartbeat), evaluates dev and test (ORCA paper,
section 5.4: Spearman ρ, Kendall τ, MAE_μ, MAE_σ², unclamped and clamped as in section 5.5), registers the saved model
as a ``ModelVersion`` and ends DONE. Any exception ends it FAILED with the message and traceback in ``log``.

Heavy imports (torch, transformers, ``modelling.orca``) happen inside :func:`training_run_execute` only, so web
processes stay light.
"""
from __future__ import annotations

import math
import time
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.jobs.lifecycle import (
    HEARTBEAT_EVERY_S,
    RunStopped,
    run_cancel,
    run_execute,
    run_finish,
    run_heartbeat,
    run_log,
    runs_fail_stale,
)
from annotation.models import LALM, CandidateAnswer, Question
from annotation.services.audit import audit_record
from annotation.services.exports import dataset_export_orca_jsonl
from annotation.services.splits import split_held_out_lalms, split_unseen_questions
from modelling.models import ModelVersion, SplitKind, TrainingRun
from modelling.orca.metrics import json_finite
from modelling.orca.presets import DEFAULT_PRESET, preset
from modelling.selectors import model_version_active, valid_rating_count
from modelling.services.registry import artifact_root
from modelling.services.scoring import scoring_run_start
from modelling.services.workers import orca_device, orca_enqueue

HEADS = ("beta", "multinomial")
POOLINGS = ("auto", "mean", "cls", "last")
DEVICES = ("cpu", "cuda")
#: Defaults of a run's ``config``: the ``cpu-minilm`` preset, the same recipe as ``python -m modelling.orca train`` and
#: bench/orca.py (``modelling.orca.presets``, a module without torch, so web processes can read it).
DEFAULT_CONFIG = preset(DEFAULT_PRESET)
#: Dev share of the training LALMs' questions in the held-out-LALM scenario.
HELD_OUT_DEV_RATIOS = (0.9, 0.1, 0.0)


def training_config_clean(*, config: dict) -> dict:
    """Validate a run's settings and fill defaults (``DEFAULT_CONFIG``; base model and device from settings).

    Returns a new dict with every key of ``DEFAULT_CONFIG``. Raises ``ValidationError`` naming the field for an
    unknown key, a wrong type or a value out of range (epochs 1–1000, lr in (0, 1), batch_size 1–4096,
    freeze_layers 0–1000, lora_rank 0–1024, var_weight 0–1000, max_length 16–32768).
    """
    unknown = sorted(set(config) - set(DEFAULT_CONFIG))
    if unknown:
        raise ValidationError({key: "unknown ORCA setting" for key in unknown})
    clean = dict(DEFAULT_CONFIG, base_model=settings.ORCA_BASE_MODEL, device=settings.ORCA_DEVICE) | dict(config)
    errors: dict[str, str] = {}
    if not isinstance(clean["base_model"], str) or not clean["base_model"].strip():
        errors["base_model"] = "name a base model: minilm, smollm2, gemma3-270m, a folder or a hub name"
    for key, choices in (("head", HEADS), ("pooling", POOLINGS), ("device", DEVICES)):
        if clean[key] not in choices:
            errors[key] = f"must be one of {', '.join(choices)}"
    for key, low, high in (("epochs", 1, 1000), ("batch_size", 1, 4096), ("freeze_layers", 0, 1000),
                           ("lora_rank", 0, 1024), ("max_length", 16, 32768)):
        value = clean[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            errors[key] = f"must be a whole number from {low} to {high}"
    lr = clean["lr"]
    if isinstance(lr, bool) or not isinstance(lr, int | float) or not 0 < lr < 1:
        errors["lr"] = "must be a number between 0 and 1"
    var_weight = clean["var_weight"]
    if isinstance(var_weight, bool) or not isinstance(var_weight, int | float) or not 0 <= var_weight <= 1000:
        errors["var_weight"] = "must be a number from 0 to 1000"
    for key in ("rationale", "question", "transcript"):
        if not isinstance(clean[key], bool):
            errors[key] = "must be true or false"
    if errors:
        raise ValidationError(errors)
    clean["base_model"] = clean["base_model"].strip()
    clean["lr"] = float(lr)
    clean["var_weight"] = float(var_weight)
    return clean


def _split_clean(split: dict) -> tuple[str, int, list[str]]:
    kind = split.get("kind", SplitKind.UNSEEN_QUESTIONS)
    if kind not in SplitKind.values:
        raise ValidationError({"split_kind": f"must be one of {', '.join(SplitKind.values)}"})
    seed = split.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError({"seed": "must be a whole number"})
    held_out = sorted({str(name) for name in split.get("held_out_lalms") or []})
    if kind == SplitKind.HELD_OUT_LALMS and not held_out:
        raise ValidationError({"held_out_lalms": "name at least one LALM to hold out"})
    if kind == SplitKind.UNSEEN_QUESTIONS:
        held_out = []
    return kind, seed, held_out


def training_run_start(
    *, config: dict, split: dict, created_by=None, trigger: str = TrainingRun.Trigger.MANUAL
) -> TrainingRun:
    """Create a QUEUED training run and enqueue its task once the transaction commits.

    Args:
        config: ORCA settings (see :func:`training_config_clean`; missing keys take defaults).
        split: ``{"kind": "unseen_questions" | "held_out_lalms", "seed": int, "held_out_lalms": [LALM name, ...]}``.
        created_by: the user starting it (None for periodic retraining).
        trigger: ``TrainingRun.Trigger`` value.

    The task goes to ``ORCA_TRAIN_QUEUE`` when set (``CELERY_TASK_ROUTES``). Raises ``ValidationError`` for bad
    settings or split.
    """
    clean = training_config_clean(config=config)
    kind, seed, held_out = _split_clean(split)
    with transaction.atomic():
        run = TrainingRun(
            config=clean, split_kind=kind, split_seed=seed, held_out_lalms=held_out, trigger=trigger,
            created_by=created_by,
        )
        run.full_clean()
        run.save()
        audit_record(actor=created_by, action="training_run.start", obj=run,
                     new={"config": clean, "split_kind": kind, "split_seed": seed, "held_out_lalms": held_out,
                          "trigger": trigger})
        orca_enqueue(TRAINING_RUN, TrainingRun, run.pk)
    return run


#: The job kind of a training run (``ModellingConfig.ready`` registers its task).
TRAINING_RUN = "training_run"


def _log(run_id: int, line: str) -> None:
    run_log(TrainingRun, run_id, line)


def _rated_questions():
    """Questions with at least one validly scored candidate answer on their current version."""
    rated = CandidateAnswer.objects.filter(
        question_version=F("question_version__question__current_version"),
        ratings__is_valid=True,
        ratings__score__isnull=False,
    ).values("question_version__question_id")
    return Question.objects.filter(pk__in=rated).only("id", "modality", "category")


def _rated_lalm_names() -> set[str]:
    return set(
        LALM.objects.filter(
            candidates__question_version=F("candidates__question_version__question__current_version"),
            candidates__ratings__is_valid=True,
            candidates__ratings__score__isnull=False,
        ).values_list("name", flat=True)
    )


def training_split_export(*, run: TrainingRun, data_dir: Path) -> dict[str, Path]:
    """Write the run's train/dev/test ORCA JSONL files into ``data_dir``; returns their paths by split name.

    Unseen questions: ``split_unseen_questions`` over the rated questions (8:1:1, seeded). Held-out LALMs: the test
    split is every answer of the held-out LALMs; the other LALMs' answers are split 9:1 by question into train/dev.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    questions = list(_rated_questions())
    paths = {name: data_dir / f"{name}.jsonl" for name in ("train", "dev", "test")}
    if run.split_kind == SplitKind.HELD_OUT_LALMS:
        lalms = split_held_out_lalms(lalm_names=_rated_lalm_names(), held_out=run.held_out_lalms)
        parts = split_unseen_questions(questions=questions, seed=run.split_seed, ratios=HELD_OUT_DEV_RATIOS)
        filters = {
            "train": {"question_ids": parts["train"], "lalm_names": lalms["train"]},
            "dev": {"question_ids": parts["dev"], "lalm_names": lalms["train"]},
            "test": {"lalm_names": lalms["test"]},
        }
    else:
        parts = split_unseen_questions(questions=questions, seed=run.split_seed)
        filters = {name: {"question_ids": parts[name]} for name in paths}
    for name, path in paths.items():
        dataset_export_orca_jsonl(out=path, **filters[name])
    return paths


def scored_items(path: Path) -> list:
    """The ``modelling.orca`` items of an ORCA JSONL file that have at least one scored rating (answers rated only
    with U/E are exported but carry no training signal)."""
    from modelling.orca import load_items

    return [item for item in load_items(path, require_ratings=False) if item.ratings]


def _evaluate(model, tokenizer, items, *, device: str) -> dict | None:
    """Unclamped and clamped metrics of a trained model on labelled items, or None for fewer than 2 items."""
    from modelling.orca import evaluate_predictions, item_targets, predict

    if len(items) < 2:
        return None
    pred = predict(model, tokenizer, items, device=device)
    human_mean, human_var = item_targets(items)
    return {
        "unclamped": evaluate_predictions(pred["mu"], pred["var"], human_mean, human_var),
        # clamped: ORCA's μ clamp, plus σ² = 0 for the clamped items and the dev-tuned concentration scale
        # (our extensions; modelling.orca.metrics.clamp_predictions)
        "clamped": evaluate_predictions(*model.config.postprocess(pred["mu"], pred["var"]), human_mean, human_var),
    }


class _Progress:
    """The ``modelling.orca.train`` callback: progress entries per epoch, step counts and a throttled heartbeat."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        self.entries: list[dict] = []
        self.last_beat = 0.0

    def _beat(self, **fields) -> None:
        self.last_beat = time.monotonic()
        run_heartbeat(TrainingRun, self.run_id, **fields)  # raises RunStopped once the run was cancelled

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "start":
            _log(self.run_id, f"training {event.get('n_train')} items, {event.get('steps')} steps, "
                              f"{event.get('trainable_params')} trainable parameters")
            self._beat(steps_total=int(event.get("steps") or 0))
        elif kind == "step" and time.monotonic() - self.last_beat >= HEARTBEAT_EVERY_S:
            self._beat(steps_done=int(event["step"]))
        elif kind == "epoch":
            dev = event.get("dev") or {}
            entry = json_finite({
                "epoch": event["epoch"], "loss": event["loss"], "dev_rho": dev.get("rho"), "dev_tau": dev.get("tau"),
                "dev_mae_mu": dev.get("mae_mu"), "elapsed_s": event.get("elapsed_s"),
            })
            self.entries.append(entry)
            rho = "–" if entry["dev_rho"] is None else f"{entry['dev_rho']:.4f}"
            _log(self.run_id, f"epoch {entry['epoch']}: loss {entry['loss']:.4f}, dev rho {rho}")
            self._beat(progress=list(self.entries), steps_done=int(event.get("step") or 0))


def training_run_execute(*, run_id: int, task_id: str = "") -> TrainingRun | None:
    """Claim a QUEUED run and train it to DONE (or FAILED / CANCELLED); returns the run, or None if not claimable.

    Re-runnable: a redelivered or duplicate message finds the run no longer QUEUED and returns None. Writes the split
    data to ``<artifact root>/run-<pk>/data/`` and the model to ``<artifact root>/run-<pk>/model/``. On DONE the model
    is registered as an inactive ``ModelVersion``; a periodic-retraining run is then activated when its dev ρ is not
    worse than the active model's (:func:`training_run_promote_if_not_worse`).
    """
    run = run_execute(TrainingRun, run_id, task_id=task_id, work=_train, what="run")
    if run is None:
        return None
    if run.status == TrainingRun.Status.DONE and run.trigger == TrainingRun.Trigger.RETRAIN:
        training_run_promote_if_not_worse(run=run)
    return run


def orca_configs(*, config: dict, seed: int, device: str | None = None):
    """``(OrcaConfig, TrainConfig)`` of a run's cleaned ``config`` (:func:`training_config_clean`) with ``seed``, on
    ``device`` when given (the worker's fallback) else the config's; shared by training runs and the leaderboard's
    cross-fits. Imports ``modelling.orca`` (torch)."""
    from modelling.orca import configs_from_settings

    return configs_from_settings(config | ({"device": device} if device else {}), seed=seed, log_every=1)


def _train(run: TrainingRun) -> None:
    from modelling.orca import train

    cfg = run.config
    folder = artifact_root() / f"run-{run.pk:05d}"
    source_rating_count = valid_rating_count()
    paths = training_split_export(run=run, data_dir=folder / "data")
    items = {name: scored_items(path) for name, path in paths.items()}
    counts = {}
    for name, split_items in items.items():
        counts[f"n_{name}_items"] = len(split_items)
        counts[f"n_{name}_ratings"] = sum(len(item.ratings) for item in split_items)
    TrainingRun.objects.filter(pk=run.pk).update(source_rating_count=source_rating_count, **counts)
    _log(run.pk, "split {}: train {n_train_items} items / {n_train_ratings} ratings, dev {n_dev_items} / "
                 "{n_dev_ratings}, test {n_test_items} / {n_test_ratings}".format(run.split_kind, **counts))
    if not items["train"]:
        raise ValueError("the training split has no candidate answer with a scored valid rating")

    device, note = orca_device(cfg["device"])  # cuda asked for on a worker without it: the CPU, noted
    if note:
        _log(run.pk, note)
    model_config, train_config = orca_configs(config=cfg, seed=run.split_seed, device=device)
    model_dir = folder / "model"
    result = train(
        items["train"], items["dev"] or None, model_dir, model_config, train_config, callback=_Progress(run.pk)
    )
    trained = result["config"]
    dev_metrics = trained.dev_metrics or {}
    metrics = json_finite({
        "dev": {"unclamped": dev_metrics["unclamped"], "clamped": dev_metrics["clamped"]} if dev_metrics else None,
        "test": _evaluate(result["model"], result["tokenizer"], items["test"], device=device),
        "best_epoch": dev_metrics.get("best_epoch"),
        "clamp_threshold": trained.clamp_threshold,
        "concentration_scale": trained.concentration_scale,
        "train_wall_s": round(result["train_wall_s"], 2),
        "pooling": trained.pooling,
        "device": device,
        "verification": trained.verification,
    })
    with transaction.atomic():
        if not run_finish(TrainingRun, run.pk, metrics=metrics, artifact_path=str(model_dir)):
            raise RunStopped(f"training run {run.pk} was cancelled")
        run.refresh_from_db()
        model_version_register(run=run)
    _log(run.pk, f"done in {metrics['train_wall_s']} s; model saved to {model_dir}")


def model_version_register(*, run: TrainingRun) -> ModelVersion:
    """Register a DONE run's saved model as an inactive ``ModelVersion`` named ``orca-<run>-<base>-<head>``."""
    base = Path(str(run.config.get("base_model", "model"))).name or "model"
    version = ModelVersion(
        training_run=run, name=f"orca-{run.pk}-{base}-{run.config.get('head', 'beta')}"[:200],
        artifact_path=run.artifact_path, metrics=run.metrics,
    )
    version.full_clean()
    version.save()
    return version


def training_run_cancel(*, run: TrainingRun, user=None) -> bool:
    """Cancel a QUEUED or RUNNING run; returns False when it had already finished.

    A QUEUED run is never started (its task finds it no longer QUEUED); a RUNNING one stops at its next heartbeat
    (within ``HEARTBEAT_EVERY_S`` seconds of training steps). No Celery revoke is needed, and none is sent: the
    embedded ``filesystem://`` broker has no broadcast channel for it.
    """
    with transaction.atomic():
        before = run_cancel(TrainingRun, run.pk)
        if before is None:
            return False
        _log(run.pk, f"cancelled by {getattr(user, 'username', None) or 'the system'}")
        audit_record(actor=user, action="training_run.cancel", obj=run, old={"status": before},
                     new={"status": TrainingRun.Status.CANCELLED})
    return True


def training_runs_fail_stale(*, now=None) -> int:
    """Mark RUNNING runs whose heartbeat is older than ``ORCA_STALE_MINUTES`` FAILED; returns how many.

    A worker killed by the hard time limit, out of memory or a machine going away leaves its run RUNNING; this is
    what ends it (beat, every 5 minutes). A run without a heartbeat is judged by its start time.
    """
    return runs_fail_stale(TrainingRun, now=now or timezone.now(), minutes=settings.ORCA_STALE_MINUTES)


def _dev_rho(metrics: dict | None) -> float | None:
    dev = (metrics or {}).get("dev") or {}
    rho = (dev.get("unclamped") or {}).get("rho")
    return None if rho is None or not math.isfinite(rho) else float(rho)


def retrain_should_activate(*, new_rho: float | None, active_rho: float | None) -> bool:
    """True when a retrained model's dev ρ is not worse than the active model's (ties activate the new one).

    An undefined new ρ never activates; an undefined active ρ always lets a defined new one through.
    """
    if new_rho is None or not math.isfinite(new_rho):
        return False
    if active_rho is None or not math.isfinite(active_rho):
        return True
    return new_rho >= active_rho


def training_run_promote_if_not_worse(*, run: TrainingRun) -> bool:
    """Activate a DONE run's model when its dev ρ (unclamped) is not worse than the active model's; returns whether
    its activation was started (a scoring job activates it once the saved model loaded and passed its checks:
    ``modelling.services.scoring``).

    The two ρ come from each run's own dev split (the data grew in between, so the splits differ); unclamped ρ
    because the clamp threshold is tuned on dev itself.
    """
    active = model_version_active()
    new_rho = _dev_rho(run.metrics)
    active_rho = _dev_rho(active.metrics) if active else None
    if active is not None and active.training_run_id == run.pk:
        return True
    if not retrain_should_activate(new_rho=new_rho, active_rho=active_rho):
        _log(run.pk, f"not activated: dev rho {new_rho} is worse than the active model's {active_rho}")
        return False
    scoring = scoring_run_start(run=run, activate=True, user=None)
    _log(run.pk, f"activating (scoring run #{scoring.pk} checks the saved model first): dev rho {new_rho} is not "
                 f"worse than the previous model's {active_rho}")
    return True


def training_retrain_if_due() -> TrainingRun | None:
    """Start a retraining run when ``ORCA_RETRAIN_EVERY`` new valid ratings arrived since the active model's data.

    Uses the active model's run settings and split (kind, seed, held-out LALMs). Nothing happens without an active
    model, when the active model is an imported checkpoint (it has no run to repeat), with ``ORCA_RETRAIN_EVERY`` ≤ 0,
    or while another run is QUEUED or RUNNING. Returns the new run or None.
    """
    every = settings.ORCA_RETRAIN_EVERY
    if every <= 0:
        return None
    active = model_version_active()
    if active is None:
        return None
    if TrainingRun.objects.filter(status__in=[TrainingRun.Status.QUEUED, TrainingRun.Status.RUNNING]).exists():
        return None
    source = active.training_run
    if source is None:  # an imported checkpoint: no recipe or split of ours to retrain it with
        return None
    if valid_rating_count() - source.source_rating_count < every:
        return None
    return training_run_start(
        config=source.config,
        split={"kind": source.split_kind, "seed": source.split_seed, "held_out_lalms": source.held_out_lalms},
        created_by=None,
        trigger=TrainingRun.Trigger.RETRAIN,
    )
