"""Rows of the modelling app: agreement snapshots (ORCA paper, section 5.2).

ORCA training runs, model versions and predictions join this module later (issue #6, "In the platform").
"""
from django.db import models
from django.db.models import Q


class AgreementLevel(models.TextChoices):
    """Level of measurement for Krippendorff's alpha on the 1–5 correctness scale (Krippendorff 2011)."""

    ORDINAL = "ordinal", "Ordinal"
    INTERVAL = "interval", "Interval"


class AgreementSnapshot(models.Model):
    """Krippendorff's alpha of the valid ratings in one scope at one moment, kept to plot agreement over time.

    Written by ``modelling.services.snapshots.agreement_snapshots_write`` (every
    ``MODELLING_SNAPSHOT_EVERY`` new valid ratings, and nightly), never edited afterwards.
    """

    class Trigger(models.TextChoices):
        THRESHOLD = "threshold", "Enough new ratings"
        NIGHTLY = "nightly", "Nightly"
        MANUAL = "manual", "Manual"

    scope = models.CharField(
        max_length=300,
        help_text="What the ratings cover: 'all', or '<kind>:<name>' such as 'benchmark:MMAR'.",
    )
    level = models.CharField(
        max_length=10, choices=AgreementLevel.choices, help_text="Level of measurement: ordinal or interval."
    )
    alpha = models.FloatField(
        null=True,
        blank=True,
        help_text="Krippendorff's alpha, at most 1.0 (1 = perfect agreement, 0 = chance); "
        "empty when undefined (fewer than two pairable ratings or a single observed score).",
    )
    ci_low = models.FloatField(null=True, blank=True, help_text="Lower end of the bootstrap 95 % interval of alpha.")
    ci_high = models.FloatField(null=True, blank=True, help_text="Upper end of the bootstrap 95 % interval of alpha.")
    n_items = models.PositiveIntegerField(help_text="Candidate answers with at least one valid scored rating.")
    n_ratings = models.PositiveIntegerField(help_text="Valid ratings with a score (1–5) in the scope.")
    trigger = models.CharField(
        max_length=10, choices=Trigger.choices, default=Trigger.MANUAL, help_text="What made this snapshot."
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the snapshot was computed.")

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(alpha__isnull=True) | Q(alpha__lte=1.0), name="agreement_snapshot_alpha_at_most_1"
            ),
            models.CheckConstraint(
                condition=Q(ci_low__isnull=True) | Q(ci_high__isnull=True) | Q(ci_low__lte=models.F("ci_high")),
                name="agreement_snapshot_ci_ordered",
            ),
        ]
        indexes = [models.Index(fields=["scope", "level", "created_at"])]

    def __str__(self) -> str:
        alpha = "undefined" if self.alpha is None else f"{self.alpha:.3f}"
        return f"{self.scope} {self.level} alpha={alpha} ({self.n_ratings} ratings)"
