"""Admin pages: "New benchmark / Add data" — import a table of questions, candidate answers and ratings.

Step 1 (:func:`import_list`): the table (upload, server path or URL), the audio (a zip or a server folder) and the
mapping to start from (a saved mapping JSON, a toolkit preset, or guessed from the column names). Step 2
(:func:`import_detail`): the detected columns and first rows, the mapping as drop-downs (re-rendered with htmx when
the layout or the LALM columns change), a preview of ten mapped rows with their audio, a validation (dry run) with
per-row problems, the import as a job with progress, and the mapping JSON to download. Thin views: forms check the
input, :mod:`annotation.services.importers.table_jobs` does the work.
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.text import slugify
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import ADMIN, role_required
from annotation.models import Benchmark, Job, Modality, TableImport
from annotation.services.audio import audio_format_sniff
from annotation.services.importers.presets import PRESETS
from annotation.services.importers.reader import ImportFormatError
from annotation.services.importers.table import table_audio_locate, table_preview
from annotation.services.importers.table_jobs import (
    table_import_draft_create,
    table_import_get_for_user,
    table_import_list_for_user,
    table_import_mapping_save,
    table_import_start,
)
from annotation.services.importers.table_locate import is_missing
from annotation.services.importers.table_mapping import FIELDS, ROW_COLUMN, ImportProblem, TableImportError
from annotation.services.importers.table_sources import table_read


class ImportSourceForm(forms.Form):
    benchmark_name = forms.CharField(
        max_length=200, label="Benchmark",
        help_text="A new name creates the benchmark; the name of an existing one adds the rows to it.",
        widget=forms.TextInput(attrs={"list": "benchmark-names", "autocomplete": "off"}),
    )
    upload = forms.FileField(
        required=False, label="Table file",
        help_text="CSV, TSV, JSON (a list of objects), JSONL or Parquet; or a zip of one such file or of a "
                  "Hugging Face datasets folder (save_to_disk).",
    )
    server_path = forms.CharField(required=False, max_length=1000, label="…or a path on the server",
                                  help_text="A file or datasets folder inside IMPORT_SERVER_DIRS.")
    url = forms.CharField(required=False, max_length=1000, label="…or a URL",
                          help_text="An http(s) address the server downloads the table from.")
    audio_upload = forms.FileField(required=False, label="Audio files (zip)",
                                   help_text="A zip of the audio files the table's audio column names.")
    audio_path = forms.CharField(required=False, max_length=1000, label="…or an audio folder on the server",
                                 help_text="A folder or zip file inside IMPORT_SERVER_DIRS. Not needed for audio "
                                           "given as URLs, file storage keys or bytes.")
    mapping_upload = forms.FileField(required=False, label="Saved mapping (JSON)",
                                     help_text="A mapping downloaded from an earlier import, to use again.")
    preset = forms.ChoiceField(
        required=False, label="…or an evaluation toolkit's output",
        choices=[("", "None: guess the mapping from the column names"),
                 *((key, preset.label) for key, preset in PRESETS.items())],
        help_text="The toolkit's file as candidate answers of an existing benchmark.",
    )
    lalm = forms.CharField(required=False, max_length=200, label="LALM of the toolkit's file",
                           help_text="The LALM whose answers the toolkit's file holds (the file does not say).")

    fieldsets = [
        ("Benchmark", ["benchmark_name"]),
        ("Table", ["upload", "server_path", "url"]),
        ("Audio", ["audio_upload", "audio_path"]),
        ("Mapping", ["mapping_upload", "preset", "lalm"]),
    ]


_NOT_MAPPED = ("", "— not mapped —")
_AUDIO_TYPES = {"WAV": "audio/wav", "FLAC": "audio/flac", "OGG": "audio/ogg", "MP3": "audio/mpeg"}
_SCALE_ITEM = re.compile(r"^\s*([^=]+?)\s*=\s*([1-5])\s*$")


def _label(key: str) -> str:
    return {"question_id": "Question id", "lalm": "LALM", "sub_category": "Sub-category"}.get(
        key, key.replace("_", " ").capitalize())


def _scale_order(item: tuple[str, int]) -> tuple:
    try:
        return (0, float(item[0]), item[0])
    except ValueError:
        return (1, 0.0, item[0])


def _first_present(value, columns: list[str]) -> str:
    options = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return next((o for o in options if o in columns or o == ROW_COLUMN), "")


class MappingForm(forms.Form):
    """The mapping document as drop-downs of the table's columns (see ``table_mapping``)."""

    benchmark_name = forms.CharField(max_length=200, label="Benchmark")
    layout = forms.ChoiceField(choices=[("long", "Long: one row per candidate answer"),
                                        ("wide", "Wide: one row per question, one column per LALM")],
                               widget=forms.RadioSelect)
    default_lalm = forms.CharField(required=False, max_length=200, label="LALM name",
                                   help_text="For every row, when no column names the LALM.")
    default_modality = forms.ChoiceField(required=False, label="Modality of every question",
                                         choices=[("", "— from the column, or unknown —"), *Modality.choices],
                                         help_text="When no column gives the modality.")
    default_category = forms.CharField(required=False, max_length=200, label="Category of every question")
    scale_table = forms.CharField(
        required=False, label="Rating scale: values",
        help_text="Each raw rating value and its 1–5 score, e.g. 0=1, 0.5=3, 1=5. Or give min and max below.")
    scale_min = forms.FloatField(required=False, label="…or linear from (min)")
    scale_max = forms.FloatField(required=False, label="…to (max)",
                                 help_text="min → 1, max → 5, in between rounded to the nearest score.")
    imported_ratings = forms.ChoiceField(
        label="Imported ratings", widget=forms.RadioSelect,
        choices=[("complete", "Count as complete: rated answers need no more ratings here"),
                 ("need_k", "Still need k ratings from this platform's annotators")])
    rater_namespace = forms.CharField(required=False, max_length=200, label="Rater namespace",
                                      help_text="Whose rater ids these are (default: the benchmark's name). "
                                                "Files sharing raters use the same namespace.")
    split = forms.CharField(required=False, max_length=100, label="Split (datasets folder)")
    missing_audio = forms.BooleanField(
        required=False, label="Audio not at hand: import the questions without it",
        help_text="A question whose audio file is not found keeps the audio column's value as its reference and "
                  "waits for the file: not served to raters, its imported ratings counted. Attach the audio later "
                  "(Attach audio, or import the table again with the audio zip).")
    match_text = forms.BooleanField(
        required=False, label="Match rows to the benchmark's questions by their text",
        help_text="For a toolkit's log without ids: the question column is compared with the benchmark's "
                  "questions (punctuation, case and the choices' format ignored), never the row's position.")
    skip_unmatched = forms.BooleanField(
        required=False, label="Leave out rows whose question is not in the benchmark",
        help_text="Listed in the summary; otherwise such a row refuses the file.")
    judge_name = forms.CharField(required=False, max_length=200, label="Judge name",
                                 help_text="Whose scores the judge score column holds, e.g. audiobench:llama3-70b.")
    judge_min = forms.FloatField(required=False, label="Judge scale from (min)")
    judge_max = forms.FloatField(required=False, label="…to (max)",
                                 help_text="min → 1, max → 5 on the platform's scale (AudioBench: 0–5, or 0–1 for its "
                                           "binary prompt).")

    def __init__(self, *args, columns: list[str], refresh_url: str, new_benchmark: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.columns = columns
        refresh = {"hx-post": refresh_url, "hx-trigger": "change", "hx-target": "#mapping-fields",
                   "hx-select": "#mapping-fields", "hx-swap": "outerHTML", "hx-include": "closest form"}
        self.fields["layout"].widget.attrs.update(refresh)
        column_choices = [_NOT_MAPPED, *((c, c) for c in columns)]
        wide = self._value("layout") == "wide"
        for key, help_text in FIELDS.items():
            if wide and key in ("lalm", "candidate", "rating"):
                continue
            choices = [*column_choices, (ROW_COLUMN, "@row: the row number")] if key == "position" else column_choices
            self.fields[f"col_{key}"] = forms.ChoiceField(required=False, choices=choices, label=_label(key),
                                                          help_text=help_text)
        for key in ("question", "reference"):  # new questions need both (a new benchmark has only new ones)
            self.fields[f"col_{key}"].required = new_benchmark and self._value("match_text") not in ("on", True)
        column_options = [(c, c) for c in columns]
        self.fields["question_key"] = forms.MultipleChoiceField(
            required=False, label="…or several columns together identify a question", choices=column_options,
            widget=forms.CheckboxSelectMultiple,
            help_text="E.g. the file name and the question text, when the same question text recurs for different "
                      "clips and there is no id column. Leave the question id unmapped.")
        self.fields["candidate_metadata"] = forms.MultipleChoiceField(
            required=False, label="Attributes of each answer (candidate metadata)", choices=column_options,
            widget=forms.CheckboxSelectMultiple,
            help_text="Kept with each candidate answer (e.g. an answer's length class) and shown with it; the "
                      "leaderboard can be broken down by each.")
        self.wide_rating_fields = []
        if wide:
            self.fields["wide_lalms"] = forms.MultipleChoiceField(
                required=False, label="LALM answer columns", choices=[(c, c) for c in columns],
                widget=forms.CheckboxSelectMultiple(attrs=refresh),
                help_text="Each chosen column holds one LALM's answers; the LALM gets the column's name.")
            chosen = self._values("wide_lalms")
            for index, column in enumerate(c for c in columns if c in chosen):
                name = f"wide_rating_{index}"
                self.fields[name] = forms.ChoiceField(required=False, choices=column_choices,
                                                      label=f"Rating column of {column}")
                self.wide_rating_fields.append((name, column))

    def _value(self, name: str):
        if self.is_bound:
            return self.data.get(name)
        return self.initial.get(name)

    def _values(self, name: str) -> list:
        if self.is_bound:
            return self.data.getlist(name) if hasattr(self.data, "getlist") else self.data.get(name, [])
        return self.initial.get(name, [])

    @property
    def fieldsets(self):
        mapped = [f"col_{k}" for k in FIELDS if f"col_{k}" in self.fields]
        question = [n for n in mapped if n[4:] not in ("lalm", "candidate", "rating", "rater", "codes", "comment")]
        answers = [n for n in mapped if n[4:] in ("lalm", "candidate")]
        ratings = [n for n in mapped if n[4:] in ("rating", "rater", "codes", "comment")]
        wide = ["wide_lalms", *(name for name, _ in self.wide_rating_fields)] if "wide_lalms" in self.fields else []
        judge = [n for n in mapped if n[4:].startswith("judge_")]
        question = [n for n in question if n not in judge]
        return [
            ("Benchmark and layout", ["benchmark_name", "layout"]),
            ("Questions", [*question, "question_key", "missing_audio", "match_text", "skip_unmatched",
                           "default_modality", "default_category"]),
            ("Candidate answers", [*answers, *wide, "default_lalm", "candidate_metadata"]),
            ("Ratings", [*ratings, "scale_table", "scale_min", "scale_max", "imported_ratings", "rater_namespace"]),
            ("A toolkit judge's scores", [*judge, "judge_name", "judge_min", "judge_max"]),
            ("Other", ["split"]),
        ]

    @staticmethod
    def initial_from(record: TableImport) -> dict:
        doc = record.mapping or {}
        columns = record.columns
        initial = {"benchmark_name": record.benchmark_name, "layout": doc.get("layout", "long"),
                   "imported_ratings": doc.get("imported_ratings", "complete"),
                   "rater_namespace": doc.get("rater_namespace", ""), "split": doc.get("split", "")}
        for key, value in (doc.get("columns") or {}).items():
            initial[f"col_{key}"] = _first_present(value, columns)
        defaults = doc.get("defaults") or {}
        initial.update(default_lalm=defaults.get("lalm", ""), default_modality=defaults.get("modality", ""),
                       default_category=defaults.get("category", ""))
        scale = doc.get("rating_scale") or {}
        if set(scale) == {"min", "max"}:
            initial.update(scale_min=scale["min"], scale_max=scale["max"])
        elif scale:
            # PostgreSQL's jsonb keeps keys in its own order: show the raw values from low to high.
            initial["scale_table"] = ", ".join(f"{k}={v}" for k, v in sorted(scale.items(), key=_scale_order))
        lalms = doc.get("lalms") or {}
        initial["wide_lalms"] = [spec if isinstance(spec, str) else spec.get("candidate") for spec in lalms.values()]
        for index, column in enumerate(c for c in columns if c in initial["wide_lalms"]):
            spec = next((s for s in lalms.values() if isinstance(s, dict) and s.get("candidate") == column), {})
            initial[f"wide_rating_{index}"] = spec.get("rating", "")
        initial.update(MappingForm._round2_initial(doc, columns))
        return initial

    @staticmethod
    def _round2_initial(doc: dict, columns: list[str]) -> dict:
        judge = doc.get("judge") or {}
        scale = judge.get("scale") or {}
        metadata = doc.get("candidate_metadata") or {}
        return {
            "question_key": [c for c in doc.get("question_key") or [] if c in columns],
            "candidate_metadata": [c for c in (_first_present(v, columns) for v in metadata.values()) if c],
            "missing_audio": doc.get("missing_audio") == "allow",
            "match_text": doc.get("match") == "question_text",
            "skip_unmatched": doc.get("unmatched") == "skip",
            "judge_name": judge.get("name", ""), "judge_min": scale.get("min"), "judge_max": scale.get("max"),
        }

    def clean(self):
        data = super().clean()
        table, low, high = data.get("scale_table", "").strip(), data.get("scale_min"), data.get("scale_max")
        if table and (low is not None or high is not None):
            self.add_error("scale_table", "Give the rating scale as values or as min and max, not both.")
        if table:
            for item in table.split(","):
                if not _SCALE_ITEM.match(item):
                    self.add_error("scale_table", f"{item.strip()!r} is not value=score with a score 1–5.")
                    break
        if (low is None) != (high is None):
            self.add_error("scale_max", "Give both min and max.")
        if (data.get("judge_min") is None) != (data.get("judge_max") is None):
            self.add_error("judge_max", "Give both min and max of the judge's scale.")
        if data.get("question_key") and data.get("col_question_id"):
            self.add_error("question_key", "Identify questions by the id column or by several columns, not both.")
        return data

    def document(self, *, base: dict) -> dict:
        """The mapping document the form describes; keys of ``base`` the form has no field for (``preset``,
        ``description``, ``format``) are kept."""
        data = self.cleaned_data
        doc = {k: base[k] for k in ("preset", "description", "format") if k in base}
        doc["layout"] = data["layout"]
        doc["columns"] = {key: data[f"col_{key}"] for key in FIELDS if data.get(f"col_{key}")}
        if data["layout"] == "wide":
            ratings = {column: data.get(name) for name, column in self.wide_rating_fields}
            doc["lalms"] = {c: ({"candidate": c, "rating": ratings[c]} if ratings.get(c) else c)
                            for c in self.columns if c in data.get("wide_lalms", [])}
        defaults = {k: data.get(f"default_{k}") for k in ("lalm", "modality", "category") if data.get(f"default_{k}")}
        if defaults:
            doc["defaults"] = defaults
        if data.get("scale_table"):
            doc["rating_scale"] = {m[1]: int(m[2]) for item in data["scale_table"].split(",")
                                   if (m := _SCALE_ITEM.match(item))}
        elif data.get("scale_min") is not None:
            doc["rating_scale"] = {"min": data["scale_min"], "max": data["scale_max"]}
        doc["imported_ratings"] = data["imported_ratings"]
        for key in ("rater_namespace", "split"):
            if data.get(key):
                doc[key] = data[key]
        doc.update(self._round2_document(base))
        return doc

    def _round2_document(self, base: dict) -> dict:
        """The form's question key, missing audio, matching, candidate metadata and judge (``optional`` of a
        preset kept)."""
        data, doc = self.cleaned_data, {}
        if len(data.get("question_key") or []) > 1:
            doc["question_key"] = [c for c in self.columns if c in data["question_key"]]
        if data.get("missing_audio"):
            doc["missing_audio"] = "allow"
        if data.get("match_text"):
            doc["match"] = "question_text"
        if data.get("skip_unmatched"):
            doc["unmatched"] = "skip"
        if data.get("candidate_metadata"):
            doc["candidate_metadata"] = {c: c for c in self.columns if c in data["candidate_metadata"]}
        judge = {"name": data["judge_name"]} if data.get("judge_name") else {}
        if data.get("judge_min") is not None:
            judge["scale"] = {"min": data["judge_min"], "max": data["judge_max"]}
        if judge:
            doc["judge"] = judge
        optional = [f for f in base.get("optional") or [] if f"col_{f}" in self.fields]
        if optional:
            doc["optional"] = optional
        return doc


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def import_list(request: HttpRequest) -> HttpResponse:
    """Step 1: the table, audio and starting mapping of a new import; the recent imports."""
    form = ImportSourceForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            record = table_import_draft_create(
                user=request.user, benchmark_name=data["benchmark_name"], upload=data["upload"],
                server_path=data["server_path"], url=data["url"], audio_upload=data["audio_upload"],
                audio_path=data["audio_path"], mapping_upload=data["mapping_upload"], preset=data["preset"],
                lalm=data["lalm"],
            )
        except ValidationError as error:
            for field, messages in error.message_dict.items():
                for message in messages:
                    form.add_error(field if field in form.fields else None, message)
        else:
            return redirect("annotation:import", pk=record.pk)
    imports = table_import_list_for_user(user=request.user)[:30]
    benchmarks = Benchmark.objects.order_by("name").values_list("name", flat=True)
    return render(request, "annotation/imports/list.html",
                  {"form": form, "imports": imports, "benchmark_names": benchmarks})


def _shown_cell(value) -> str:
    if is_missing(value):
        return ""
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "…"


def _context(record: TableImport, form: MappingForm, **extra) -> dict:
    """The whole page: the table's first rows, the mapping form, the latest job; ``extra`` on top."""
    try:
        head = table_read(Path(record.file_path), file_format=(record.mapping or {}).get("format", ""),
                          split=(record.mapping or {}).get("split", ""), nrows=5).head(5)
        read_error = ""
    except ImportFormatError as error:
        head, read_error = [], str(error)
    rows = [[_shown_cell(row.get(c)) for c in record.columns] for row in head]
    return {"record": record, "form": form, "first_rows": rows, "read_error": read_error,
            **_job_context(record.job), **extra}


#: What the progress of each phase of an import job counts.
_PHASE_UNITS = {"checking audio": "audio files"}


def _job_context(job: Job | None) -> dict:
    if job is None:
        return {"job_active": False, "job_percent": 0, "job_result": {}}
    active = job.status in (Job.Status.QUEUED, Job.Status.RUNNING)
    percent = round(100 * job.done / job.total, 1) if job.total else (0.0 if active else 100.0)
    phase = (job.params or {}).get("phase", "")
    result = (job.params or {}).get("result", {})
    benchmark = (job.params or {}).get("benchmark_name", "")
    return {"job": job, "job_active": active, "job_percent": min(percent, 100.0), "job_result": result,
            "job_phase": phase, "job_unit": _PHASE_UNITS.get(phase, "rows"),
            "job_problem_count": result.get("n_problems") or len(result.get("problems") or []),
            "leaderboard_query": urlencode({"benchmark": benchmark, **(
                {"by": result["candidate_metadata"][0]} if result.get("candidate_metadata") else {})}),
            "attach_query": urlencode({"benchmark": benchmark})}


def _mapping_form(request: HttpRequest, record: TableImport, *, bound: bool) -> MappingForm:
    from django.urls import reverse

    refresh = reverse("annotation:import", kwargs={"pk": record.pk})
    name = request.POST.get("benchmark_name", record.benchmark_name) if bound else record.benchmark_name
    new = not Benchmark.objects.filter(name=(name or "").strip()).exists()
    if bound:
        return MappingForm(request.POST, columns=record.columns, refresh_url=refresh, new_benchmark=new)
    return MappingForm(initial=MappingForm.initial_from(record), columns=record.columns, refresh_url=refresh,
                       new_benchmark=new)


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def import_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """Step 2: columns, first rows, the mapping form and the latest job. An htmx POST (the layout or the LALM
    columns changed) re-renders the mapping fields from the posted values."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    form = _mapping_form(request, record, bound=request.method == "POST")
    template = "annotation/imports/detail.html"
    if request.method == "POST":
        return render(request, template + "#mapping-fields", {"form": form, "record": record})
    return render(request, template, _context(record, form))


def _saved_mapping(request: HttpRequest, record: TableImport) -> tuple[MappingForm, list[ImportProblem] | None]:
    """The posted mapping form, saved on the draft when it is valid; problems of the form or the mapping."""
    form = _mapping_form(request, record, bound=True)
    if not form.is_valid():
        return form, [ImportProblem(key=name if name != "__all__" else "", reason=" ".join(errors))
                      for name, errors in form.errors.items()]
    try:
        table_import_mapping_save(record=record, user=request.user, document=form.document(base=record.mapping),
                                  benchmark_name=form.cleaned_data["benchmark_name"])
    except TableImportError as error:
        return form, error.problems
    return form, None


@role_required(ADMIN)
@require_POST
def import_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Ten rows as the mapping reads them, with their audio players and problems (htmx partial)."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    _, problems = _saved_mapping(request, record)
    rows = []
    if problems is None:
        try:
            rows, problems = table_preview(path=Path(record.file_path), mapping=record.mapping,
                                           benchmark_name=record.benchmark_name,
                                           audio_root=Path(record.audio_root) if record.audio_root else None)
        except ImportFormatError as error:
            problems = getattr(error, "problems", None) or [ImportProblem(reason=str(error))]
    return render(request, "annotation/imports/detail.html#import-preview",
                  {"record": record, "preview_rows": rows, "preview_problems": problems, "previewed": True})


def _start(request: HttpRequest, pk: int, *, dry_run: bool) -> HttpResponse:
    record = table_import_get_for_user(user=request.user, pk=pk)
    _, problems = _saved_mapping(request, record)
    job = None
    if problems is None:
        try:
            job = table_import_start(record=record, user=request.user, dry_run=dry_run)
        except TableImportError as error:
            problems = error.problems
        except ValidationError as error:
            problems = [ImportProblem(reason=" ".join(error.messages))]
    context = {"record": record, "start_problems": problems, **_job_context(job or record.job)}
    return render(request, "annotation/imports/detail.html#import-job", context)


@role_required(ADMIN)
@require_POST
def import_validate(request: HttpRequest, pk: int) -> HttpResponse:
    """Check every row and count what an import would do, writing nothing (a dry-run job; htmx partial)."""
    return _start(request, pk, dry_run=True)


@role_required(ADMIN)
@require_POST
def import_run(request: HttpRequest, pk: int) -> HttpResponse:
    """Import the table as a job (htmx partial with its progress)."""
    return _start(request, pk, dry_run=False)


@role_required(ADMIN)
@require_GET
def import_job(request: HttpRequest, pk: int) -> HttpResponse:
    """The latest job's progress (polled by the page while it runs)."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    return render(request, "annotation/imports/detail.html#import-job", {"record": record,
                                                                        **_job_context(record.job)})


