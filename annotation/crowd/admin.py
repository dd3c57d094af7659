"""Django admin for quality control and studies; every write goes through the services (audited). The platform's
own pages (Admin → Crowd studies, Gold items & checks, Quality policy) do the same with forms of their own."""
from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Count, Q
from django.urls import reverse
from django.utils.html import format_html

from annotation.admin_readonly import ReadOnlyAdmin
from annotation.crowd.annotators import annotator_ratings_restore, annotator_status_set
from annotation.crowd.items import (
    POLICY_FIELDS,
    attention_check_create,
    benchmark_quality_set,
    gold_item_mark,
    quality_item_deactivate,
    quality_item_update,
    quality_policy_set,
)
from annotation.crowd.models import (
    AnnotatorQuality,
    BenchmarkQuality,
    QualificationAttempt,
    QualityCheck,
    QualityItem,
    QualityPolicy,
    RatingInvalidation,
    Study,
    StudyParticipant,
)
from annotation.crowd.studies import STUDY_FIELDS, study_save
from annotation.models import CandidateAnswer, Question


class QualityItemForm(forms.ModelForm):
    """Gold: pick a candidate answer. Attention check: pick a question and write the instruction text."""

    question = forms.ModelChoiceField(Question.objects.all(), required=False,
                                      widget=forms.NumberInput, help_text="Attention check: the question (id).")
    text = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                           help_text="Attention check: the answer text that asks for a specific response, e.g. "
                                     "'This is an attention check: rate this answer 2 and tick no code.'")

    class Meta:
        model = QualityItem
        fields = ["kind", "candidate", "min_score", "max_score", "expected_codes", "explanation",
                  "in_qualification", "is_active"]
        widgets = {"candidate": forms.NumberInput}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "candidate" in self.fields:  # read-only on an existing item
            self.fields["candidate"].required = False
            self.fields["candidate"].queryset = CandidateAnswer.objects.all()

    def clean(self):
        data = super().clean()
        if data.get("kind") == QualityItem.Kind.GOLD and not data.get("candidate"):
            self.add_error("candidate", "A gold item needs a candidate answer.")
        if data.get("kind") == QualityItem.Kind.ATTENTION and not self.instance.pk:
            if not data.get("question"):
                self.add_error("question", "An attention check needs a question.")
            if not (data.get("text") or "").strip():
                self.add_error("text", "Write the attention check's text.")
        return data


@admin.register(QualityItem)
class QualityItemAdmin(admin.ModelAdmin):
    form = QualityItemForm
    list_display = ["id", "kind", "candidate", "min_score", "max_score", "expected_codes", "in_qualification",
                    "is_active", "checks_passed"]
    list_filter = ["kind", "in_qualification", "is_active"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_checks=Count("checks"), n_passed=Count("checks", filter=Q(checks__passed=True))
        )

    @admin.display(description="Checks passed")
    def checks_passed(self, obj):
        return f"{obj.n_passed}/{obj.n_checks}" if obj.n_checks else "–"

    def get_readonly_fields(self, request, obj=None):
        # An existing item keeps its kind and candidate answer; its rules change through quality_item_update.
        return ["kind", "candidate"] if obj is not None else []

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # its checks are kept: untick "active" to stop handing it out

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        try:
            if change:
                item = quality_item_update(
                    item=QualityItem.objects.get(pk=obj.pk), min_score=data["min_score"], max_score=data["max_score"],
                    expected_codes=data["expected_codes"], explanation=data["explanation"],
                    in_qualification=data["in_qualification"], is_active=data["is_active"], by=request.user)
            elif data["kind"] == QualityItem.Kind.ATTENTION:
                item = attention_check_create(question=data["question"], text=data["text"],
                                              expected_score=data["min_score"], expected_codes=data["expected_codes"],
                                              explanation=data["explanation"], by=request.user)
            else:
                item = gold_item_mark(candidate=data["candidate"], min_score=data["min_score"],
                                      max_score=data["max_score"], expected_codes=data["expected_codes"],
                                      explanation=data["explanation"], in_qualification=data["in_qualification"],
                                      by=request.user)
            if not change and not data["is_active"]:
                quality_item_deactivate(item=item, by=request.user)
            obj.pk = item.pk
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))


@admin.register(BenchmarkQuality)
class BenchmarkQualityAdmin(admin.ModelAdmin):
    list_display = ["benchmark", "gold_rate", "attention_rate", "min_seconds", "training_feedback"]

    def save_model(self, request, obj, form, change):
        benchmark_quality_set(benchmark=obj.benchmark, gold_rate=obj.gold_rate, attention_rate=obj.attention_rate,
                              min_seconds=obj.min_seconds, training_feedback=obj.training_feedback, by=request.user)


