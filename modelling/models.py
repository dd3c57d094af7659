"""Rows of the modelling app: agreement snapshots (ORCA paper, section 5.2) and the ORCA registry: training runs,
model versions and predictions (ORCA paper, sections 4–5).
"""
from django.conf import settings
from django.db import models
from django.db.models import Q

from annotation.models import RunStatus


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


class SplitKind(models.TextChoices):
    """How a training run splits the rated data (ORCA paper, section 5.3)."""

    UNSEEN_QUESTIONS = "unseen_questions", (
        "Unseen questions (stratified by modality, then benchmark and category; 8:1:1)")
    HELD_OUT_LALMS = "held_out_lalms", "Held-out LALMs"
    CROSS_FIT = "cross_fit", "One fold of a cross-fit (trained on the other folds' questions)"


class TrainingRun(models.Model):
    """One ORCA fine-tuning run: its settings, its split, its life (QUEUED → RUNNING → DONE/FAILED/CANCELLED) and
    its results. Created QUEUED by ``modelling.services.training.training_run_start``; only the services write it.
    """

    Status = RunStatus

    class Trigger(models.TextChoices):
        MANUAL = "manual", "Started by a user"
        RETRAIN = "retrain", "Periodic retraining"

    config = models.JSONField(
        default=dict,
        help_text="ORCA settings: base_model (alias, folder or hub name), head (beta|multinomial), pooling "
        "(auto|mean|cls|last), epochs, lr (backbone learning rate), batch_size, max_length (tokens), input-field "
        "flags rationale/question/transcript (booleans) and device (cpu|cuda).",
    )
    split_kind = models.CharField(
        max_length=20, choices=SplitKind.choices, default=SplitKind.UNSEEN_QUESTIONS, help_text="How the data is split."
    )
    split_seed = models.IntegerField(default=0, help_text="Seed of the split and of training.")
    held_out_lalms = models.JSONField(
        default=list, blank=True, help_text="Names of the LALMs whose answers form the test split (held-out LALMs)."
    )
    trigger = models.CharField(
        max_length=10, choices=Trigger.choices, default=Trigger.MANUAL, help_text="What started the run."
    )
    status = models.CharField(
        max_length=10, choices=Status.choices, default=Status.QUEUED, help_text="Where the run is in its life."
    )
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id of the worker (for revoking).")
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="Last sign of life from the worker; stale runs are failed by the reaper."
    )
    log = models.TextField(blank=True, help_text="What happened, one line per event; the traceback when it failed.")
    progress = models.JSONField(
        default=list,
        blank=True,
        help_text="One entry per finished epoch: {epoch, loss (mean training NLL per rating, nats), dev_rho, "
        "dev_tau, dev_mae_mu, elapsed_s}.",
    )
    steps_done = models.PositiveIntegerField(default=0, help_text="Optimiser steps done so far.")
    steps_total = models.PositiveIntegerField(default=0, help_text="Optimiser steps planned (epochs × batches).")
    metrics = models.JSONField(
        default=dict,
        blank=True,
        help_text="{dev: {unclamped, clamped, per_group}, test: {unclamped, clamped, per_group}}: unclamped and "
        "clamped each {rho, tau, mae_mu, mae_var} on the normalised scale (null where undefined); per_group "
        "{\"benchmark=NAME\" or \"benchmark=NAME|key=value\": {n, rho, rho_ci, tau, mae_mu, mae_var}} of the "
        "unclamped μ on that benchmark's (group's) answers in the split; plus best_epoch, clamp_threshold, "
        "concentration_scale and train_wall_s.",
    )
    artifact_path = models.CharField(
        max_length=500, blank=True, help_text="Folder of the saved ORCA model (weights, head, config, tokenizer)."
    )
    n_train_items = models.PositiveIntegerField(default=0, help_text="Candidate answers in the training split.")
    n_train_ratings = models.PositiveIntegerField(default=0, help_text="Scored ratings in the training split.")
    n_dev_items = models.PositiveIntegerField(default=0, help_text="Candidate answers in the dev split.")
    n_dev_ratings = models.PositiveIntegerField(default=0, help_text="Scored ratings in the dev split.")
    n_test_items = models.PositiveIntegerField(default=0, help_text="Candidate answers in the test split.")
    n_test_ratings = models.PositiveIntegerField(default=0, help_text="Scored ratings in the test split.")
    source_rating_count = models.PositiveIntegerField(
        default=0,
        help_text="Valid scored ratings in the whole store when the data was exported (periodic retraining counts "
        "new ratings from here).",
    )
    source_rating_counts = models.JSONField(
        default=dict, blank=True,
        help_text="Valid scored ratings per benchmark (name → count) when the data was exported: periodic retraining "
        "weights up the benchmarks the model has seen fewer than half of the ratings of.",
    )
    parent = models.ForeignKey(
        "ModelVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="children",
        help_text="The model version this run started from (adaptation: config init_from is its folder); empty: "
        "trained from the base model.",
    )
    activation_decision = models.JSONField(
        default=dict, blank=True,
        help_text="The comparison with the model active when the run finished, per benchmark on held-out questions "
        "neither model trained on: {activate: bool, reasons: [sentence, ...], active_version, tolerance, "
        "benchmarks: [{benchmark, n, n_questions, rho_new, rho_active, diff, diff_ci, worse}], decided_at} "
        "(modelling.services.orca_quality.activation_compare).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who started the run (empty for periodic retraining).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the run was queued.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker claimed the run.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When the run ended (any final status).")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"training run #{self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED, self.Status.CANCELLED)


