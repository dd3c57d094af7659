"""The leaderboard page (experts and admins) and starting/cancelling a cross-fit (admins). Thin: check access,
validate the query string, call services, render."""
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text
from annotation.models import Benchmark
from modelling.leaderboard.crossfit import (
    CROSSFIT_RECIPES,
    crossfit_cancel,
    crossfit_list,
    crossfit_start,
)
from modelling.leaderboard.services import (
    BY_CHOICES,
    leaderboard_budget_plan,
    leaderboard_cached,
)
from modelling.models import CrossFitRun


@role_required(*STAFF)
@require_GET
def leaderboard_page(request):
    """The leaderboard of one benchmark (``?benchmark=``) or all, optional ``?by=modality|category``, the forest
    plot, the pairwise table, system-level agreement, the cross-fits and the budget planner (``?a=&b=``)."""
    benchmarks = list(Benchmark.objects.order_by("name").values_list("name", flat=True))
    benchmark = request.GET.get("benchmark") or None
    if benchmark not in benchmarks:
        benchmark = None
    by = request.GET.get("by") or None
    if by not in BY_CHOICES:
        by = None
    board, forest_svg = leaderboard_cached(benchmark=benchmark, by=by)
    rated = [r.lalm for r in board.rows if r.rated_answers]
    plan, plan_error = None, ""
    a, b = request.GET.get("a") or "", request.GET.get("b") or ""
    if a or b:
        if a not in rated or b not in rated or a == b:
            plan_error = "Choose two different LALMs with rated answers."
        else:
            try:
                plan = leaderboard_budget_plan(board=board, a=a, b=b)
            except ValueError as exc:
                plan_error = str(exc)
    return render(request, "modelling/leaderboard.html", {
        "board": board,
        "columns_judges": board.judges,
        "forest_svg": forest_svg,
        "benchmarks": benchmarks,
        "benchmark": benchmark,
        "by": by,
        "by_choices": BY_CHOICES,
        "rated_lalms": rated,
        "a": a,
        "b": b,
        "plan": plan,
        "plan_error": plan_error,
        "crossfits": list(crossfit_list()[:5]),
        "can_manage": has_role(request.user, ADMIN),
    })


@role_required(ADMIN)
@require_POST
def crossfit_start_view(request):
    """Admins: start a cross-fit (``folds`` from the form, 2–20; ``recipe`` one of ``CROSSFIT_RECIPES``)."""
    folds = request.POST.get("folds", "5")
    recipe = request.POST.get("recipe", "default")
    try:
        if recipe not in CROSSFIT_RECIPES:
            raise ValidationError({"recipe": f"must be one of {', '.join(CROSSFIT_RECIPES)}"})
        run = crossfit_start(folds=int(folds) if folds.isdigit() else folds, config=CROSSFIT_RECIPES[recipe],
                             created_by=request.user)
    except ValidationError as exc:
        messages.error(request, errors_text(exc))
    else:
        messages.success(request, f"{run.name} queued: {run.folds} folds over questions.")
    return redirect("modelling:leaderboard")


@role_required(ADMIN)
@require_POST
def crossfit_cancel_view(request, pk: int):
    """Admins: cancel a queued or running cross-fit."""
    run = get_object_or_404(CrossFitRun, pk=pk)
    if crossfit_cancel(run=run, user=request.user):
        messages.success(request, f"{run.name} cancelled.")
    else:
        messages.error(request, f"{run.name} had already finished.")
    return redirect("modelling:leaderboard")
