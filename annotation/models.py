"""The item store: benchmarks, audio, versioned questions, LALMs, candidate answers, ratings and jobs.

See the README (Layout; Integrity: versions, races and input) and the ORCA paper, sections 3.1–3.3. Invariants
that matter are database constraints, so they hold for every writer (web, API, imports, jobs).
"""
import random

from django.conf import settings
from django.db import models
from django.db.models import Q

from .codes import ALL_CODE_STRINGS


def random_key_new() -> float:
    """A fresh uniform random number in [0, 1): a candidate answer's ``random_key`` (drawn once, at creation)."""
    return random.random()


def _check_api_key_env(provider_settings) -> None:
    """``ValidationError`` on ``settings`` when it names an API key variable that is not allowed (see
    ``annotation.providers.setup``); run by ``full_clean()`` (the admin, services)."""
    from django.core.exceptions import ValidationError

    from annotation.providers.setup import api_key_env_error

    if not isinstance(provider_settings, dict):
        raise ValidationError({"settings": "Settings must be a JSON object."})
    if error := api_key_env_error(provider_settings):
        raise ValidationError({"settings": error[0].upper() + error[1:] + "."})


class RunStatus(models.TextChoices):
    """The life of a row of background work, declared once: QUEUED → RUNNING → DONE / FAILED / CANCELLED.

    ``Job.Status`` and ``modelling.TrainingRun.Status`` are this class; ``JobItem.Status`` and
    ``refinement.Suggestion.Status`` are variants made by :func:`run_status_variant` from these members plus their
    own states. The values are what the database stores.
    """

    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


def run_status_variant(qualname: str, module: str, *members: str | tuple[str, str] | tuple[str, str, str]):
    """A ``TextChoices`` class that lives at ``module.qualname`` (e.g. ``"JobItem.Status"``, so it pickles) whose
    members are, in the order given:

    * ``"RUNNING"``: that :class:`RunStatus` member (same value and label);
    * ``("DONE", "Ready for review")``: that member's value with another label;
    * ``("SKIPPED", "skipped", "Skipped")``: a state of the variant's own (name, value, label).

    Raises:
        KeyError: a name that is not a :class:`RunStatus` member in the first two forms.
    """
    spec = []
    for member in members:
        if isinstance(member, str):
            spec.append((member, (RunStatus[member].value, RunStatus[member].label)))
        elif len(member) == 2:
            spec.append((member[0], (RunStatus[member[0]].value, member[1])))
        else:
            spec.append((member[0], (member[1], member[2])))
    return models.TextChoices(qualname.replace(".", ""), spec, module=module, qualname=qualname)


class Modality(models.TextChoices):
    SPEECH = "speech", "Speech"
    SOUND = "sound", "Sound"
    MUSIC = "music", "Music"
    MIXED = "mixed", "Mixed"


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
        IMPORT = "import", "Imported answers (JSONL)"
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


class CandidateAnswer(models.Model):
    """An LALM's answer to one version of a question: the thing annotators rate."""

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
        default=random_key_new, editable=False,
        help_text="Uniform random number in [0, 1) drawn when the answer is created. Within a priority level the "
                  "queue serves answers in this order, so the rated answers of a benchmark are a random sample "
                  "while it is partly rated (README, Leaderboard); routing derives its audit share from it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["question_version", "lalm"], name="candidate_unique_per_version_lalm"),
        ]
        indexes = [
            # The queue's order at one valid-rating count: highest priority first, then the random key.
            models.Index(fields=["valid_rating_count", "-priority", "random_key"], name="candidate_queue_order"),
            # The few candidates whose own k (routing) exceeds the shared one: the queue looks them up here.
            models.Index(
                fields=["valid_rating_count", "-priority", "random_key"],
                condition=Q(target_ratings__isnull=False),
                name="candidate_open_routed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question_version} / {self.lalm}"


class Assignment(models.Model):
    """Who is rating what now. An open assignment holds one of the candidate's k slots until it expires."""

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        SUBMITTED = "submitted", "Submitted"
        SKIPPED = "skipped", "Skipped"
        EXPIRED = "expired", "Expired"

    candidate = models.ForeignKey(CandidateAnswer, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="assignments")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    skip_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "annotator"],
                condition=Q(status="open"),
                name="assignment_one_open_per_annotator",
            ),
        ]
        indexes = [models.Index(fields=["status", "expires_at"])]

    def __str__(self) -> str:
        return f"{self.annotator} -> {self.candidate_id} ({self.status})"


