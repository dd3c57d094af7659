"""ORCA's quality per benchmark, and where the platform may use ORCA (README, "ORCA on each benchmark").

**Figures.** ORCA is judged on each benchmark by Spearman ρ, Kendall τ-b, MAE_μ and MAE_σ² of its unclamped μ and σ²
against the mean and the sample variance of the human ratings on the normalised scale y = (r − 1)/4 (ORCA paper,
section 5.4; conventions of ``modelling/orca/metrics.py``), over answers the model never trained on, with the
number of those answers and a 95 % interval for ρ: Fisher's z with the Bonett–Wright standard error
√((1 + ρ²/2)/(n − 3)) (Bonett & Wright 2000, "Sample size requirements for estimating Pearson, Kendall and Spearman
correlations", Psychometrika 65, 23–28). :func:`per_group_metrics` computes them for one benchmark and for each
(benchmark, group) pair — modality, category and the candidate-metadata keys of ``ORCA_QUALITY_GROUP_KEYS``
(:func:`item_groups`) — in the ``per_group`` shape that ``modelling.orca`` records (README, "ORCA from the command
line"). A training run records them on its dev and test splits (held-out questions); a cross-fit on every rated
answer (each predicted by a fold model that never saw its question).

**The figure of a benchmark** (:func:`benchmark_quality`), in this order:

1. the active model on answers it never trained on: its run's test split (held-out questions of the benchmark) or,
   when they are more, the benchmark's answers first rated after its training data was read ("held out by time":
   what a newly imported benchmark has). An imported checkpoint's training data is unknown, so it has none;
2. else the latest finished cross-fit on the benchmark's rated answers.

Fewer than ``ORCA_QUALITY_MIN_ITEMS`` answers is no figure for a decision.

**Use ORCA only where it helps** (:func:`orca_gates`): routing by ORCA (both policies of the routing page and
expert review by predicted ambiguity) is used on a benchmark only when its figure's ρ ≥ ``ORCA_ROUTING_MIN_RHO``,
and the model's vote as a rater (stop after one human rating that agrees with ORCA) only when ρ ≥
``ORCA_RATER_MIN_RHO``; otherwise the benchmark keeps the default k and priority, and the pages say why
(:func:`routing_refusals` is what ``modelling.services.routing`` reads).

**PPI++ adds nothing** where its power-tuning λ ≈ 0 (:func:`ppi_lambdas`, :func:`ppi_lambda_note`): the estimate
is then the human-only mean; the interval stays valid either way.

**Activation** (:func:`activation_compare`): a retrained model replaces the active one only when it is not worse on
any benchmark's held-out questions that neither model trained on (a paired comparison of ρ on the same answers with a
cluster bootstrap over questions, tolerance ``ORCA_ACTIVATION_RHO_TOLERANCE``).
"""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.utils import timezone

from modelling.orca.data import normalise_rating
from modelling.orca.metrics import json_finite, kendall_tau_b, spearman_or_none

#: Confidence of the interval of ρ.
CONFIDENCE = 0.95
#: Candidate-answer field whose JSON object supplies extra groups (its string values of the keys in
#: ``ORCA_QUALITY_GROUP_KEYS``, e.g. an answer-type "type": "short"); None while candidate answers have no such field.
#: The candidate metadata of the table importer (``CandidateAnswer.metadata``) makes this ``"metadata"``.
CANDIDATE_METADATA_FIELD: str | None = None
#: Paired bootstrap resamples of the activation comparison.
ACTIVATION_RESAMPLES = 1000
#: Fewest compared answers of a benchmark for its activation verdict (ρ needs 3).
ACTIVATION_MIN_ITEMS = 3

ROUTING = "routing"
RATER = "rater"


# --- metrics per group ---------------------------------------------------------------------------------------------


def group_key(benchmark: str, key: str | None = None, value: str | None = None) -> str:
    """The ``per_group`` key of a benchmark (``benchmark=NAME``) or of one of its groups
    (``benchmark=NAME|modality=sound``)."""
    return f"benchmark={benchmark}" + (f"|{key}={value}" if key is not None else "")


