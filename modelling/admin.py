"""Django admin for the modelling rows (read-only: snapshots are computed, never typed in)."""
from django.contrib import admin

from .models import AgreementSnapshot


@admin.register(AgreementSnapshot)
class AgreementSnapshotAdmin(admin.ModelAdmin):
    list_display = ["created_at", "scope", "level", "alpha", "ci_low", "ci_high", "n_items", "n_ratings", "trigger"]
    list_filter = ["level", "trigger", "scope"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
