"""Django admin for Stage 3 rows, and the action that pulls never-rated questions into expert review."""
from django.contrib import admin, messages

from .models import Correction, CorrectionItem, ReviewClaim, Suggestion, UnratedQuestion
from .services.queues import questions_pull_unrated


@admin.register(CorrectionItem)
class CorrectionItemAdmin(admin.ModelAdmin):
    list_display = ["question", "queue", "status", "origin", "flag_count", "opened_at", "closed_at", "closed_by"]
    list_filter = ["queue", "status", "origin", "question__benchmark", "question__modality"]
    search_fields = ["question__external_id", "note", "close_reason"]
    raw_id_fields = ["question", "question_version", "closed_version", "opened_by", "closed_by"]
    readonly_fields = ["evidence"]


@admin.register(Correction)
class CorrectionAdmin(admin.ModelAdmin):
    list_display = ["question", "field", "queue", "expert", "from_version", "to_version", "created_at"]
    list_filter = ["field", "queue", "question__benchmark"]
    search_fields = ["question__external_id", "reason"]
    raw_id_fields = ["question", "from_version", "to_version", "suggestion", "expert"]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # corrections are history


@admin.register(Suggestion)
class SuggestionAdmin(admin.ModelAdmin):
    list_display = ["question", "field", "status", "provider", "model_name", "requested_by", "created_at"]
    list_filter = ["status", "field", "provider"]
    raw_id_fields = ["question", "base_version", "requested_by"]


@admin.register(ReviewClaim)
class ReviewClaimAdmin(admin.ModelAdmin):
    list_display = ["question", "expert", "claimed_at"]
    raw_id_fields = ["question", "expert"]


@admin.register(UnratedQuestion)
class UnratedQuestionAdmin(admin.ModelAdmin):
    """Questions no annotator rated (ORCA paper, section 5.2: 128 of 2,000); an action sends them to experts."""

    list_display = ["external_id", "benchmark", "modality", "category", "status"]
    list_filter = ["benchmark", "modality"]
    search_fields = ["external_id"]
    actions = ["pull_into_expert_review"]

    def get_queryset(self, request):
        return super().get_queryset(request).exclude(versions__ratings__isnull=False)

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Pull into expert review (expert queue)")
    def pull_into_expert_review(self, request, queryset):
        opened = questions_pull_unrated(questions=list(queryset), opened_by=request.user)
        self.message_user(request, f"{opened} question(s) put in the expert review queue.", messages.SUCCESS)
