"""ORCA's quality per benchmark, and where the platform may use ORCA (README, "ORCA on each benchmark").

**Figures.** ORCA is judged on each benchmark by Spearman ρ (with a 95 % interval), Kendall τ-b, MAE_μ and MAE_σ² of
its unclamped μ and σ² against the human ratings, over answers the model never trained on, with their number n
(:mod:`modelling.services.orca_evaluation`: per benchmark and per (benchmark, group) pair — modality, category and
the candidate-metadata keys of ``ORCA_QUALITY_GROUP_KEYS``). A training run records them on its dev and test splits
(held-out questions); a cross-fit on every rated answer (each predicted by a fold model that never saw its question).

**The figure of a benchmark** (:meth:`Figures.used`), in this order:

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

Activation of a retrained model (not worse on any benchmark) is decided in
:func:`modelling.services.orca_evaluation.activation_compare`.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings

from modelling.services.orca_evaluation import crossfit_quality, human_targets, predictions_quality

ROUTING = "routing"
RATER = "rater"


# --- the figure of a benchmark ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityFigure:
    """ORCA's figures on one benchmark's answers from one source of out-of-sample predictions.

    Attributes:
        benchmark: the benchmark's name.
        metrics: {n, rho, rho_ci, tau, mae_mu, mae_var} (``orca_evaluation.group_metrics``).
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
             *predictions_state(), ",".join(settings.ORCA_QUALITY_GROUP_KEYS))
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
        reason: the decision in a sentence, with the numbers and where they come from (logs, routing decisions).
        why: the same in a few words for a table cell ("ρ 0.41 < ORCA_ROUTING_MIN_RHO 0.50").
    """

    use: str
    allowed: bool
    threshold: float | None
    reason: str
    why: str = ""


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
    refused = f"{what} is refused on {benchmark}: "
    if threshold is None:
        return Gate(use, True, None, f"{what} is offered on every benchmark ({setting} is not set).",
                    f"no threshold ({setting} off)")
    if figure is None:
        return Gate(use, False, threshold, refused + "ORCA has no out-of-sample figure there yet (train a model "
                    "with its ratings, or run a cross-fit).", "no held-out figure yet")
    if figure.n < min_items:
        return Gate(use, False, threshold, refused + f"only {figure.n} held-out answers ({figure.label}), fewer than "
                    f"ORCA_QUALITY_MIN_ITEMS = {min_items} to judge ORCA by.",
                    f"only {figure.n} held-out answers (< {min_items})")
    if figure.rho is None:
        return Gate(use, False, threshold, refused + f"ρ is undefined on its {figure.n} held-out answers (constant "
                    "ratings or predictions).", "ρ undefined")
    if figure.rho < threshold:
        return Gate(use, False, threshold, refused + f"{_fmt_rho(figure)}; below {setting} = {threshold:.2f}.",
                    f"ρ {figure.rho:.2f} < {setting} {threshold:.2f}")
    return Gate(use, True, threshold, f"{what} is offered on {benchmark}: {_fmt_rho(figure)}; at least "
                f"{setting} = {threshold:.2f}.", f"ρ {figure.rho:.2f} ≥ {setting} {threshold:.2f}")


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
    note = ""
    if benchmark and figures.crossfit_name:
        from modelling.selectors import valid_ratings_fingerprint
        from modelling.services.agreement_cache import cached_by_data, predictions_state

        scope = hashlib.sha256(f"{benchmark}\x00{figures.crossfit_name}".encode()).hexdigest()[:24]  # a safe key
        lambdas = cached_by_data(name="ppi-lambdas", state=(scope, valid_ratings_fingerprint(), *predictions_state()),
                                 compute=lambda: ppi_lambdas(benchmark=benchmark))
        note = ppi_lambda_note(lambdas=lambdas, benchmark=benchmark)
    return LeaderboardQuality([chosen[n] for n in names if n in chosen], source, note)