class TrainingSplit(models.Model):
    """Which questions a training run trained on (train), tuned on (dev) and held out (test): primary keys of
    ``annotation.Question``. Kept so that a run adapted from this run's model keeps the same questions held out
    (a model started from it must never be tested on questions it inherited training on), and so that a new model
    and the active one can be compared on questions neither trained on. Written by
    ``modelling.services.training`` only."""

    run = models.OneToOneField(TrainingRun, on_delete=models.CASCADE, related_name="split",
                               help_text="The training run.")
    train = models.JSONField(default=list, blank=True, help_text="Question pks of the training split.")
    dev = models.JSONField(default=list, blank=True, help_text="Question pks of the dev split.")
    test = models.JSONField(default=list, blank=True, help_text="Question pks of the test split (held out).")

    def __str__(self) -> str:
        return f"split of run #{self.run_id}: {len(self.train)}/{len(self.dev)}/{len(self.test)} questions"

    def parts(self) -> dict[str, set[int]]:
        """{"train": {question pk, ...}, "dev": {...}, "test": {...}}."""
        return {"train": set(self.train), "dev": set(self.dev), "test": set(self.test)}


class ModelVersion(models.Model):
    """An ORCA model in the registry: trained here (one per finished run) or imported from a checkpoint of the ORCA
    authors' release (no run; provenance in ``source_url``, ``licence``, ``upstream_path``). At most one is active
    and scores candidates."""

    training_run = models.OneToOneField(
        TrainingRun, on_delete=models.PROTECT, related_name="model_version", null=True, blank=True,
        help_text="The run that trained it; empty for an imported checkpoint.",
    )
    name = models.CharField(max_length=200, unique=True, help_text="Display name, e.g. 'orca-7-minilm-beta'.")
    artifact_path = models.CharField(max_length=500, help_text="Folder of the saved ORCA model.")
    metrics = models.JSONField(default=dict, blank=True, help_text="The run's dev/test metrics (see TrainingRun).")
    is_active = models.BooleanField(default=False, help_text="The model whose predictions the platform uses now.")
    activated_at = models.DateTimeField(null=True, blank=True, help_text="When it was last made active.")
    activated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Who made it active (empty when periodic retraining did).",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When the run finished and registered it.")
    upstream_path = models.CharField(
        max_length=500, blank=True,
        help_text="Imported checkpoints: the ORCA authors' model folder it was converted from (config.yaml, lm/).",
    )
    source_url = models.URLField(max_length=500, blank=True, help_text="Imported checkpoints: where it was published.")
    licence = models.CharField(
        max_length=200, blank=True, help_text="Imported checkpoints: the licence it comes under."
    )
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Imported checkpoints: the admin who registered it.",
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_active"], condition=Q(is_active=True), name="model_version_at_most_one_active"
            ),
            models.CheckConstraint(
                condition=Q(training_run__isnull=False) | ~Q(upstream_path=""),
                name="model_version_trained_or_imported",
            ),
        ]

    @property
    def is_imported(self) -> bool:
        """True for a checkpoint of the ORCA authors registered from its folder (no training run)."""
        return self.training_run_id is None

    def __str__(self) -> str:
        return self.name + (" (active)" if self.is_active else "")


