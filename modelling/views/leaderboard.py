"""The leaderboard page and its downloads (experts and admins), and starting/cancelling a cross-fit (admins). Thin:
check access, validate the query string and forms, call services, render."""
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text
from annotation.teams.scope import benchmarks_readable, reads_every_benchmark
from modelling.forms import CrossFitStartForm, LeaderboardDownloadForm, LeaderboardQueryForm
from modelling.leaderboard import stats
from modelling.leaderboard.crossfit import (
    CROSSFIT_RECIPES,
    crossfit_cancel,
    crossfit_list,
    crossfit_start,
)
from modelling.leaderboard.render import leaderboard_cached, leaderboard_render
from modelling.leaderboard.selectors import BY_QUESTION_FIELDS, leaderboard_by_choices
from modelling.leaderboard.services import leaderboard_budget_plan
from modelling.models import CrossFitRun
from modelling.services.orca_quality import leaderboard_quality

#: Content type and file extension of each download format.
DOWNLOADS = {"csv": ("text/csv; charset=utf-8", "csv"), "markdown": ("text/markdown; charset=utf-8", "md"),
             "latex": ("application/x-tex; charset=utf-8", "tex")}


def _benchmark_names(user) -> list[str]:
    """The benchmarks ``user`` may choose (``annotation.teams.scope``): another team's is refused by the form as if
    it did not exist."""
    return list(benchmarks_readable(user=user).values_list("name", flat=True))


def _scope(user, benchmark: str, names: list[str]) -> str | None:
    """The benchmark to compute: the chosen one, or None (all benchmarks) for a user who reads every benchmark;
    for a user who does not (an expert of a team), their first benchmark, since "all" would include other teams'
    answers. Raises Http404 when they read no benchmark at all."""
    if benchmark or reads_every_benchmark(user=user):
        return benchmark or None
    if not names:
        raise Http404("No benchmark of yours has answers to rank.")
    return names[0]


def _by_choices(request, names: list[str]) -> list[str]:
    """The breakdowns of the benchmark the page will show (modality, category, its candidate metadata names); a
    benchmark the user does not read gives only modality and category (the form refuses it anyway)."""
    requested = request.GET.get("benchmark") or ""
    if requested and requested not in names:
        return list(BY_QUESTION_FIELDS)
    return leaderboard_by_choices(benchmark=_scope(request.user, requested, names))


@role_required(*STAFF)
@require_GET
def leaderboard_page(request):
    """The leaderboard of one benchmark (``?benchmark=``) or all, optional ``?by=`` (modality, category or a candidate
    metadata name), the forest
    plot beside the LALM × LALM verdict matrix (the full list of pairs behind a disclosure), system-level
    agreement, the downloads, the cross-fits and the budget planner (``?a=&b=``)."""
    names = _benchmark_names(request.user)
    form = LeaderboardQueryForm(request.GET, benchmarks=names, by_choices=_by_choices(request, names))
    query_error = ""
    if form.is_valid():
        query = form.cleaned_data
    else:
        query_error = errors_text(form)
        query = {"benchmark": "", "by": "", "a": "", "b": ""}
    benchmark, by = _scope(request.user, query["benchmark"], names), query["by"] or None
    board, forest_svg = leaderboard_cached(benchmark=benchmark, by=by)
    rated = [r.lalm for r in board.rows if board.question_values.get(r.lalm)]
    plan, plan_error = None, ""
    a, b = query["a"], query["b"]
    if a or b:
        if a not in rated or b not in rated or a == b:
            plan_error = "Choose two different LALMs with rated answers."
        else:
            try:
                plan = leaderboard_budget_plan(board=board, a=a, b=b)
            except ValueError as exc:
                plan_error = str(exc)
    else:  # preselect two different LALMs (the two best)
        a, b = (rated + ["", ""])[:2]
    scope = {k: v for k, v in (("benchmark", benchmark), ("by", by)) if v}
    return render(request, "modelling/leaderboard.html", {
        "board": board,
        "forest_svg": forest_svg,
        "matrix": board.verdict_matrix(),
        "decided": [p for p in board.pairwise if p.verdict != "undecided"],
        "ci_methods": stats.CI_METHODS,
        "benchmarks": form.fields["benchmark"].choices[1:],
        "all_benchmarks": reads_every_benchmark(user=request.user),  # teams: "All" only for who reads every one
        "benchmark": benchmark,
        "by": by,
        "by_choices": form.fields["by"].choices[1:],
        "query_error": query_error,
        "scope": scope,
        "downloads": [(fmt, label) for fmt, label in LeaderboardDownloadForm.base_fields["format"].choices],
        "rated_lalms": rated,
        "a": a,
        "b": b,
        "plan": plan,
        "plan_error": plan_error,
        "crossfits": list(crossfit_list()[:5]),
        "crossfit_form": CrossFitStartForm(),
        "can_manage": has_role(request.user, ADMIN),
        "orca_quality": leaderboard_quality(benchmark=benchmark),  # ORCA's figure in scope, PPI++'s λ note
    })


@role_required(*STAFF)
@require_GET
def leaderboard_download(request):
    """The leaderboard table of the page's scope as a file: ``?format=csv|markdown|latex`` (+ ``benchmark``,
    ``by``). 400 with the reason for an unknown format or benchmark."""
    names = _benchmark_names(request.user)
    form = LeaderboardDownloadForm(request.GET, benchmarks=names, by_choices=_by_choices(request, names))
    if not form.is_valid():
        return HttpResponse(errors_text(form), status=400,
                            content_type="text/plain; charset=utf-8")
    query = form.cleaned_data
    benchmark = _scope(request.user, query["benchmark"], names)
    board, _ = leaderboard_cached(benchmark=benchmark, by=query["by"] or None)
    content_type, extension = DOWNLOADS[query["format"]]
    name = "-".join(["leaderboard", benchmark or "all"] + ([query["by"]] if query["by"] else []))
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    response = HttpResponse(leaderboard_render(board, fmt=query["format"]), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{safe}.{extension}"'
    return response


@role_required(ADMIN)
@require_POST
def crossfit_start_view(request):
    """Admins: start a cross-fit (``folds`` 2–20, ``recipe`` one of ``CROSSFIT_RECIPES``)."""
    form = CrossFitStartForm(request.POST)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return redirect("modelling:leaderboard")
    try:
        run = crossfit_start(folds=form.cleaned_data["folds"], config=CROSSFIT_RECIPES[form.cleaned_data["recipe"]],
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
