"""Crowd study pages: the entry link, the completion page and the admin's study report (thin views)."""
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from annotation.crowd import selectors
from annotation.crowd.studies import (
    StudyClosed,
    study_completion_for,
    study_completion_url,
    study_enter,
    study_entry_link,
    study_report,
    study_report_csv,
)

_BACKEND = "django.contrib.auth.backends.ModelBackend"


@require_GET
def study_entry(request: HttpRequest, slug: str) -> HttpResponse:
    """The study entry link: create or resume the participant, log them in and send them to their next item."""
    try:
        participant = study_enter(slug=slug, params=request.GET)
    except StudyClosed as exc:
        return render(request, "crowd/study_message.html", {"title": "Study not available", "message": str(exc)},
                      status=404)
    except ValidationError as exc:
        return render(request, "crowd/study_message.html",
                      {"title": "This link is incomplete", "message": " ".join(exc.messages)}, status=400)
    if request.user.is_authenticated and request.user.pk != participant.user_id:
        request.session.flush()
    login(request, participant.user, backend=_BACKEND)
    return HttpResponseRedirect(reverse("annotation:next"))


@require_GET
@login_required
def study_done(request: HttpRequest) -> HttpResponse:
    """The completion code once the participant reached the quota (and a redirect to the platform)."""
    participant = study_completion_for(user=request.user)
    if participant is None:
        return HttpResponseRedirect(reverse("annotation:next"))
    study = participant.study
    return render(request, "crowd/study_done.html",
                  {"study": study, "code": study.completion_code, "redirect_url": study_completion_url(study=study)})


def completion_redirect(*, user) -> str | None:
    """The completion page's URL when ``user`` is a study participant who reached the quota, else None."""
    return reverse("quality:study-done") if study_completion_for(user=user) is not None else None


@require_GET
@login_required
def study_report_page(request: HttpRequest, study_pk: int) -> HttpResponse:
    """Admins: the study's participants, items, time on task, implied hourly pay and quality; ``?format=csv``."""
    study = selectors.study_get_for_admin(user=request.user, study_pk=study_pk)
    if request.GET.get("format") == "csv":
        response = HttpResponse(study_report_csv(study=study), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="study-{study.slug}.csv"'
        return response
    rows = study_report(study=study)
    link = study_entry_link(study=study, base_url=request.build_absolute_uri(
        reverse("quality:study-entry", args=[study.slug])))
    return render(request, "crowd/study_report.html", {"study": study, "rows": rows, "entry_link": link})
