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
from modelling.orca.data import normalise_rating
from modelling.services.routing_policy import audit_member

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


def _estimate_dict(e: stats.Estimate | None) -> dict | None:
    if e is None:
        return None
    return {"estimate": _round(e.estimate), "ci": [_round(v) for v in e.ci] if e.ci else None,
            "estimator": e.estimator, "ci_method": e.method if e.ci else None, "n": e.n}


@dataclass
class LeaderboardRow:
    """One LALM (ORCA paper, Table 5, extended). Means on the normalised scale unless named *_rating (1–5).

    ``human`` is the human-only estimate (``classical``, or ``active`` without ORCA under leaderboard precision),
    ``with_orca`` the one that adds ORCA's cross-fitted μ (``ppi++`` or ``active``); the headline (``estimate``,
    ``ci``, ``estimator``, ``ci_method``) is ``with_orca`` when it has an interval, else ``human``.
    """

    lalm: str
    answers: int
    rated_answers: int
    labels: int
    ratings: int
    mean_rating: float | None
    sd_rating: float | None
    human: stats.Estimate | None
    with_orca: stats.Estimate | None
    sampling: str
    notes: list[str]
    answer_words: float | None
    judges: dict[str, float | None]
    orca: dict | None

    @property
    def headline(self) -> stats.Estimate | None:
        if self.with_orca is not None and self.with_orca.ci is not None:
            return self.with_orca
        return self.human

    @property
    def estimate(self) -> float | None:
        return None if self.headline is None else self.headline.estimate

    @property
    def ci(self) -> tuple[float, float] | None:
        h = self.headline
        return None if h is None or h.ci is None else tuple(h.ci)

    @property
    def estimator(self) -> str | None:
        return None if self.headline is None else self.headline.estimator

    @property
    def ci_method(self) -> str | None:
        return None if self.ci is None else self.headline.method

    @property
    def ci_method_text(self) -> str:
        """The interval method in words ('' without an interval)."""
        return stats.CI_METHODS.get(self.ci_method or "", "")

    @property
    def mean_correctness(self) -> float | None:
        return None if self.human is None else self.human.estimate

    @property
    def rated_share(self) -> float:
        return self.rated_answers / self.answers if self.answers else 0.0

    @property
    def orca_only(self) -> bool:
        """No human rated it, but ORCA predicted it: the ORCA columns are its only figures."""
        return self.rated_answers == 0 and self.orca is not None

    def as_json(self) -> dict:
        """The row for JSON (command, API, download): numbers rounded here, once, to 4 decimals (σ² to 5, the answer
        length to 2); the object keeps full precision for the tables, which round once to what they show."""
        orca = None if self.orca is None else {"mu": _round(self.orca["mu"]), "var": _round(self.orca["var"], 5),
                                               "n": self.orca["n"]}
        return {
            "lalm": self.lalm, "answers": self.answers, "rated_answers": self.rated_answers,
            "rated_share": _round(self.rated_share), "labels": self.labels, "ratings": self.ratings,
            "mean_rating": _round(self.mean_rating), "sd_rating": _round(self.sd_rating),
            "estimate": _round(self.estimate), "ci": [_round(v) for v in self.ci] if self.ci is not None else None,
            "estimator": self.estimator, "ci_method": self.ci_method,
            "mean_correctness": _round(self.mean_correctness), "human": _estimate_dict(self.human),
            "ppi": _estimate_dict(self.with_orca), "sampling": self.sampling, "notes": self.notes,
            "answer_words": _round(self.answer_words, 2), "judges": {j: _round(v) for j, v in self.judges.items()},
            "orca": orca,
        }


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
        return (f"anytime-valid betting test of equal means (Waudby-Smith & Ramdas 2024), Holm over "
                f"{_count(len(self.pairwise), 'pair')}")

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
            f"anytime p {p.p_anytime:.3g}, Holm p {p.p_holm:.3g} (betting test, Holm over {_count(p.pairs, 'pair')})")


