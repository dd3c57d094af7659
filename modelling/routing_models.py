"""Rows of routing and the sampling design (registered with the modelling app by ``modelling.models``): the routing
switch and log, each benchmark's policy, the leaderboard-precision draws (per answer π, per question u) and the
design epochs (issue #35). Written only by ``modelling.services.routing`` and ``modelling.services.design``.
"""
from django.conf import settings
from django.db import models
from django.db.models import Q

from modelling.services.routing_policy import DEFAULT_ACTIVE_FLOOR

# --- Routing annotation by predicted disagreement (modelling/services/routing.py) ------------------------


class RoutingPolicy(models.Model):
    """The routing switch (one row, pk 1) and where the last evaluation left off; thresholds are settings.

    Written only by ``modelling.services.routing`` (``routing_policy_set``, ``routing_refresh``).
    """

    enabled = models.BooleanField(
        default=False, help_text="Routing on: ORCA's predictions set target_ratings and priority of candidates."
    )
    model_version = models.ForeignKey(
        "modelling.ModelVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The model version whose predictions the last full evaluation used.",
    )
    n_predictions = models.PositiveIntegerField(
        default=0, help_text="Predictions of that model version at the last full evaluation (new ones trigger one)."
    )
    rating_watermark = models.PositiveBigIntegerField(
        default=0, help_text="Highest Rating id seen by the last evaluation (newer ratings trigger re-evaluation)."
    )
    evaluated_at = models.DateTimeField(null=True, blank=True, help_text="When the policy was last evaluated.")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who last switched routing on or off.",
    )
    updated_at = models.DateTimeField(auto_now=True, help_text="When the switch was last changed.")

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(id=1), name="routing_policy_singleton")]

    def __str__(self) -> str:
        return f"routing {'on' if self.enabled else 'off'}"


class RoutingDecision(models.Model):
    """One change routing made to a candidate answer's target_ratings / priority, with its reason (the log).

    Written only by ``modelling.services.routing``; the latest row of a candidate is its current routing state.
    ``refinement`` reads rows with ``expert=True`` (by app label, ``apps.get_model``) to offer predicted-ambiguous
    questions to expert review.
    """

    class Reason(models.TextChoices):
        OBSERVED_DISAGREEMENT = "observed_disagreement", "Observed disagreement (overrides the prediction)"
        OBSERVED_AGREEMENT = "observed_agreement", "Observed agreement (overrides the prediction)"
        PREDICTED_DISAGREEMENT = "predicted_disagreement", "Predicted disagreement (top σ² quantile)"
        CONFIDENT_AGREEING = "confident_agreeing", "First two ratings agree (stops early)"
        CONFIDENT_MODEL_AGREES = "confident_model_agrees", "Low predicted σ², first rating matches the model's 1 + 4μ"
        CONFIDENT_DISAGREEING = "confident_disagreeing", "First two ratings disagree (default kept)"
        DEFAULT = "default", "No rule applies (default)"
        ROUTING_OFF = "routing_off", "Routing switched off (default restored)"
        ACTIVE_SELECTED = "active_selected", "Drawn for the leaderboard (probability ∝ σ with a uniform floor)"
        ACTIVE_SKIPPED = "active_skipped", "Not drawn for the leaderboard (not to be rated)"
        AUDIT = "audit", "In the audit share (always the default k: keeps the leaderboard unbiased)"

    candidate = models.ForeignKey(
        "annotation.CandidateAnswer", on_delete=models.CASCADE, related_name="routing_decisions",
        help_text="The candidate answer routed.",
    )
    model_version = models.ForeignKey(
        "modelling.ModelVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="routing_decisions",
        help_text="The model whose prediction was used (empty when routing was switched off).",
    )
    reason = models.CharField(max_length=30, choices=Reason.choices, help_text="The rule that decided.")
    detail = models.TextField(blank=True, help_text="The numbers behind the reason, in words.")
    old_target_ratings = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="target_ratings before (empty = the default k)."
    )
    target_ratings = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="target_ratings after (empty = the default k)."
    )
    old_priority = models.IntegerField(default=0, help_text="Queue priority before.")
    priority = models.IntegerField(default=0, help_text="Queue priority after (higher is offered first).")
    mu = models.FloatField(null=True, blank=True, help_text="Predicted μ (0–1) used.")
    variance = models.FloatField(null=True, blank=True, help_text="Predicted σ² (normalised scale) used.")
    n_ratings = models.PositiveSmallIntegerField(default=0, help_text="Valid scored ratings seen when deciding.")
    expert = models.BooleanField(
        default=False, help_text="Predicted ambiguous (σ² in the top expert quantile): offered to expert review."
    )
    inclusion_probability = models.FloatField(
        null=True, blank=True,
        help_text="Leaderboard-precision policy: the probability π (0–1] with which this answer was drawn; a rating "
        "of a drawn answer weighs 1/π in the active estimate. Empty for the other policies.",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the decision was made.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["candidate", "-id"]), models.Index(fields=["reason", "-id"])]

    def __str__(self) -> str:
        return f"{self.candidate_id}: {self.old_target_ratings}->{self.target_ratings} ({self.reason})"


