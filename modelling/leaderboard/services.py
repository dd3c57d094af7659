"""The LALM leaderboard over the store: per-LALM estimates of mean correctness, each named with its estimator and
interval method, verdicts between LALMs, judges, ORCA and the verdict matrix; its renderings (JSON, CSV, Markdown,
LaTeX, the forest plot) are :mod:`modelling.leaderboard.render`.

Estimand. For an LALM on a benchmark: *the mean over its candidate answers (current question versions) of each
answer's expected normalised rating (r − 1)/4 by an annotator of the pool* — what the mean of an answer's valid
ratings tends to with more raters. Every estimator below is unbiased for it only under the sampling it names:

* ``uniform`` benchmark (routing never decided one of its answers): the queue serves each priority level in the
  answers' random-key order, so the rated answers are a uniform random sample — ``classical`` (human-only) and,
  with a finished cross-fit covering every answer, ``ppi++``;
* ``routed`` benchmark (routing by disagreement: priorities from ORCA's σ², early stops after agreeing ratings or
  the model's vote): which answers were rated and how many ratings each got depended on the model and on the
  ratings, so only the *audit share* (answers with random key < the share, always the default k ratings) counts
  — ``classical`` and ``ppi++`` on the audit answers; the other answers' ratings weigh 0;
* ``active`` benchmark (leaderboard precision): the fixed design (u, π) of every answer; drawn answers with
  ratings weigh 1/π — ``active`` (with ORCA's cross-fitted μ when every answer has one, else without).

Which ratings count follows each benchmark's design epochs (:mod:`modelling.leaderboard.designs`), what the rated
answers stand for is checked (:mod:`modelling.leaderboard.population`), and intervals allow for annotators crossed
with answers (:mod:`modelling.leaderboard.raters`); the rows are :mod:`modelling.leaderboard.rows`.

With several benchmarks in scope each benchmark is a stratum; the strata's estimates combine by answer share
(``stratified_t``). Row notes say why an estimator is absent ("cross-fit stale: 312 answers without a
cross-fitted prediction", "too few questions", "routing chose what was rated …").

The statistics are :mod:`modelling.leaderboard.stats`.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.utils import timezone

from modelling.leaderboard import planner, stats, verdicts
from modelling.leaderboard.population import Population, population_load, population_state
from modelling.leaderboard.rows import (  # noqa: F401 (LeaderboardRow, _round re-exported)
    LeaderboardRow,
    _count,
    _round,
    _rows,
    _value,
    benchmark_designs,
)
from modelling.leaderboard.selectors import (
    ACTIVE,
    BY_QUESTION_FIELDS,
    ROUTED,
    UNIFORM,
    LeaderboardData,
    leaderboard_by_check,
    leaderboard_data_load,
    leaderboard_group,
)

#: Grouping keys of ``--by`` every benchmark has (candidate metadata names add their own:
#: ``selectors.leaderboard_by_choices``).
BY_CHOICES = BY_QUESTION_FIELDS
#: Formats of the command and the downloads.


@dataclass
class PredictionSet:
    """ORCA predictions the leaderboard uses.

    Attributes:
        model_version: the name shown with every figure (a cross-fit's name, or the active model's), or None.
        source: ``crossfit`` (out of sample), ``active`` (the active model: in-sample on the answers it trained
            on) or ``none``.
        mu, var: {candidate id: μ (0–1)} and {candidate id: σ² (normalised scale)}.
        ppi_allowed: True only for cross-fitted predictions.
        note: why PPI is refused, in words ('' when allowed).
    """

    model_version: str | None
    source: str
    mu: dict[int, float] = field(default_factory=dict)
    var: dict[int, float] = field(default_factory=dict)
    ppi_allowed: bool = False
    note: str = ""


def leaderboard_predictions(*, candidate_ids) -> PredictionSet:
    """The predictions to use: the latest finished cross-fit's, else the active model's (no PPI), else none."""
    from modelling.leaderboard.crossfit import crossfit_latest_done
    from modelling.models import Prediction
    from modelling.selectors import model_version_active

    ids = list(candidate_ids)
    crossfit = crossfit_latest_done()
    if crossfit is not None:
        rows = Prediction.objects.filter(candidate_id__in=ids, model_version__crossfit_fold__crossfit=crossfit)
        mu, var = {}, {}
        for cid, m, v in rows.values_list("candidate_id", "mu", "variance"):
            mu[cid], var[cid] = m, v
        return PredictionSet(crossfit.name, "crossfit", mu, var, ppi_allowed=True)
    active = model_version_active()
    if active is None:
        return PredictionSet(None, "none", note=(
            "No ORCA model: train one and run a cross-fit for prediction-powered (PPI++) and ORCA-assisted active "
            "estimates; the human-only ones stand."))
    mu, var = {}, {}
    for cid, m, v in Prediction.objects.filter(candidate_id__in=ids, model_version=active).values_list(
        "candidate_id", "mu", "variance"
    ):
        mu[cid], var[cid] = m, v
    return PredictionSet(
        active.name, "active", mu, var, ppi_allowed=False,
        note=f"PPI refused: only in-sample predictions exist ({active.name} was trained on rated answers, so its "
             "μ on them is biased towards the human ratings). Run a cross-fit (K folds over questions) for "
             "prediction-powered estimates; the human-only CIs stand.",
    )


@dataclass(frozen=True)
class LeaderboardConfig:
    """The leaderboard's thresholds (settings ``LEADERBOARD_*``; README, Leaderboard)."""

    min_questions: int = stats.MIN_QUESTIONS
    min_shared: int = verdicts.MIN_SHARED_QUESTIONS
    #: Seed of the budget planner's simulations (the plans are reproducible).
    seed: int = 0

    @classmethod
    def from_settings(cls, *, seed: int = 0) -> LeaderboardConfig:
        return cls(settings.LEADERBOARD_MIN_QUESTIONS, settings.LEADERBOARD_MIN_SHARED_QUESTIONS, seed)