def _pair_json(p: verdicts.PairwiseVerdict) -> dict:
    out = p.as_dict()
    out["diff"] = _round(out["diff"])
    for key in ("level", "p_anytime", "p_holm"):
        out[key] = float(f"{out[key]:.6g}")
    out["e_value"] = float(f"{out['e_value']:.6g}") if math.isfinite(out["e_value"]) else None
    out["ci"] = [_round(v) for v in out["ci"]] if out["ci"] else None
    return out


def _round(x, digits: int = 4):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(float(x), digits)


def _count(n: int, noun: str) -> str:
    """"1 answer", "2 answers"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _value(data: LeaderboardData, cid: int) -> float:
    return float(np.mean([normalise_rating(s) for s in data.scores[cid]]))


def _within_variances(data: LeaderboardData, ids: list[int], sampled) -> np.ndarray:
    """(N,) the variance of each sampled answer's mean normalised rating from its raters: its ratings' sample
    variance ÷ their number; an answer with one rating takes the mean sample variance of the others (0 for the
    unsampled)."""
    spreads = [float(np.var([normalise_rating(x) for x in data.scores[c]], ddof=1))
               for c, s in zip(ids, sampled) if s and len(data.scores[c]) >= 2]
    pooled = float(np.mean(spreads)) if spreads else 0.0
    out = np.zeros(len(ids))
    for j, (c, s) in enumerate(zip(ids, sampled)):
        if s:
            values = [normalise_rating(x) for x in data.scores[c]]
            out[j] = (float(np.var(values, ddof=1)) if len(values) >= 2 else pooled) / len(values)
    return out


@dataclass
class _Part:
    """One LALM on one benchmark: the estimates, the labels they use, the weights of those, and notes."""

    answers: int
    human: stats.Estimate | None = None
    with_orca: stats.Estimate | None = None
    labels: list[int] = field(default_factory=list)
    weights: dict[int, float] | None = None
    notes: list[str] = field(default_factory=list)


def _part(data: LeaderboardData, ids: list[int], preds: PredictionSet, *, sampling: str, share: float,
          config: LeaderboardConfig) -> _Part:
    """The estimates of one LALM's answers ``ids`` on one benchmark sampled as ``sampling`` (module docstring)."""
    part = _Part(answers=len(ids))
    rated = [c for c in ids if data.scores.get(c)]
    crossfit_missing = sum(c not in preds.mu for c in ids) if preds.ppi_allowed else len(ids)
    too_few = (f"too few questions: {{n}} labelled (an interval needs {config.min_questions}; the human-only point "
               "estimate has none)")

    def orca_note() -> str:
        return f"cross-fit stale: {_count(crossfit_missing, 'answer')} without a cross-fitted prediction"

    if sampling == ACTIVE:
        undecided = [c for c in ids if c not in data.design]
        if undecided:
            part.notes.append(f"{_count(len(undecided), 'answer')} without a fixed draw yet (routing has not "
                              "decided them): no unbiased estimate until it has")
            return part
        pi = np.array([data.design[c][0] for c in ids])
        drawn = np.array([data.design[c][1] < data.design[c][0] for c in ids])
        sampled = drawn & np.array([bool(data.scores.get(c)) for c in ids])
        part.labels = [c for c, s in zip(ids, sampled) if s]
        part.weights = {c: 1.0 / data.design[c][0] for c in part.labels}
        if not part.labels:
            part.notes.append(f"none of the {int(drawn.sum())} drawn answers is rated yet")
            return part
        y = np.array([_value(data, c) if s else np.nan for c, s in zip(ids, sampled)])
        within = _within_variances(data, ids, sampled)
        part.notes.append(f"answers drawn ∝ ORCA's σ (leaderboard precision): {len(part.labels)} of "
                          f"{int(drawn.sum())} drawn answers rated, each weighted 1/π")
        part.human = stats.active_mean(y=y, pi=pi, sampled=sampled, drawn=drawn, within=within,
                                       min_questions=config.min_questions)
        if crossfit_missing == 0:
            part.with_orca = stats.active_mean(y=y, pi=pi, sampled=sampled, drawn=drawn, within=within,
                                               yhat=[preds.mu[c] for c in ids], min_questions=config.min_questions)
        elif preds.ppi_allowed:
            part.notes.append(orca_note())
        if part.human.ci is None:
            part.notes.append(too_few.format(n=len(part.labels)))
        return part
    if sampling == ROUTED:
        part.labels = [c for c in rated if audit_member(random_key=data.answers[c]["key"], share=share)]
        audit = sum(audit_member(random_key=data.answers[c]["key"], share=share) for c in ids)
        part.notes.append(f"routing chose what was rated: the estimates use the audit share only ({len(part.labels)} "
                          f"of its {_count(audit, 'answer')} rated; ratings of "
                          f"{_count(len(rated) - len(part.labels), 'routed answer')} weigh 0)")
    else:
        part.labels = rated
    if not part.labels:
        return part
    y = [_value(data, c) for c in part.labels]
    part.human = stats.classical_mean(y, min_questions=config.min_questions)
    if part.human.ci is None:
        part.notes.append(too_few.format(n=len(part.labels)))
    elif not preds.ppi_allowed:
        pass  # no cross-fit at all: the page says so once, above the table (ppi_note)
    elif crossfit_missing:
        part.notes.append(orca_note())
    else:
        part.with_orca = stats.ppi_mean(y=y, yhat=[preds.mu[c] for c in part.labels],
                                        yhat_all=[preds.mu[c] for c in ids],
                                        min_questions=max(3, config.min_questions))
    return part


