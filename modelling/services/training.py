"""ORCA training runs in the platform: start, execute, cancel, reap stale runs, retrain periodically.

A run is a row first (``TrainingRun``, QUEUED), then a Celery task (``modelling.tasks.training_run_task``, routed to
``ORCA_TRAIN_QUEUE`` by ``CELERY_TASK_ROUTES``) claims it with a conditional update (QUEUED → RUNNING; the lifecycle is
:mod:`annotation.jobs.lifecycle`), writes the split data (:mod:`modelling.services.training_split`), calls
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
from annotation.services.audit import audit_record
from annotation.services.splits import SPLIT_NAMES
from modelling.models import ModelVersion, SplitKind, TrainingRun, TrainingSplit
from modelling.orca.metrics import json_finite
from modelling.orca.presets import DEFAULT_PRESET, preset
from modelling.selectors import model_version_active, valid_rating_count
from modelling.services.orca_evaluation import (
    activation_compare,
    group_key,
    per_group_metrics,
)
from modelling.services.registry import artifact_root
from modelling.services.scoring import scoring_run_start
from modelling.services.training_split import SplitItem, scored_items, training_split_inherited, training_split_write
from modelling.services.workers import orca_device, orca_enqueue

HEADS = ("beta", "multinomial")
POOLINGS = ("auto", "mean", "cls", "last")
DEVICES = ("cpu", "cuda")
#: Defaults of a run's ``config``: the ``cpu-minilm`` preset, the same recipe as ``python -m modelling.orca train`` and
#: bench/orca.py (``modelling.orca.presets``, a module without torch, so web processes can read it).
DEFAULT_CONFIG = preset(DEFAULT_PRESET)
#: Adaptation keys of a run's ``config`` beside the preset's: ``init_from`` (the folder of the model version the run
#: starts from, set by :func:`training_run_start` from its ``parent``) and ``group_weights`` ({"benchmark=NAME":
#: weight > 0}: each answer's loss weight is multiplied by the weight of each of its groups listed; README, "Training
#: ORCA in the browser").
ADAPT_DEFAULTS = {"init_from": None, "group_weights": {}}
#: Settings of the model itself: an adapted run takes them from its parent (the base-model options are ignored).
MODEL_KEYS = ("base_model", "head", "pooling", "max_length", "rationale", "question", "transcript", "lexical",
              "lora_rank")


def training_config_clean(*, config: dict) -> dict:
    """Validate a run's settings and fill defaults (``DEFAULT_CONFIG``; base model and device from settings).

    Returns a new dict with every key of ``DEFAULT_CONFIG`` and ``ADAPT_DEFAULTS``. Raises ``ValidationError``
    naming the field for an unknown key, a wrong type or a value out of range (epochs 1–1000, lr in (0, 1),
    batch_size 1–4096, freeze_layers 0–1000, lora_rank 0–1024, var_weight 0–1000, max_length 16–32768,
    group_weights {non-empty name: number in (0, 1000]}, init_from a folder name or None).
    """
    unknown = sorted(set(config) - set(DEFAULT_CONFIG) - set(ADAPT_DEFAULTS))
    if unknown:
        raise ValidationError({key: "unknown ORCA setting" for key in unknown})
    clean = dict(DEFAULT_CONFIG, base_model=settings.ORCA_BASE_MODEL, device=settings.ORCA_DEVICE,
                 **ADAPT_DEFAULTS) | dict(config)
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
    for key in ("rationale", "question", "transcript", "lexical"):
        if not isinstance(clean[key], bool):
            errors[key] = "must be true or false"
    weights = clean["group_weights"] or {}
    if not isinstance(weights, dict) or any(
            not isinstance(k, str) or not k.strip() or isinstance(w, bool) or not isinstance(w, int | float)
            or not 0 < w <= 1000 for k, w in weights.items()):
        errors["group_weights"] = "must map group names such as 'benchmark=NAME' to weights above 0 and at most 1000"
    if clean["init_from"] is not None and (not isinstance(clean["init_from"], str) or not clean["init_from"].strip()):
        errors["init_from"] = "must be the folder of a saved ORCA model, or empty"
    if errors:
        raise ValidationError(errors)
    clean["group_weights"] = {k.strip(): float(w) for k, w in weights.items()}
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
    *, config: dict, split: dict, created_by=None, trigger: str = TrainingRun.Trigger.MANUAL,
    parent: ModelVersion | None = None,
) -> TrainingRun:
    """Create a QUEUED training run and enqueue its task once the transaction commits.

    Args:
        config: ORCA settings (see :func:`training_config_clean`; missing keys take defaults). ``init_from`` is set
            here from ``parent`` only.
        split: ``{"kind": "unseen_questions" | "held_out_lalms", "seed": int, "held_out_lalms": [LALM name, ...]}``.
        created_by: the user starting it (None for periodic retraining).
        trigger: ``TrainingRun.Trigger`` value.
        parent: the model version to start from (adaptation; usually the active one): the run fine-tunes its saved
            folder (``init_from``) with the parent's model settings (base model, head, pooling, inputs, max length,
            LoRA rank), and keeps the parent's split of the questions it knew (:func:`training_split_parts`), so
            its test split holds only questions no model of its line trained on.

    The task goes to ``ORCA_TRAIN_QUEUE`` when set (``CELERY_TASK_ROUTES``). Raises ``ValidationError`` for bad
    settings or split, an ``init_from`` without a parent, a parent that is a cross-fit fold, or an adaptation with
    the held-out-LALM split (the parent may have trained on those LALMs' answers).
    """
    config = dict(config)
    if parent is None:
        if config.get("init_from"):
            raise ValidationError({"init_from": "a run starts from a registered model version (its parent), not a "
                                                "folder"})
    else:
        if parent.training_run_id and parent.training_run.split_kind == SplitKind.CROSS_FIT:
            raise ValidationError({"parent": f"{parent.name} is a cross-fit fold's model; start from a trained or "
                                             "imported model version"})
        inherited = parent.training_run.config if parent.training_run_id else {}
        config |= {key: inherited[key] for key in MODEL_KEYS if key in inherited}
        config["init_from"] = parent.artifact_path
    clean = training_config_clean(config=config)
    kind, seed, held_out = _split_clean(split)
    if parent is not None and kind != SplitKind.UNSEEN_QUESTIONS:
        raise ValidationError({"split_kind": "a run adapted from a model tests on unseen questions: its parent may "
                                             "have trained on any LALM's answers"})
    with transaction.atomic():
        run = TrainingRun(
            config=clean, split_kind=kind, split_seed=seed, held_out_lalms=held_out, trigger=trigger,
            created_by=created_by, parent=parent,
        )
        run.full_clean()
        run.save()
        audit_record(actor=created_by, action="training_run.start", obj=run,
                     new={"config": clean, "split_kind": kind, "split_seed": seed, "held_out_lalms": held_out,
                          "trigger": trigger, "parent": getattr(parent, "name", None)})
        orca_enqueue(TRAINING_RUN, TrainingRun, run.pk)
    return run


#: The job kind of a training run (``ModellingConfig.ready`` registers its task).
TRAINING_RUN = "training_run"


def _log(run_id: int, line: str) -> None:
    run_log(TrainingRun, run_id, line)


def _evaluate(model, tokenizer, items, *, device: str, index: dict[str, SplitItem]) -> tuple[dict | None, dict]:
    """(metrics, predictions) of a trained model on labelled items: metrics {unclamped, clamped (from 2 items),
    per_group (``orca_evaluation.per_group_metrics`` of the unclamped μ by the items' groups, the interval of ρ
    over question clusters)}, None without items;
    predictions {item id: (μ, mean normalised human rating)}."""
    from modelling.orca import evaluate_predictions, item_targets, predict

    if not items:
        return None, {}
    pred = predict(model, tokenizer, items, device=device)
    human_mean, human_var = item_targets(items)
    metrics = {"per_group": per_group_metrics([index[it.id].groups for it in items], pred["mu"], pred["var"],
                                              human_mean, human_var, clusters=[index[it.id].question for it in items])}
    if len(items) >= 2:
        metrics["unclamped"] = evaluate_predictions(pred["mu"], pred["var"], human_mean, human_var)
        # clamped: ORCA's μ clamp, plus σ² = 0 for the clamped items and the dev-tuned concentration scale
        # (our extensions; modelling.orca.metrics.clamp_predictions)
        metrics["clamped"] = evaluate_predictions(*model.config.postprocess(pred["mu"], pred["var"]), human_mean,
                                                  human_var)
    return metrics, {it.id: (float(mu), float(hm)) for it, mu, hm in zip(items, pred["mu"], human_mean)}


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
    cross-fits. ``init_from`` and ``group_weights``, when set, go to the TrainConfig. Imports ``modelling.orca``
    (torch).

    Raises:
        ValueError: an adaptation setting is set that this worker's ``modelling.orca`` does not know (a worker
            running older code): the run fails saying so instead of silently training from the base model.
    """
    import dataclasses

    from modelling.orca import TrainConfig, configs_from_settings

    adapt = {key: config[key] for key in ADAPT_DEFAULTS if config.get(key)}
    unknown = sorted(set(adapt) - {f.name for f in dataclasses.fields(TrainConfig)})
    if unknown:
        raise ValueError(f"this worker's modelling.orca has no {', '.join(unknown)} setting (warm start from a saved "
                         "model, per-group weights): update the worker's code, or start the run from the base model "
                         "without group weights")
    return configs_from_settings(config | ({"device": device} if device else {}), seed=seed, log_every=1, **adapt)


def valid_rating_counts_by_benchmark() -> dict[str, int]:
    """{benchmark name: valid scored ratings on current question versions} (the counts retraining compares)."""
    from django.db.models import Count

    from modelling.selectors import valid_rating_queryset

    name = "candidate__question_version__question__benchmark__name"
    return dict(valid_rating_queryset().values(name).annotate(n=Count("id")).values_list(name, "n"))


def _train(run: TrainingRun) -> None:
    from modelling.orca import train

    cfg = run.config
    folder = artifact_root() / f"run-{run.pk:05d}"
    source_rating_count = valid_rating_count()
    source_counts = valid_rating_counts_by_benchmark()
    if run.parent_id is not None:
        _log(run.pk, f"adapting {run.parent.name}: training starts from its saved folder {cfg.get('init_from')}")
        if training_split_inherited(run) is None:
            _log(run.pk, f"{run.parent.name} has no recorded split: its trained questions are unknown, so this run's "
                         "held-out questions may include some of them (its test figures may be optimistic)")
    if cfg.get("group_weights"):
        _log(run.pk, "group weights: " + ", ".join(f"{k} × {w:g}" for k, w in sorted(cfg["group_weights"].items())))
    export = training_split_write(run=run, data_dir=folder / "data")
    TrainingSplit.objects.update_or_create(run=run, defaults={name: sorted(export.parts[name])
                                                              for name in SPLIT_NAMES})
    items = {name: scored_items(path) for name, path in export.paths.items()}
    counts = {}
    for name, split_items in items.items():
        counts[f"n_{name}_items"] = len(split_items)
        counts[f"n_{name}_ratings"] = sum(len(item.ratings) for item in split_items)
    TrainingRun.objects.filter(pk=run.pk).update(source_rating_count=source_rating_count,
                                                 source_rating_counts=source_counts, **counts)
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
    dev_eval, _ = _evaluate(result["model"], result["tokenizer"], items["dev"], device=device, index=export.items)
    test_eval, test_pred = _evaluate(result["model"], result["tokenizer"], items["test"], device=device,
                                     index=export.items)
    metrics = json_finite({
        "dev": {"unclamped": dev_metrics["unclamped"], "clamped": dev_metrics["clamped"],
                "per_group": (dev_eval or {}).get("per_group", {})} if dev_metrics else None,
        "test": test_eval,
        "best_epoch": dev_metrics.get("best_epoch"),
        "clamp_threshold": trained.clamp_threshold,
        "concentration_scale": trained.concentration_scale,
        "train_wall_s": round(result["train_wall_s"], 2),
        "pooling": trained.pooling,
        "device": device,
        "verification": trained.verification,
    })
    held_out = {export.items[i].candidate: (mu, hm, export.items[i].question, export.items[i].groups["benchmark"])
                for i, (mu, hm) in test_pred.items()}
    decision = json_finite(activation_compare(run=run, held_out=held_out))
    with transaction.atomic():
        if not run_finish(TrainingRun, run.pk, metrics=metrics, artifact_path=str(model_dir),
                          activation_decision=decision):
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
    """Activate a DONE run's model when it is not worse than the active model on any benchmark; returns whether its
    activation was started (a scoring job activates it once the saved model loaded and passed its checks:
    ``modelling.services.scoring``).

    "Not worse" is the run's ``activation_decision`` (``orca_quality.activation_compare``: ρ on each benchmark's
    held-out answers that neither model trained on, a drop counting only beyond ``ORCA_ACTIVATION_RHO_TOLERANCE``
    and beyond noise). Where it compared no benchmark (too few such answers), or the run has no decision (runs
    from before it was recorded), the dev ρ rule decides (:func:`retrain_should_activate`; unclamped ρ, each run on
    its own dev split). A decision taken against a model that is no longer the active one activates nothing. The
    outcome and its reasons are written to the run's log and its ``activation_decision``.
    """
    active = model_version_active()
    if active is not None and active.training_run_id == run.pk:
        return True
    decision = dict(run.activation_decision or {})
    activate = decision.get("activate")
    reasons = list(decision.get("reasons") or [])
    if decision and decision.get("active_version") != getattr(active, "pk", None):
        activate, reasons = False, reasons + [
            f"the active model changed since the comparison (then {decision.get('active_name') or 'none'}, now "
            f"{getattr(active, 'name', None) or 'none'}): start a new run to compare with it"]
    elif activate is None:
        new_rho, active_rho = _dev_rho(run.metrics), _dev_rho(active.metrics) if active else None
        activate = retrain_should_activate(new_rho=new_rho, active_rho=active_rho)
        reasons.append(f"dev ρ {new_rho} is {'not ' if activate else ''}worse than the active model's {active_rho} "
                       "(each on its own dev split)")
    decision |= {"activate": bool(activate), "reasons": reasons, "applied": True}
    TrainingRun.objects.filter(pk=run.pk).update(activation_decision=decision)
    if not activate:
        _log(run.pk, "not activated: " + "; ".join(reasons))
        return False
    scoring = scoring_run_start(run=run, activate=True, user=None)
    _log(run.pk, f"activating (scoring run #{scoring.pk} checks the saved model first): " + "; ".join(reasons))
    return True


def retrain_weighted_benchmarks(*, source: TrainingRun, counts: dict[str, int]) -> list[str]:
    """Benchmarks whose answers a retraining weights up: those the active model's run saw fewer than half of the
    current valid ratings of (``source.source_rating_counts``; a benchmark new to it saw none), sorted."""
    seen = source.source_rating_counts or {}
    return sorted(name for name, n in counts.items() if n and seen.get(name, 0) < n / 2)


def training_retrain_if_due() -> TrainingRun | None:
    """Start a retraining run when ``ORCA_RETRAIN_EVERY`` new valid ratings arrived since the active model's data.

    The run adapts the active model (starts from it: ``parent``, keeping its split of the questions it knew) with
    its run's settings but ``ORCA_ADAPT_EPOCHS`` epochs (when > 0) and weights up the benchmarks it has seen fewer
    than half of the ratings of (:func:`retrain_weighted_benchmarks`, weight ``ORCA_ADAPT_WEIGHT``); where the
    active model's split is not recorded or was a held-out-LALM split, it trains from the base model with the same
    settings and split instead (as before adaptation existed). Nothing happens without an active model, when the
    active model is an imported checkpoint (it has no run to repeat), with ``ORCA_RETRAIN_EVERY`` ≤ 0, or while
    another run is QUEUED or RUNNING. Returns the new run or None. The run is activated only when it is not worse on
    any benchmark (:func:`training_run_promote_if_not_worse`).
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
    weighted = retrain_weighted_benchmarks(source=source, counts=valid_rating_counts_by_benchmark())
    adapt = source.split_kind == SplitKind.UNSEEN_QUESTIONS and TrainingSplit.objects.filter(run=source).exists()
    config = dict(source.config, init_from=None,
                  group_weights={group_key(name): settings.ORCA_ADAPT_WEIGHT for name in weighted})
    if adapt and settings.ORCA_ADAPT_EPOCHS > 0:
        config["epochs"] = settings.ORCA_ADAPT_EPOCHS
    return training_run_start(
        config=config,
        split={"kind": source.split_kind, "seed": source.split_seed, "held_out_lalms": source.held_out_lalms},
        created_by=None,
        trigger=TrainingRun.Trigger.RETRAIN,
        parent=active if adapt else None,
    )