@dataclass
class Leaderboard:
    """The leaderboard of one scope (a benchmark or all), optionally broken down by modality or category."""

    benchmark: str | None
    model_version: str | None
    prediction_source: str
    ppi_note: str
    rows: list[LeaderboardRow]
    pairwise: list[verdicts.PairwiseVerdict]
    agreement: dict[str, dict | None]
    judges: list[str]
    config: LeaderboardConfig = field(default_factory=LeaderboardConfig)
    by: str | None = None
    groups: list[tuple[str, list[LeaderboardRow]]] = field(default_factory=list)
    generated_at: str = ""
    #: What the verdicts and the planner are computed from: counted values, their order, countable questions and
    #: the queue's cost of a question (:class:`modelling.leaderboard.verdicts.VerdictInputs`).
    verdict_inputs: verdicts.VerdictInputs = field(default_factory=verdicts.VerdictInputs)

    @property
    def question_values(self) -> dict[str, dict[int, float]]:
        """{LALM: {question: human value}} of the counted answers (what the verdicts use)."""
        return self.verdict_inputs.values

    @property
    def verdict_method(self) -> str:
        """The verdicts' method in words, with the number of pairs Holm's correction runs over."""
        powered = {p.powered for p in self.pairwise}
        text = "anytime-valid betting test of equal means (Waudby-Smith & Ramdas 2024)"
        if True in powered:
            text += (", prediction-powered with the cross-fitted ORCA on the questions the design never counts "
                     f"(PPI++){' for the pairs marked PPI' if len(powered) > 1 else ''}")
        return f"{text}, Holm over {_count(len(self.pairwise), 'pair')}"

    @property
    def sampling_note(self) -> str:
        """One sentence on how the rated answers were chosen in this scope (shown above the table)."""
        kinds = {r.sampling for r in self.rows if r.rated_answers}
        if not kinds or kinds == {UNIFORM}:
            return ("Rated answers were chosen by the queue's random order (uniform policy): the rated ones are a "
                    "random sample of each LALM's answers.")
        parts = []
        if ROUTED in kinds or "mixed" in kinds:
            parts.append("Routing by predicted disagreement chose what was rated (priorities from ORCA's σ², early "
                         "stops), so the estimates of routed benchmarks use only their audit share (a random share "
                         "of answers that always gets k ratings); other ratings weigh 0.")
        if ACTIVE in kinds or "mixed" in kinds:
            parts.append("Leaderboard precision drew answers ∝ ORCA's σ with fixed probabilities π: each drawn "
                         "answer's ratings weigh 1/π (active estimate).")
        return " ".join(parts)

    @property
    def decided(self) -> int:
        return sum(p.verdict != "undecided" for p in self.pairwise)

    def verdict_matrix(self) -> list[dict]:
        """Rows of the LALM × LALM matrix in the table's order: {"lalm", "cells": [{"other", "verdict", "diff",
        "title"}]}; ``verdict`` is ``better`` / ``worse`` / ``undecided`` / ``self`` from the row LALM's side."""
        names = [r.lalm for r in self.rows if r.lalm in self.question_values and self.question_values[r.lalm]]
        by_pair = {}
        for p in self.pairwise:
            by_pair[(p.a, p.b)] = (p, 1)
            by_pair[(p.b, p.a)] = (p, -1)
        out = []
        for a in names:
            cells = []
            for b in names:
                if a == b:
                    cells.append({"other": b, "verdict": "self", "diff": None, "title": a})
                    continue
                p, sign = by_pair[(a, b)]
                diff = None if p.diff is None else sign * p.diff
                verdict = {"a>b": "better", "b>a": "worse"}.get(p.verdict, "undecided")
                if sign < 0 and verdict != "undecided":
                    verdict = "worse" if verdict == "better" else "better"
                title = f"{a} − {b}: " + (f"{diff:+.3f} over {p.n_questions} shared questions" if diff is not None
                                           else "no shared rated question")
                title += pair_title(p, sign)
                cells.append({"other": b, "verdict": verdict, "diff": diff, "title": title})
            out.append({"lalm": a, "cells": cells})
        return out

    def as_json(self) -> dict:
        """The command's ``--json`` shape: {"benchmark", "model_version", "prediction_source", "sampling_note",
        "verdict_method", "rows": [...], "pairwise": [{"a", "b", "n_questions", "diff", "ci", "level", "e_value",
        "p_anytime", "p_holm", "verdict", "note", "method", "pairs"}]} (+ "by", "groups")."""
        out = {"benchmark": self.benchmark, "model_version": self.model_version,
               "prediction_source": self.prediction_source, "sampling_note": self.sampling_note,
               "verdict_method": self.verdict_method, "rows": [r.as_json() for r in self.rows],
               "pairwise": [_pair_json(p) for p in self.pairwise]}
        if self.by:
            out["by"] = self.by
            out["groups"] = [{"name": name, "rows": [r.as_json() for r in rows]} for name, rows in self.groups]
        return out

    def as_api(self) -> dict:
        """The API's shape: the JSON shape plus system-level agreement, the interval methods and notes."""
        out = self.as_json()
        out.update({
            "ppi_note": self.ppi_note,
            "system_agreement": self.agreement,
            "ci_methods": stats.CI_METHODS,
            "min_questions": self.config.min_questions,
            "min_shared_questions": self.config.min_shared,
            "generated_at": self.generated_at,
        })
        return out