@admin.register(QualityPolicy)
class QualityPolicyAdmin(admin.ModelAdmin):
    list_display = ["__str__", "qualification_required", "qualification_items", "qualification_pass_mark",
                    "qualification_attempts", "warn_score", "pause_score", "auto_pause"]
    fields = list(POLICY_FIELDS)

    def has_add_permission(self, request):
        return not QualityPolicy.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def save_model(self, request, obj, form, change):
        quality_policy_set(values={name: form.cleaned_data[name] for name in POLICY_FIELDS}, by=request.user)
        obj.pk = 1


@admin.register(QualityCheck)
class QualityCheckAdmin(ReadOnlyAdmin):
    """Outcomes of ratings of quality items, written by the rating service only."""

    list_display = ["created_at", "annotator", "kind", "phase", "item", "passed", "reason"]
    list_filter = ["kind", "phase", "passed"]


class StudyParticipantInline(admin.TabularInline):
    model = StudyParticipant
    extra = 0
    readonly_fields = ["participant_id", "user", "session_id", "joined_at", "completed_at"]
    fields = readonly_fields
    can_delete = False


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    """Studies, saved through :func:`study_save` (validated and audited) like the platform's study page."""

    list_display = ["name", "benchmark", "is_enabled", "quota", "max_participants", "participant_count", "report"]
    prepopulated_fields = {"slug": ["name"]}
    fields = list(STUDY_FIELDS)
    inlines = [StudyParticipantInline]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # its participants and their ratings stay attributable: disable it instead

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(n_participants=Count("participants"))

    @admin.display(description="Participants", ordering="n_participants")
    def participant_count(self, obj):
        return obj.n_participants

    @admin.display(description="Report")
    def report(self, obj):
        return format_html('<a href="{}">report</a>', reverse("crowd:study-report", args=[obj.pk]))

    def save_model(self, request, obj, form, change):
        saved = study_save(study=Study.objects.get(pk=obj.pk) if change else None,
                           values={name: form.cleaned_data[name] for name in STUDY_FIELDS}, by=request.user)
        obj.pk = saved.pk


@admin.register(RatingInvalidation)
class RatingInvalidationAdmin(admin.ModelAdmin):
    list_display = ["created_at", "annotator", "reason", "n_ratings", "created_by", "undone_at"]
    readonly_fields = ["annotator", "reason", "rating_ids", "created_by", "created_at", "undone_by", "undone_at"]
    actions = ["undo"]

    @admin.display(description="Ratings")
    def n_ratings(self, obj):
        return len(obj.rating_ids)

    def has_add_permission(self, request):
        return False

    @admin.action(description="Undo: make these ratings valid again")
    def undo(self, request, queryset):
        for action in queryset:
            try:
                n = annotator_ratings_restore(invalidation=action, by=request.user)
            except ValidationError as exc:
                messages.warning(request, " ".join(exc.messages))
            else:
                messages.success(request, f"{action.annotator}: {n} rating(s) valid again.")


class AnnotatorQualityInline(admin.StackedInline):
    model = AnnotatorQuality
    extra = 0
    can_delete = False
    readonly_fields = ["status", "status_reason", "status_changed_at", "qualified_at"]


class QualificationAttemptInline(admin.TabularInline):
    model = QualificationAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["number", "total", "done_items", "passed_items", "passed", "started_at", "finished_at"]
    fields = readonly_fields
    verbose_name_plural = "Qualification results"


User = get_user_model()
_BaseUserAdmin = type(admin.site._registry[User]) if admin.site.is_registered(User) else UserAdmin


class AnnotatorUserAdmin(_BaseUserAdmin):
    """The user admin with the annotator's quality status and qualification results, and pause/resume."""

    inlines = [*getattr(_BaseUserAdmin, "inlines", []), AnnotatorQualityInline, QualificationAttemptInline]
    actions = [*(getattr(_BaseUserAdmin, "actions", None) or []), "pause", "resume"]

    @admin.action(description="Pause: no new items")
    def pause(self, request, queryset):
        paused = 0
        for user in queryset:
            try:
                annotator_status_set(annotator=user, status=AnnotatorQuality.Status.PAUSED,
                                     reason="paused by an admin", by=request.user)
            except ValidationError as error:  # an import-only account
                messages.error(request, " ".join(error.messages))
            else:
                paused += 1
        messages.success(request, f"Paused {paused} annotator(s).")

    @admin.action(description="Resume: active again")
    def resume(self, request, queryset):
        for user in queryset:
            annotator_status_set(annotator=user, status=AnnotatorQuality.Status.ACTIVE, reason="resumed by an admin",
                                 by=request.user)
        messages.success(request, f"Resumed {queryset.count()} annotator(s).")


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, AnnotatorUserAdmin)
