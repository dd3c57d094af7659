"""ORCA training runs and the model registry: runs side by side, a run's live progress, starting, activating and
cancelling runs, importing a released checkpoint (experts read; admins act)."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text, form_add_validation_error
from annotation.jobs.lifecycle import run_waiting_for_worker
from modelling.forms import ModelImportForm, PresetForm, TrainingRunForm, presets_offered
from modelling.models import TrainingRun
from modelling.selectors import (
    model_version_active,
    model_version_imported_list,
    rated_lalm_names,
    training_run_list,
)
from modelling.services.orca_quality import figures_from_per_group, orca_gates, quality_figures
from modelling.services.registry import model_import_start, model_imports_unregistered
from modelling.services.scoring import scoring_run_activation_latest, scoring_run_start, scoring_runs_recent
from modelling.services.training import training_run_cancel, training_run_start, valid_rating_counts_by_benchmark
from modelling.services.training_chart import training_progress_svg
from modelling.services.workers import cuda_worker_alive

#: The ORCA paper's figures (clamped; unseen-question test splits, mean of five; ORCA paper, section 5).
PAPER_RESULTS = [
    {"name": "Paper: ORCA Gemma3-270M (clamped)", "rho": 0.844, "tau": 0.721, "mae_mu": 0.121, "mae_var": None},
    {"name": "Paper: ORCA OLMo2-1B (clamped)", "rho": 0.895, "tau": 0.784, "mae_mu": 0.094, "mae_var": None},
]


def _metrics(run, split: str, variant: str) -> dict | None:
    return ((run.metrics or {}).get(split) or {}).get(variant)


def _per_benchmark(run, split: str) -> list:
    """The run's figures per benchmark on one split (``orca_quality.QualityFigure``), by benchmark name."""
    figures = figures_from_per_group(_metrics(run, split, "per_group"), source=split, model=f"run #{run.pk}",
                                     label=f"its {split} split")
    return [figures[name] for name in sorted(figures)]


@role_required(*STAFF)
@require_GET
def training_runs_page(request):
    """All training runs side by side (test and dev metrics, clamped and unclamped) beside the paper's figures, and
    the latest scoring jobs (activations included) with their progress: the ``scoring-jobs`` partial, polled by htmx
    every 2 s while one is queued or running."""
    scoring = scoring_runs_recent()
    context = {"scoring": scoring, "scoring_active": any(not row.finished_at for row in scoring)}
    if request.htmx and request.GET.get("part") == "scoring":
        return render(request, "modelling/training_runs.html#scoring-jobs", context)
    runs = list(training_run_list().select_related("parent"))
    for run in runs:
        run.test_clamped = _metrics(run, "test", "clamped")
        run.test_unclamped = _metrics(run, "test", "unclamped")
        run.dev_clamped = _metrics(run, "dev", "clamped")
        run.dev_unclamped = _metrics(run, "dev", "unclamped")
        run.test_by_benchmark = _per_benchmark(run, "test")
        run.waiting_for_worker = run_waiting_for_worker(
            queued_at=run.created_at if run.status == TrainingRun.Status.QUEUED else None)
    active = model_version_active()
    figures = quality_figures()
    return render(request, "modelling/training_runs.html", context | {
        "runs": runs, "paper_results": PAPER_RESULTS, "active": active,
        "imported": model_version_imported_list(), "can_manage": has_role(request.user, ADMIN),
        "imports": model_imports_unregistered(),
        "benchmark_quality": [(g, figures.active.get(g.benchmark), figures.crossfit.get(g.benchmark))
                              for g in orca_gates(figures=figures).values()],
        "quality_figures": figures, "quality_settings": _quality_settings(),
    })


def _quality_settings() -> dict:
    return {"routing_min_rho": settings.ORCA_ROUTING_MIN_RHO, "rater_min_rho": settings.ORCA_RATER_MIN_RHO,
            "min_items": settings.ORCA_QUALITY_MIN_ITEMS, "tolerance": settings.ORCA_ACTIVATION_RHO_TOLERANCE}


def _activation_started(request, version_name: str) -> None:
    messages.success(request, f"{version_name} is being activated: a worker loads it, checks its files and tokenizer "
                              "against what was saved, then makes it the active model and scores every candidate "
                              "answer (progress under Scoring jobs). A model that fails the check is not activated.")


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def model_import_page(request):
    """Register a checkpoint of the ORCA authors' release as a model version (admins): a job converts and checks
    it; the ORCA runs page shows the result, then **Activate** it."""
    form = ModelImportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            row = model_import_start(**form.cleaned_data, user=request.user)
        except ValidationError as exc:
            form_add_validation_error(form, exc)
        else:
            messages.success(request, f"{row.name} is being registered: a worker checks and converts the checkpoint. "
                                      "When it is listed below as registered, activate it to score every candidate "
                                      "answer.")
            return redirect("modelling:training_runs")
    return render(request, "modelling/model_import.html", {"form": form})


