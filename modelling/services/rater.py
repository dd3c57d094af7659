"""ORCA as an extra rater, and its calibration (ORCA paper, sections 4.2, 5.2 and 6.1).

*Extra rater.* The model's rating of a candidate answer is round(1 + 4μ) on the 1–5 scale
(:func:`modelling.services.routing_policy.model_rating`). Krippendorff's alpha is computed over the humans' valid scored
ratings of the candidate answers the model scored, once without and once with the model as one more annotator
(one more value in every unit, so a unit with one human rating becomes pairable). If the model rates like a typical
annotator the two alphas are close; a model below the humans pulls alpha down. Spearman ρ is between μ and the mean
human score of each candidate answer.

*Calibration.* Predicted σ² against the observed sample variance (ddof 1) of the normalised scores y = (r − 1)/4
of candidates with >= 2 valid ratings, in equal-count bins of predicted σ²; predicted μ against the mean normalised
score in ten equal-width μ bins (a reliability diagram). A calibrated model lies on the diagonal.

*Out of sample.* A model's μ on the answers it trained on is pulled towards their ratings, so every figure here is
computed on answers the model never trained on (:func:`rater_sources`): the latest finished cross-fit's predictions
(each answer predicted by a fold model that never saw its question), and for each trained model version the
answers that had no valid rating when its training run read its data ("held out by time"). An imported checkpoint's
training data is unknown: its figures say so.

The computations are pure over :class:`modelling.selectors.ValidRatings` and a {candidate id: (μ, σ²)} mapping;
:func:`rater_snapshots_write` stores the active model's out-of-sample figures as
:class:`~modelling.models.RaterSnapshot` rows.
"""
from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from annotation.agreement import krippendorff_alpha, value_counts_matrix
from modelling.models import AgreementLevel, ModelVersion, Prediction, RaterSnapshot
from modelling.orca.data import normalise_rating
from modelling.orca.metrics import spearman_or_none
from modelling.selectors import ValidRatings, model_version_active, valid_ratings_load
from modelling.services.routing_policy import model_rating

#: Equal-count bins of predicted σ² in the calibration plot.
VARIANCE_BINS = 8
#: Equal-width μ bins of the reliability diagram.
MU_BINS = 10


@dataclass(frozen=True)
class RaterResult:
    """ORCA against the humans on the candidate answers it scored that have >= 1 valid scored rating.

    Attributes:
        level: 'ordinal' or 'interval'.
        alpha_humans: Krippendorff's alpha of the human ratings alone (None when undefined).
        alpha_with_model: alpha with round(1 + 4μ) added as one more annotator per unit (None when undefined).
        rho: Spearman ρ of μ against the mean human score, in [-1, 1]; None with < 3 items or a constant side.
        n_items: candidate answers counted; n_ratings: their valid human ratings.
    """

    level: str
    alpha_humans: float | None
    alpha_with_model: float | None
    rho: float | None
    n_items: int
    n_ratings: int

    @property
    def alpha_delta(self) -> float | None:
        """alpha_with_model − alpha_humans (negative: the model agrees with the humans less than they do)."""
        if self.alpha_humans is None or self.alpha_with_model is None:
            return None
        return self.alpha_with_model - self.alpha_humans


def rater_compute(
    *, ratings: ValidRatings, predictions: Mapping[int, tuple[float, float]], level: str = AgreementLevel.ORDINAL
) -> RaterResult:
    """Alpha without/with the model as an annotator and Spearman ρ (module docstring).

    Args:
        ratings: valid scored human ratings (any scope).
        predictions: {candidate id: (μ in [0, 1], σ²)} of one model version.
        level: level of measurement of alpha.
    """
    keep = np.isin(ratings.candidate_ids, np.fromiter(predictions.keys(), dtype=np.int64, count=len(predictions)))
    ids, scores = ratings.candidate_ids[keep], ratings.scores[keep]
    units = np.unique(ids)
    if units.size == 0:
        return RaterResult(level, None, None, None, 0, 0)
    human = value_counts_matrix(candidate_ids=ids, scores=scores)
    model_scores = np.asarray([model_rating(predictions[int(u)][0]) for u in units], dtype=np.int64)
    with_model = human.copy()
    with_model[np.arange(units.size), model_scores - 1] += 1
    sums = np.bincount(np.searchsorted(units, ids), weights=scores, minlength=units.size)
    means = sums / human.sum(axis=1)
    mus = [predictions[int(u)][0] for u in units]
    return RaterResult(
        level=level,
        alpha_humans=krippendorff_alpha(value_counts=human, level=level),
        alpha_with_model=krippendorff_alpha(value_counts=with_model, level=level),
        rho=spearman_or_none(mus, means.tolist()),
        n_items=int(units.size),
        n_ratings=int(scores.size),
    )


