"""Reliability snapshots: each computation of the rater signals, one row per annotator (the signal history)."""
from django.conf import settings
from django.db import models


class ReliabilitySnapshot(models.Model):
    """One annotator's reliability signals at one computation (``modelling.reliability.signals``)."""

    computed_at = models.DateTimeField(db_index=True, help_text="When the signals were computed (one run).")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="reliability_snapshots")
    n_ratings = models.PositiveIntegerField(help_text="Valid ratings of the annotator counted (scored or U/E).")
    combined = models.FloatField(null=True, blank=True,
                                 help_text="Combined risk 0–1 (0: like the typical annotator); empty: too little data.")
    signals = models.JSONField(default=dict, help_text="Every signal and per-signal risk (RaterSignals.as_dict()).")
    action = models.CharField(max_length=10, blank=True,
                              help_text="What the thresholds did: 'warned', 'paused', 'cleared' or empty.")

    class Meta:
        ordering = ["-computed_at", "annotator_id"]
        indexes = [models.Index(fields=["annotator", "computed_at"])]

    def __str__(self) -> str:
        return f"{self.annotator} @ {self.computed_at:%Y-%m-%d %H:%M}: {self.combined}"