@role_required(ADMIN)
@require_POST
def model_version_activate_view(request, pk: int):
    """Start activating an imported model version (a scoring job checks it, activates it, scores every candidate
    answer); admins only."""
    version = get_object_or_404(model_version_imported_list(), pk=pk)
    scoring_run_start(version=version, activate=True, user=request.user)
    _activation_started(request, version.name)
    return redirect("modelling:training_runs")


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def training_run_new(request):
    """The form that starts an ORCA training run (admins), its values filled from the recipe chosen above it (a GET
    form: ``?preset=``; the GPU recipe is offered only while a worker with CUDA is alive); POST creates the run QUEUED
    and redirects to its page."""
    offered = presets_offered(cuda_worker=cuda_worker_alive())
    chooser = PresetForm(request.GET if "preset" in request.GET else None, offered=offered)
    chosen = chooser.chosen()
    if "preset" in request.GET and chosen != request.GET["preset"]:
        messages.warning(request, f"The recipe {request.GET['preset']!r} needs a worker with a CUDA GPU, and none is "
                                  "running: start one (README, Scaling out) or use the CPU recipe.")
    active = model_version_active()
    benchmarks = sorted(valid_rating_counts_by_benchmark())
    # "Adapt to this benchmark" links (the runs page) preselect the active model and the benchmark to weight up.
    initial = {"start_from": "active" if active and request.GET.get("start_from") == "active" else "base",
               "weight_benchmarks": [b for b in request.GET.getlist("weight") if b in benchmarks]}
    if initial["start_from"] == "active" and settings.ORCA_ADAPT_EPOCHS > 0:
        initial["epochs"] = settings.ORCA_ADAPT_EPOCHS
    form = TrainingRunForm(request.POST or None, lalm_names=rated_lalm_names(), preset_name=chosen, active=active,
                           benchmark_names=benchmarks, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            run = training_run_start(config=form.config(), split=form.split(), created_by=request.user,
                                     parent=active if form.adapts() else None)
        except ValidationError as exc:
            form_add_validation_error(form, exc)
        else:
            messages.success(request, f"Training run #{run.pk} is queued.")
            return redirect("modelling:training_run", pk=run.pk)
    return render(request, "modelling/training_run_new.html", {"form": form, "chooser": chooser})


@role_required(*STAFF)
@require_GET
def training_run_page(request, pk: int):
    """One run: settings, live progress (the ``run-progress`` partial, polled by htmx every 2 s until it ends),
    metrics, log, and the activate/cancel buttons."""
    run = get_object_or_404(training_run_list().select_related("parent__training_run"), pk=pk)
    version = getattr(run, "model_version", None)
    context = {
        "run": run,
        "version": version,
        "dev_by_benchmark": _per_benchmark(run, "dev"),
        "test_by_benchmark": _per_benchmark(run, "test"),
        "decision": run.activation_decision or None,
        "quality_settings": _quality_settings(),
        "activation": scoring_run_activation_latest(version=version) if version else None,
        "chart_svg": training_progress_svg(progress=run.progress),
        "metric_rows": [
            (f"{split} {variant}", _metrics(run, split, variant))
            for split in ("dev", "test") for variant in ("unclamped", "clamped")
        ],
        "percent": int(100 * run.steps_done / run.steps_total) if run.steps_total else 0,
        "can_manage": has_role(request.user, ADMIN),
    }
    template = "modelling/training_run.html"
    return render(request, template + "#run-progress" if request.htmx else template, context)


@role_required(ADMIN)
@require_POST
def training_run_activate(request, pk: int):
    """Start activating the run's model (a scoring job checks it, activates it, scores every candidate answer);
    admins only."""
    run = get_object_or_404(training_run_list(), pk=pk)
    try:
        scoring = scoring_run_start(run=run, activate=True, user=request.user)
    except ValidationError as exc:
        messages.error(request, errors_text(exc))
    else:
        _activation_started(request, scoring.model_version.name)
    return redirect("modelling:training_run", pk=run.pk)


@role_required(ADMIN)
@require_POST
def training_run_cancel_view(request, pk: int):
    """Cancel a queued or running run; admins only."""
    run = get_object_or_404(training_run_list(), pk=pk)
    if training_run_cancel(run=run, user=request.user):
        messages.success(request, f"Training run #{run.pk} is cancelled.")
    else:
        messages.error(request, f"Training run #{run.pk} has already finished.")
    return redirect("modelling:training_run", pk=run.pk)
