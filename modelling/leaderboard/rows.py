"""The leaderboard's per-LALM rows: which ratings each benchmark's estimate may use (design epochs,
:mod:`modelling.leaderboard.designs`), what the rated answers stand for (population checks,
:mod:`modelling.leaderboard.population`), the estimates with intervals that allow for annotators crossed with
answers (:mod:`modelling.leaderboard.raters`), and the displayed means.

Estimand of a row: the mean over the LALM's candidate answers (current question versions) of each answer's
expected normalised rating (r − 1)/4 by an annotator of the pool, narrowed where a population check says so (the
row's ``estimand``). Estimators (module docstring of :mod:`modelling.leaderboard.services`): ``classical`` and
``ppi++`` on a uniform sample (the whole benchmark under ``uniform``, the audit share under ``routed``), ``active``
under leaderboard precision; several benchmarks combine by answer share (``stratified_t``).

Displayed means ("mean rating ± sd", "ratings"): the ratings the estimate uses — under routing the audit share's,
under the active design each drawn answer's weighted 1/π — with ``ratings_all`` the valid ratings in all; the row
says so when the two differ ("early-stopped ratings left out").
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from modelling.leaderboard import stats
from modelling.leaderboard.designs import Design, design_of
from modelling.leaderboard.population import ALL_ANSWERS, Population, population_check
from modelling.leaderboard.raters import Severity, severity_of
from modelling.leaderboard.selectors import ACTIVE, ROUTED, LeaderboardData
from modelling.leaderboard.verdicts import rated_in_another_design
from modelling.orca.data import normalise_rating
from modelling.services.routing_policy import audit_member


def _round(x, digits: int = 4):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(float(x), digits)


def _count(n: int, noun: str) -> str:
    """"1 answer", "2 answers"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _value(data: LeaderboardData, cid: int) -> float:
    """An answer's human value: the mean of its valid ratings, normalised (r − 1)/4."""
    return float(np.mean([normalise_rating(s) for s in data.scores[cid]]))


def _estimate_dict(e: stats.Estimate | None) -> dict | None:
    if e is None:
        return None
    return {"estimate": _round(e.estimate), "ci": [_round(v) for v in e.ci] if e.ci else None,
            "estimator": e.estimator, "ci_method": e.method if e.ci else None, "n": e.n,
            "annotators": e.raters or None}


@dataclass
class LeaderboardRow:
    """One LALM (ORCA paper, Table 5, extended). Means on the normalised scale unless named *_rating (1–5).

    ``human`` is the human-only estimate (``classical``, or ``active`` without ORCA under leaderboard precision),
    ``with_orca`` the one that adds ORCA's cross-fitted μ (``ppi++`` or ``active``); the headline (``estimate``,
    ``ci``, ``estimator``, ``ci_method``) is ``with_orca`` when it has an interval, else ``human``.
    ``mean_rating``, ``sd_rating`` and ``ratings`` are of the ratings the estimate uses (module docstring);
    ``ratings_all`` counts every valid rating. ``design`` names the design epoch(s) the estimate uses, ``estimand``
    what it is the mean of ("all answers" unless a population check narrows it).
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
    ratings_all: int = 0
    design: str = ""
    estimand: str = ALL_ANSWERS

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
            "ratings_all": self.ratings_all, "mean_rating": _round(self.mean_rating),
            "sd_rating": _round(self.sd_rating),
            "estimate": _round(self.estimate), "ci": [_round(v) for v in self.ci] if self.ci is not None else None,
            "estimator": self.estimator, "ci_method": self.ci_method,
            "mean_correctness": _round(self.mean_correctness), "human": _estimate_dict(self.human),
            "ppi": _estimate_dict(self.with_orca), "sampling": self.sampling, "design": self.design,
            "estimand": self.estimand, "notes": self.notes,
            "answer_words": _round(self.answer_words, 2), "judges": {j: _round(v) for j, v in self.judges.items()},
            "orca": orca,
        }


@dataclass
class _Part:
    """One LALM on one benchmark: the estimates, the labels they use, the weights of those, and notes."""

    answers: int
    human: stats.Estimate | None = None
    with_orca: stats.Estimate | None = None
    labels: list[int] = field(default_factory=list)
    weights: dict[int, float] | None = None
    notes: list[str] = field(default_factory=list)
    estimand: str = ALL_ANSWERS


@dataclass
class _View:
    """The ratings of one benchmark's answers that its design lets the estimate use."""

    scores: dict[int, list[int]]
    raters: dict[int, list] | None

    def y(self, cid: int) -> float:
        return float(np.mean([normalise_rating(s) for s in self.scores[cid]]))

    def normalised(self, labels: list[int]) -> list[list[float]]:
        return [[normalise_rating(s) for s in self.scores[c]] for c in labels]

    def who(self, labels: list[int]) -> list[list] | None:
        return None if self.raters is None else [self.raters[c] for c in labels]


