"""Cross-fitted ORCA predictions for prediction-powered leaderboard estimates.

Prediction-powered inference needs predictions on the rated answers from a model that never trained on them; the
active model trained on (most of) the rated answers, so its μ there is in-sample and pulls the estimate towards
the human ratings with a CI that is too narrow. A cross-fit fixes that:

1. every question with a candidate answer on its current version gets a fold 0..K−1 (a seeded shuffle of the
   question ids, dealt round-robin);
2. for each fold k, an ORCA model is trained (the run's ORCA settings, no dev split: the last epoch is kept) on the
   rated answers of the questions *not* in fold k, registered as an inactive ``ModelVersion`` (with a
   ``TrainingRun`` of split kind ``cross_fit``), and predicts every answer to fold k's questions, rated or not;
3. the run ends DONE when every fold has predicted; the leaderboard then uses these predictions and names the
   cross-fit (each ``Prediction`` row names the fold's model version that made it).

A run is a row first (``CrossFitRun``, QUEUED), then a Celery task claims it (QUEUED → RUNNING) and records
progress (``folds_done``, ``n_predictions``, heartbeat, log) with the lifecycle a training run has
(:mod:`annotation.jobs.lifecycle`); a cancelled run stops at the
next fold or heartbeat. Heavy imports happen inside :func:`crossfit_execute`.
"""
from __future__ import annotations

import random
import time

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.jobs import lifecycle
from annotation.models import CandidateAnswer, Question
from annotation.services.audit import audit_record
from annotation.services.exports import dataset_export_orca_jsonl
from modelling.models import CrossFitFold, CrossFitRun, SplitKind, TrainingRun
from modelling.services.orca_evaluation import crossfit_quality
from modelling.services.predictions import predictions_score
from modelling.services.registry import artifact_root
from modelling.services.training import model_version_register, orca_configs, training_config_clean
from modelling.services.training_split import scored_items
from modelling.services.workers import orca_device, orca_enqueue

#: The job kind of a cross-fit (``ModellingConfig.ready`` registers its task).
CROSSFIT = "crossfit"
#: Recipes the leaderboard page offers: the platform's default ORCA settings (as a training run), or the fast CPU
#: recipe of ``bench/leaderboard.py`` (3 epochs, 96 tokens, no rationale): about 2 minutes a fold of seed-108 on
#: 2 CPU cores, where the default settings take about as long as a training run, 13 minutes. Its cross-fitted μ
#: reached dev ρ 0.655 and a PPI interval of 0.76 × human-only at a 30 % budget in the replay.
CROSSFIT_RECIPES = {"default": {}, "fast": {"epochs": 3, "max_length": 96, "rationale": False}}
#: How the page names each recipe of :data:`CROSSFIT_RECIPES` (the start form's choices).
CROSSFIT_RECIPE_LABELS = {"default": "default ORCA settings", "fast": "fast (3 epochs, 96 tokens, no rationale)"}


def crossfit_latest_done() -> CrossFitRun | None:
    """The newest DONE cross-fit, or None."""
    return (CrossFitRun.objects.filter(status=CrossFitRun.Status.DONE)
            .order_by(F("finished_at").desc(nulls_last=True), "-id").first())


def crossfit_start(*, config: dict | None = None, folds: int = 5, seed: int = 0, created_by=None) -> CrossFitRun:
    """Create a QUEUED cross-fit and enqueue its task after commit (routed to ``ORCA_TRAIN_QUEUE`` when set).

    Args:
        config: ORCA settings (``modelling.services.training.training_config_clean``; missing keys take the
            platform defaults — the CPU default model).
        folds: K, 2–20. seed: seed of the fold assignment and of training.

    Raises ``ValidationError`` naming the field for bad settings.
    """
    clean = training_config_clean(config=config or {})
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= 20:
        raise ValidationError({"folds": "must be a whole number from 2 to 20"})
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValidationError({"seed": "must be a whole number"})
    with transaction.atomic():
        run = CrossFitRun(config=clean, folds=folds, seed=seed, created_by=created_by)
        run.full_clean()
        run.save()
        audit_record(actor=created_by, action="crossfit.start", obj=run,
                     new={"config": clean, "folds": folds, "seed": seed})
        orca_enqueue(CROSSFIT, CrossFitRun, run.pk)  # ORCA_TRAIN_QUEUE when a worker serves it, else noted
    return run


def _log(pk: int, line: str) -> None:
    lifecycle.run_log(CrossFitRun, pk, line)


def _beat(pk: int, **fields) -> None:
    lifecycle.run_heartbeat(CrossFitRun, pk, **fields)  # raises RunStopped once the cross-fit was cancelled


def crossfit_assign_folds(*, question_ids, folds: int, seed: int) -> dict[int, int]:
    """{question pk: fold} — the sorted pks shuffled with ``random.Random(seed)`` and dealt round-robin."""
    order = sorted(set(question_ids))
    random.Random(seed).shuffle(order)
    return {q: i % folds for i, q in enumerate(order)}


def _current_question_ids() -> list[int]:
    current = CandidateAnswer.objects.filter(question_version=F("question_version__question__current_version"))
    return list(Question.objects.filter(pk__in=current.values("question_version__question_id"))
                .values_list("pk", flat=True))