def _combine(parts: list[_Part], attr: str) -> stats.Estimate | None:
    estimates = [(p.answers, getattr(p, attr)) for p in parts]
    if any(e is None for _, e in estimates):
        return None
    if len(estimates) == 1:
        return estimates[0][1]
    if any(e.ci is None for _, e in estimates):  # the point estimate still combines; the interval cannot
        total = sum(n for n, _ in estimates)
        return stats.Estimate(sum(n * e.estimate for n, e in estimates) / total, None, sum(e.n for _, e in estimates),
                              stats.STRATIFIED_T, "+".join(sorted({e.estimator for _, e in estimates})))
    return stats.stratified(estimates)


def _rows(data: LeaderboardData, answer_ids: list[int], preds: PredictionSet, *, config: LeaderboardConfig,
          labels_out: dict | None = None) -> list[LeaderboardRow]:
    """One row per LALM with answers among ``answer_ids``, best headline estimate first, unrated rows last.
    ``labels_out`` (when given) receives {LALM: {candidate id: weight}} of the labels used."""
    by_lalm: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for cid in answer_ids:
        a = data.answers[cid]
        by_lalm[a["lalm"]][a["benchmark_id"]].append(cid)
    rows = []
    for lalm, strata in by_lalm.items():
        ids = [c for group in strata.values() for c in group]
        parts = [_part(data, group, preds, sampling=data.sampling.get(bench, UNIFORM),
                       share=data.audit_share.get(bench, 0.0), config=config)
                 for bench, group in sorted(strata.items())]
        notes = list(dict.fromkeys(n for p in parts for n in p.notes))
        if len(parts) > 1 and any(p.human is not None and p.human.ci is None for p in parts):
            notes.append("a benchmark with too few questions for an interval leaves the combined estimate without one")
        if labels_out is not None:
            labels_out[lalm] = {c: (p.weights or {}).get(c, 1.0) for p in parts for c in p.labels}
        scores = [s for c in ids for s in data.scores.get(c, [])]
        judges = {}
        for judge, judged in sorted(data.judges.items()):
            values = [normalise_rating(judged[c]) for c in ids if c in judged]
            judges[judge] = float(np.mean(values)) if values else None
        predicted = [c for c in ids if c in preds.mu]
        orca = None
        if predicted:
            orca = {"mu": float(np.mean([preds.mu[c] for c in predicted])),
                    "var": float(np.mean([preds.var[c] for c in predicted])), "n": len(predicted)}
        kinds = {data.sampling.get(b, UNIFORM) for b in strata}
        rows.append(LeaderboardRow(
            lalm=lalm, answers=len(ids), rated_answers=sum(bool(data.scores.get(c)) for c in ids),
            labels=sum(len(p.labels) for p in parts), ratings=len(scores),
            mean_rating=float(np.mean(scores)) if scores else None,
            sd_rating=float(np.std(scores, ddof=1)) if len(scores) >= 2 else None,
            human=_combine(parts, "human"), with_orca=_combine(parts, "with_orca"),
            sampling=kinds.pop() if len(kinds) == 1 else "mixed", notes=notes,
            answer_words=float(np.mean([data.answers[c]["words"] for c in ids])),
            judges=judges, orca=orca,
        ))
    rows.sort(key=lambda r: (r.estimate is None, -(r.estimate if r.estimate is not None else
                                                    (r.orca or {}).get("mu") or 0), r.lalm))
    return rows


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
                             config=LeaderboardConfig.from_settings(seed=seed), benchmark=benchmark, by=by)


