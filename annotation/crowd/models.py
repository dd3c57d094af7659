"""Quality-control and crowd-study rows (app label ``annotation``; imported by ``annotation.models``).

* :class:`QualityItem` — a candidate answer used as a check: *gold* (an expert's accepted score range, optional
  expected codes, an explanation) or an *attention check* (its text asks for a specific response). Ratings of a
  quality item are stored as ordinary ``Rating`` rows so the rating page and API treat them exactly like other
  items, but they are written ``is_valid=False`` with :data:`QUALITY_INVALID_REASON`, so every reader of valid
  ratings (alpha, ORCA training, exports, the leaderboard) leaves them out, and the regular queue never offers a
  quality item (it is handed out only by :mod:`annotation.crowd.queue`). Ratings a candidate answer already had
  when it was marked gold are invalidated then (:data:`GOLD_MARKED_INVALID_REASON`), so they never count either.
* :class:`QualityCheck` — the outcome of one such rating (passed or failed, why).
* :class:`BenchmarkQuality` — per-benchmark insertion rates, minimum time on task, training feedback.
* :class:`QualityPolicy` — the one row of site-wide rules: qualification and warn/pause thresholds.
* :class:`QualificationAttempt` — an annotator's run through N qualification items.
* :class:`AnnotatorQuality` — an annotator's status (active / warned / paused) and qualification state.
* :class:`Study`, :class:`StudyParticipant` — a crowd study (Prolific, MTurk, ...) bound to one benchmark.
"""
import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

#: ``Rating.invalid_reason`` of ratings of quality items (they never count as real ratings).
QUALITY_INVALID_REASON = "quality-control item (gold or attention check); never counts as a rating"
#: ``Rating.invalid_reason`` of the ratings a candidate answer had when it was marked gold (kept, never counted).
GOLD_MARKED_INVALID_REASON = "the candidate answer became a gold item; ratings made before never count"


class QualityItem(models.Model):
    """A candidate answer used to check annotators: gold or attention check."""

    class Kind(models.TextChoices):
        GOLD = "gold", "Gold item"
        ATTENTION = "attention", "Attention check"

    candidate = models.OneToOneField(
        "annotation.CandidateAnswer", on_delete=models.CASCADE, related_name="quality_item",
        help_text="The candidate answer shown as the check.",
    )
    kind = models.CharField(max_length=10, choices=Kind.choices, help_text="gold or attention.")
    min_score = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(5)], help_text="Lowest accepted score (1–5).")
    max_score = models.PositiveSmallIntegerField(
        validators=[MinValueValidator(1), MaxValueValidator(5)], help_text="Highest accepted score (1–5).")
    expected_codes = models.CharField(
        max_length=5, blank=True, default="",
        help_text="Feedback codes the rating must include (subset of QARUE); empty: codes are not checked.")
    explanation = models.TextField(blank=True, help_text="Why this score is right; shown as training feedback.")
    in_qualification = models.BooleanField(
        default=False, help_text="Also used as a qualification item for new annotators.")
    is_active = models.BooleanField(default=True, help_text="Handed out; inactive items keep their results.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(min_score__gte=1, max_score__lte=5, min_score__lte=F("max_score")),
                                   name="quality_item_score_range"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.candidate_id} [{self.min_score}-{self.max_score}]"


