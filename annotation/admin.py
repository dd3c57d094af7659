"""Django admin for every core row.

Rows whose writes have consequences (ratings, versions, assignments, judge ratings, jobs) are read-only here: their
services keep the audit log, counts and invalidation right, and the platform's pages call them. Question details
are saved through :func:`annotation.services.versions.question_details_set` (audited).
"""
from django.contrib import admin

from annotation.admin_audio import AudioClipUploadAdminMixin
from annotation.admin_readonly import ReadOnlyAdmin

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
from .services.versions import QUESTION_DETAIL_FIELDS, question_details_set


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
    """Questions come from imports; here only their details change (audited). Texts change by a new version
    (refinement), the status and current version only through the services."""

    list_display = ["external_id", "benchmark", "modality", "category", "status", "current_version"]
    list_filter = ["benchmark", "modality", "status"]
    search_fields = ["external_id", "category", "sub_category"]
    raw_id_fields = ["audio"]
    fields = ["benchmark", "external_id", "status", "current_version", *QUESTION_DETAIL_FIELDS, "created_at"]
    readonly_fields = ["benchmark", "external_id", "status", "current_version", "created_at"]
    inlines = [QuestionVersionInline]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        question_details_set(question=obj, values={name: form.cleaned_data[name] for name in QUESTION_DETAIL_FIELDS
                                                   if name in form.cleaned_data}, by=request.user)


@admin.register(QuestionVersion)
class QuestionVersionAdmin(ReadOnlyAdmin):
    """Versions are immutable and made by imports, Stage 1 jobs and corrections only."""

    list_display = ["question", "number", "source", "created_by", "created_at"]
    list_filter = ["source"]
    search_fields = ["question__external_id", "question_text"]


class EditedInThePlatformAdmin(ReadOnlyAdmin):
    """Read-only here: LALMs and judges are added and changed on their pages (``/lalms/``, ``/judges/``), whose
    forms check the provider set-up (keys bound to hosts, no private base URL) and write the audit log."""


@admin.register(LALM)
class LALMAdmin(EditedInThePlatformAdmin):
    list_display = ["name", "provider", "is_active", "created_at"]
    list_filter = ["provider", "is_active"]
    search_fields = ["name"]


@admin.register(CandidateAnswer)
class CandidateAnswerAdmin(ReadOnlyAdmin):
    """Candidate answers come from jobs and imports; their ratings depend on the text staying as rated."""

    list_display = ["id", "question_version", "lalm", "valid_rating_count", "target_ratings", "priority"]
    list_filter = ["lalm", "question_version__question__benchmark"]
    search_fields = ["question_version__question__external_id", "text"]


@admin.register(Assignment)
class AssignmentAdmin(ReadOnlyAdmin):
    list_display = ["candidate", "annotator", "status", "created_at", "expires_at"]
    list_filter = ["status"]


@admin.register(Rating)
class RatingAdmin(ReadOnlyAdmin):
    """Ratings change only through the rating page and API (their own, audited) and invalidation (audited, with
    the counts refreshed): Annotator quality invalidates an annotator's ratings, corrections those of a version."""

    list_display = ["candidate", "annotator", "score", "codes", "is_valid", "source", "created_at"]
    list_filter = ["is_valid", "source", "score"]
    search_fields = ["annotator__username", "candidate__question_version__question__external_id", "comment"]


@admin.register(Judge)
class JudgeAdmin(EditedInThePlatformAdmin):
    list_display = ["name", "provider", "model", "prompt_variant", "mode", "is_active", "created_at"]
    list_filter = ["provider", "prompt_variant", "mode", "is_active"]
    search_fields = ["name", "model"]


@admin.register(JudgeRating)
class JudgeRatingAdmin(ReadOnlyAdmin):
    list_display = ["candidate", "judge_name", "prompt_variant", "mode", "score", "expected_score", "created_at"]
    list_filter = ["judge_name", "prompt_variant", "mode"]


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    """Jobs are started, retried and cancelled on the Jobs page (audited)."""

    list_display = ["id", "kind", "status", "benchmark", "done", "failed", "total", "created_at"]
    list_filter = ["kind", "status"]


@admin.register(TableImport)
class TableImportAdmin(ReadOnlyAdmin):
    """Table imports are made on the "New benchmark / Add data" page (and recorded by ``import_table``): shown here,
    never added or changed, because their ``file_path``, ``audio_root``, ``source`` and ``mapping`` are read by the
    import page's preview, player and jobs, and the page admits only uploads, downloads it checked and paths inside
    ``IMPORT_SERVER_DIRS`` (an edit here pointed a draft at ``/etc/passwd``; issue #34 item 3)."""

    list_display = ["id", "source", "benchmark_name", "file_format", "rows", "imported_at", "created_by"]
    list_filter = ["file_format", "source_kind"]
    search_fields = ["source", "benchmark_name"]


@admin.register(ImportAccount)
class ImportAccountAdmin(admin.ModelAdmin):
    """Import-only accounts: pseudonyms of raters whose ratings came from a file (they cannot log in)."""

    list_display = ["user", "namespace", "created_at"]
    search_fields = ["user__username", "namespace"]
    readonly_fields = ["user", "key", "namespace", "created_at"]

from annotation.crowd import admin as _quality_admin  # noqa: E402,F401  (registers the quality admin)
