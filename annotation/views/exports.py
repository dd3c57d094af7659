"""Admin pages: dataset exports (start, progress, download).

Thin views: a form validates input, ``annotation.services.exports.export_start`` does the work; the job page polls
its own ``#export-progress`` partial with htmx while the export runs in a worker.
"""
from django import forms
from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from annotation.access import ADMIN, role_required
from annotation.models import LALM, Benchmark, Job
from annotation.services.exports import (
    BENCHMARK_FORMATS,
    DATASET_FORMATS,
    EXPORT_KINDS,
    SPLIT_KINDS,
    ExportError,
    export_download_path,
    export_job_for_user,
    export_jobs_for_user,
    export_start,
)


class ExportForm(forms.Form):
    what = forms.ChoiceField(
        choices=[("dataset", "Curated annotation dataset"), ("benchmark", "Corrected benchmark with changelog")],
        help_text="A dataset holds the ratings; a corrected benchmark holds the questions' current versions.",
    )
    benchmark = forms.ModelChoiceField(queryset=Benchmark.objects.order_by("name"), required=False,
                                       empty_label="All benchmarks",
                                       help_text="Required for a corrected benchmark.")
    formats = forms.MultipleChoiceField(choices=[(f, f) for f in DATASET_FORMATS], initial=["orca-jsonl"],
                                        required=False, widget=forms.CheckboxSelectMultiple,
                                        help_text="Dataset files to write; each comes with the datasheet.")
    split = forms.ChoiceField(choices=[(s, s) for s in SPLIT_KINDS], initial="none",
                              help_text="Train/dev/test assignment written into every row (none: no split column).")
    seed = forms.IntegerField(min_value=0, initial=0, help_text="Seed of the split.")
    held_out_lalms = forms.ModelMultipleChoiceField(
        queryset=LALM.objects.order_by("name"), required=False, to_field_name="name", label="Held-out LALMs",
        widget=forms.SelectMultiple(attrs={"data-searchable": "LALMs"}),
        help_text="For the held-out-LALM split: these LALMs' answers form the test split.",
    )
    include_invalid = forms.BooleanField(required=False, label="Include invalidated ratings with their reason",
                                         help_text="Ratings of corrected question versions, marked as invalid.")
    licence = forms.CharField(required=False, max_length=500,
                              help_text="Written into the datasheet; empty: the benchmark's licence.")
    benchmark_format = forms.ChoiceField(choices=[("", "from the imported file"), *[(f, f) for f in BENCHMARK_FORMATS]],
                                         required=False, help_text="File format of a corrected benchmark.")

    fieldsets = [
        ("Export", ["what", "benchmark"]),
        ("Dataset", ["formats", "split", "seed", "held_out_lalms", "include_invalid"]),
        ("Datasheet and benchmark file", ["licence", "benchmark_format"]),
    ]

    def clean(self):
        data = super().clean()
        if data.get("what") == "dataset" and not data.get("formats"):
            self.add_error("formats", "Choose at least one format.")
        if data.get("what") == "benchmark" and not data.get("benchmark"):
            self.add_error("benchmark", "Choose the benchmark to export.")
        return data


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def export_list(request: HttpRequest) -> HttpResponse:
    form = ExportForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = export_start(
                requested_by=request.user,
                what=data["what"],
                benchmark=data["benchmark"],
                formats=data["formats"] or ["orca-jsonl"],
                include_invalid=data["include_invalid"],
                split=data["split"],
                seed=data["seed"],
                held_out_lalms=[lalm.name for lalm in data["held_out_lalms"]],
                licence=data["licence"],
                benchmark_format=data["benchmark_format"],
            )
        except ExportError as error:
            form.add_error(None, str(error))
        else:
            messages.success(request, f"Export #{job.pk}: {job.get_status_display().lower()}.")
            return redirect("annotation:export", job_pk=job.pk)
    jobs = export_jobs_for_user(user=request.user)[:50]
    return render(request, "annotation/exports/list.html", {"form": form, "jobs": jobs, "kinds": EXPORT_KINDS})


def _job(request: HttpRequest, job_pk: int) -> Job:
    try:
        return export_job_for_user(user=request.user, job_pk=job_pk)
    except Job.DoesNotExist:
        raise Http404("No such export.") from None


@role_required(ADMIN)
@require_GET
def export_detail(request: HttpRequest, job_pk: int) -> HttpResponse:
    job = _job(request, job_pk)
    active = job.status in (Job.Status.QUEUED, Job.Status.RUNNING)
    percent = round(100 * job.done / job.total, 1) if job.total else (100.0 if not active else 0.0)
    template = "annotation/exports/detail.html"
    if request.htmx:
        template += "#export-progress"
    return render(request, template, {"job": job, "active": active, "percent": percent,
                                      "result": job.params.get("result", {})})


@role_required(ADMIN)
@require_GET
def export_download(request: HttpRequest, job_pk: int) -> FileResponse:
    job = _job(request, job_pk)
    try:
        path = export_download_path(user=request.user, job=job)
    except FileNotFoundError:
        raise Http404("This export has no file (yet).") from None
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/zip")