class ModelImport(models.Model):
    """One registration of an ORCA authors' checkpoint, run as a job (``modelling.services.registry``): the
    conversion loads torch and the tokenizer, which a web request should not. ``status`` follows
    ``annotation.jobs.lifecycle``; a failed import says why in ``log`` (the file and field at fault); a finished one
    points to the ``model_version`` it registered."""

    Status = TrainingRun.Status

    name = models.CharField(max_length=200, help_text="Display name the model version gets.")
    upstream_path = models.CharField(max_length=500, help_text="The authors' model folder (best/model).")
    source_url = models.URLField(max_length=500, blank=True, help_text="Where it was published.")
    licence = models.CharField(max_length=200, blank=True, help_text="The licence it comes under.")
    tokenizer = models.CharField(max_length=500, blank=True, help_text="Tokenizer folder; empty: ../tokenizer.")
    base_model = models.CharField(max_length=500, blank=True,
                                  help_text="Local base LM of a LoRA adapter; empty: the one the adapter names.")
    clamp_threshold = models.FloatField(null=True, blank=True, help_text="Their σ² threshold for clamping μ.")
    rationale = models.BooleanField(default=True, help_text="The model reads the rationale.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED,
                              help_text="Where the import is in its life.")
    log = models.TextField(blank=True, help_text="What the job did, with UTC times; the reason of a failure.")
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id of the import.")
    model_version = models.OneToOneField(
        ModelVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="import_run",
        help_text="The model version it registered (when done).",
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="The admin who started it.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"checkpoint import {self.name} ({self.status})"

    @property
    def failure(self) -> str:
        """The log's last "FAILED: …" line without the prefix (the first line of it), or ""."""
        lines = [line for line in self.log.splitlines() if "FAILED: " in line]
        return lines[-1].split("FAILED: ", 1)[1] if lines else ""


class ScoringRun(models.Model):
    """One scoring job of a model version (``modelling.services.scoring``): a worker loads the model, checking that
    it is the model that was saved or imported (tokenizer fingerprint, SHA-256 of its files), then scores every
    current candidate answer it has not scored, with progress (``done`` of ``total``). With ``activate`` the version
    becomes the active one only after that check passed: a model that fails it is never activated (the reason is in
    ``log``). Created QUEUED by ``scoring_run_start``; only that module writes it."""

    Status = TrainingRun.Status

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="scoring_runs", help_text="The model that scores."
    )
    activate = models.BooleanField(
        default=False, help_text="Make the model the active one once it loaded and passed its checks."
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED,
                              help_text="Where the job is in its life.")
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id of the worker.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    log = models.TextField(blank=True, help_text="What happened, with UTC times; the reason of a failure.")
    done = models.PositiveIntegerField(default=0, help_text="Candidate answers scored so far.")
    total = models.PositiveIntegerField(default=0, help_text="Candidate answers to score (known once it runs).")
    device = models.CharField(max_length=20, blank=True, help_text="Where it scores: cpu or cuda.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+", help_text="Who started it (empty for beat and retraining).")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was queued.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker claimed it.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When it ended (any final status).")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "heartbeat_at"])]

    def __str__(self) -> str:
        return f"scoring run #{self.pk} of {self.model_version_id} ({self.status})"

    @property
    def percent(self) -> int:
        """Share of ``total`` scored, 0–100 (0 while the total is unknown)."""
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def failure(self) -> str:
        """The log's last "FAILED: …" line without the prefix, or ""."""
        lines = [line for line in self.log.splitlines() if "FAILED: " in line]
        return lines[-1].split("FAILED: ", 1)[1] if lines else ""


