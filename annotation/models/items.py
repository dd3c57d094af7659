"""The benchmark items: benchmarks, audio clips, versioned questions, LALMs and their candidate answers (ORCA paper,
sections 3.1–3.2)."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models.common import Modality, _check_api_key_env, random_key_new


class Benchmark(models.Model):
    """An audio QA benchmark (MMAU test-mini, MMAR, the bundled demo, ...)."""

    name = models.CharField(max_length=200, unique=True, help_text="Unique name, e.g. 'MMAR'.")
    version = models.CharField(max_length=50, blank=True, help_text="Release of the benchmark, e.g. 'v05.15.25'.")
    source = models.CharField(max_length=500, blank=True, help_text="Where the benchmark comes from (URL or file).")
    description = models.TextField(blank=True)
    licence = models.CharField(max_length=100, blank=True, help_text="Licence of the benchmark's data.")
    target_ratings = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        help_text="k: distinct annotators per candidate answer; empty means the ANNOTATION_TARGET_RATINGS setting.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AudioClip(models.Model):
    """An audio file, stored once per content (sha256)."""

    file = models.FileField(upload_to="audio/%Y/%m/", help_text="The audio file.")
    original_name = models.CharField(max_length=500, blank=True, help_text="File name at import.")
    sha256 = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the file's bytes (hex).")
    duration_s = models.FloatField(help_text="Duration in seconds.")
    sample_rate = models.PositiveIntegerField(help_text="Sample rate in Hz.")
    channels = models.PositiveSmallIntegerField(default=1, help_text="Number of channels.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.original_name or self.sha256[:12]


class Question(models.Model):
    """A benchmark item. Its texts live in immutable ``QuestionVersion`` rows; ``current_version`` points at one."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        UNDER_CORRECTION = "under_correction", "Under correction"
        RETIRED = "retired", "Retired"
        #: Imported without its audio (a table's ``"missing_audio": "allow"``): kept, counted on the leaderboard
        #: with its imported ratings, but never served to raters until its audio is attached (README, "Your own
        #: benchmark"); ``audio_ref`` names the file it waits for.
        AUDIO_MISSING = "audio_missing", "Waiting for its audio"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="questions")
    external_id = models.CharField(max_length=200, help_text="The item's id in its benchmark (MMAU/MMAR id).")
    audio = models.ForeignKey(
        AudioClip, null=True, blank=True, on_delete=models.SET_NULL, related_name="questions", help_text="Audio clip."
    )
    audio_ref = models.CharField(max_length=500, blank=True, help_text="Audio path or URL named by the benchmark.")
    modality = models.CharField(max_length=10, choices=Modality.choices, help_text="speech, sound, music or mixed.")
    modality_detail = models.CharField(
        max_length=50, blank=True, help_text="The benchmark's own modality label, e.g. MMAR 'mix-sound-speech'."
    )
    category = models.CharField(max_length=200, blank=True, help_text="Benchmark category.")
    sub_category = models.CharField(max_length=200, blank=True, help_text="Benchmark sub-category.")
    choices = models.JSONField(
        default=list, blank=True, help_text="Multiple-choice options, if the benchmark has them."
    )
    extra = models.JSONField(default=dict, blank=True, help_text="Other fields of the source record.")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    random_key = models.FloatField(
        default=random_key_new, editable=False,
        help_text="Uniform random number in [0, 1) drawn once when the question is created and kept across its "
                  "versions. Every LALM's answer to the question shares it: the queue serves a priority level in "
                  "this order and routing's audit share is the questions whose key is below the share, so any two "
                  "LALMs share audited questions at the audit share itself, not its square (README, Leaderboard).",
    )
    current_version = models.ForeignKey(
        "QuestionVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The version annotators see now.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["benchmark", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "external_id"], name="question_unique_external_id"),
        ]
        indexes = [models.Index(fields=["external_id"])]

    def __str__(self) -> str:
        return f"{self.benchmark}:{self.external_id}"

    @property
    def has_speech(self) -> bool:
        """True for speech questions and mixed ones whose label names speech (MMAR 'mix-sound-speech')."""
        return self.modality == Modality.SPEECH or "speech" in self.modality_detail