def crossfit_execute(*, run_id: int, task_id: str = "") -> CrossFitRun | None:
    """Claim a QUEUED cross-fit and run every fold to DONE (or FAILED / CANCELLED); None when not claimable."""
    return lifecycle.run_execute(CrossFitRun, run_id, task_id=task_id, work=_crossfit, what="cross-fit")


def _crossfit(run: CrossFitRun) -> None:
    from modelling.orca import train

    cfg = run.config
    device, note = orca_device(cfg.get("device", "cpu"))  # cuda asked for on a worker without it: the CPU, noted
    if note:
        _log(run.pk, note)
    fold_of = crossfit_assign_folds(question_ids=_current_question_ids(), folds=run.folds, seed=run.seed)
    if not fold_of:
        raise ValueError("no question has a candidate answer on its current version")
    folder = artifact_root() / f"crossfit-{run.pk:05d}"
    _log(run.pk, f"{len(fold_of)} questions in {run.folds} folds (seed {run.seed})")
    total = 0
    for k in range(run.folds):
        _beat(run.pk)
        held = sorted(q for q, f in fold_of.items() if f == k)
        train_questions = [q for q, f in fold_of.items() if f != k]
        data = folder / f"fold-{k}"
        data.mkdir(parents=True, exist_ok=True)
        dataset_export_orca_jsonl(out=data / "train.jsonl", question_ids=train_questions)
        items = scored_items(data / "train.jsonl")
        if not items:
            raise ValueError(f"fold {k}: the other folds have no candidate answer with a scored valid rating")
        fold_run = TrainingRun.objects.create(
            config=cfg, split_kind=SplitKind.CROSS_FIT, split_seed=run.seed, status=TrainingRun.Status.RUNNING,
            created_by=run.created_by, started_at=timezone.now(), n_train_items=len(items),
            n_train_ratings=sum(len(it.ratings) for it in items),
            log=f"fold {k} of {run.folds} of {run.name}: trains on the other folds' questions\n",
        )
        _log(run.pk, f"fold {k}: training on {len(items)} rated answers, holding out {len(held)} questions")
        last = [time.monotonic()]

        def progress(event: dict, pk=run.pk, last=last) -> None:
            if time.monotonic() - last[0] >= lifecycle.HEARTBEAT_EVERY_S or event.get("event") == "epoch":
                last[0] = time.monotonic()
                _beat(pk)

        model_dir = data / "model"
        try:
            result = train(items, None, model_dir, *orca_configs(config=cfg, seed=run.seed, device=device),
                           callback=progress)
        except lifecycle.RunStopped:
            # The fold's training run ends with the cross-fit, not 30 minutes later by the stale reaper.
            lifecycle.run_cancel(TrainingRun, fold_run.pk)
            lifecycle.run_log(TrainingRun, fold_run.pk, f"stopped: {run.name} was cancelled")
            raise
        except Exception as exc:
            lifecycle.run_log(TrainingRun, fold_run.pk, f"FAILED: {type(exc).__name__}: {exc}")
            lifecycle.run_fail(TrainingRun, fold_run.pk)
            raise
        with transaction.atomic():
            TrainingRun.objects.filter(pk=fold_run.pk).update(
                status=TrainingRun.Status.DONE, artifact_path=str(model_dir), finished_at=timezone.now(),
                metrics={"train_wall_s": round(result["train_wall_s"], 2), "cross_fit": run.pk, "fold": k},
            )
            fold_run.refresh_from_db()
            version = model_version_register(run=fold_run)
            fold_row = CrossFitFold.objects.create(crossfit=run, fold=k, question_ids=held, model_version=version,
                                                   n_train_items=len(items))
        candidates = list(CandidateAnswer.objects.filter(
            question_version=F("question_version__question__current_version"),
            question_version__question_id__in=held,
        ))
        written = predictions_score(model_version=version, candidates=candidates, device=device)
        total += written
        CrossFitFold.objects.filter(pk=fold_row.pk).update(n_predicted=written)
        _beat(run.pk, folds_done=k + 1, n_predictions=total)
        _log(run.pk, f"fold {k}: {version.name} predicted {written} answers")
    if not lifecycle.run_finish(CrossFitRun, run.pk, quality=crossfit_quality(crossfit=run)):  # per benchmark
        raise lifecycle.RunStopped(f"cross-fit {run.pk} was cancelled")
    _log(run.pk, f"done: {total} cross-fitted predictions")


def crossfit_cancel(*, run: CrossFitRun, user=None) -> bool:
    """Cancel a QUEUED or RUNNING cross-fit (a running one stops at its next heartbeat); False when finished."""
    with transaction.atomic():
        if lifecycle.run_cancel(CrossFitRun, run.pk) is None:
            return False
        _log(run.pk, f"cancelled by {getattr(user, 'username', None) or 'the system'}")
        audit_record(actor=user, action="crossfit.cancel", obj=run, new={"status": CrossFitRun.Status.CANCELLED})
    return True


def crossfits_fail_stale(*, now=None) -> int:
    """Mark RUNNING cross-fits without a heartbeat for ``ORCA_STALE_MINUTES`` FAILED (a lost worker); how many."""
    return lifecycle.runs_fail_stale(CrossFitRun, now=now or timezone.now(), minutes=settings.ORCA_STALE_MINUTES)


def crossfit_list():
    """Cross-fits, newest first, with their folds' model versions."""
    return CrossFitRun.objects.prefetch_related("fold_rows__model_version").order_by("-created_at", "-id")