class Rating(models.Model):
    """One annotator's correctness score (1–5) and feedback for one candidate answer (ORCA paper, Appendix A)."""

    class Source(models.TextChoices):
        WEB = "web", "Web"
        API = "api", "API"
        IMPORT = "import", "Import"

    candidate = models.ForeignKey(CandidateAnswer, on_delete=models.CASCADE, related_name="ratings")
    question_version = models.ForeignKey(QuestionVersion, on_delete=models.CASCADE, related_name="ratings")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ratings")
    score = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Correctness 1–5; empty only with code U or E (unable to judge)."
    )
    codes = models.CharField(
        max_length=5, blank=True, default="", help_text="Feedback codes, a subset of QARUE in that order."
    )
    comment = models.TextField(blank=True, help_text="Free-text feedback.")
    seconds_on_task = models.FloatField(
        null=True, blank=True, help_text="Seconds from showing the item to submit, as the rating page or API client "
        "reported it (not trusted: quality checks and study pay use server_seconds_on_task).")
    server_seconds_on_task = models.FloatField(
        null=True, blank=True, help_text="Seconds from the assignment being handed out to the rating being stored, "
        "measured by the server; empty for imported ratings.")
    audio_seconds_played = models.FloatField(null=True, blank=True, help_text="Seconds of audio played.")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.WEB)
    is_valid = models.BooleanField(default=True, help_text="False once the rated question version was corrected.")
    invalid_reason = models.TextField(blank=True, help_text="Why the rating stopped counting.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "annotator"], name="rating_one_per_candidate_annotator"),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=1, score__lte=5), name="rating_score_1_to_5"
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=False) | Q(codes__contains="U") | Q(codes__contains="E"),
                name="rating_null_score_needs_u_or_e",
            ),
            models.CheckConstraint(condition=Q(codes__in=ALL_CODE_STRINGS), name="rating_codes_subset_of_qarue"),
        ]
        indexes = [models.Index(fields=["annotator", "created_at"])]

    def __str__(self) -> str:
        return f"{self.annotator} rated {self.candidate_id}: {self.score} {self.codes}"