class QualityCheck(models.Model):
    """The outcome of one rating of a quality item."""

    class Phase(models.TextChoices):
        QUEUE = "queue", "Inserted in the work queue"
        QUALIFICATION = "qualification", "Qualification"

    rating = models.OneToOneField("annotation.Rating", on_delete=models.CASCADE, related_name="quality_check")
    item = models.ForeignKey(QualityItem, on_delete=models.CASCADE, related_name="checks")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quality_checks")
    kind = models.CharField(max_length=10, choices=QualityItem.Kind.choices, help_text="gold or attention.")
    phase = models.CharField(max_length=15, choices=Phase.choices, default=Phase.QUEUE)
    attempt = models.ForeignKey("QualificationAttempt", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="checks")
    passed = models.BooleanField(help_text="The rating met the item's accepted range, codes and minimum time.")
    reason = models.CharField(max_length=300, blank=True, help_text="Why it failed (empty when passed).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["annotator", "kind"])]


class BenchmarkQuality(models.Model):
    """How many quality items a benchmark's queue mixes in, and how they are judged."""

    benchmark = models.OneToOneField("annotation.Benchmark", on_delete=models.CASCADE, related_name="quality")
    gold_rate = models.FloatField(default=0.0, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                  help_text="Probability (0–1) that the next item is a gold item.")
    attention_rate = models.FloatField(default=0.0, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                       help_text="Probability (0–1) that the next item is an attention check.")
    min_seconds = models.FloatField(
        default=0.0, validators=[MinValueValidator(0)],
        help_text="An attention check rated faster than this many seconds counts as failed.")
    training_feedback = models.BooleanField(
        default=False, help_text="Training mode: after a gold item, show whether it passed and its explanation.")

    class Meta:
        verbose_name_plural = "benchmark quality settings"
        constraints = [
            models.CheckConstraint(condition=Q(gold_rate__gte=0, attention_rate__gte=0)
                                   & Q(gold_rate__lte=1, attention_rate__lte=1), name="benchmark_quality_rates"),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark}: gold {self.gold_rate:.0%}, attention {self.attention_rate:.0%}"


class QualityPolicy(models.Model):
    """Site-wide quality rules (one row, pk=1; :func:`annotation.crowd.items.quality_policy` makes it)."""

    qualification_required = models.BooleanField(
        default=False, help_text="New annotators must pass qualification before they get real items.")
    qualification_items = models.PositiveSmallIntegerField(default=5, validators=[MinValueValidator(1)],
                                                           help_text="N: items per qualification attempt.")
    qualification_pass_mark = models.FloatField(
        default=0.8, validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="Share of the N items (0–1) that must pass.")
    qualification_attempts = models.PositiveSmallIntegerField(
        default=2, validators=[MinValueValidator(1)], help_text="Attempts allowed (1 = no retry).")
    warn_score = models.FloatField(default=0.4, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                   help_text="Combined risk score (0–1) at which an annotator is warned.")
    pause_score = models.FloatField(default=0.7, validators=[MinValueValidator(0), MaxValueValidator(1)],
                                    help_text="Combined risk score (0–1) at which an annotator is paused.")
    min_ratings = models.PositiveSmallIntegerField(
        default=10, help_text="Ratings an annotator needs before the thresholds apply.")
    max_attention_failures = models.PositiveSmallIntegerField(
        default=2, help_text="Failed attention checks that pause an annotator on their own.")
    auto_pause = models.BooleanField(default=True, help_text="Apply the pause threshold when signals are computed.")

    class Meta:
        verbose_name_plural = "quality policy"

    def __str__(self) -> str:
        return "Quality policy"

    def clean(self) -> None:
        """Raises ``ValidationError`` when the warn score is above the pause score (nobody would be warned first)."""
        if self.warn_score is not None and self.pause_score is not None and self.warn_score > self.pause_score:
            raise ValidationError({"warn_score": "The warn score must not be above the pause score."})


class QualificationAttempt(models.Model):
    """One pass of an annotator through ``total`` qualification items."""

    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                  related_name="qualification_attempts")
    number = models.PositiveSmallIntegerField(help_text="1 for the first attempt, then 2, ...")
    total = models.PositiveSmallIntegerField(help_text="Items in this attempt.")
    passed_items = models.PositiveSmallIntegerField(default=0, help_text="Items passed so far.")
    done_items = models.PositiveSmallIntegerField(default=0, help_text="Items rated so far.")
    passed = models.BooleanField(null=True, blank=True, help_text="Result; empty while the attempt runs.")
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["annotator", "number"]
        constraints = [
            models.UniqueConstraint(fields=["annotator", "number"], name="qualification_attempt_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} attempt {self.number}: {self.passed_items}/{self.total} ({self.passed})"


class AnnotatorQuality(models.Model):
    """An annotator's quality status: active, warned or paused (paused annotators get no new items)."""

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        WARNED = "warned", "Warned"
        PAUSED = "paused", "Paused"

    annotator = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="quality")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    status_reason = models.TextField(blank=True, help_text="Why the status was set (signal values or a note).")
    status_changed_at = models.DateTimeField(null=True, blank=True)
    qualified_at = models.DateTimeField(null=True, blank=True, help_text="When qualification was passed.")

    class Meta:
        verbose_name_plural = "annotator quality"

    def __str__(self) -> str:
        return f"{self.annotator}: {self.status}"


class RatingInvalidation(models.Model):
    """One admin action that invalidated all of an annotator's valid ratings (and its undo)."""

    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    reason = models.TextField(help_text="Why the ratings stopped counting.")
    rating_ids = models.JSONField(default=list, help_text="Ratings this action made invalid.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    undone_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+")
    undone_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]


