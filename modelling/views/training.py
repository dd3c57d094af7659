"""ORCA training runs and the model registry: runs side by side, a run's live progress, starting, activating and
cancelling runs, importing a released checkpoint (experts read; admins act)."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text, form_add_validation_error
from annotation.jobs.lifecycle import run_waiting_for_worker
from modelling.forms import ModelImportForm, TrainingRunForm
from modelling.models import TrainingRun
from modelling.selectors import (
    model_version_active,
    model_version_imported_list,
    rated_lalm_names,
    training_run_list,
)
from modelling.services.registry import model_import_start, model_imports_unregistered, model_version_activate
from modelling.services.training import training_run_cancel, training_run_start
from modelling.services.training_chart import training_progress_svg

#: The ORCA paper's figures (clamped; unseen-question test splits, mean of five; /work/shared/data/README.md).
PAPER_RESULTS = [
    {"name": "Paper: ORCA Gemma3-270M (clamped)", "rho": 0.844, "tau": 0.721, "mae_mu": 0.121, "mae_var": None},
    {"name": "Paper: ORCA OLMo2-1B (clamped)", "rho": 0.895, "tau": 0.784, "mae_mu": 0.094, "mae_var": None},
]


def _metrics(run, split: str, variant: str) -> dict | None:
    return ((run.metrics or {}).get(split) or {}).get(variant)


@role_required(*STAFF)
@require_GET
def training_runs_page(request):
    """All training runs side by side (test and dev metrics, clamped and unclamped) beside the paper's figures."""
    runs = list(training_run_list())
    for run in runs:
        run.test_clamped = _metrics(run, "test", "clamped")
        run.test_unclamped = _metrics(run, "test", "unclamped")
        run.dev_clamped = _metrics(run, "dev", "clamped")
        run.dev_unclamped = _metrics(run, "dev", "unclamped")
        run.waiting_for_worker = run_waiting_for_worker(
            queued_at=run.created_at if run.status == TrainingRun.Status.QUEUED else None)
    return render(request, "modelling/training_runs.html", {
        "runs": runs, "paper_results": PAPER_RESULTS, "active": model_version_active(),
        "imported": model_version_imported_list(), "can_manage": has_role(request.user, ADMIN),
        "imports": model_imports_unregistered(),
    })


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
    """Make an imported model version the active one (then every candidate answer is scored with it); admins only."""
    version = get_object_or_404(model_version_imported_list(), pk=pk)
    model_version_activate(version=version, user=request.user)
    messages.success(request, f"{version.name} is now the active model; candidate answers are being scored.")
    return redirect("modelling:training_runs")


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def training_run_new(request):
    """The form that starts an ORCA training run (admins); POST creates it QUEUED and redirects to its page."""
    form = TrainingRunForm(request.POST or None, lalm_names=rated_lalm_names())
    if request.method == "POST" and form.is_valid():
        try:
            run = training_run_start(config=form.config(), split=form.split(), created_by=request.user)
        except ValidationError as exc:
            form_add_validation_error(form, exc)
        else:
            messages.success(request, f"Training run #{run.pk} is queued.")
            return redirect("modelling:training_run", pk=run.pk)
    return render(request, "modelling/training_run_new.html", {"form": form})


@role_required(*STAFF)
@require_GET
def training_run_page(request, pk: int):
    """One run: settings, live progress (the ``run-progress`` partial, polled by htmx every 2 s until it ends),
    metrics, log, and the activate/cancel buttons."""
    run = get_object_or_404(training_run_list(), pk=pk)
    version = getattr(run, "model_version", None)
    context = {
        "run": run,
        "version": version,
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
    """Make the run's model the active one (then every candidate answer is scored with it); admins only."""
    run = get_object_or_404(training_run_list(), pk=pk)
    try:
        version = model_version_activate(run=run, user=request.user)
    except ValidationError as exc:
        messages.error(request, errors_text(exc))
    else:
        messages.success(request, f"{version.name} is now the active model; candidate answers are being scored.")
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
