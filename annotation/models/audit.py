"""The audit log: one row per write by a person or a job."""
from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """One write by a person or a job: who, what, when, old → new (the admin's audit log).

    Written by ``annotation.services.audit.audit_record`` from the write services, never from signals or ``save()``.
    Rows are append-only; the object is named by type and primary key (not a foreign key) so the trail outlives it.
    """

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The person who made the change; empty when a job or the system did.",
    )
    actor_label = models.CharField(
        max_length=200, help_text="Who, as shown in the log: the username, or e.g. 'job 12' or 'system'."
    )
    action = models.CharField(max_length=100, help_text="What happened, e.g. 'rating.submit', 'job.cancel'.")
    object_type = models.CharField(max_length=100, help_text="The changed row's model, e.g. 'annotation.rating'.")
    object_id = models.CharField(max_length=64, blank=True, help_text="The changed row's primary key.")
    object_repr = models.CharField(max_length=300, blank=True, help_text="The changed row as text at the time.")
    old = models.JSONField(null=True, blank=True, help_text="The changed fields before (null for a creation).")
    new = models.JSONField(null=True, blank=True, help_text="The changed fields after (null for a deletion).")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True, help_text="When it happened.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"]), models.Index(fields=["action"])]

    def __str__(self) -> str:
        return (
            f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_label} {self.action} "
            f"{self.object_type}:{self.object_id}"
        )