def item_groups(*, benchmark: str, modality: str = "", category: str = "", metadata: Mapping | None = None
                ) -> dict[str, str]:
    """The ``groups`` of one candidate answer as the ORCA JSONL carries them: benchmark, modality, category (when
    set) and the string values of ``ORCA_QUALITY_GROUP_KEYS`` in its candidate metadata (e.g. ``type``)."""
    groups = {"benchmark": benchmark}
    if modality:
        groups["modality"] = modality
    if category:
        groups["category"] = category
    for key in settings.ORCA_QUALITY_GROUP_KEYS:
        value = (metadata or {}).get(key)
        if isinstance(value, str) and value and key not in groups:
            groups[key] = value
    return groups


def rho_interval(rho: float | None, n: int, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The ``confidence`` interval of a Spearman ρ from ``n`` pairs: tanh(atanh ρ ± z·√((1 + ρ²/2)/(n − 3)))
    (Fisher's z with the Bonett–Wright standard error; module docstring). None for ρ None or n < 4. Both ends are
    in [−1, 1]."""
    if rho is None or not math.isfinite(rho) or n < 4:
        return None
    from scipy.stats import norm

    r = min(max(rho, -0.999999), 0.999999)
    half = float(norm.ppf(0.5 + confidence / 2)) * math.sqrt((1 + r * r / 2) / (n - 3))
    z = math.atanh(r)
    return math.tanh(z - half), math.tanh(z + half)


def group_metrics(mu: Sequence[float], var: Sequence[float], human_mean: Sequence[float],
                  human_var: Sequence[float]) -> dict:
    """{n, rho, rho_ci, tau, mae_mu, mae_var} of one group of answers (normalised scale).

    ``rho`` and ``tau`` are None below 3 answers or when either side is constant, ``rho_ci`` below 4
    (:func:`rho_interval`), ``mae_var`` when no answer has 2 ratings (``human_var`` nan: sample variance, ddof 1).
    """
    mu, var = np.asarray(mu, float), np.asarray(var, float)
    hm, hv = np.asarray(human_mean, float), np.asarray(human_var, float)
    n = int(mu.size)
    rho = spearman_or_none(mu, hm) if n >= 3 else None
    tau = kendall_tau_b(mu, hm) if rho is not None else None
    ok = np.isfinite(hv)
    ci = rho_interval(rho, n)
    return json_finite({
        "n": n, "rho": rho, "rho_ci": list(ci) if ci else None, "tau": tau,
        "mae_mu": float(np.abs(mu - hm).mean()) if n else None,
        "mae_var": float(np.abs(var[ok] - hv[ok]).mean()) if ok.any() else None,
    })


def per_group_metrics(groups: Sequence[Mapping[str, str]], mu: Sequence[float], var: Sequence[float],
                      human_mean: Sequence[float], human_var: Sequence[float]) -> dict[str, dict]:
    """ORCA's figures per benchmark and per (benchmark, group) pair.

    Args:
        groups: one ``{"benchmark": NAME, "modality": ..., ...}`` per answer (:func:`item_groups`); answers without
            a benchmark are left out.
        mu, var: predicted μ in [0, 1] and σ² per answer; human_mean: mean normalised rating per answer;
        human_var: sample variance (ddof 1) of its normalised ratings, nan with one rating.

    Returns:
        ``{"benchmark=NAME": {n, rho, rho_ci, tau, mae_mu, mae_var}, "benchmark=NAME|modality=sound": {...}, ...}``
        (:func:`group_metrics`), keys sorted.

    Raises:
        ValueError: the five sequences differ in length.
    """
    if not (len(groups) == len(mu) == len(var) == len(human_mean) == len(human_var)):
        raise ValueError("groups, mu, var, human_mean and human_var must have the same length")
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        bench = g.get("benchmark")
        if not bench:
            continue
        members[group_key(bench)].append(i)
        for key, value in g.items():
            if key != "benchmark" and value:
                members[group_key(bench, key, value)].append(i)
    arrays = [np.asarray(a, float) for a in (mu, var, human_mean, human_var)]
    return {name: group_metrics(*(a[idx] for a in arrays)) for name, idx in sorted(members.items())}


def candidate_groups(*, candidate_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """{candidate pk: its groups (:func:`item_groups`)} of the given candidate answers, in one query per 5,000."""
    from annotation.models import CandidateAnswer

    ids = sorted(set(candidate_ids))
    question = "question_version__question__"
    fields = ["pk", question + "benchmark__name", question + "modality", question + "category"]
    if CANDIDATE_METADATA_FIELD:
        fields.append(CANDIDATE_METADATA_FIELD)
    out = {}
    for start in range(0, len(ids), 5000):
        for pk, bench, modality, category, *meta in CandidateAnswer.objects.filter(
                pk__in=ids[start:start + 5000]).values_list(*fields):
            out[pk] = item_groups(benchmark=bench, modality=modality, category=category,
                                  metadata=meta[0] if meta else None)
    return out


def human_targets(ratings) -> dict[int, tuple[float, float]]:
    """{candidate pk: (mean normalised rating, sample variance ddof 1 or nan)} of :class:`ValidRatings`."""
    scores: dict[int, list[float]] = defaultdict(list)
    for cid, score in zip(ratings.candidate_ids.tolist(), ratings.scores.tolist()):
        scores[cid].append(normalise_rating(score))
    return {cid: (float(np.mean(ys)), float(np.var(ys, ddof=1)) if len(ys) > 1 else math.nan)
            for cid, ys in scores.items()}


def predictions_quality(*, predictions: Mapping[int, tuple[float, float]], ratings) -> dict[str, dict]:
    """:func:`per_group_metrics` of predictions {candidate pk: (μ, σ²)} on the candidate answers among them with a
    valid scored rating in ``ratings`` (:class:`modelling.selectors.ValidRatings`)."""
    targets = human_targets(ratings)
    ids = sorted(set(predictions) & set(targets))
    groups = candidate_groups(candidate_ids=ids)
    ids = [cid for cid in ids if cid in groups]
    return per_group_metrics([groups[c] for c in ids], [predictions[c][0] for c in ids],
                             [predictions[c][1] for c in ids], [targets[c][0] for c in ids],
                             [targets[c][1] for c in ids])


# --- the figure of a benchmark ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityFigure:
    """ORCA's figures on one benchmark's answers from one source of out-of-sample predictions.

    Attributes:
        benchmark: the benchmark's name.
        metrics: {n, rho, rho_ci, tau, mae_mu, mae_var} (:func:`group_metrics`).
        source: ``held-out questions`` (a run's test split), ``held out by time`` or ``cross-fit``.
        model: the model version's or the cross-fit's name.
        label: the sample in words (shown beside the numbers).
        subgroups: [(group such as ``modality=sound``, its metrics)] of groups with fewer answers than the whole.
    """

    benchmark: str
    metrics: dict
    source: str
    model: str
    label: str
    subgroups: list = field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.metrics.get("n") or 0)

    @property
    def rho(self) -> float | None:
        return self.metrics.get("rho")

    @property
    def rho_ci(self) -> list | None:
        return self.metrics.get("rho_ci")


def figures_from_per_group(per_group: Mapping[str, dict] | None, *, source: str, model: str, label: str
                           ) -> dict[str, QualityFigure]:
    """{benchmark: its :class:`QualityFigure`} of a ``per_group`` block (subgroups with as many answers as their
    benchmark say nothing more and are left out)."""
    out: dict[str, QualityFigure] = {}
    subgroups: dict[str, list] = defaultdict(list)
    for key, metrics in (per_group or {}).items():
        head, _, rest = key.partition("|")
        bench = head.removeprefix("benchmark=")
        if rest:
            subgroups[bench].append((rest, metrics))
        else:
            out[bench] = QualityFigure(bench, metrics, source, model, label)
    for bench, figure in out.items():
        rows = [(name, m) for name, m in sorted(subgroups[bench]) if (m.get("n") or 0) < figure.n]
        out[bench] = QualityFigure(bench, figure.metrics, source, model, label, rows)
    return out


def _active_figures(active, ratings) -> dict[str, QualityFigure]:
    """The active model's figures per benchmark: its test split's or its held-out-by-time answers', the larger."""
    from modelling.services.rater import out_of_sample_predictions

    run = active.training_run
    if run is None:  # an imported checkpoint: its training data is unknown, nothing is known to be held out
        return {}
    test = ((run.metrics or {}).get("test") or {}).get("per_group")
    figures = figures_from_per_group(test, source="held-out questions", model=active.name,
                                     label=f"{active.name} on its test split (questions it never trained on)")
    by_time = out_of_sample_predictions(model_version=active).predictions
    later = figures_from_per_group(
        predictions_quality(predictions=by_time, ratings=ratings), source="held out by time", model=active.name,
        label=f"{active.name} on answers first rated after its training data was read")
    for bench, figure in later.items():
        if bench not in figures or figure.n > figures[bench].n:
            figures[bench] = figure
    return figures


def crossfit_quality(*, crossfit, ratings=None) -> dict[str, dict]:
    """The ``per_group`` block (:func:`per_group_metrics`) of a cross-fit's predictions on the rated answers
    (``ratings``: :class:`~modelling.selectors.ValidRatings`, default all valid ratings now); what a cross-fit records
    in ``CrossFitRun.quality`` when it finishes."""
    from modelling.models import Prediction
    from modelling.selectors import valid_ratings_load

    rows = Prediction.objects.filter(model_version__crossfit_fold__crossfit=crossfit).values_list(
        "candidate_id", "mu", "variance")
    predictions = {cid: (mu, var) for cid, mu, var in rows.iterator(chunk_size=5000)}
    return predictions_quality(predictions=predictions, ratings=valid_ratings_load() if ratings is None else ratings)


def _crossfit_figures(crossfit, ratings) -> dict[str, QualityFigure]:
    return figures_from_per_group(
        crossfit_quality(crossfit=crossfit, ratings=ratings), source="cross-fit", model=crossfit.name,
        label=f"{crossfit.name}: every rated answer predicted by a fold model that never saw its question")


@dataclass(frozen=True)
class Figures:
    """The out-of-sample figures of every benchmark: ``active`` (the active model's) and ``crossfit`` (the latest
    finished cross-fit's), each {benchmark name: :class:`QualityFigure`}, and the names of their sources."""

    active: dict
    crossfit: dict
    active_name: str | None
    crossfit_name: str | None

    def used(self, benchmark: str) -> QualityFigure | None:
        """The figure decisions use (module docstring): the active model's with at least ``ORCA_QUALITY_MIN_ITEMS``
        answers, else the cross-fit's, else the larger of the two (too small to pass), else None."""
        own, crossfit = self.active.get(benchmark), self.crossfit.get(benchmark)
        least = settings.ORCA_QUALITY_MIN_ITEMS
        if own is not None and own.n >= least:
            return own
        if crossfit is not None and crossfit.n >= least:
            return crossfit
        present = [f for f in (own, crossfit) if f is not None]
        return max(present, key=lambda f: f.n) if present else None


def quality_figures() -> Figures:
    """The out-of-sample figures of every benchmark (:class:`Figures`), computed once per change of the valid
    ratings, the predictions, the active model or the latest cross-fit (cached)."""
    from modelling.leaderboard.crossfit import crossfit_latest_done
    from modelling.selectors import model_version_active, valid_ratings_fingerprint, valid_ratings_load
    from modelling.services.agreement_cache import cached_by_data, predictions_state

    active = model_version_active()
    crossfit = crossfit_latest_done()

    def compute() -> Figures:
        ratings = valid_ratings_load()
        return Figures(
            active=_active_figures(active, ratings) if active is not None else {},
            crossfit=_crossfit_figures(crossfit, ratings) if crossfit is not None else {},
            active_name=getattr(active, "name", None), crossfit_name=getattr(crossfit, "name", None),
        )

    state = (getattr(active, "pk", None), getattr(crossfit, "pk", None), valid_ratings_fingerprint(),
             *predictions_state(), tuple(settings.ORCA_QUALITY_GROUP_KEYS))
    return cached_by_data(name="orca-quality", state=state, compute=compute)


def benchmark_quality(*, benchmark: str) -> QualityFigure | None:
    """The figure of ``benchmark`` (by name) that decisions use (:meth:`Figures.used`), or None."""
    return quality_figures().used(benchmark)


# --- the gates -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gate:
    """Whether one use of ORCA is offered on one benchmark, and why.

    Attributes:
        use: ``routing`` (routing by ORCA) or ``rater`` (the model's vote as a rater).
        allowed: True when offered.
        threshold: the ρ it needs (None: no threshold set, always offered).
        reason: the decision in words, with the numbers.
    """

    use: str
    allowed: bool
    threshold: float | None
    reason: str


def _fmt_rho(figure: QualityFigure) -> str:
    ci = figure.rho_ci
    interval = f", 95 % CI {ci[0]:.2f}–{ci[1]:.2f}" if ci else ""
    return f"ρ = {figure.rho:.2f}{interval}, n = {figure.n} answers, {figure.label}"


def gate_decide(*, use: str, benchmark: str, figure: QualityFigure | None, threshold: float | None,
                min_items: int) -> Gate:
    """Offer ``use`` of ORCA on ``benchmark`` when its figure has ≥ ``min_items`` answers and ρ ≥ ``threshold``;
    pure. ``threshold`` None offers it always (the setting left empty)."""
    what = "Routing by ORCA" if use == ROUTING else "ORCA's vote as a rater"
    setting = "ORCA_ROUTING_MIN_RHO" if use == ROUTING else "ORCA_RATER_MIN_RHO"
    if threshold is None:
        return Gate(use, True, None, f"{what} is offered on every benchmark ({setting} is not set).")
    if figure is None:
        return Gate(use, False, threshold, f"{what} is refused on {benchmark}: ORCA has no out-of-sample figure "
                    "there yet (train a model with its ratings, or run a cross-fit).")
    if figure.n < min_items:
        return Gate(use, False, threshold, f"{what} is refused on {benchmark}: only {figure.n} held-out answers "
                    f"({figure.label}), fewer than ORCA_QUALITY_MIN_ITEMS = {min_items} to judge ORCA by.")
    if figure.rho is None:
        return Gate(use, False, threshold, f"{what} is refused on {benchmark}: ρ is undefined on its {figure.n} "
                    "held-out answers (constant ratings or predictions).")
    if figure.rho < threshold:
        return Gate(use, False, threshold, f"{what} is refused on {benchmark}: {_fmt_rho(figure)}; below "
                    f"{setting} = {threshold:.2f}.")
    return Gate(use, True, threshold, f"{what} is offered on {benchmark}: {_fmt_rho(figure)}; at least "
                f"{setting} = {threshold:.2f}.")


@dataclass(frozen=True)
class BenchmarkGates:
    """A benchmark's figure (the one decisions use, or None) and its two gates."""

    benchmark: str
    figure: QualityFigure | None
    routing: Gate
    rater: Gate


def orca_gates(*, figures: Figures | None = None) -> dict[int, BenchmarkGates]:
    """{benchmark pk: :class:`BenchmarkGates`} of every benchmark, from ``ORCA_ROUTING_MIN_RHO``,
    ``ORCA_RATER_MIN_RHO`` and ``ORCA_QUALITY_MIN_ITEMS`` and the figures (:func:`quality_figures` by default)."""
    from annotation.models import Benchmark

    figures = figures or quality_figures()
    out = {}
    for pk, name in Benchmark.objects.order_by("name").values_list("pk", "name"):
        figure = figures.used(name)
        out[pk] = BenchmarkGates(name, figure, *(
            gate_decide(use=use, benchmark=name, figure=figure, threshold=threshold,
                        min_items=settings.ORCA_QUALITY_MIN_ITEMS)
            for use, threshold in ((ROUTING, settings.ORCA_ROUTING_MIN_RHO), (RATER, settings.ORCA_RATER_MIN_RHO))))
    return out


def routing_refusals() -> tuple[dict[int, str], set[int]]:
    """What routing may not do: ({benchmark pk: reason} where routing by ORCA is refused, {benchmark pk} where the
    model's vote as a rater is refused). Read by ``modelling.services.routing.routing_evaluate``."""
    gates = orca_gates()
    return ({pk: g.routing.reason for pk, g in gates.items() if not g.routing.allowed},
            {pk for pk, g in gates.items() if not g.rater.allowed})


def refused_choice(reason: str):
    """The routing choice of an answer on a benchmark where routing by ORCA is refused: the default k and priority
    (``DEFAULT``), the reason in its detail."""
    from modelling.services.routing_policy import DEFAULT, RoutingChoice

    return RoutingChoice(None, 0, DEFAULT, f"ORCA not used: {reason}")


# --- PPI++: does ORCA add anything? ------------------------------------------------------------------------------


def ppi_lambdas(*, benchmark: str) -> dict[str, float]:
    """{LALM: PPI++'s power-tuning λ} on ``benchmark``: Cochran's regression coefficient of the mean normalised
    rating on the latest cross-fit's μ over the LALM's rated answers with a prediction, clipped to [0, 1]
    (``modelling.leaderboard.stats.regression_lambda``), for LALMs with at least 3 such answers. This is the λ of
    the leaderboard's ``ppi++`` estimate where the rated answers are a uniform sample (no routing); {} without a
    cross-fit."""
    from modelling.leaderboard.crossfit import crossfit_latest_done
    from modelling.leaderboard.stats import regression_lambda
    from modelling.models import Prediction
    from modelling.selectors import valid_ratings_load

    crossfit = crossfit_latest_done()
    if crossfit is None:
        return {}
    ratings = valid_ratings_load(benchmark=benchmark)
    targets = human_targets(ratings)
    lalm_of = dict(zip(ratings.candidate_ids.tolist(), ratings.lalm.tolist()))
    mu = dict(Prediction.objects.filter(model_version__crossfit_fold__crossfit=crossfit,
                                        candidate_id__in=list(targets)).values_list("candidate_id", "mu"))
    pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for cid, (mean, _) in targets.items():
        if cid in mu:
            pairs[lalm_of[cid]].append((mean, mu[cid]))
    return {lalm: regression_lambda([p[0] for p in rows], [p[1] for p in rows])
            for lalm, rows in sorted(pairs.items()) if len(rows) >= 3}


def ppi_lambda_note(*, lambdas: Mapping[str, float | None], benchmark: str | None = None,
                    negligible: float | None = None) -> str:
    """One sentence saying where ORCA adds nothing to PPI++ (its λ ≤ ``negligible``, default
    ``ORCA_PPI_LAMBDA_NEGLIGIBLE``), or '' when it adds something for every LALM (or no λ is known).

    Args:
        lambdas: {LALM: the power-tuning λ in [0, 1] its PPI++ estimate used} (None: no PPI++ estimate).
        benchmark: the scope's name for the sentence (None: the page's scope).
    """
    negligible = settings.ORCA_PPI_LAMBDA_NEGLIGIBLE if negligible is None else negligible
    known = {lalm: lam for lalm, lam in lambdas.items() if lam is not None}
    if not known:
        return ""
    nothing = sorted(lalm for lalm, lam in known.items() if lam <= negligible)
    if not nothing:
        return ""
    where = f" on {benchmark}" if benchmark else ""
    if len(nothing) == len(known):
        return (f"ORCA adds nothing{where}: PPI++'s power-tuning λ is at most {negligible:g} for every LALM, so its "
                "estimates are (almost) the human-only means. Its intervals stay valid; train or adapt ORCA on "
                "this benchmark's ratings to make it help.")
    return (f"ORCA adds nothing{where} for {', '.join(nothing)}: PPI++'s λ is at most {negligible:g} there, so those "
            "rows are (almost) the human-only means; the intervals stay valid.")


@dataclass(frozen=True)
class LeaderboardQuality:
    """What the leaderboard page shows about ORCA in its scope: the figures of the predictions it uses (one per
    benchmark in scope), where they come from, and the PPI++ note."""

    figures: list
    source: str
    note: str


def leaderboard_quality(*, benchmark: str | None) -> LeaderboardQuality:
    """ORCA's figures for the leaderboard's scope (``benchmark`` name, or None for all): the latest cross-fit's,
    which PPI++ uses, else the active model's; and :func:`ppi_lambda_note` of the benchmark's λ."""
    from annotation.models import Benchmark

    figures = quality_figures()
    names = [benchmark] if benchmark else list(Benchmark.objects.order_by("name").values_list("name", flat=True))
    if figures.crossfit_name:
        chosen, source = figures.crossfit, f"cross-fit {figures.crossfit_name} (the predictions PPI++ uses)"
    else:
        chosen, source = figures.active, f"active model {figures.active_name}" if figures.active_name else ""
    note = ppi_lambda_note(lambdas=ppi_lambdas(benchmark=benchmark), benchmark=benchmark) if benchmark else ""
    return LeaderboardQuality([chosen[n] for n in names if n in chosen], source, note)


# --- activation: not worse on any benchmark ------------------------------------------------------------------------


def compare_on_benchmark(*, mu_new: Sequence[float], mu_active: Sequence[float], human_mean: Sequence[float],
                         questions: Sequence[int], tolerance: float, resamples: int = ACTIVATION_RESAMPLES,
                         seed: int = 0) -> dict:
    """The paired comparison of two models' Spearman ρ on the same answers of one benchmark.

    Args:
        mu_new, mu_active: each model's μ per answer; human_mean: mean normalised rating per answer;
        questions: the question of each answer (the bootstrap resamples questions: answers of one question are
            not independent).
        tolerance: the ρ drop accepted as no loss (``ORCA_ACTIVATION_RHO_TOLERANCE``).

    Returns:
        {n, n_questions, rho_new, rho_active, diff (new − active), diff_ci (95 % percentile interval of the
        difference over ``resamples`` cluster-bootstrap resamples), worse}. ``worse`` is True when the drop is
        beyond the tolerance *and* beyond noise: diff < −tolerance and the interval's upper end < 0. With fewer than
        ``ACTIVATION_MIN_ITEMS`` answers or an undefined ρ, nothing is judged (worse False, diff None).
    """
    new, old, hm = (np.asarray(a, float) for a in (mu_new, mu_active, human_mean))
    q = np.asarray(questions)
    n = int(new.size)
    out = {"n": n, "n_questions": int(np.unique(q).size), "rho_new": None, "rho_active": None, "diff": None,
           "diff_ci": None, "worse": False}
    if n < ACTIVATION_MIN_ITEMS:
        return out
    rho_new, rho_old = spearman_or_none(new, hm), spearman_or_none(old, hm)
    out.update(rho_new=rho_new, rho_active=rho_old)
    if rho_new is None or rho_old is None:
        return out
    diff = rho_new - rho_old
    _, cluster = np.unique(q, return_inverse=True)
    members = [np.flatnonzero(cluster == c) for c in range(cluster.max() + 1)]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(resamples):
        idx = np.concatenate([members[c] for c in rng.integers(0, len(members), len(members))])
        a, b = spearman_or_none(new[idx], hm[idx]), spearman_or_none(old[idx], hm[idx])
        if a is not None and b is not None:
            diffs.append(a - b)
    ci = [float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975))] if len(diffs) >= 20 else None
    out.update(diff=diff, diff_ci=ci, worse=bool(diff < -tolerance and ci is not None and ci[1] < 0))
    return json_finite(out)


def activation_decide(*, comparisons: Sequence[dict], tolerance: float, active_name: str) -> tuple[bool, list[str]]:
    """(activate, reasons): not worse on every compared benchmark (:func:`compare_on_benchmark`); pure.

    The reasons name each benchmark that got worse, or say that none did and how many were compared. Without any
    benchmark with a ρ on both sides, the caller decides (``activate`` None is not returned: False and a reason).
    """
    judged = [c for c in comparisons if c["diff"] is not None]
    worse = [c for c in judged if c["worse"]]
    reasons = []
    for c in worse:
        lo, hi = c["diff_ci"]
        reasons.append(f"worse on {c['benchmark']}: ρ {c['rho_new']:.3f} vs {c['rho_active']:.3f} of {active_name} on "
                       f"the same {c['n']} held-out answers (Δ {c['diff']:+.3f}, 95 % CI {lo:+.3f} to {hi:+.3f}; "
                       f"a drop beyond the tolerance {tolerance:g} and beyond noise)")
    if worse:
        return False, reasons
    if not judged:
        return False, ["no benchmark has held-out answers that both models never trained on, with a defined ρ"]
    names = ", ".join(f"{c['benchmark']} (Δ {c['diff']:+.3f}, n {c['n']})" for c in judged)
    return True, [f"not worse than {active_name} on any of {len(judged)} benchmark(s) compared on held-out answers "
                  f"neither trained on: {names}"]


def activation_compare(*, run, held_out: Mapping[int, tuple[float, float, int, str]]) -> dict:
    """Compare a finished run's model with the active one on each benchmark (the run's ``activation_decision``).

    Args:
        run: the new ``TrainingRun`` (its model is not registered yet).
        held_out: {candidate pk: (the new model's μ, mean normalised human rating, question pk, benchmark)} of
            the run's test split.

    The answers compared are those of questions the active model neither trained nor tuned on (its run's
    ``TrainingSplit``; all of them for a model whose split is not recorded, said in the reasons) that the active
    model has a prediction of. Without an active model the new one may be activated. Returns
    {activate, reasons, active_version, active_name, tolerance, benchmarks: [...], decided_at}; ``activate`` None
    when no benchmark could be compared (the caller falls back to dev ρ).
    """
    from modelling.models import Prediction, TrainingSplit
    from modelling.selectors import model_version_active

    tolerance = settings.ORCA_ACTIVATION_RHO_TOLERANCE
    active = model_version_active()
    base = {"tolerance": tolerance, "decided_at": timezone.now().isoformat(), "benchmarks": []}
    if active is None:
        return base | {"activate": True, "active_version": None, "active_name": None,
                       "reasons": ["no model is active"]}
    reasons = []
    split = TrainingSplit.objects.filter(run_id=active.training_run_id).first() if active.training_run_id else None
    if split is None:
        reasons.append(f"which questions {active.name} trained on is not recorded: compared on every held-out "
                       "answer of the new run, some of which it may have trained on (favouring it)")
        seen: set[int] = set()
    else:
        seen = set(split.train) | set(split.dev)
    kept = {cid: v for cid, v in held_out.items() if v[2] not in seen}
    old = dict(Prediction.objects.filter(model_version=active, candidate_id__in=list(kept))
               .values_list("candidate_id", "mu"))
    by_bench: dict[str, list[int]] = defaultdict(list)
    for cid in sorted(kept):
        if cid in old:
            by_bench[kept[cid][3]].append(cid)
    comparisons = []
    for bench, ids in sorted(by_bench.items()):
        c = compare_on_benchmark(mu_new=[kept[i][0] for i in ids], mu_active=[old[i] for i in ids],
                                 human_mean=[kept[i][1] for i in ids], questions=[kept[i][2] for i in ids],
                                 tolerance=tolerance)
        comparisons.append({"benchmark": bench, **c})
    activate, why = activation_decide(comparisons=comparisons, tolerance=tolerance, active_name=active.name)
    if not any(c["diff"] is not None for c in comparisons):
        activate = None
    return base | {"activate": activate, "active_version": active.pk, "active_name": active.name,
                   "reasons": why + reasons, "benchmarks": comparisons}