class BenchmarkRouting(models.Model):
    """Which routing policy a benchmark's candidate answers follow while routing is on (no row: disagreement).

    Written only by ``modelling.services.routing.benchmark_routing_set``.
    """

    class Policy(models.TextChoices):
        DISAGREEMENT = "disagreement", "Predicted disagreement (more raters where ORCA expects disagreement)"
        LEADERBOARD_PRECISION = "leaderboard_precision", (
            "Leaderboard precision (rate a sample drawn ∝ ORCA's σ with a uniform floor, weighted 1/π)"
        )

    benchmark = models.OneToOneField(
        "annotation.Benchmark", on_delete=models.CASCADE, related_name="+", help_text="The benchmark."
    )
    policy = models.CharField(max_length=30, choices=Policy.choices, default=Policy.DISAGREEMENT,
                              help_text="The routing policy of its candidate answers.")
    budget = models.FloatField(
        default=0.3, help_text="Leaderboard precision: expected share (0–1] of each LALM's answers drawn for rating."
    )
    floor = models.FloatField(
        default=DEFAULT_ACTIVE_FLOOR,
        help_text="Leaderboard precision: share (0–1] of the budget spread uniformly (the rest ∝ σ).",
    )
    audit_share = models.FloatField(
        null=True, blank=True,
        help_text="Predicted disagreement: share (0–1) of the benchmark's answers, by random key, that routing never "
                  "stops early (the audit the leaderboard estimates from); empty: ROUTING_AUDIT_SHARE.",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who last chose the policy.",
    )
    updated_at = models.DateTimeField(auto_now=True, help_text="When the policy was last chosen.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(budget__gt=0.0, budget__lte=1.0), name="benchmark_routing_budget"),
            models.CheckConstraint(condition=Q(floor__gt=0.0, floor__lte=1.0), name="benchmark_routing_floor"),
            models.CheckConstraint(
                condition=Q(audit_share__isnull=True) | Q(audit_share__gte=0.0, audit_share__lte=1.0),
                name="benchmark_routing_audit_share",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark_id}: {self.policy}"

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        errors = {name: "must be above 0 and at most 1" for name in ("budget", "floor")
                  if not 0.0 < (getattr(self, name) or 0.0) <= 1.0}
        if self.audit_share is not None and not 0.0 <= self.audit_share <= 1.0:
            errors["audit_share"] = "must be between 0 and 1"
        if errors:
            raise ValidationError(errors)


class ActiveDraw(models.Model):
    """The fixed design of the leaderboard-precision policy for one candidate answer: its uniform number u (its
    question's :class:`QuestionDraw`, shared by every LALM's answer to the question) and its own inclusion
    probability π, set at the first routing decision that applied the policy to it (or when the leaderboard found
    it without one) and never changed (a new model version, new answers or a new budget leave them alone), so the
    draw (u < π) and the weight 1/π of its ratings hold for the leaderboard's active estimate (Zrnic & Candès,
    ICML 2024; README, Leaderboard). Two LALMs' answers to a question are both drawn with probability min(π_a, π_b)
    (one u), not π_a·π_b.

    Written only by ``modelling.services.design``.
    """

    candidate = models.OneToOneField(
        "annotation.CandidateAnswer", on_delete=models.CASCADE, related_name="active_draw",
        help_text="The candidate answer.",
    )
    u = models.FloatField(help_text="Its question's uniform number in [0, 1) (QuestionDraw.u); the answer is drawn "
                                    "when u < π.")
    pi = models.FloatField(help_text="Inclusion probability π in (0, 1], from ORCA's σ at the first decision.")
    model_version = models.ForeignKey(
        "modelling.ModelVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="The model whose predicted σ set π.",
    )
    budget = models.FloatField(help_text="The benchmark's budget share when π was set.")
    floor = models.FloatField(help_text="The benchmark's uniform floor when π was set.")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the draw was made.")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(pi__gt=0.0, pi__lte=1.0), name="active_draw_pi_0_1"),
            models.CheckConstraint(condition=Q(u__gte=0.0, u__lt=1.0), name="active_draw_u_0_1"),
        ]

    def __str__(self) -> str:
        return f"{self.candidate_id}: u={self.u:.4f} π={self.pi:.4f}"

    @property
    def drawn(self) -> bool:
        return self.u < self.pi