class Judge(models.Model):
    """An LLM judge: a provider, a model and a prompt variant (ORCA paper, section 5.6 and Appendix B.2).

    Adding a judge is a row (the judge form on the judges page, ``annotation.services.endpoints``), not code.
    The prompt variants are the template files in
    ``annotation/judging/prompts/`` (Appendix B.2: the full prompt of Fig. 7, the context ablations of Table 6 and
    the modified prompt of Fig. 8). ``settings`` keys, all optional: ``base_url``, ``api_key_env``,
    ``temperature`` (default 0), ``max_tokens`` (cap on a generated reply: 256 on servers, 128 for local models),
    ``requests_per_minute``, ``timeout_s``, ``logprobs`` (bool, OpenAI-compatible generate mode: ask for token
    log-probabilities, default true), ``top_logprobs`` (probability modes on a server: alternatives asked for,
    default 20), ``device`` and ``batch_size`` (local models; default ``cpu`` and 8 candidates per forward pass).

    ``mode`` (see :mod:`annotation.judging.probability`): ``generate`` asks for an explanation and a score and
    parses the reply; ``probability`` reads the model's distribution over the tokens "1".."5" at the score
    position and stores Σ p(k)·k; ``probability_yesno`` reads P("Yes") for "Is the candidate answer correct?"
    (AQAScore, Kuan et al.) and stores 1 + 4·P(Yes). Probability modes generate nothing, so they never fail for
    parsing; on an OpenAI-compatible server they need ``logprobs`` support (the connection test that saving such a
    judge queues checks it, in a worker).
    """

    class Mode(models.TextChoices):
        GENERATE = "generate", "Generate (explanation, then a parsed score)"
        PROBABILITY = "probability", "Probability of the score tokens 1–5 (Σ p(k)·k)"
        PROBABILITY_YESNO = "probability_yesno", "Probability of “Yes” (is the candidate answer correct?)"

    class Provider(models.TextChoices):
        GEMINI = "gemini", "Gemini (google-genai)"
        OPENAI = "openai", "OpenAI-compatible server"
        LOCAL = "local", "Local transformers chat model"

    class PromptVariant(models.TextChoices):
        FULL = "full", "Full (question, context: rationale + transcript)"
        NO_TRANSCRIPT = "no_transcript", "Without transcript"
        NO_CONTEXT = "no_context", "Without context"
        NO_QUESTION = "no_question", "Without context and question"
        MODIFIED = "modified", "Modified full prompt (Fig. 8)"

    name = models.CharField(max_length=200, unique=True, help_text="Unique name shown on the comparison page.")
    provider = models.CharField(max_length=10, choices=Provider.choices, help_text="Where the model runs.")
    model = models.CharField(
        max_length=500,
        help_text="Model name (e.g. 'gemini-2.5-flash', 'Qwen2.5-7B-Instruct'); local: 'smollm2', a folder or .gguf.",
    )
    prompt_variant = models.CharField(
        max_length=20, choices=PromptVariant.choices, default=PromptVariant.FULL, help_text="Prompt template used."
    )
    mode = models.CharField(
        max_length=20, choices=Mode.choices, default=Mode.GENERATE,
        help_text="How a score is obtained: a generated and parsed reply, or the model's token probabilities.",
    )
    settings = models.JSONField(default=dict, blank=True, help_text="Provider settings (see the class docstring).")
    is_active = models.BooleanField(default=True, help_text="Offered on the judges page and used in fusion.")
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self):
        _check_api_key_env(self.settings)


class JudgeRating(models.Model):
    """An LLM judge's score for a candidate answer (ORCA paper, section 5.6 and Appendix B.2).

    ``judge`` is set for ratings made here; imported or legacy rows only carry ``judge_name``/``prompt_variant``.
    """

    candidate = models.ForeignKey(CandidateAnswer, on_delete=models.CASCADE, related_name="judge_ratings")
    judge = models.ForeignKey(
        Judge, null=True, blank=True, on_delete=models.CASCADE, related_name="ratings",
        help_text="The judge row; empty for imported or legacy ratings.",
    )
    judge_name = models.CharField(max_length=200, help_text="The judge model, e.g. 'gemini-2.5-flash'.")
    prompt_variant = models.CharField(max_length=50, default="full", help_text="Prompt template used.")
    mode = models.CharField(
        max_length=20, choices=Judge.Mode.choices, default=Judge.Mode.GENERATE,
        help_text="How the score was obtained: generate (parsed reply), probability (Σ p(k)·k) or "
                  "probability_yesno (1 + 4·P(Yes)).",
    )
    score = models.FloatField(
        null=True, blank=True,
        help_text="Score 1–5 (probability modes: continuous); empty when a generated reply could not be parsed.",
    )
    expected_score = models.FloatField(
        null=True, blank=True, help_text="Σ p(k)·k over tokens 1–5 where log-probabilities were returned."
    )
    distribution = models.JSONField(
        null=True, blank=True,
        help_text='Probability modes: the renormalised distribution read from the model, {"1": p, ..., "5": p} '
                  'or {"Yes": p, "No": p}.',
    )
    explanation = models.TextField(blank=True)
    raw_output = models.TextField(blank=True, help_text="The judge's reply as received.")
    job = models.ForeignKey("Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["candidate", "judge_name", "prompt_variant"], name="judge_rating_unique_per_judge_prompt"
            ),
            models.UniqueConstraint(
                fields=["candidate", "judge"], condition=Q(judge__isnull=False), name="judge_rating_unique_per_judge"
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=1, score__lte=5), name="judge_rating_score_1_to_5"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge_name}/{self.prompt_variant} on {self.candidate_id}: {self.score}"


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


