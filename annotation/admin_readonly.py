"""The admin of rows only services write (used by ``annotation.admin`` and ``annotation.crowd.admin``)."""
from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows only services write: the admin lists and shows them, and never adds, changes or deletes one (a write
    here would skip the audit log, the rating counts and invalidation)."""

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
