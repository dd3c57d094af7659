"""Rating in the browser (ORCA paper, section 3.2): home page, next item, submit, skip, own ratings, guidelines.

Thin views: each parses input with a form, calls one service and renders the page, or only its
``#rating-form`` partial for htmx requests (django-template-partials). Without JavaScript the forms post normally
and the view redirects to the next item.
"""
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotation import selectors
from annotation.access import RATERS, role_required
from annotation.codes import CODE_DEFINITIONS, SCORE_DEFINITIONS
from annotation.crowd.examples import GUIDELINE_EXAMPLES
from annotation.crowd.items import quality_feedback
from annotation.crowd.selectors import qualification_progress_for, study_progress_for
from annotation.crowd.views import completion_redirect
from annotation.forms import (
    SKIP_REASON_SUGGESTIONS,
    RatingForm,
    SkipForm,
    form_add_validation_error,
    query_benchmark_pk,
)
from annotation.models import Assignment
from annotation.services.assignment import assignment_next, assignment_skip
from annotation.services.rating import rating_is_editable, rating_submit, rating_update

NEXT_TEMPLATE = "annotation/next.html"
#: Fields of ``rating_submit`` errors that belong on the form; others are about the item itself.
_FORM_FIELDS = {"score", "codes", "comment", "seconds_on_task", "audio_seconds_played"}


def _benchmark_from(request: HttpRequest):
    """The benchmark named by ``?benchmark=<pk>`` (the queue filter), or None; 404 for an unknown one."""
    pk = query_benchmark_pk(request.GET)
    if pk is None:
        return None
    return selectors.benchmark_get_for_rating(user=request.user, benchmark_pk=pk)


def _with_benchmark(url: str, benchmark) -> str:
    return f"{url}?{urlencode({'benchmark': benchmark.pk})}" if benchmark is not None else url


def _render_item(
    request: HttpRequest,
    *,
    assignment: Assignment | None,
    benchmark,
    form: RatingForm | None = None,
    skip_form: SkipForm | None = None,
    status: int = 200,
    closed_why: str = "",
) -> HttpResponse:
    """Render the rating page for ``assignment`` (None: the "all done" message, or ``closed_why``, the reason the
    queue is closed to the user, from :func:`annotation.services.assignment.assignment_next`); htmx gets the
    partial only.

    ``assignment`` must be the user's own, with ``RATING_PAGE_RELATED`` loaded (as the assignment service and
    ``selectors.assignment_get_for_annotator`` return it). A study participant who reached the quota is sent to
    the completion code instead.
    """
    if assignment is None and (done_url := completion_redirect(user=request.user)):
        return HttpResponseClientRedirect(done_url) if request.htmx else HttpResponseRedirect(done_url)
    qualification = qualification_progress_for(user=request.user) if assignment is not None else None
    context = {
        "assignment": assignment,
        "candidate": assignment.candidate if assignment else None,
        "version": assignment.candidate.question_version if assignment else None,
        "question": assignment.candidate.question_version.question if assignment else None,
        "benchmark": benchmark,
        "form": form or RatingForm(),
        "skip_form": skip_form or SkipForm(),
        "skip_open": skip_form is not None and bool(skip_form.errors),
        "skip_suggestions": SKIP_REASON_SUGGESTIONS,
        "query": f"?{urlencode({'benchmark': benchmark.pk})}" if benchmark is not None else "",
        "qualification": qualification,
        "study_progress": study_progress_for(user=request.user) if assignment and not qualification else None,
        "quality_notice": closed_why if assignment is None else "",
    }
    template = NEXT_TEMPLATE + "#rating-form" if request.htmx else NEXT_TEMPLATE
    return render(request, template, context, status=status)


def _render_again(request: HttpRequest, *, assignment: Assignment, benchmark, **forms) -> HttpResponse:
    """Show ``assignment`` again (a form with errors), loading what the page shows first."""
    assignment = selectors.assignment_get_for_annotator(user=request.user, assignment_pk=assignment.pk)
    return _render_item(request, assignment=assignment, benchmark=benchmark, **forms)


def _next_response(request: HttpRequest, *, benchmark) -> HttpResponse:
    """After a submit or skip: the next item's partial for htmx, else a redirect to the next item (PRG)."""
    if request.htmx:
        nxt = assignment_next(annotator=request.user, benchmark=benchmark)
        return _render_item(request, assignment=nxt.assignment, benchmark=benchmark, closed_why=nxt.closed_why)
    return HttpResponseRedirect(_with_benchmark(reverse("annotation:next"), benchmark))


@require_GET
@role_required(*RATERS)
def home(request: HttpRequest) -> HttpResponse:
    """The annotator's progress per benchmark (rated today / in total / waiting) and a big "Next item" button."""
    progress = selectors.rating_progress_for_annotator(user=request.user)
    context = {
        "progress": progress,
        "today": sum(row.today for row in progress),
        "total": sum(row.total for row in progress),
        "available": sum(row.available for row in progress),
        "score_definitions": SCORE_DEFINITIONS,
        "code_definitions": CODE_DEFINITIONS,
    }
    return render(request, "annotation/home.html", context)


