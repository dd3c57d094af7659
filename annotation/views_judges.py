"""Staff pages for LLM judges (ORCA paper, section 5.6): the judges with a start form, and the comparison page.

Thin views: reading through ``annotation.services.judging.judges_check_staff`` (experts and admins); starting a
run is for admins only (``annotation.services.jobs.job_check_admin``, issue 7's role matrix) and calls
``judge_job_start`` and sends the user to the job's progress page (``annotation/jobs/detail.html``).
"""
from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotation.forms import query_pk
from annotation.models import Benchmark, Job, Judge
from annotation.services.accounts import user_is_admin
from annotation.services.jobs import job_check_admin, job_list_for_staff
from annotation.services.judging import (
    JudgeJobError,
    judge_availability,
    judge_comparison,
    judge_job_start,
    judge_list_for_staff,
)
from annotation.views_jobs import staff_required


class JudgeJobForm(forms.Form):
    """Which judge to run over which benchmark (optionally some question ids)."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.filter(is_active=True),
                                   help_text="An active judge (add or change judges in the admin).")
    benchmark = forms.ModelChoiceField(queryset=Benchmark.objects.all(), help_text="Whose candidate answers to rate.")
    questions = forms.CharField(
        required=False, help_text="Benchmark ids separated by spaces or commas; empty: every question with answers."
    )

    def external_ids(self) -> list[str]:
        return [part for part in self.cleaned_data["questions"].replace(",", " ").split() if part]


@require_http_methods(["GET", "POST"])
@staff_required
def judge_list(request: HttpRequest) -> HttpResponse:
    """Judges with availability and counts, recent judge jobs, and the form that starts a judge run."""
    form = JudgeJobForm(request.POST or None)
    status = 200
    if request.method == "POST":
        job_check_admin(user=request.user)
        if form.is_valid():
            try:
                job = judge_job_start(
                    judge=form.cleaned_data["judge"],
                    benchmark=form.cleaned_data["benchmark"],
                    external_ids=form.external_ids() or None,
                    created_by=request.user,
                )
            except JudgeJobError as error:
                messages.error(request, str(error))
            else:
                messages.success(request, f"Started judge job #{job.pk} over {job.total} questions.")
                return HttpResponseRedirect(reverse("annotation:job", args=[job.pk]))
        status = 400
    judges = list(judge_list_for_staff(user=request.user))
    for judge in judges:
        judge.availability = judge_availability(judge=judge)
    context = {
        "judges": judges,
        "form": form,
        "jobs": job_list_for_staff(user=request.user).filter(kind=Job.Kind.JUDGE)[:50],
        "can_manage": user_is_admin(request.user),
    }
    return render(request, "annotation/judges/list.html", context, status=status)


@require_GET
@staff_required
def judge_compare(request: HttpRequest) -> HttpResponse:
    """Each judge's Spearman ρ, Kendall τ and MAE against the mean human rating, with the fusions."""
    benchmark = None
    pk = query_pk(request.GET, "benchmark")
    if pk is not None:
        benchmark = Benchmark.objects.filter(pk=pk).first()
    comparison = judge_comparison(user=request.user, benchmark=benchmark)
    fusion = comparison.fusion
    context = {
        "comparison": comparison,
        "fusion_weights": list(zip(fusion.judges, fusion.weights, strict=True)) if fusion else [],
        "benchmark": benchmark,
        "benchmarks": Benchmark.objects.order_by("name"),
    }
    return render(request, "annotation/judges/compare.html", context)
