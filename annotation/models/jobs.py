"""Background work users can watch: jobs with their items, and connection tests of LALMs and judges."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models.common import RunStatus, run_status_variant
from annotation.models.items import LALM, Benchmark, CandidateAnswer, Question, QuestionVersion
from annotation.models.ratings import Judge


class Job(models.Model):
    """A background job users can watch: a Stage 1 batch, a judge run, an import or an export."""

    class Kind(models.TextChoices):
        TRANSCRIBE = "transcribe", "Transcripts (Whisper)"
        RATIONALE = "rationale", "Rationales"
        CANDIDATES = "candidates", "Candidate answers"
        JUDGE = "judge", "LLM judge"
        IMPORT = "import", "Import"
        EXPORT = "export", "Export"

    Status = RunStatus

    kind = models.CharField(max_length=20, choices=Kind.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    benchmark = models.ForeignKey(Benchmark, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    lalm = models.ForeignKey(LALM, null=True, blank=True, on_delete=models.CASCADE, related_name="jobs")
    params = models.JSONField(default=dict, blank=True, help_text="What the job was asked to do.")
    total = models.PositiveIntegerField(default=0, help_text="Items to process.")
    done = models.PositiveIntegerField(default=0, help_text="Items processed successfully.")
    failed = models.PositiveIntegerField(default=0, help_text="Items that failed.")
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id (for revoking).")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} #{self.pk} ({self.status})"


class JobItem(models.Model):
    """One unit of work of a Stage 1 job: one question (for the job's LALM when it makes candidate answers).

    The row is what makes jobs re-runnable (README, Layout: ``annotation/jobs/``): a worker claims it with a
    conditional update, and the result (a new ``QuestionVersion`` or a ``CandidateAnswer``) is written in the same
    transaction that moves it from ``running`` to ``done``, so a killed or duplicated task never writes a result
    twice.
    """

    Status = run_status_variant(
        "JobItem.Status", __name__, ("PENDING", "pending", "Pending"), "RUNNING", "DONE",
        ("SKIPPED", "skipped", "Skipped (already done for the current version)"), "FAILED", "CANCELLED",
    )

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="items")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="job_items")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id of the message for this item.")
    claim_token = models.CharField(
        max_length=64, blank=True, help_text="Token of the execution that holds the item while it is running."
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Times a worker claimed the item.")
    error = models.TextField(blank=True, help_text="Why the item failed (provider message).")
    usage = models.JSONField(
        default=dict, blank=True, help_text="Provider usage for the result, e.g. token counts or audio seconds."
    )
    result_version = models.ForeignKey(
        QuestionVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The question version this item created (transcript, rationale).",
    )
    result_candidate = models.ForeignKey(
        CandidateAnswer, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The candidate answer this item created.",
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "question"], name="job_item_unique_per_job_question"),
        ]
        indexes = [models.Index(fields=["job", "status"])]

    def __str__(self) -> str:
        return f"job {self.job_id} / {self.question_id} ({self.status})"


class ConnectionTest(models.Model):
    """One "test connection" of an LALM or a judge: a worker sends the model one real request and stores the answer
    or the error (``annotation.services.endpoints``); the page polls the row. Exactly one of ``lalm`` and
    ``judge`` is set."""

    #: The run statuses of a job (a test is never cancelled).
    Status = Job.Status

    lalm = models.ForeignKey(LALM, null=True, blank=True, on_delete=models.CASCADE, related_name="connection_tests",
                             help_text="The LALM tested.")
    judge = models.ForeignKey(Judge, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="connection_tests", help_text="The judge tested.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    endpoint = models.CharField(max_length=500, blank=True,
                                help_text="Where the request went: provider, model, host and the key variable used.")
    request = models.TextField(blank=True, help_text="What was sent (the prompt; audio: a generated 1 s tone).")
    answer = models.TextField(blank=True, help_text="The model's answer as received.")
    error = models.TextField(blank=True, help_text="Why the test failed (the provider's message).")
    seconds = models.FloatField(null=True, blank=True, help_text="Seconds the request took.")
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(lalm__isnull=True) ^ Q(judge__isnull=True),
                                   name="connection_test_one_target"),
        ]

    def __str__(self) -> str:
        return f"connection test {self.pk} of {self.lalm or self.judge} ({self.status})"

    @property
    def target(self):
        """The LALM or judge tested."""
        return self.lalm or self.judge