def predictions_of(*, model_version: ModelVersion) -> dict[int, tuple[float, float]]:
    """{candidate id: (μ, σ²)} of every prediction of ``model_version``."""
    rows = Prediction.objects.filter(model_version=model_version).values_list("candidate_id", "mu", "variance")
    return {cid: (mu, var) for cid, mu, var in rows.iterator(chunk_size=5000)}


@dataclass(frozen=True)
class RaterSource:
    """One model's predictions restricted to answers it never trained on.

    Attributes:
        name: the model version's or the cross-fit's name.
        version: the model version (None for a cross-fit, whose folds are several).
        predictions: {candidate id: (μ, σ²)} out of sample.
        sample: ``cross-fit``, ``held out by time`` or ``training data unknown``.
        label: the sample in words, shown beside the figures.
    """

    name: str
    version: ModelVersion | None
    predictions: dict
    sample: str
    label: str


def out_of_sample_predictions(*, model_version: ModelVersion) -> RaterSource:
    """``model_version``'s predictions of answers it did not train on: those without a valid rating made before its
    training run read its data (the run's start). An imported checkpoint keeps all its predictions, labelled
    "training data unknown"."""
    from annotation.models import Rating

    predictions = predictions_of(model_version=model_version)
    run = model_version.training_run
    if run is None:
        return RaterSource(model_version.name, model_version, predictions, "training data unknown",
                           "imported checkpoint: its training data is unknown, so these answers may be in-sample")
    read_at = run.started_at or run.created_at
    seen = set(Rating.objects.filter(is_valid=True, score__isnull=False, created_at__lt=read_at,
                                     candidate_id__in=list(predictions)).values_list("candidate_id", flat=True))
    kept = {cid: p for cid, p in predictions.items() if cid not in seen}
    return RaterSource(model_version.name, model_version, kept, "held out by time",
                       f"held out by time: {len(kept)} of {len(predictions)} predicted answers had no rating when "
                       "its training data was read")


def rater_sources() -> list[RaterSource]:
    """Out-of-sample predictions to judge ORCA as a rater by: the latest finished cross-fit (all its predictions),
    then every other model version with predictions, newest first (cross-fit folds are in the cross-fit's row)."""
    from modelling.leaderboard.crossfit import crossfit_latest_done

    sources = []
    crossfit = crossfit_latest_done()
    if crossfit is not None:
        rows = Prediction.objects.filter(model_version__crossfit_fold__crossfit=crossfit).values_list(
            "candidate_id", "mu", "variance")
        sources.append(RaterSource(
            crossfit.name, None, {cid: (mu, var) for cid, mu, var in rows.iterator(chunk_size=5000)}, "cross-fit",
            "cross-fit: every answer predicted by a fold model that never trained on its question"))
    versions = (ModelVersion.objects.filter(predictions__isnull=False, crossfit_fold__isnull=True).distinct()
                .select_related("training_run").order_by("-created_at", "-id"))
    return sources + [out_of_sample_predictions(model_version=v) for v in versions]


def rater_by_source(*, level: str = AgreementLevel.ORDINAL) -> list[tuple[RaterSource, RaterResult]]:
    """The rater figures of every :func:`rater_sources` entry, out of sample (computed now)."""
    ratings = valid_ratings_load()
    return [(source, rater_compute(ratings=ratings, predictions=source.predictions, level=level))
            for source in rater_sources()]


def rater_snapshots_write() -> list[RaterSnapshot]:
    """Snapshot the active model's out-of-sample rater figures at both levels; nothing without an active scored
    model."""
    active = model_version_active()
    if active is None:
        return []
    predictions = out_of_sample_predictions(model_version=active).predictions
    if not predictions:
        return []
    ratings = valid_ratings_load()
    rows = []
    for level in AgreementLevel.values:
        r = rater_compute(ratings=ratings, predictions=predictions, level=level)
        rows.append(RaterSnapshot.objects.create(
            model_version=active, level=level, alpha_humans=r.alpha_humans, alpha_with_model=r.alpha_with_model,
            rho=r.rho, n_items=r.n_items, n_ratings=r.n_ratings,
        ))
    return rows


# --- calibration --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationBin:
    """One bin: mean predicted value, mean observed value, items in the bin."""

    predicted: float
    observed: float
    n: int