class QuestionDraw(models.Model):
    """The uniform number u of the leaderboard-precision design for one question, drawn once (the first time one of
    its answers gets an :class:`ActiveDraw`) and shared by every LALM's answer to it, in every version. It is
    independent of the question's random key (the queue's order), so the drawn answers the queue has reached so
    far are a uniform sample of the drawn ones. Written only by ``modelling.services.design``.
    """

    question = models.OneToOneField("annotation.Question", on_delete=models.CASCADE, related_name="+",
                                    help_text="The question.")
    u = models.FloatField(help_text="Uniform number in [0, 1); an answer of the question is drawn when u < its π.")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was drawn.")

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(u__gte=0.0, u__lt=1.0), name="question_draw_u_0_1")]

    def __str__(self) -> str:
        return f"question {self.question_id}: u={self.u:.4f}"


class DesignEpoch(models.Model):
    """A stretch of time during which a benchmark's answers were chosen for rating under one design (issue #35):
    ``uniform`` (routing off: every answer wants k ratings, the queue serves questions by random key), ``routed``
    (routing by disagreement with an audit share of questions, key < share, never stopped early) or ``active``
    (the leaderboard-precision draws). Switching routing on or off, starting or stopping leaderboard precision, or
    changing the audit share of a routed benchmark starts the next epoch; a rating belongs to the epoch in which it
    was made (``started`` ≤ its time < the next epoch's ``started``), so an estimate can use the ratings made under
    one design. Written only by ``modelling.services.design``.
    """

    class Policy(models.TextChoices):
        UNIFORM = "uniform", "Uniform (routing off)"
        ROUTED = "routed", "Routed by disagreement, with an audit share"
        ACTIVE = "active", "Leaderboard precision (drawn ∝ ORCA's σ, weighted 1/π)"

    benchmark = models.ForeignKey("annotation.Benchmark", on_delete=models.CASCADE, related_name="+",
                                  help_text="The benchmark.")
    number = models.PositiveIntegerField(help_text="1 for the benchmark's first epoch, then 2, 3, ...")
    policy = models.CharField(max_length=10, choices=Policy.choices, help_text="The design of this epoch.")
    audit_share = models.FloatField(null=True, blank=True,
                                    help_text="Routed epochs: the audit share (0–1) of questions; else empty.")
    started = models.DateTimeField(help_text="When the epoch started (the first: when the benchmark was created).")
    reason = models.TextField(blank=True, help_text="What started it (the switch, the share change, a migration).")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Who made the change that started it.")

    class Meta:
        ordering = ["benchmark", "number"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "number"], name="design_epoch_unique_number"),
            models.CheckConstraint(condition=Q(audit_share__isnull=True) | Q(audit_share__gte=0.0,
                                                                             audit_share__lte=1.0),
                                   name="design_epoch_audit_share"),
        ]

    def __str__(self) -> str:
        return f"{self.benchmark_id} epoch {self.number}: {self.policy}"
