"""Who rates what: assignments, annotators' ratings (ORCA paper, Appendix A), LLM judges and their ratings (section
5.6)."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.codes import ALL_CODE_STRINGS
from annotation.models.common import _check_api_key_env
from annotation.models.items import CandidateAnswer, QuestionVersion


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
