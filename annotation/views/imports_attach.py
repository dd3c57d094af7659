"""Admin page: Attach audio — audio files for questions imported without their audio (``"missing_audio":
"allow"``: they wait for it, not served to raters, until it is attached by the file's name; README, "Your own
benchmark"). Thin: the form checks the input,
:func:`annotation.services.importers.table_audio.audio_attach_uploads` does the work."""
from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from annotation.access import ADMIN, role_required
from annotation.services.importers.table_audio import audio_attach_uploads, benchmarks_waiting_for_audio
from annotation.services.importers.table_mapping import ImportProblem, TableImportError


class MultipleFileField(forms.FileField):
    """A file input taking several files (Django's documented pattern: ``ClearableFileInput`` with
    ``allow_multiple_selected``); ``clean`` returns a list."""

    class Widget(forms.ClearableFileInput):
        allow_multiple_selected = True

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", self.Widget(attrs={"accept": "audio/*,.wav,.flac,.mp3,.ogg,.zip"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        return [single(d, initial) for d in data] if isinstance(data, list | tuple) else [single(data, initial)]


class AudioAttachForm(forms.Form):
    """Audio for questions imported without it: the benchmark, and the files."""

    benchmark = forms.ChoiceField(label="Benchmark", choices=[])
    audio_files = MultipleFileField(
        label="Audio files", help_text="One or more audio files (WAV, FLAC, MP3, OGG) or one zip of them. Each file "
        "goes to the questions whose audio reference — the audio column's value at import — ends with its name.")
    fieldsets = [("Attach audio", ["benchmark", "audio_files"])]

    def __init__(self, *args, benchmarks: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].choices = benchmarks


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def import_audio_attach(request: HttpRequest) -> HttpResponse:
    """Attach audio files to questions imported without their audio (``missing_audio``: they wait for it and are
    not served to raters until then)."""
    waiting = benchmarks_waiting_for_audio()
    choices = [(b.name, f"{b.name} ({b.waiting} question{'s' if b.waiting != 1 else ''} waiting)") for b in waiting]
    form = AudioAttachForm(request.POST or None, request.FILES or None, benchmarks=choices,
                           initial={"benchmark": request.GET.get("benchmark", "")})
    summary, problems = None, []
    if request.method == "POST" and form.is_valid():
        try:
            summary = audio_attach_uploads(user=request.user, benchmark_name=form.cleaned_data["benchmark"],
                                           uploads=form.cleaned_data["audio_files"])
        except TableImportError as error:
            problems = error.problems
        except ValidationError as error:
            problems = [ImportProblem(reason=" ".join(error.messages))]
        else:
            waiting = benchmarks_waiting_for_audio()
    return render(request, "annotation/imports/attach_audio.html",
                  {"form": form, "summary": summary, "problems": problems, "waiting": waiting},
                  status=400 if problems else 200)