class WorkerNode(models.Model):
    """A Celery worker as it announced itself (``modelling.services.workers``): the queues it serves and whether
    torch sees a CUDA device there. Written when the worker starts and refreshed every minute while it runs; a row
    not refreshed for 3 minutes is a worker gone. Read by the training form (the GPU preset is offered only when a
    CUDA worker is alive) and by the routing of ORCA jobs (the ``ORCA_TRAIN_QUEUE`` queue only when a worker serves
    it)."""

    hostname = models.CharField(max_length=255, unique=True, help_text="Celery node name, e.g. gpu@host.")
    queues = models.JSONField(default=list, blank=True, help_text="Names of the queues it consumes.")
    cuda = models.BooleanField(default=False, help_text="torch sees a CUDA device in this worker.")
    device_name = models.CharField(max_length=200, blank=True, help_text="The GPU's name, when there is one.")
    versions = models.JSONField(default=dict, blank=True, help_text="torch and transformers versions there.")
    started_at = models.DateTimeField(help_text="When the worker announced itself.")
    last_seen_at = models.DateTimeField(help_text="Its latest sign of life (refreshed every minute).")

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return f"{self.hostname} ({', '.join(self.queues)}{', CUDA' if self.cuda else ''})"


class Prediction(models.Model):
    """ORCA's predicted Beta distribution of one candidate answer's normalised rating y = (r − 1)/4 (paper, Eq. 1–4).

    μ = α/(α+β) is the expected correctness; σ² = αβ/((α+β)²(α+β+1)) the predicted disagreement.
    """

    candidate = models.ForeignKey(
        "annotation.CandidateAnswer", on_delete=models.CASCADE, related_name="predictions",
        help_text="The candidate answer scored.",
    )
    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="predictions", help_text="The model that scored it."
    )
    mu = models.FloatField(help_text="Predicted mean correctness μ on the normalised scale, 0–1 (1 = correct).")
    variance = models.FloatField(help_text="Predicted variance σ² on the normalised scale, 0–0.25.")
    alpha = models.FloatField(help_text="Beta α > 0 (moment-matched for the multinomial head).")
    beta = models.FloatField(help_text="Beta β > 0 (moment-matched for the multinomial head).")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was scored.")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "model_version"], name="prediction_one_per_candidate_model"),
            models.CheckConstraint(condition=Q(mu__gte=0.0, mu__lte=1.0), name="prediction_mu_0_to_1"),
            models.CheckConstraint(condition=Q(variance__gte=0.0), name="prediction_variance_non_negative"),
            models.CheckConstraint(condition=Q(alpha__gt=0.0, beta__gt=0.0), name="prediction_alpha_beta_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.model_version} on {self.candidate_id}: mu={self.mu:.3f} var={self.variance:.4f}"


# --- Cross-fitted predictions for the leaderboard (modelling/leaderboard/crossfit.py) -----------------------------


class CrossFitRun(models.Model):
    """Cross-fitted ORCA predictions: K folds over questions; fold k's model trains on the rated answers of the
    other folds' questions and predicts every answer to fold k's questions, so no prediction comes from a model
    that saw its answer (or any answer to its question). Prediction-powered estimates need this (a model's μ on
    its own training answers is biased towards their ratings).

    Created QUEUED by ``modelling.leaderboard.crossfit.crossfit_start``; only that module writes it.
    """

    #: The life of a training run: QUEUED → RUNNING → DONE / FAILED / CANCELLED.
    Status = TrainingRun.Status

    config = models.JSONField(default=dict, help_text="ORCA settings of every fold (as a training run's config).")
    folds = models.PositiveSmallIntegerField(default=5, help_text="K: number of folds over questions (2–20).")
    seed = models.IntegerField(default=0, help_text="Seed of the fold assignment and of training.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED,
                              help_text="Where the cross-fit is in its life.")
    task_id = models.CharField(max_length=255, blank=True, help_text="Celery task id of the worker.")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="Last sign of life from the worker.")
    log = models.TextField(blank=True, help_text="What happened, one line per event; the traceback when it failed.")
    folds_done = models.PositiveSmallIntegerField(default=0, help_text="Folds trained and scored so far.")
    n_predictions = models.PositiveIntegerField(default=0, help_text="Candidate answers predicted so far.")
    quality = models.JSONField(
        default=dict, blank=True,
        help_text="ORCA's quality per group of its cross-fitted predictions on the rated answers when it finished: "
        "{\"benchmark=NAME\": {n, rho, rho_ci, tau, mae_mu, mae_var}, \"benchmark=NAME|modality=sound\": ...} "
        "(modelling.services.orca_quality.per_group_metrics).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="Who started it.",
    )
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was queued.")
    started_at = models.DateTimeField(null=True, blank=True, help_text="When a worker claimed it.")
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When it ended (any final status).")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(folds__gte=2, folds__lte=20), name="crossfit_folds_2_to_20"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"

    @property
    def name(self) -> str:
        return f"crossfit-{self.pk}-{self.folds}fold-{self.config.get('base_model', 'orca')}"