def pair_title(p: verdicts.PairwiseVerdict, sign: int) -> str:
    """The matrix cell's tooltip after the difference: the confidence sequence (from the row LALM's side), e-value,
    anytime p and Holm p, or why there is no verdict."""
    if p.note:
        return f" ({p.note})"
    if p.ci is None:
        return ""
    low, high = (p.ci[0], p.ci[1]) if sign > 0 else (-p.ci[1], -p.ci[0])
    return (f"; {1 - p.level:.4g} confidence sequence [{low:+.3f}, {high:+.3f}], e-value {p.e_value:.3g}, "
            f"anytime p {p.p_anytime:.3g}, Holm p {p.p_holm:.3g} ({pair_test(p)}, Holm over {_count(p.pairs, 'pair')})")


def pair_test(p: verdicts.PairwiseVerdict) -> str:
    """The pair's test in words: the human-only betting test or the prediction-powered one (with ORCA, PPI)."""
    return "betting test with ORCA (PPI)" if p.powered else "betting test, human only"


def _pair_json(p: verdicts.PairwiseVerdict) -> dict:
    out = p.as_dict()
    out["diff"] = _round(out["diff"])
    for key in ("level", "p_anytime", "p_holm"):
        out[key] = float(f"{out[key]:.6g}")
    out["e_value"] = float(f"{out['e_value']:.6g}") if math.isfinite(out["e_value"]) else None
    out["ci"] = [_round(v) for v in out["ci"]] if out["ci"] else None
    return out