@role_required(ADMIN)
@require_http_methods(["GET", "POST"])
def import_mapping(request: HttpRequest, pk: int) -> HttpResponse:
    """The mapping JSON as a download: the saved one (GET), or the posted form's once saved (POST)."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    if request.method == "POST":
        form, problems = _saved_mapping(request, record)
        if problems:
            context = _context(record, form, start_problems=problems)
            return render(request, "annotation/imports/detail.html", context, status=400)
    name = slugify(record.benchmark_name) or "benchmark"
    response = JsonResponse(record.mapping, json_dumps_params={"indent": 2, "ensure_ascii": False})
    response["Content-Disposition"] = f'attachment; filename="mapping-{name}.json"'
    return response


@role_required(ADMIN)
@require_GET
def import_audio(request: HttpRequest, pk: int, row: int) -> HttpResponse:
    """The audio of data row ``row`` for the preview's player, found as the import will find it."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    workdir = Path(tempfile.mkdtemp(prefix="orca-import-audio-"))
    try:
        path = table_audio_locate(path=Path(record.file_path), mapping=record.mapping, row=row,
                                  audio_root=Path(record.audio_root) if record.audio_root else None,
                                  workdir=workdir)
        if path.stat().st_size > settings.AUDIO_UPLOAD_MAX_BYTES:
            raise ValueError("the audio file is too large to preview")
        data = path.read_bytes()
    except (ValueError, ImportFormatError, OSError) as error:
        raise Http404(str(error)) from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    sniffed = audio_format_sniff(head=data[:16])
    return HttpResponse(data, content_type=_AUDIO_TYPES.get(sniffed, "application/octet-stream"))


@role_required(ADMIN)
@require_POST
def import_allow_missing_audio(request: HttpRequest, pk: int) -> HttpResponse:
    """The validation's offer when audio was not found: import without it (``"missing_audio": "allow"``) and
    validate again; back to the import page."""
    record = table_import_get_for_user(user=request.user, pk=pk)
    try:
        table_import_mapping_save(record=record, user=request.user,
                                  document={**(record.mapping or {}), "missing_audio": "allow"},
                                  benchmark_name=record.benchmark_name)
        table_import_start(record=record, user=request.user, dry_run=True)
    except (TableImportError, ValidationError):
        pass  # the page shows the saved mapping and the latest job, whose problems say what is wrong
    return redirect("annotation:import", pk=record.pk)