@dataclass(frozen=True)
class Calibration:
    """Binned calibration of one model version (normalised scale).

    Attributes:
        variance: equal-count bins of predicted σ² vs observed sample variance of y (items with >= 2 ratings).
        mu: equal-width μ bins vs mean observed y (items with >= 1 rating).
    """

    variance: list[CalibrationBin]
    mu: list[CalibrationBin]


def calibration_compute(
    *, ratings: ValidRatings, predictions: Mapping[int, tuple[float, float]],
    variance_bins: int = VARIANCE_BINS, mu_bins: int = MU_BINS,
) -> Calibration:
    """Bin predicted σ² against observed variance and predicted μ against the mean rating (module docstring)."""
    per_item: dict[int, list[float]] = {}
    for cid, score in zip(ratings.candidate_ids.tolist(), ratings.scores.tolist()):
        if cid in predictions:
            per_item.setdefault(cid, []).append(normalise_rating(score))
    pairs_var = sorted(
        (predictions[cid][1], float(np.var(ys, ddof=1))) for cid, ys in per_item.items() if len(ys) >= 2
    )
    var_bins = []
    for chunk in np.array_split(np.asarray(pairs_var, dtype=np.float64).reshape(-1, 2), variance_bins):
        if len(chunk):
            var_bins.append(CalibrationBin(float(chunk[:, 0].mean()), float(chunk[:, 1].mean()), len(chunk)))
    mu_pairs = np.asarray([(predictions[cid][0], float(np.mean(ys))) for cid, ys in per_item.items()],
                          dtype=np.float64).reshape(-1, 2)
    mu_out = []
    if len(mu_pairs):
        index = np.minimum((mu_pairs[:, 0] * mu_bins).astype(int), mu_bins - 1)
        for b in range(mu_bins):
            sel = mu_pairs[index == b]
            if len(sel):
                mu_out.append(CalibrationBin(float(sel[:, 0].mean()), float(sel[:, 1].mean()), len(sel)))
    return Calibration(variance=var_bins, mu=mu_out)


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


def calibration_svg(*, calibration: Calibration) -> str:
    """Two panels as an inline ``<svg>``: predicted σ² vs observed variance, and the μ reliability diagram; both
    with the diagonal. matplotlib (Agg, no pyplot) is imported here so web processes that never draw stay light."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "orca-calibration", "font.size": 9,
                                 "text.parse_math": False}):
        fig = Figure(figsize=(10, 3.8), layout="constrained")
        ax_var, ax_mu = fig.subplots(1, 2)
        for ax, bins, top, xlabel, ylabel, title in (
            (ax_var, calibration.variance, None, "predicted σ² (normalised scale)", "observed rating variance",
             "Predicted vs observed disagreement"),
            (ax_mu, calibration.mu, 1.0, "predicted μ", "mean human rating (y = (r − 1)/4)",
             "Reliability diagram"),
        ):
            xs, ys, ns = [b.predicted for b in bins], [b.observed for b in bins], [b.n for b in bins]
            limit = top or max([0.01, *xs, *ys]) * 1.1
            ax.plot([0, limit], [0, limit], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
            if bins:
                ax.plot(xs, ys, marker="o", linewidth=1.5, label="model (binned)")
                for x, y, n in zip(xs, ys, ns):
                    ax.annotate(str(n), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7)
            else:
                ax.text(0.5, 0.5, "no rated, scored items yet", ha="center", va="center", transform=ax.transAxes)
            ax.set_xlim(0, limit)
            ax.set_ylim(0, limit)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            ax.legend(loc="upper left", fontsize=7)
        return _svg(fig)


def rater_history_svg(*, snapshots: Sequence[RaterSnapshot]) -> str:
    """Alpha of the humans, alpha with the model and Spearman ρ over time (one level's snapshots), as ``<svg>``."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "orca-rater", "font.size": 9,
                                 "text.parse_math": False}):
        fig = Figure(figsize=(10, 3.2), layout="constrained")
        ax = fig.subplots()
        ordered = sorted(snapshots, key=lambda s: (s.created_at, s.id or 0))
        if ordered:
            xs = [s.created_at for s in ordered]
            for attr, label in (("alpha_humans", "alpha, humans"), ("alpha_with_model", "alpha, humans + ORCA"),
                                ("rho", "Spearman ρ (μ vs mean rating)")):
                ax.plot(xs, [getattr(s, attr) for s in ordered], marker="o", markersize=3, label=label)
            ax.legend(loc="lower right", fontsize=7)
        else:
            ax.text(0.5, 0.5, "no snapshots yet", ha="center", va="center", transform=ax.transAxes)
        ax.set_ylabel("value")
        ax.grid(True, alpha=0.3)
        return _svg(fig)