class TableImport(models.Model):
    """One table import (CSV, TSV, JSON, JSONL, Parquet or a Hugging Face ``datasets`` folder) with its mapping
    document: a draft while an admin maps its columns in the browser, then the record of what was imported.

    The mapping (``annotation.services.importers.table_mapping``) is saved here and can be downloaded and used
    again (``manage.py import_table --mapping``). Runs from the browser are ``Job(kind="import")`` rows whose
    ``params["table_import"]`` is this row's pk; ``job`` is the latest.
    """

    class SourceKind(models.TextChoices):
        UPLOAD = "upload", "Uploaded file"
        PATH = "path", "Server path"
        URL = "url", "URL"

    benchmark_name = models.CharField(max_length=200, help_text="The benchmark the rows go into (created if new).")
    benchmark = models.ForeignKey(
        Benchmark, null=True, blank=True, on_delete=models.SET_NULL, related_name="table_imports",
        help_text="The benchmark, once rows were imported into it.",
    )
    source_kind = models.CharField(max_length=10, choices=SourceKind.choices, help_text="Where the table came from.")
    source = models.CharField(max_length=1000, help_text="The uploaded file's name, the server path or the URL.")
    file_path = models.CharField(max_length=1000, help_text="The table file (or dataset folder) on this server.")
    file_format = models.CharField(
        max_length=10, help_text="csv, tsv, json (a list of objects), jsonl, parquet or hf (load_from_disk)."
    )
    audio_root = models.CharField(
        max_length=1000, blank=True, help_text="Folder or zip file the audio column's relative paths start from."
    )
    mapping = models.JSONField(default=dict, blank=True, help_text="The mapping document: which column is what.")
    columns = models.JSONField(default=list, blank=True, help_text="The table's column names, as read.")
    rows = models.PositiveIntegerField(null=True, blank=True, help_text="Number of data rows in the table.")
    summary = models.JSONField(
        default=dict, blank=True, help_text="Counts of the last import of this table (questions, candidate "
                                            "answers, LALMs, ratings created/updated).",
    )
    job = models.ForeignKey(
        "Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The latest validation or import job started from the browser.",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    imported_at = models.DateTimeField(null=True, blank=True, help_text="When rows were last imported from it.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.source} -> {self.benchmark_name}"


class ImportAccount(models.Model):
    """Marks a user as an import-only account: the pseudonym of a rater whose ratings were imported from a file.

    The account has no usable password and is inactive, so nobody can log in as it; its ratings are ordinary
    ratings (``source="import"``) that count in alpha, the leaderboard and training. ``key`` is the HMAC-SHA256
    of (namespace, rater id) under the site's ``SECRET_KEY`` (``annotation.services.accounts``), so the rater id
    itself is stored nowhere and the same rater of the same namespace maps to the same account on every import.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="import_account")
    key = models.CharField(max_length=64, unique=True, help_text="HMAC-SHA256 (hex) of the namespace and rater id.")
    namespace = models.CharField(
        max_length=200, help_text="Whose rater ids these are (default: the benchmark the ratings came with)."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} (imported, {self.namespace})"


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


# Quality control and crowd studies (annotation/crowd/models.py), registered with this app.
from annotation.crowd.models import (  # noqa: E402,F401
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
from annotation.teams.models import BenchmarkMembership  # noqa: E402,F401