#: Query parameter names a study may use (letters, digits, ``_ . -``).
PARAM_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,50}$")
#: Ids from a crowd platform without a stricter rule of its own (MTurk, CloudResearch, SONA, your own links).
GENERIC_ID_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")
#: Prolific's participant, study and session ids: 24 hexadecimal characters.
PROLIFIC_ID_RE = re.compile(r"^[0-9a-fA-F]{24}$")
#: The query parameter of a signed entry link (``annotation.crowd.studies.study_link_signature``).
SIGNATURE_PARAM = "sig"


class Study(models.Model):
    """A crowd study: an entry link for one benchmark, a quota per participant, a completion code.

    An enabled study always has its platform's study id and a participant cap (``study_enabled_needs_id_and_cap``):
    an entry link must carry that study id, and no more than the cap of new participants can join.
    """

    class Platform(models.TextChoices):
        PROLIFIC = "prolific", "Prolific"
        OTHER = "other", "Other (MTurk, CloudResearch, own links)"

    name = models.CharField(max_length=200, unique=True, help_text="Shown to admins only.")
    slug = models.SlugField(
        max_length=60, unique=True,
        help_text="The last part of the entry link: pilot-1 gives /study/pilot-1/ (letters, digits, hyphens).")
    benchmark = models.ForeignKey("annotation.Benchmark", on_delete=models.PROTECT, related_name="studies",
                                  help_text="Participants rate only this benchmark.")
    is_enabled = models.BooleanField(
        default=False, help_text="Entry links work only while the study is enabled; enabling needs the platform's "
        "study id and a participant cap.")
    platform = models.CharField(
        max_length=20, choices=Platform.choices, default=Platform.PROLIFIC,
        help_text="The crowd platform, which decides how ids are checked: Prolific's are 24 hexadecimal "
        "characters; other platforms' are letters, digits and _ . : @ - (up to 200).")
    participant_param = models.CharField(max_length=50, default="PROLIFIC_PID",
                                         help_text="Query parameter with the participant id (MTurk: workerId).")
    study_param = models.CharField(max_length=50, default="STUDY_ID", blank=True,
                                   help_text="Query parameter with the platform's study id (MTurk: hitId).")
    session_param = models.CharField(max_length=50, default="SESSION_ID", blank=True,
                                     help_text="Query parameter with the session id (MTurk: assignmentId).")
    external_study_id = models.CharField(
        max_length=100, blank=True,
        help_text="The platform's id of this study (Prolific: the 24 characters in the study's address); an entry "
        "link must carry exactly this id. Needed to enable the study.")
    quota = models.PositiveIntegerField(default=20, validators=[MinValueValidator(1)],
                                        help_text="Items each participant rates before the completion code.")
    max_participants = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)],
        help_text="The most participants that may join (returning ones are always let back in). Needed to enable "
        "the study.")
    signed_links = models.BooleanField(
        default=False, help_text="Only signed entry links work: each participant's link carries sig=, a keyed hash of "
        "their id and the study id, made on the study's page. For links you send out yourself; Prolific and MTurk "
        "fill in ids but cannot sign them.")
    completion_code = models.CharField(max_length=100, help_text="Shown on reaching the quota (Prolific code).")
    completion_url = models.URLField(
        blank=True, max_length=500,
        help_text="Where participants are sent on completion; {code} is replaced by the completion code, e.g. "
        "https://app.prolific.com/submissions/complete?cc={code}. Empty: the code is shown, nobody is sent on.")
    instructions = models.TextField(
        blank=True, help_text="Shown to participants on the welcome page before they start (what the study is "
        "about); the page adds the number of items and the link to the rating guidelines.")
    reward_per_item = models.DecimalField(max_digits=8, decimal_places=3, default=0,
                                          help_text="Pay per item in the study's currency (for the hourly rate).")
    currency = models.CharField(max_length=3, default="GBP")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "studies"
        constraints = [
            models.CheckConstraint(
                condition=Q(is_enabled=False) | (Q(max_participants__gte=1) & ~Q(external_study_id="")
                                                 & ~Q(study_param="")),
                name="study_enabled_needs_id_and_cap",
                violation_error_message="An enabled study needs the platform's study id, its query parameter and a "
                                        "participant cap.",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def id_pattern(self) -> re.Pattern:
        """The pattern participant, study and session ids of this study's platform must match."""
        return PROLIFIC_ID_RE if self.platform == self.Platform.PROLIFIC else GENERIC_ID_RE

    def clean(self) -> None:
        """Field rules a form or service checks before saving (``full_clean``).

        Raises:
            ValidationError: a parameter name with other characters than letters, digits, ``_ . -``, used twice
                or named ``sig``; a study id that is not one of the platform's ids; an enabled study without study
                id, study parameter or participant cap; a completion URL that carries neither ``{code}`` nor the
                code.
        """
        errors: dict[str, str] = {}
        params = [(name, getattr(self, name)) for name in ("participant_param", "study_param", "session_param")]
        for name, value in params:
            if value and not PARAM_NAME_RE.match(value):
                errors[name] = "Use letters, digits, '_', '.' or '-' (a query parameter name)."
            elif value == SIGNATURE_PARAM:
                errors[name] = f"'{SIGNATURE_PARAM}' is the signature of a signed link; choose another name."
        used = [value for _, value in params if value]
        if len(used) != len(set(used)):
            errors["session_param"] = "The participant, study and session parameters must differ."
        if self.external_study_id and not self.id_pattern().match(self.external_study_id):
            errors["external_study_id"] = (
                "A Prolific study id is 24 hexadecimal characters (0-9, a-f), as in the study's address."
                if self.platform == self.Platform.PROLIFIC
                else "Use letters, digits and _ . : @ - only.")
        if self.is_enabled:
            if not self.external_study_id:
                errors.setdefault("external_study_id", "Enter the platform's study id before enabling the study.")
            if not self.study_param:
                errors.setdefault("study_param", "The entry link must carry the study id to enable the study.")
            if not self.max_participants:
                errors["max_participants"] = "Set a participant cap before enabling the study."
        if self.completion_url and "{code}" not in self.completion_url and (
                not self.completion_code or self.completion_code not in self.completion_url):
            errors["completion_url"] = ("Write {code} where the completion code goes (e.g. ...?cc={code}), or paste "
                                        "the platform's completion address that already contains the code.")
        if errors:
            raise ValidationError(errors)


class StudyParticipant(models.Model):
    """A pseudonymous participant of a study: one account per (platform participant id), passwordless."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="study_participations")
    participant_id = models.CharField(max_length=200, help_text="The platform's participant id (PROLIFIC_PID).")
    session_id = models.CharField(max_length=200, blank=True, help_text="The platform's latest session id.")
    external_study_id = models.CharField(max_length=200, blank=True, help_text="The platform's study id.")
    joined_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True, help_text="When the quota was reached.")

    class Meta:
        ordering = ["joined_at"]
        constraints = [
            models.UniqueConstraint(fields=["study", "participant_id"], name="study_participant_unique_id"),
            models.UniqueConstraint(fields=["study", "user"], name="study_participant_unique_user"),
        ]

    def __str__(self) -> str:
        return f"{self.study}: {self.participant_id}"