class CrossFitFold(models.Model):
    """One fold of a cross-fit: the held-out questions and the model version (trained without them) that
    predicted their answers."""

    crossfit = models.ForeignKey(CrossFitRun, on_delete=models.CASCADE, related_name="fold_rows",
                                 help_text="The cross-fit.")
    fold = models.PositiveSmallIntegerField(help_text="Fold number, 0 to K − 1.")
    question_ids = models.JSONField(default=list, help_text="Primary keys of the held-out questions of this fold.")
    model_version = models.OneToOneField(
        ModelVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="crossfit_fold",
        help_text="The model trained on the other folds; it made this fold's predictions.",
    )
    n_train_items = models.PositiveIntegerField(default=0, help_text="Rated candidate answers it trained on.")
    n_predicted = models.PositiveIntegerField(default=0, help_text="Candidate answers of this fold it predicted.")

    class Meta:
        ordering = ["crossfit", "fold"]
        constraints = [models.UniqueConstraint(fields=["crossfit", "fold"], name="crossfit_fold_unique")]

    def __str__(self) -> str:
        return f"{self.crossfit.name} fold {self.fold}"


class RaterSnapshot(models.Model):
    """ORCA as an extra rater at one moment: Krippendorff's alpha with and without the model's rounded ratings and
    Spearman ρ of μ against the mean human rating. Written by ``modelling.services.rater``.
    """

    model_version = models.ForeignKey(
        ModelVersion, on_delete=models.CASCADE, related_name="rater_snapshots", help_text="The model rated."
    )
    level = models.CharField(max_length=10, choices=AgreementLevel.choices, help_text="Level of measurement.")
    alpha_humans = models.FloatField(null=True, blank=True, help_text="Alpha of the humans' valid ratings alone.")
    alpha_with_model = models.FloatField(
        null=True, blank=True, help_text="Alpha with the model's round(1 + 4μ) added as one more annotator."
    )
    rho = models.FloatField(null=True, blank=True, help_text="Spearman ρ of μ against the mean human rating.")
    n_items = models.PositiveIntegerField(help_text="Candidate answers with a prediction and a valid rating.")
    n_ratings = models.PositiveIntegerField(help_text="Valid human ratings of those candidate answers.")
    created_at = models.DateTimeField(auto_now_add=True, help_text="When it was computed.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["model_version", "level", "created_at"])]

    def __str__(self) -> str:
        return f"{self.model_version} {self.level} alpha+model={self.alpha_with_model} rho={self.rho}"


# Routing, the leaderboard-precision design and design epochs (modelling/routing_models.py), registered with this app.
# Rater reliability snapshots (modelling/reliability/models.py), registered with this app.
from modelling.reliability.models import ReliabilitySnapshot  # noqa: E402,F401
from modelling.routing_models import (  # noqa: E402,F401
    ActiveDraw,
    BenchmarkRouting,
    DesignEpoch,
    QuestionDraw,
    RoutingDecision,
    RoutingPolicy,
)