def _view(data: LeaderboardData, ids: list[int], design: Design) -> tuple[list[int], _View, int]:
    """(answers kept, the view of their valid ratings, answers left out because ratings of another design touch
    them) — :mod:`modelling.leaderboard.designs`."""
    raters = getattr(data, "raters", None) or None
    kept, scores, who, dropped = [], {}, ({} if raters is not None else None), 0
    for c in ids:
        s = data.scores.get(c) or []
        if rated_in_another_design(data, c, design):
            dropped += 1
            continue
        kept.append(c)
        if s:
            scores[c] = list(s)
            if who is not None:
                r = list(raters.get(c) or [])
                who[c] = r if len(r) == len(s) else [None] * len(s)
    return kept, _View(scores, who), dropped


def _within_variances(view: _View, ids: list[int], sampled) -> np.ndarray:
    """(N,) the variance of each sampled answer's mean normalised rating from its raters: its ratings' sample
    variance ÷ their number; an answer with one rating takes the mean sample variance of the others (0 for the
    unsampled)."""
    spreads = [float(np.var([normalise_rating(x) for x in view.scores[c]], ddof=1))
               for c, s in zip(ids, sampled) if s and len(view.scores[c]) >= 2]
    pooled = float(np.mean(spreads)) if spreads else 0.0
    out = np.zeros(len(ids))
    for j, (c, s) in enumerate(zip(ids, sampled)):
        if s:
            values = [normalise_rating(x) for x in view.scores[c]]
            out[j] = (float(np.var(values, ddof=1)) if len(values) >= 2 else pooled) / len(values)
    return out


def _too_few(n: int, config) -> str:
    return (f"too few questions: {n} labelled (an interval needs {config.min_questions}; the human-only point "
            "estimate has none)")


def _part_active(part: _Part, data: LeaderboardData, ids: list[int], view: _View, preds, config,
                 crossfit_missing: int, severity: Severity | None) -> _Part:
    """The active estimates (leaderboard precision: fixed draws (π, u), labels weighted 1/π)."""
    undecided = [c for c in ids if c not in data.design]
    if undecided:
        part.notes.append(f"{_count(len(undecided), 'answer')} without a fixed draw yet (routing has not "
                          "decided them): no unbiased estimate until it has")
        return part
    pi = np.array([data.design[c][0] for c in ids])
    drawn = np.array([data.design[c][1] < data.design[c][0] for c in ids])
    sampled = drawn & np.array([c in view.scores for c in ids])
    part.labels = [c for c, s in zip(ids, sampled) if s]
    part.weights = {c: 1.0 / data.design[c][0] for c in part.labels}
    if not part.labels:
        part.notes.append(f"none of the {int(drawn.sum())} drawn answers is rated yet")
        return part
    y = np.array([view.y(c) if s else np.nan for c, s in zip(ids, sampled)])
    common = dict(y=y, pi=pi, sampled=sampled, drawn=drawn, within=_within_variances(view, ids, sampled),
                  min_questions=config.min_questions, ratings=view.normalised(part.labels),
                  raters=view.who(part.labels), severity=severity)
    part.notes.append(f"answers drawn ∝ ORCA's σ (leaderboard precision): {len(part.labels)} of "
                      f"{int(drawn.sum())} drawn answers rated, each weighted 1/π")
    part.human = stats.active_mean(**common)
    if crossfit_missing == 0:
        part.with_orca = stats.active_mean(**common, yhat=[preds.mu[c] for c in ids])
    elif preds.ppi_allowed:
        part.notes.append(f"cross-fit stale: {_count(crossfit_missing, 'answer')} without a cross-fitted prediction")
    if part.human.ci is None:
        part.notes.append(_too_few(len(part.labels), config))
    return part


def _queue_keys(data: LeaderboardData, ids: list[int], design: Design) -> dict[int, float]:
    """{answer: random key} of the answers the design serves in key order (every answer under ``uniform``, the audit
    share under ``routed``, the drawn ones under ``active``): where a skipped or unjudgeable answer is a hole."""
    def served(c: int) -> bool:
        if design.sampling == ROUTED:
            return audit_member(random_key=data.answers[c]["key"], share=design.share)
        if design.sampling == ACTIVE:
            return c in data.design and data.design[c][1] < data.design[c][0]
        return True

    return {c: data.answers[c]["key"] for c in ids if served(c)}