class QuestionVersion(models.Model):
    """One immutable state of a question's texts. A change is a new row with the next ``number``."""

    class Source(models.TextChoices):
        IMPORT = "import", "Import"
        TRANSCRIPTION = "transcription", "Transcription job"
        RATIONALE = "rationale", "Rationale job"
        EXPERT = "expert", "Expert correction"

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField(help_text="1 for the first version, then 2, 3, ...")
    question_text = models.TextField(help_text="The question asked about the audio.")
    reference_answer = models.TextField(help_text="The reference (ground-truth) answer.")
    rationale = models.TextField(blank=True, help_text="Why the reference answer is right given the audio.")
    transcript = models.TextField(blank=True, help_text="Transcript of the speech in the audio.")
    transcript_language = models.CharField(max_length=16, blank=True, help_text="Language detected by Whisper.")
    transcript_segments = models.JSONField(
        default=list, blank=True, help_text="Whisper segments: list of {start, end, text}, seconds."
    )
    source = models.CharField(max_length=20, choices=Source.choices, help_text="What made this version.")
    reason = models.TextField(blank=True, help_text="Why this version was made (import note, correction reason).")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["question", "number"]
        constraints = [
            models.UniqueConstraint(fields=["question", "number"], name="question_version_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.question} v{self.number}"

    def save(self, *args, **kwargs):
        # Immutability is the point of a version: corrections create a new row instead.
        if not self._state.adding:
            raise ValueError("QuestionVersion rows are immutable; create a new version instead")
        super().save(*args, **kwargs)


class LALM(models.Model):
    """A large audio language model that produces candidate answers."""

    class Provider(models.TextChoices):
        IMPORT = "import", "Imported answers (from a file)"
        GEMINI = "gemini", "Gemini (google-genai)"
        OPENAI = "openai", "OpenAI-compatible server"

    name = models.CharField(max_length=200, unique=True, help_text="Display name or anonymous tag (e.g. 'M2_1').")
    provider = models.CharField(max_length=20, choices=Provider.choices, default=Provider.IMPORT)
    settings = models.JSONField(default=dict, blank=True, help_text="Provider settings (model name, base URL, ...).")
    is_active = models.BooleanField(default=True, help_text="Asked for new candidate answers when items change.")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "LALM"
        verbose_name_plural = "LALMs"

    def __str__(self) -> str:
        return self.name

    def clean(self):
        _check_api_key_env(self.settings)


def candidate_keys_fill(candidates) -> None:
    """Give each unsaved candidate answer of ``candidates`` without a ``random_key`` its question's key (one
    query). Raises ``ValueError`` for a candidate without a saved question version."""
    wanted = {c.question_version_id for c in candidates if c.random_key is None}
    if not wanted:
        return
    if None in wanted:
        raise ValueError("a candidate answer needs a saved question version to take its question's random key")
    keys = dict(QuestionVersion.objects.filter(pk__in=wanted).values_list("pk", "question__random_key"))
    for c in candidates:
        if c.random_key is None:
            c.random_key = keys[c.question_version_id]


class CandidateAnswerQuerySet(models.QuerySet):
    """``bulk_create`` fills each new answer's ``random_key`` from its question (:func:`candidate_keys_fill`)."""

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        candidate_keys_fill(objs)
        return super().bulk_create(objs, *args, **kwargs)


class CandidateAnswer(models.Model):
    """An LALM's answer to one version of a question: the thing annotators rate."""

    objects = CandidateAnswerQuerySet.as_manager()

    question_version = models.ForeignKey(QuestionVersion, on_delete=models.CASCADE, related_name="candidates")
    lalm = models.ForeignKey(LALM, on_delete=models.PROTECT, related_name="candidates")
    text = models.TextField(blank=True, help_text="The candidate answer (may be empty if the LALM said nothing).")
    source_job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    target_ratings = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Overrides the benchmark's k for this candidate (routing may set it)."
    )
    priority = models.IntegerField(default=0, help_text="Routing priority: higher is offered to annotators first.")
    valid_rating_count = models.PositiveIntegerField(
        default=0, help_text="Number of valid ratings (kept by the rating services)."
    )
    random_key = models.FloatField(
        editable=False,
        help_text="Its question's random key (Question.random_key), copied when the answer is created so the queue "
                  "reads its order from one index: within a priority level the queue serves questions in key order "
                  "(a question's answers one after another, by id), so the rated questions of a benchmark are a "
                  "random sample while it is partly rated; routing's audit share is the questions with key < share.",
    )
    metadata = models.JSONField(
        default=dict, blank=True,
        help_text='Attributes of this answer from its import ({"type": "short", ...}: names to texts, the mapping\'s '
                  "candidate_metadata); the leaderboard can be broken down by each name.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["question_version", "lalm"], name="candidate_unique_per_version_lalm"),
        ]
        indexes = [
            # The queue's order at one valid-rating count: highest priority first, then the question's random key,
            # then the answer (a question's answers share the key).
            models.Index(fields=["valid_rating_count", "-priority", "random_key", "id"], name="candidate_queue_order"),
            # The few candidates whose own k (routing) exceeds the shared one: the queue looks them up here.
            models.Index(
                fields=["valid_rating_count", "-priority", "random_key", "id"],
                condition=Q(target_ratings__isnull=False),
                name="candidate_open_routed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question_version} / {self.lalm}"

    def save(self, *args, **kwargs):
        if self.random_key is None:  # a new answer takes its question's key (never a draw of its own)
            candidate_keys_fill([self])
        super().save(*args, **kwargs)
