"""Staff pages for Stage 1 jobs: the job list with a start form, a live progress page, retry-failed and cancel.

Thin views: reading (list, progress) is for experts and admins; starting, retrying and cancelling is for admins
only (``annotation.access``). Each validates the form and calls one service. The progress panel is the
``progress`` partial of ``annotation/jobs/detail.html``, polled by htmx every 2 s while the job is active.
"""
from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.jobs.items import job_cancel, job_retry_failed
from annotation.models import LALM, Benchmark, Job
from annotation.services.jobs import (
    JobStartError,
    job_for_staff,
    job_list_for_staff,
    job_progress,
    job_start,
    provider_availabilities,
)
from annotation.services.preparation import (
    PREPARATION_KINDS,
    preparation_rerating_counts,
)


class JobStartForm(forms.Form):
    """What a staff member chooses when starting a Stage 1 job."""

    kind = forms.ChoiceField(choices=[(k, Job.Kind(k).label) for k in PREPARATION_KINDS],
                             help_text="Transcripts (Whisper), rationales, or candidate answers from one LALM.")
    benchmark = forms.ModelChoiceField(queryset=Benchmark.objects.all(), help_text="Whose questions to prepare.")
    lalm = forms.ModelChoiceField(
        queryset=LALM.objects.exclude(provider=LALM.Provider.IMPORT), required=False, label="LALM",
        help_text="For candidate answers.",
    )
    questions = forms.CharField(
        required=False, help_text="Benchmark ids separated by spaces or commas; empty: every question that fits."
    )
    all_modalities = forms.BooleanField(required=False, help_text="Transcribe non-speech questions too.")
    overwrite = forms.BooleanField(
        required=False, help_text="Write a new transcript or rationale even where the current version has one."
    )
    #: Shown under the form: what a new transcript or rationale does to items already being rated.
    rerating_note = (
        "A new transcript or rationale is a new version of the question. On questions that already have candidate "
        "answers it works like a correction: their ratings stop counting (kept, with the job as the reason) and "
        "their candidate answers are copied onto the new version to be rated again."
    )

    fieldsets = [
        ("What", ["kind", "benchmark", "lalm"]),
        ("Which questions", ["questions", "all_modalities", "overwrite"]),
    ]

    def clean(self):
        data = super().clean()
        if data.get("kind") == Job.Kind.CANDIDATES and not data.get("lalm"):
            self.add_error("lalm", "Choose the LALM to ask for candidate answers.")
        return data

    def external_ids(self) -> list[str]:
        return [part for part in self.cleaned_data["questions"].replace(",", " ").split() if part]


def _job(request: HttpRequest, job_pk: int) -> Job:
    try:
        return job_for_staff(user=request.user, job_pk=job_pk)
    except Job.DoesNotExist:
        raise Http404("No such job") from None


@require_GET
@role_required(*STAFF)
def job_list(request: HttpRequest) -> HttpResponse:
    """All jobs with their status, the start form and which providers are available (with reasons)."""
    context = {
        "jobs": job_list_for_staff(user=request.user)[:200],
        "form": JobStartForm(),
        "providers": provider_availabilities(),
        "can_manage": has_role(request.user, ADMIN),
    }
    return render(request, "annotation/jobs/list.html", context)


@require_POST
@role_required(ADMIN)
def job_create(request: HttpRequest) -> HttpResponse:
    """Start a job from the form; errors (unavailable provider, unknown ids) come back as a message."""
    form = JobStartForm(request.POST)
    if not form.is_valid():
        context = {"jobs": job_list_for_staff(user=request.user)[:200], "form": form,
                   "providers": provider_availabilities(), "can_manage": True}
        return render(request, "annotation/jobs/list.html", context, status=400)
    try:
        job = job_start(
            kind=form.cleaned_data["kind"],
            benchmark=form.cleaned_data["benchmark"],
            lalm=form.cleaned_data["lalm"],
            external_ids=form.external_ids() or None,
            all_modalities=form.cleaned_data["all_modalities"],
            overwrite=form.cleaned_data["overwrite"],
            created_by=request.user,
        )
    except JobStartError as error:
        messages.error(request, str(error))
        return HttpResponseRedirect(reverse("annotation:jobs"))
    messages.success(request, f"Started {job.get_kind_display().lower()} job #{job.pk} with {job.total} items.")
    return HttpResponseRedirect(reverse("annotation:job", args=[job.pk]))


@require_GET
@role_required(*STAFF)
def job_detail(request: HttpRequest, job_pk: int) -> HttpResponse:
    """The progress page; an htmx request gets only the ``progress`` partial (polled every 2 s while active)."""
    job = _job(request, job_pk)
    context = {
        "job": job,
        "progress": job_progress(job=job),
        "active": job.status in (Job.Status.QUEUED, Job.Status.RUNNING),
        "failed_items": job.items.filter(status="failed").select_related("question")[:100],
        "can_manage": has_role(request.user, ADMIN),
        "rerating": preparation_rerating_counts(job=job),
    }
    template = "annotation/jobs/detail.html"
    if request.htmx:
        template += "#progress"
    return render(request, template, context)


@require_POST
@role_required(ADMIN)
def job_retry(request: HttpRequest, job_pk: int) -> HttpResponse:
    """Send the job's failed (and stuck) items again."""
    job = _job(request, job_pk)
    count = job_retry_failed(job=job, actor=request.user)
    messages.success(request, f"{count} items sent again.") if count else messages.info(request, "Nothing to retry.")
    return HttpResponseRedirect(reverse("annotation:job", args=[job.pk]))


@require_POST
@role_required(ADMIN)
def job_stop(request: HttpRequest, job_pk: int) -> HttpResponse:
    """Cancel the job: pending items are dropped, running ones finish."""
    job = _job(request, job_pk)
    count = job_cancel(job=job, actor=request.user)
    messages.success(request, f"Job cancelled; {count} pending items dropped.")
    return HttpResponseRedirect(reverse("annotation:job", args=[job.pk]))