@require_GET
@role_required(*RATERS)
def next_item(request: HttpRequest) -> HttpResponse:
    """The item to rate now: the annotator's open assignment or a new one (``?benchmark=<pk>`` narrows it)."""
    benchmark = _benchmark_from(request)
    nxt = assignment_next(annotator=request.user, benchmark=benchmark)
    return _render_item(request, assignment=nxt.assignment, benchmark=benchmark, closed_why=nxt.closed_why)


@require_POST
@role_required(*RATERS)
def rate(request: HttpRequest, assignment_pk: int) -> HttpResponse:
    """Submit a rating for the annotator's assignment, then show the next item (or the form with its errors)."""
    benchmark = _benchmark_from(request)
    assignment = selectors.assignment_get_for_annotator(user=request.user, assignment_pk=assignment_pk, page=False)
    form = RatingForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            rating = rating_submit(
                candidate=assignment.candidate,
                annotator=request.user,
                score=data["score"],
                codes=data["codes"],
                comment=data["comment"],
                seconds_on_task=data["seconds_on_task"],
                audio_seconds_played=data["audio_seconds_played"],
                assignment=assignment,
            )
        except ValidationError as exc:
            if hasattr(exc, "error_dict") and set(exc.error_dict) <= _FORM_FIELDS:
                form_add_validation_error(form, exc, fields=_FORM_FIELDS)
                return _render_again(request, assignment=assignment, benchmark=benchmark, form=form)
            # The item itself can no longer be rated (corrected, paused, skipped or expired): say so and move on.
            for message in exc.messages:
                messages.warning(request, message)
            return _next_response(request, benchmark=benchmark)
        messages.success(request, "Rating saved.")
        if feedback := quality_feedback(rating=rating):
            messages.info(request, feedback)
        return _next_response(request, benchmark=benchmark)
    return _render_again(request, assignment=assignment, benchmark=benchmark, form=form)


@require_POST
@role_required(*RATERS)
def skip(request: HttpRequest, assignment_pk: int) -> HttpResponse:
    """Skip the annotator's assignment with a reason, then show the next item."""
    benchmark = _benchmark_from(request)
    assignment = selectors.assignment_get_for_annotator(user=request.user, assignment_pk=assignment_pk, page=False)
    skip_form = SkipForm(request.POST)
    if skip_form.is_valid():
        try:
            assignment_skip(assignment=assignment, reason=skip_form.cleaned_data["reason"])
        except ValidationError as exc:
            for message in exc.messages:
                messages.warning(request, message)
        else:
            messages.info(request, "Item skipped.")
        return _next_response(request, benchmark=benchmark)
    return _render_again(request, assignment=assignment, benchmark=benchmark, skip_form=skip_form)


@require_GET
@role_required(*RATERS)
def my_ratings(request: HttpRequest) -> HttpResponse:
    """The annotator's past ratings, newest first, 50 a page; each can be edited while its item is incomplete."""
    page = Paginator(selectors.rating_list_for_annotator(user=request.user), 50).get_page(request.GET.get("page"))
    for rating in page.object_list:
        rating.editable = rating_is_editable(
            rating=rating, k=rating.k, valid_rating_count=rating.candidate_count,
            current_version_id=rating.current_version_id,
        )
    return render(request, "annotation/my_ratings.html", {"page": page})


@require_http_methods(["GET", "POST"])
@role_required(*RATERS)
def rating_edit(request: HttpRequest, rating_pk: int) -> HttpResponse:
    """Edit one of the annotator's own ratings (score, codes, comment) while its item is not complete."""
    rating = selectors.rating_get_for_edit(user=request.user, rating_pk=rating_pk)
    editable = rating_is_editable(rating=rating, k=rating.k, valid_rating_count=rating.candidate_count,
                                  current_version_id=rating.current_version_id)
    if request.method == "POST":
        form = RatingForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                rating_update(rating=rating, annotator=request.user, score=data["score"], codes=data["codes"],
                              comment=data["comment"])
            except ValidationError as exc:
                form_add_validation_error(form, exc, fields=_FORM_FIELDS)
            else:
                messages.success(request, "Rating updated.")
                return HttpResponseRedirect(reverse("annotation:my-ratings"))
        status = 400
    else:
        form = RatingForm(initial={"score": rating.score, "codes": list(rating.codes), "comment": rating.comment})
        status = 200
    context = {"rating": rating, "form": form, "editable": editable, "not_editable": not editable,
               "version": rating.question_version,
               "candidate": rating.candidate}
    return render(request, "annotation/rating_edit.html", context, status=status)


@require_GET
def guidelines(request: HttpRequest) -> HttpResponse:
    """The rating guidelines: the 1–5 scale and the feedback codes (ORCA paper, Appendix A), worked examples and
    the keyboard shortcuts. Public, so a crowd participant can read them on the study's welcome page before
    signing in."""
    return render(request, "annotation/guidelines.html",
                  {"score_definitions": SCORE_DEFINITIONS, "code_definitions": CODE_DEFINITIONS,
                   "examples": GUIDELINE_EXAMPLES})
