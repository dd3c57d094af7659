"""Django admin for every core row."""
from django import forms
from django.contrib import admin

from annotation.admin_audio import AudioClipUploadAdminMixin

from .models import (
    LALM,
    Assignment,
    AudioClip,
    Benchmark,
    CandidateAnswer,
    ImportAccount,
    Job,
    Judge,
    JudgeRating,
    Question,
    QuestionVersion,
    Rating,
    TableImport,
)
from .services.judging import JudgeModeError, judge_mode_check


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "target_ratings", "created_at"]
    search_fields = ["name"]


@admin.register(AudioClip)
class AudioClipAdmin(AudioClipUploadAdminMixin, admin.ModelAdmin):  # upload form: annotation/admin_audio.py
    list_display = ["original_name", "duration_s", "sample_rate", "channels", "sha256"]
    search_fields = ["original_name", "sha256"]


class QuestionVersionInline(admin.TabularInline):
    model = QuestionVersion
    extra = 0
    fields = ["number", "source", "question_text", "reference_answer", "created_by", "created_at"]
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    list_display = ["external_id", "benchmark", "modality", "category", "status", "current_version"]
    list_filter = ["benchmark", "modality", "status"]
    search_fields = ["external_id", "category", "sub_category"]
    raw_id_fields = ["audio", "current_version"]
    inlines = [QuestionVersionInline]


@admin.register(QuestionVersion)
class QuestionVersionAdmin(admin.ModelAdmin):
    list_display = ["question", "number", "source", "created_by", "created_at"]
    list_filter = ["source"]
    search_fields = ["question__external_id", "question_text"]
    raw_id_fields = ["question", "created_by", "job"]

    def get_readonly_fields(self, request, obj=None):
        # Versions are immutable: existing ones are shown, never edited.
        if obj is not None:
            return [f.name for f in self.model._meta.fields]
        return []


@admin.register(LALM)
class LALMAdmin(admin.ModelAdmin):
    list_display = ["name", "provider", "is_active", "created_at"]
    list_filter = ["provider", "is_active"]
    search_fields = ["name"]


@admin.register(CandidateAnswer)
class CandidateAnswerAdmin(admin.ModelAdmin):
    list_display = ["id", "question_version", "lalm", "valid_rating_count", "target_ratings", "priority"]
    list_filter = ["lalm", "question_version__question__benchmark"]
    search_fields = ["question_version__question__external_id", "text"]
    raw_id_fields = ["question_version", "source_job"]
    readonly_fields = ["valid_rating_count"]


@admin.register(Assignment)
class AssignmentAdmin(admin.ModelAdmin):
    list_display = ["candidate", "annotator", "status", "created_at", "expires_at"]
    list_filter = ["status"]
    raw_id_fields = ["candidate", "annotator"]


@admin.register(Rating)
class RatingAdmin(admin.ModelAdmin):
    list_display = ["candidate", "annotator", "score", "codes", "is_valid", "source", "created_at"]
    list_filter = ["is_valid", "source", "score"]
    search_fields = ["annotator__username", "candidate__question_version__question__external_id", "comment"]
    raw_id_fields = ["candidate", "question_version", "annotator"]


class JudgeAdminForm(forms.ModelForm):
    """The judge form: a probability mode is checked against the provider before the judge is saved (a server
    must return token log-probabilities; ``judge_mode_check`` sends it one request)."""

    class Meta:
        model = Judge
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        candidate = Judge(**{name: cleaned.get(name) for name in
                             ("name", "provider", "model", "prompt_variant", "mode", "settings")})
        candidate.settings = candidate.settings or {}
        try:
            judge_mode_check(judge=candidate)
        except JudgeModeError as error:
            raise forms.ValidationError({"mode": str(error)}) from error
        return cleaned


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    form = JudgeAdminForm
    list_display = ["name", "provider", "model", "prompt_variant", "mode", "is_active", "created_at"]
    list_filter = ["provider", "prompt_variant", "mode", "is_active"]
    search_fields = ["name", "model"]


@admin.register(JudgeRating)
class JudgeRatingAdmin(admin.ModelAdmin):
    list_display = ["candidate", "judge_name", "prompt_variant", "mode", "score", "expected_score", "created_at"]
    list_filter = ["judge_name", "prompt_variant", "mode"]
    raw_id_fields = ["candidate", "judge", "job"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "status", "benchmark", "done", "failed", "total", "created_at"]
    list_filter = ["kind", "status"]
    raw_id_fields = ["benchmark", "lalm", "created_by"]


@admin.register(TableImport)
class TableImportAdmin(admin.ModelAdmin):
    """Table imports: mapped on the "New benchmark / Add data" page, recorded by ``import_table`` too."""

    list_display = ["id", "source", "benchmark_name", "file_format", "rows", "imported_at", "created_by"]
    list_filter = ["file_format", "source_kind"]
    search_fields = ["source", "benchmark_name"]
    raw_id_fields = ["benchmark", "job", "created_by"]
    readonly_fields = ["columns", "summary", "imported_at"]


@admin.register(ImportAccount)
class ImportAccountAdmin(admin.ModelAdmin):
    """Import-only accounts: pseudonyms of raters whose ratings came from a file (they cannot log in)."""

    list_display = ["user", "namespace", "created_at"]
    search_fields = ["user__username", "namespace"]
    readonly_fields = ["user", "key", "namespace", "created_at"]

from annotation.crowd import admin as _quality_admin  # noqa: E402,F401  (registers the quality admin)
