"""Admins' annotator reliability pages: the ranking with every signal and actions, and one annotator's history.

Thin views: check access (admins only: the page names annotators and acts on their accounts), validate input, call
one service, render.
"""
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.access import ADMIN, role_required
from annotation.crowd.annotators import (
    annotator_ratings_invalidate,
    annotator_ratings_restore,
    annotator_status_set,
)
from annotation.crowd.items import quality_policy
from annotation.crowd.models import AnnotatorQuality, RatingInvalidation
from annotation.crowd.selectors import quality_checks_for_annotator
from annotation.forms import errors_text
from annotation.jobs.registry import task_send
from annotation.selectors import rating_counting_queryset
from modelling.reliability.forms import AnnotatorActionForm
from modelling.reliability.models import ReliabilitySnapshot
from modelling.reliability.services import reliability_page_load


def _annotator(pk: int):
    try:
        return get_user_model().objects.get(pk=pk)
    except get_user_model().DoesNotExist:
        raise Http404("No such annotator.") from None


@require_GET
@role_required(ADMIN)
def quality_page(request):
    """Annotators ranked by their latest combined risk, with every signal, status and actions."""
    page = reliability_page_load()
    return render(request, "modelling/reliability.html", {"rows": page.rows, "computed_at": page.computed_at,
                                                      "paused_elsewhere": page.paused_elsewhere,
                                                      "import_accounts": page.import_accounts,
                                                      "policy": quality_policy()})


@require_POST
@role_required(ADMIN)
def quality_refresh(request):
    """Queue a recomputation of the signals (the beat's job, done by a worker: it fits Dawid–Skene over every
    rating), which then applies the thresholds."""
    task_send("modelling.tasks.reliability_refresh_task", request.user.pk)
    messages.success(request, "Recomputation queued: the worker computes the signals and applies the thresholds; "
                              "reload this page in a moment.")
    return redirect("modelling:quality")


@require_GET
@role_required(ADMIN)
def quality_annotator(request, pk: int):
    """One annotator: status, signal history, quality checks and invalidations (with undo)."""
    annotator = _annotator(pk)
    context = {
        "annotator": annotator,
        "status": AnnotatorQuality.objects.filter(annotator=annotator).first(),
        "history": ReliabilitySnapshot.objects.filter(annotator=annotator).order_by("-computed_at")[:100],
        "checks": quality_checks_for_annotator(user=request.user, annotator=annotator),
        "invalidations": RatingInvalidation.objects.filter(annotator=annotator).select_related("created_by"),
        "valid_ratings": rating_counting_queryset().filter(annotator=annotator).count(),
    }
    return render(request, "modelling/reliability_annotator.html", context)


@require_POST
@role_required(ADMIN)
def quality_annotator_action(request, pk: int):
    """``action`` = pause / resume / invalidate (with ``reason``) / undo (with ``invalidation``), parsed by
    :class:`AnnotatorActionForm`; a bad value is a message, never a server error."""
    annotator = _annotator(pk)
    form = AnnotatorActionForm(request.POST, annotator=annotator)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return redirect("modelling:quality_annotator", pk=annotator.pk)
    action, reason = form.cleaned_data["action"], form.cleaned_data["reason"]
    try:
        if action == "pause":
            annotator_status_set(annotator=annotator, status=AnnotatorQuality.Status.PAUSED,
                                 reason=reason or "paused by an admin", by=request.user)
            messages.success(request, f"{annotator} is paused: no new items.")
        elif action == "resume":
            annotator_status_set(annotator=annotator, status=AnnotatorQuality.Status.ACTIVE,
                                 reason=reason or "resumed by an admin", by=request.user)
            messages.success(request, f"{annotator} is active again.")
        elif action == "invalidate":
            done = annotator_ratings_invalidate(annotator=annotator, reason=reason, by=request.user)
            messages.success(request, f"{len(done.rating_ids)} rating(s) of {annotator} no longer count.")
        else:
            n = annotator_ratings_restore(invalidation=form.cleaned_data["invalidation"], by=request.user)
            messages.success(request, f"{n} rating(s) of {annotator} count again.")
    except ValidationError as exc:
        messages.error(request, errors_text(exc))
    return redirect("modelling:quality_annotator", pk=annotator.pk)