def _part(data: LeaderboardData, ids: list[int], preds, *, design: Design, config,
          population: Population | None = None, severity: Severity | None = None) -> _Part:
    """The estimates of one LALM's answers ``ids`` on one benchmark under ``design`` (module docstring);
    ``severity``: the benchmark's pooled annotator severity (:func:`benchmark_severities`)."""
    ids, view, dropped = _view(data, ids, design)
    ids, pop_notes, estimand = population_check(population, ids=ids, rated=set(view.scores),
                                                keys=_queue_keys(data, ids, design))
    part = _Part(answers=len(ids), estimand=estimand)
    if dropped and design.left_out_random:
        part.notes.append(f"{_count(dropped, 'answer')} rated under an earlier uniform design left out (the first in "
                          "the queue's random order: the rest is still a random part of the answers)")
    elif dropped:
        part.notes.append(f"{_count(dropped, 'answer')} rated under an earlier design left out: the estimate is the "
                          "mean over the other answers")
        part.estimand = "answers not rated under an earlier design" + (
            "" if estimand == ALL_ANSWERS else f"; {estimand}")
    part.notes += pop_notes
    crossfit_missing = sum(c not in preds.mu for c in ids) if preds.ppi_allowed else len(ids)
    if design.sampling == ACTIVE:
        return _part_active(part, data, ids, view, preds, config, crossfit_missing, severity)
    rated = [c for c in ids if c in view.scores]
    if design.sampling == ROUTED:
        part.labels = [c for c in rated if audit_member(random_key=data.answers[c]["key"], share=design.share)]
        audit = sum(audit_member(random_key=data.answers[c]["key"], share=design.share) for c in ids)
        part.notes.append(f"routing chose what was rated: the estimates use the audit share only ({len(part.labels)} "
                          f"of its {_count(audit, 'answer')} rated; ratings of "
                          f"{_count(len(rated) - len(part.labels), 'routed answer')} weigh 0)")
    else:
        part.labels = rated
    if not part.labels:
        return part
    y = [view.y(c) for c in part.labels]
    by_rater = dict(ratings=view.normalised(part.labels), raters=view.who(part.labels), severity=severity)
    part.human = stats.classical_mean(y, min_questions=config.min_questions, **by_rater)
    if part.human.ci is None:
        part.notes.append(_too_few(len(part.labels), config))
    elif not preds.ppi_allowed:
        pass  # no cross-fit at all: the page says so once, above the table (ppi_note)
    elif crossfit_missing:
        part.notes.append(f"cross-fit stale: {_count(crossfit_missing, 'answer')} without a cross-fitted prediction")
    else:
        part.with_orca = stats.ppi_mean(y=y, yhat=[preds.mu[c] for c in part.labels],
                                        yhat_all=[preds.mu[c] for c in ids],
                                        min_questions=max(3, config.min_questions), **by_rater)
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


def _displayed(data: LeaderboardData, parts: list[_Part], ids: list[int]) -> tuple[dict, list[str]]:
    """The displayed means of the ratings the estimates use: {"ratings", "ratings_all", "mean_rating",
    "sd_rating"} (1–5; under the active design each rating weighs its answer's 1/π ÷ k) and a note when they
    leave ratings out."""
    everything = [s for c in ids for s in data.scores.get(c, [])]
    values, weights = [], []
    for p in parts:
        for c in p.labels:
            scores = data.scores[c]
            w = (p.weights or {}).get(c, 1.0) / (len(scores) if p.weights else 1.0)
            values += list(scores)
            weights += [w] * len(scores)
    out = {"ratings": len(values), "ratings_all": len(everything), "mean_rating": None, "sd_rating": None}
    if values:
        v, w = np.asarray(values, dtype=np.float64), np.asarray(weights)
        mean = float(np.sum(w * v) / np.sum(w))
        out["mean_rating"] = mean
        if v.size >= 2:
            out["sd_rating"] = math.sqrt(float(np.sum(w * (v - mean) ** 2) / np.sum(w)) * v.size / (v.size - 1))
    notes = []
    if len(values) < len(everything):
        notes.append(f"mean rating ± sd and ratings: the {_count(len(values), 'rating')} the estimate uses (audit "
                     f"share, drawn answers, current design) of {len(everything)} valid; the others (early-stopped, "
                     "selected or of another design) are left out")
    return out, notes