def leaderboard_build(*, data: LeaderboardData, preds: PredictionSet, config: LeaderboardConfig,
                      benchmark: str | None = None, by: str | None = None) -> Leaderboard:
    """The leaderboard of ``data`` with ``preds`` — no database read: what :func:`leaderboard_compute` shows, and
    what ``bench/leaderboard.py`` computes on its replays, so the bench validates the page's own code."""
    ids = sorted(data.answers)
    rows = _rows(data, ids, preds, config=config)
    inputs = verdicts.verdict_inputs(data, ids, audit_first=_audit_first())
    rated_order = [r.lalm for r in rows if inputs.values.get(r.lalm)]
    pairwise = verdicts.pairwise_verdicts({name: inputs.values[name] for name in rated_order}, order=inputs.order,
                                          min_shared=config.min_shared)
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
        board.groups = [(name, _rows(data, groups[name], preds, config=config)) for name in sorted(groups)]
    return board


def _audit_first() -> bool:
    """Audit answers have the queue's top priority under routing (``ROUTING_AUDIT_PRIORITY`` above the high
    priority), so the queue serves the audit share first."""
    return settings.ROUTING_AUDIT_PRIORITY > max(settings.ROUTING_HIGH_PRIORITY, 0)


def _difference_spread(board: Leaderboard) -> float | None:
    """The spread of true differences between two of the board's LALMs, by the method of moments: √(2 · (the
    variance of the headline estimates − their mean squared standard error)), at least 0.02; None with fewer than
    three estimates with an interval (the planner then does not shrink)."""
    rows = [r.headline for r in board.rows if r.headline is not None and r.headline.se is not None]
    if len(rows) < 3:
        return None
    between = float(np.var([e.estimate for e in rows], ddof=1) - np.mean([e.se ** 2 for e in rows]))
    return max(0.02, math.sqrt(2 * max(between, 0.0)))


def leaderboard_budget_plan(*, board: Leaderboard, a: str, b: str) -> planner.PairPlan:
    """About how many more ratings, under the benchmark's queue and policy, decide ``a`` against ``b`` with 80 %
    power at the pair's Holm level (:mod:`modelling.leaderboard.planner`): the level of its Holm step when decided,
    else of Holm's next step given the verdicts the table has; the planning distribution is shrunk towards 0 by the
    spread of this table's estimates (:func:`_difference_spread`).

    Raises ValueError when either LALM has no counted rated answer or a == b.
    """
    inputs = board.verdict_inputs
    if a == b or not inputs.values.get(a) or not inputs.values.get(b):
        raise ValueError(f"{a} and {b}: the planner needs two different LALMs with counted rated answers")
    pair = next((p for p in board.pairwise if {p.a, p.b} == {a, b}), None)
    if pair is None:
        raise ValueError(f"{a} and {b} are not a pair of this leaderboard")
    d = verdicts.pair_sequence(inputs.values, inputs.order, a, b)
    countable = inputs.countable.get(a, set()) & inputs.countable.get(b, set())
    return planner.plan_pair(
        d, level=pair.level, available_questions=len(countable) - d.size, p_anytime=pair.p_anytime,
        answers_per_question=inputs.answers_per_question, ratings_per_answer=inputs.ratings_per_answer,
        counted_share=max(inputs.counted_share, 1e-9), min_shared=board.config.min_shared, seed=board.config.seed,
        prior_sd=_difference_spread(board),
    )


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
            settings.ROUTING_AUDIT_SHARE, *dataclasses.astuple(LeaderboardConfig.from_settings()))
