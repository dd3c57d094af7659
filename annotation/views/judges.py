"""Staff pages for LLM judges (ORCA paper, section 5.6): the judges with a start form, and the comparison page.

Thin views: reading is for experts and admins, starting a run for admins only (``annotation.access``); a start calls
``judge_job_start`` and sends the user to the job's progress page (``annotation/jobs/detail.html``).
"""
from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from annotation.access import ADMIN, STAFF, has_role, require_role, role_required
from annotation.forms import query_benchmark_pk
from annotation.models import Benchmark, Job, Judge
from annotation.services.endpoints import judges_for_page
from annotation.services.jobs import job_list_for_staff
from annotation.services.judge_comparison import judge_comparison
from annotation.services.judging import JudgeJobError, judge_availability, judge_job_start
from annotation.teams.scope import benchmark_readable, benchmarks_readable


class JudgeJobForm(forms.Form):
    """Which judge to run over which benchmark (optionally some question ids)."""

    judge = forms.ModelChoiceField(queryset=Judge.objects.filter(is_active=True),
                                   help_text="An active judge (add or change judges above).")
    benchmark = forms.ModelChoiceField(queryset=Benchmark.objects.all(), help_text="Whose candidate answers to rate.")
    questions = forms.CharField(
        required=False, help_text="Benchmark ids separated by spaces or commas; empty: every question with answers."
    )

    def external_ids(self) -> list[str]:
        return [part for part in self.cleaned_data["questions"].replace(",", " ").split() if part]


@require_http_methods(["GET", "POST"])
@role_required(*STAFF)
def judge_list(request: HttpRequest) -> HttpResponse:
    """Judges with availability and counts, recent judge jobs, and the form that starts a judge run."""
    form = JudgeJobForm(request.POST or None)
    status = 200
    if request.method == "POST":
        require_role(request.user, ADMIN, message="Only admins may start, retry or cancel jobs")
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
    judges = judges_for_page(user=request.user)
    for judge in judges:
        judge.availability = judge_availability(judge=judge)
    context = {
        "judges": judges,
        "form": form,
        "jobs": job_list_for_staff(user=request.user).filter(kind=Job.Kind.JUDGE)[:50],
        "can_manage": has_role(request.user, ADMIN),
    }
    return render(request, "annotation/judges/list.html", context, status=status)


@require_GET
@role_required(*STAFF)
def judge_compare(request: HttpRequest) -> HttpResponse:
    """Each judge's Spearman ρ, Kendall τ and MAE against the mean human rating, with the fusions."""
    benchmark = None
    pk = query_benchmark_pk(request.GET)
    if pk is not None:
        benchmark = benchmark_readable(user=request.user, pk=pk)  # another team's: as if there were none
        if benchmark is None:
            raise Http404("No such benchmark.")
    comparison = judge_comparison(user=request.user, benchmark=benchmark)
    fusion = comparison.fusion
    context = {
        "comparison": comparison,
        "fusion_weights": list(zip(fusion.judges, fusion.weights, strict=True)) if fusion else [],
        "benchmark": benchmark,
        "benchmarks": benchmarks_readable(user=request.user),
    }
    return render(request, "annotation/judges/compare.html", context)