def leaderboard_compute(
    *, benchmark: str | None = None, by: str | None = None, seed: int = 0, data: LeaderboardData | None = None,
) -> Leaderboard:
    """Compute the leaderboard of ``benchmark`` (a name, None = all benchmarks), optionally broken down ``by``
    modality, category or a candidate metadata name.

    Args:
        seed: seed of the budget planner's simulations (the plans are reproducible).
        data: preloaded data (default: :func:`leaderboard_data_load`).

    Raises ValueError for an unknown ``by``.
    """
    leaderboard_by_check(by=by, benchmark=benchmark)
    data = data if data is not None else leaderboard_data_load(benchmark=benchmark)
    return leaderboard_build(data=data, preds=leaderboard_predictions(candidate_ids=data.answers),
                             config=LeaderboardConfig.from_settings(seed=seed), benchmark=benchmark, by=by,
                             population=population_load(answer_ids=data.answers))


def leaderboard_build(*, data: LeaderboardData, preds: PredictionSet, config: LeaderboardConfig,
                      benchmark: str | None = None, by: str | None = None,
                      population: Population | None = None) -> Leaderboard:
    """The leaderboard of ``data`` with ``preds`` — no database read: what :func:`leaderboard_compute` shows, and
    what ``bench/leaderboard.py`` computes on its replays, so the bench validates the page's own code.
    ``population``: the store's population checks (:mod:`modelling.leaderboard.population`; None: none)."""
    ids = sorted(data.answers)
    rows = _rows(data, ids, preds, config=config, population=population)
    inputs = verdicts.verdict_inputs(data, ids, audit_first=_audit_first(), designs=benchmark_designs(data, ids),
                                     predictions=preds.mu if preds.ppi_allowed else None)
    rated_order = [r.lalm for r in rows if inputs.values.get(r.lalm)]
    pairwise = verdicts.pairwise_verdicts({name: inputs.values[name] for name in rated_order}, order=inputs.order,
                                          min_shared=config.min_shared, predictions=inputs.predictions,
                                          held=inputs.held)
    human = {r.lalm: r.mean_correctness for r in rows if r.mean_correctness is not None}
    agreement = {}
    if preds.mu:
        agreement["ORCA"] = stats.rank_agreement(human, {r.lalm: r.orca["mu"] for r in rows if r.orca})
    judge_names = sorted(data.judges)
    for judge in judge_names:
        agreement[judge] = stats.rank_agreement(
            human, {r.lalm: r.judges[judge] for r in rows if r.judges.get(judge) is not None}
        )
    board = Leaderboard(
        benchmark=benchmark, model_version=preds.model_version, prediction_source=preds.source,
        ppi_note=preds.note, rows=rows, pairwise=pairwise, agreement=agreement, judges=judge_names, config=config,
        by=by, generated_at=timezone.now().isoformat(timespec="seconds"), verdict_inputs=inputs,
    )
    if by is not None:
        groups: dict[str, list[int]] = defaultdict(list)
        for cid in ids:
            groups[leaderboard_group(data.answers[cid], by) or "(none)"].append(cid)
        board.groups = [(name, _rows(data, groups[name], preds, config=config, population=population))
                        for name in sorted(groups)]
    return board


def _audit_first() -> bool:
    """Audit answers have the queue's top priority under routing (``ROUTING_AUDIT_PRIORITY`` above the high
    priority), so the queue serves the audit share first."""
    return settings.ROUTING_AUDIT_PRIORITY > max(settings.ROUTING_HIGH_PRIORITY, 0)


def _difference_spread(board: Leaderboard) -> float | None:
    """τ, the spread of true differences among the pairs the planner is asked about, for its empirical-Bayes
    shrinkage (:func:`modelling.leaderboard.planner.plan_pair`'s ``prior_sd``), at least 0.02.

    From the board's *undecided* pairs with at least ``min_shared`` counted questions, by the method of moments:
    √(mean d̄² − mean s²/n) over them (d̄, s, n: a pair's mean, standard deviation and number of counted
    differences). The planner plans undecided pairs only, and they are the close ones: a prior from every row's
    estimate (decided, far-apart pairs included) shrank too little, and plans under the default policy came true
    0.71 of the time against the 80 % aimed at (``bench/leaderboard.py``, ``planner_power``; README). With fewer than
    three such pairs, from the rows: √(2 · (the variance of the headline estimates − their mean squared standard
    error)). None when neither has three (the planner then does not shrink)."""
    inputs = board.verdict_inputs
    means, variances = [], []
    for pair in board.pairwise:
        if pair.verdict != "undecided" or pair.n_questions < max(2, board.config.min_shared):
            continue
        d = verdicts.pair_sequence(inputs.values, inputs.order, pair.a, pair.b)
        means.append(float(d.mean()))
        variances.append(float(d.var(ddof=1)) / d.size)
    if len(means) >= 3:
        between = float(np.mean(np.square(means)) - np.mean(variances))
        return max(0.02, math.sqrt(max(between, 0.0)))
    rows = [r.headline for r in board.rows if r.headline is not None and r.headline.se is not None]
    if len(rows) < 3:
        return None
    between = float(np.var([e.estimate for e in rows], ddof=1) - np.mean([e.se ** 2 for e in rows]))
    return max(0.02, math.sqrt(2 * max(between, 0.0)))


