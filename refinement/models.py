"""Stage 3 rows: correction queue items, expert claims, corrections, AI suggestions and the flag watermark.

ORCA paper, sections 3.3 and 5.2: raters' feedback codes (Appendix A) route a question to expert queues; an expert
corrects the question, reference answer, rationale or transcript (optionally from an AI suggestion); the
correction is a new immutable ``annotation.QuestionVersion``; ratings of the old version are kept but invalidated.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import Question, QuestionVersion, run_status_variant


class Queue(models.TextChoices):
    """The correction queues. Keys are stable (``refinement_queues --json`` prints them)."""

    QUESTION = "question", "Question (Q)"
    REFERENCE = "reference", "Reference answer (R)"
    RATIONALE = "rationale", "Rationale (A)"
    TRANSCRIPT = "transcript", "Transcript"
    EXPERT = "expert", "Expert review (U/E)"
    DISAGREEMENT = "disagreement", "Disagreement"


class CorrectableField(models.TextChoices):
    """The ``QuestionVersion`` texts an expert may correct."""

    QUESTION_TEXT = "question_text", "Question"
    REFERENCE_ANSWER = "reference_answer", "Reference answer"
    RATIONALE = "rationale", "Rationale"
    TRANSCRIPT = "transcript", "Transcript"


class CorrectionItem(models.Model):
    """A question waiting in one correction queue (a *flag*). At most one open item per (question, queue).

    Rule-made items carry their evidence (which ratings/codes/candidates fired the rule); items can also be opened
    by an expert (transcript problems reported in comments) or by an admin (questions never rated, ORCA paper
    section 5.2's 128). Closing is either a correction (a new version) or a dismissal with a reason.
    """

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CORRECTED = "corrected", "Corrected"
        DISMISSED = "dismissed", "Dismissed"

    class Origin(models.TextChoices):
        RULE = "rule", "Feedback rule"
        EXPERT = "expert", "Sent by an expert"
        ADMIN = "admin", "Pulled in by an admin"

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="correction_items")
    queue = models.CharField(max_length=20, choices=Queue.choices, help_text="The correction queue.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.RULE)
    flag_count = models.PositiveIntegerField(
        default=1,
        help_text="Number of flags: ratings carrying the queue's code, high-variance candidates, or 1 when opened "
        "by hand. Queue pages order by it.",
    )
    evidence = models.JSONField(
        default=dict, blank=True, help_text="What fired the rule: rating ids, code counts, candidate variances."
    )
    question_version = models.ForeignKey(
        QuestionVersion, on_delete=models.PROTECT, related_name="+", help_text="The version current when flagged."
    )
    note = models.TextField(blank=True, help_text="Why it was opened by hand.")
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    opened_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    close_reason = models.TextField(blank=True, help_text="Dismissal reason or correction reason.")
    closed_version = models.ForeignKey(
        QuestionVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The version a correction created.",
    )

    class Meta:
        ordering = ["-flag_count", "opened_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["question", "queue"], condition=Q(status="open"), name="correction_item_one_open_per_queue"
            ),
            models.CheckConstraint(
                condition=Q(status="open", closed_at__isnull=True) | (~Q(status="open") & Q(closed_at__isnull=False)),
                name="correction_item_closed_at_iff_closed",
            ),
            models.CheckConstraint(
                condition=~Q(status="dismissed") | ~Q(close_reason=""), name="correction_item_dismissal_has_reason"
            ),
        ]
        indexes = [models.Index(fields=["queue", "status"])]

    def __str__(self) -> str:
        return f"{self.question} in {self.queue} ({self.status})"


class ReviewClaim(models.Model):
    """One expert working on a question now. The one-to-one key makes a second claim fail in the database."""

    question = models.OneToOneField(Question, on_delete=models.CASCADE, related_name="review_claim")
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="review_claims")
    claimed_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.question} claimed by {self.expert}"


class Suggestion(models.Model):
    """An AI-proposed text for one field, made by a Celery job; saved only when an expert accepts it."""

    Status = run_status_variant(
        "Suggestion.Status", __name__, "QUEUED", "RUNNING", ("DONE", "Ready for review"), "FAILED",
        ("ACCEPTED", "accepted", "Accepted"), ("REJECTED", "rejected", "Rejected"),
    )

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="suggestions")
    base_version = models.ForeignKey(
        QuestionVersion, on_delete=models.CASCADE, related_name="+", help_text="Version the suggestion starts from."
    )
    field = models.CharField(max_length=20, choices=CorrectableField.choices, help_text="The field to rewrite.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    provider = models.CharField(max_length=20, blank=True, help_text="'gemini' or 'openai'.")
    model_name = models.CharField(max_length=200, blank=True, help_text="The text model asked.")
    instructions = models.TextField(blank=True, help_text="Extra instructions from the expert.")
    prompt = models.TextField(blank=True, help_text="The prompt sent (without audio).")
    proposed_text = models.TextField(blank=True, help_text="The model's proposal.")
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"suggestion {self.pk} for {self.question} {self.field} ({self.status})"


class Correction(models.Model):
    """One corrected field of one expert save: old and new text, the version it made, the queue it answered."""

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="corrections")
    field = models.CharField(max_length=20, choices=CorrectableField.choices)
    queue = models.CharField(max_length=20, choices=Queue.choices, blank=True, help_text="Queue worked from.")
    old_text = models.TextField(blank=True)
    new_text = models.TextField(blank=True)
    from_version = models.ForeignKey(QuestionVersion, on_delete=models.PROTECT, related_name="+")
    to_version = models.ForeignKey(QuestionVersion, on_delete=models.PROTECT, related_name="corrections")
    suggestion = models.ForeignKey(
        Suggestion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The accepted AI suggestion this text started from, if any.",
    )
    expert = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="corrections")
    reason = models.TextField(help_text="Why the expert changed it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["to_version", "field"], name="correction_one_per_version_field"),
        ]

    def __str__(self) -> str:
        return f"{self.question} {self.field} v{self.from_version_id}->v{self.to_version_id}"


class FlagWatermark(models.Model):
    """How far the periodic flag evaluation has read ratings (``Rating.updated_at``); one row per ``name``."""

    name = models.CharField(max_length=50, unique=True)
    ratings_updated_before = models.DateTimeField(
        null=True, blank=True, help_text="Ratings updated at or before this time have been evaluated."
    )
    evaluated_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: {self.ratings_updated_before}"


class UnratedQuestion(Question):
    """Admin view of questions that no annotator has rated (ORCA paper, section 5.2: 128 such questions)."""

    class Meta:
        proxy = True
        verbose_name = "question never rated"
        verbose_name_plural = "questions never rated"
