"""Django admin for the modelling rows (read-only: snapshots are computed, never typed in)."""
from django.contrib import admin

from .models import AgreementSnapshot, ModelImport, ModelVersion, Prediction, ScoringRun, TrainingRun, WorkerNode


@admin.register(AgreementSnapshot)
class AgreementSnapshotAdmin(admin.ModelAdmin):
    list_display = ["created_at", "scope", "level", "alpha", "ci_low", "ci_high", "n_items", "n_ratings", "trigger"]
    list_filter = ["level", "trigger", "scope"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class _ReadOnlyAdmin(admin.ModelAdmin):
    """ORCA rows are written by the services (training, activation, scoring) only."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(TrainingRun)
class TrainingRunAdmin(_ReadOnlyAdmin):
    list_display = ["id", "created_at", "status", "trigger", "split_kind", "split_seed", "n_train_items", "created_by"]
    list_filter = ["status", "trigger", "split_kind"]


@admin.register(ModelVersion)
class ModelVersionAdmin(_ReadOnlyAdmin):
    list_display = ["name", "is_active", "training_run", "licence", "activated_at", "activated_by", "created_at"]
    list_filter = ["is_active"]


@admin.register(ModelImport)
class ModelImportAdmin(_ReadOnlyAdmin):
    list_display = ["id", "name", "status", "created_at", "created_by", "model_version"]
    list_filter = ["status"]


@admin.register(ScoringRun)
class ScoringRunAdmin(_ReadOnlyAdmin):
    list_display = ["id", "model_version", "activate", "status", "done", "total", "device", "created_at", "created_by"]
    list_filter = ["status", "activate"]


@admin.register(WorkerNode)
class WorkerNodeAdmin(_ReadOnlyAdmin):
    list_display = ["hostname", "queues", "cuda", "device_name", "started_at", "last_seen_at"]
    list_filter = ["cuda"]


@admin.register(Prediction)
class PredictionAdmin(_ReadOnlyAdmin):
    list_display = ["candidate", "model_version", "mu", "variance", "created_at"]
    list_filter = ["model_version"]
    raw_id_fields = ["candidate"]