def leaderboard_budget_plan(*, board: Leaderboard, a: str, b: str) -> planner.PairPlan:
    """About how many more ratings, under the benchmark's queue and policy, decide ``a`` against ``b`` with 80 %
    power at the pair's Holm level (:mod:`modelling.leaderboard.planner`): the level of its Holm step when decided,
    else of Holm's next step given the verdicts the table has; the planning distribution is shrunk towards 0 by the
    spread of the table's undecided pairs (:func:`_difference_spread`). A prediction-powered pair is planned with the
    prediction-powered test it is decided by (:mod:`modelling.leaderboard.planner`), and its note says so.

    Raises ValueError when either LALM has no counted rated answer or a == b.
    """
    inputs = board.verdict_inputs
    if a == b or not inputs.values.get(a) or not inputs.values.get(b):
        raise ValueError(f"{a} and {b}: the planner needs two different LALMs with counted rated answers")
    pair = next((p for p in board.pairwise if {p.a, p.b} == {a, b}), None)
    if pair is None:
        raise ValueError(f"{a} and {b} are not a pair of this leaderboard")
    d = verdicts.pair_sequence(inputs.values, inputs.order, a, b)
    ppi = verdicts.ppi_evidence(a, b, verdicts.pair_questions(inputs.values, inputs.order, a, b), inputs.predictions,
                                inputs.held) if pair.powered else None
    countable = inputs.countable.get(a, set()) & inputs.countable.get(b, set())
    plan = planner.plan_pair(
        d, level=pair.level, available_questions=len(countable) - d.size, p_anytime=pair.p_anytime,
        answers_per_question=inputs.answers_per_question, ratings_per_answer=inputs.ratings_per_answer,
        counted_share=max(inputs.counted_share, 1e-9), min_shared=board.config.min_shared, seed=board.config.seed,
        prior_sd=_difference_spread(board), **({"f": ppi[1], "phi": ppi[0]} if ppi else {}),
    )
    if ppi and not plan.decided:
        plan = dataclasses.replace(plan, note=(plan.note + "; " if plan.note else "") + (
            "planned with this pair's prediction-powered test (ORCA on the questions the design never counts)"))
    return plan


def leaderboard_data_state(*, benchmark: str | None, by: str | None) -> tuple:
    """What the leaderboard reads, as a tuple that changes whenever its figures can: the valid ratings, the ORCA
    predictions (cross-fitted ones included), the candidate answers, the judges' scores and active flags, the
    routing decisions and fixed draws, the benchmarks' routing settings and the leaderboard settings. A handful of
    aggregate queries."""
    from django.db.models import Count, Max, Q

    from annotation.models import CandidateAnswer, JudgeRating, TableImport
    from modelling.models import ActiveDraw, BenchmarkRouting, RoutingDecision
    from modelling.selectors import valid_ratings_fingerprint
    from modelling.services.agreement_cache import predictions_state

    answers = CandidateAnswer.objects.aggregate(n=Count("id"), last=Max("id"))
    judged = JudgeRating.objects.aggregate(n=Count("id"), last=Max("id"),
                                          inactive=Count("id", filter=Q(judge__is_active=False)))
    routed = RoutingDecision.objects.aggregate(last=Max("id"))
    draws = ActiveDraw.objects.aggregate(n=Count("id"), last=Max("id"))
    policies = BenchmarkRouting.objects.aggregate(n=Count("id"), last=Max("updated_at"))
    imported = TableImport.objects.aggregate(last=Max("imported_at"))["last"]  # candidate metadata re-imported
    return (benchmark or "-", by or "-", valid_ratings_fingerprint(), *predictions_state(),
            imported and imported.timestamp(),
            answers["n"], answers["last"], judged["n"], judged["last"], judged["inactive"], routed["last"],
            draws["n"], draws["last"], policies["n"], policies["last"] and policies["last"].timestamp(),
            settings.ROUTING_AUDIT_SHARE, *dataclasses.astuple(LeaderboardConfig.from_settings()),
            *population_state())