def _row(data: LeaderboardData, lalm: str, strata: dict[int, list[int]], preds, config,
         population: Population | None, epochs_rated: dict[int, set[int]],
         severities: dict[int, Severity]) -> tuple[LeaderboardRow, list[_Part]]:
    """One LALM's row from its answers grouped by benchmark (``strata``)."""
    ids = [c for group in strata.values() for c in group]
    designs = {bench: design_of(data, bench, epochs_with_ratings=epochs_rated.get(bench, set()))
               for bench in strata}
    parts = [_part(data, group, preds, design=designs[bench], config=config, population=population,
                   severity=severities.get(bench)) for bench, group in sorted(strata.items())]
    notes = list(dict.fromkeys([n for p in parts for n in p.notes]
                               + [d.text for _, d in sorted(designs.items()) if d.text]))
    if len(parts) > 1 and any(p.human is not None and p.human.ci is None for p in parts):
        notes.append("a benchmark with too few questions for an interval leaves the combined estimate without one")
    shown, shown_notes = _displayed(data, parts, ids)
    judges = {}
    for judge, judged in sorted(data.judges.items()):
        values = [normalise_rating(judged[c]) for c in ids if c in judged]
        judges[judge] = float(np.mean(values)) if values else None
    predicted = [c for c in ids if c in preds.mu]
    orca = None
    if predicted:
        orca = {"mu": float(np.mean([preds.mu[c] for c in predicted])),
                "var": float(np.mean([preds.var[c] for c in predicted])), "n": len(predicted)}
    kinds = {d.sampling for d in designs.values()}
    estimands = {p.estimand for p in parts if p.estimand != ALL_ANSWERS}
    row = LeaderboardRow(
        lalm=lalm, answers=len(ids), rated_answers=sum(bool(data.scores.get(c)) for c in ids),
        labels=sum(len(p.labels) for p in parts), human=_combine(parts, "human"),
        with_orca=_combine(parts, "with_orca"), sampling=kinds.pop() if len(kinds) == 1 else "mixed",
        notes=notes + shown_notes, answer_words=float(np.mean([data.answers[c]["words"] for c in ids])),
        judges=judges, orca=orca, design="; ".join(dict.fromkeys(d.text for d in designs.values() if d.text)),
        estimand="; ".join(sorted(estimands)) or ALL_ANSWERS, **shown,
    )
    return row, parts


def _epochs_rated(data: LeaderboardData, answer_ids: list[int]) -> dict[int, set[int]]:
    """{benchmark pk: the design epochs its ratings were given in} (empty without ``rating_epoch``)."""
    marks = getattr(data, "rating_epoch", None) or {}
    out: dict[int, set[int]] = defaultdict(set)
    for c in answer_ids:
        out[data.answers[c]["benchmark_id"]].update(int(e) for e in marks.get(c) or [])
    return out


def benchmark_designs(data: LeaderboardData, answer_ids) -> dict[int, Design]:
    """{benchmark pk: the design its estimates use} for the benchmarks of ``answer_ids`` (:func:`design_of` over
    the epochs their ratings were given in): the rows and the verdicts count the same ratings."""
    epochs_rated = _epochs_rated(data, list(answer_ids))
    return {bench: design_of(data, bench, epochs_with_ratings=epochs_rated.get(bench, set()))
            for bench in {data.answers[c]["benchmark_id"] for c in answer_ids}}


def benchmark_severities(data: LeaderboardData, answer_ids) -> dict[int, Severity]:
    """{benchmark pk: the annotators' severity spread estimated from all valid ratings of its answers among
    ``answer_ids``, every LALM's} (:func:`modelling.leaderboard.raters.severity_of`); empty when the annotators of
    the ratings are unknown. One estimate per benchmark, shared by its rows: the same annotators rate every LALM,
    and a row's own ratings (5 annotators, unequal weights) estimate it far less well."""
    raters = getattr(data, "raters", None) or None
    if raters is None:
        return {}
    by_bench: dict[int, dict[int, list[float]]] = defaultdict(dict)
    for c in answer_ids:
        if data.scores.get(c):
            by_bench[data.answers[c]["benchmark_id"]][c] = [normalise_rating(s) for s in data.scores[c]]
    return {bench: severity_of(scores, raters) for bench, scores in by_bench.items()}


def _rows(data: LeaderboardData, answer_ids: list[int], preds, *, config, labels_out: dict | None = None,
          population: Population | None = None) -> list[LeaderboardRow]:
    """One row per LALM with answers among ``answer_ids``, best headline estimate first, unrated rows last.
    ``labels_out`` (when given) receives {LALM: {candidate id: weight}} of the labels used; ``population`` the
    store's population checks (:func:`modelling.leaderboard.population.population_load`; None: none)."""
    by_lalm: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for cid in answer_ids:
        a = data.answers[cid]
        by_lalm[a["lalm"]][a["benchmark_id"]].append(cid)
    epochs_rated = _epochs_rated(data, answer_ids)
    severities = benchmark_severities(data, answer_ids)
    rows = []
    for lalm, strata in by_lalm.items():
        row, parts = _row(data, lalm, strata, preds, config, population, epochs_rated, severities)
        if labels_out is not None:
            labels_out[lalm] = {c: (p.weights or {}).get(c, 1.0) for p in parts for c in p.labels}
        rows.append(row)
    rows.sort(key=lambda r: (r.estimate is None, -(r.estimate if r.estimate is not None else
                                                    (r.orca or {}).get("mu") or 0), r.lalm))
    return rows

