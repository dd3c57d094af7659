"""The LALM leaderboard over the store: per-LALM human, judge, ORCA-only and prediction-powered estimates.

Estimand. For an LALM on a benchmark: *the LALM's mean normalised human rating over its answers on this
benchmark*, i.e. the mean over its candidate answers (current versions) of each answer's mean valid rating mapped
to y = (r − 1)/4 ∈ [0, 1].

* ``mean_correctness`` estimates it from the rated answers alone (their mean), with a 95 % CI from a cluster
  bootstrap over questions (:func:`modelling.leaderboard.stats.cluster_bootstrap_means`). It assumes the rated
  answers are a random sample of the LALM's answers (true under uniform assignment; not under routing that
  prefers some answers — then the active/PPI estimate with weights is the right one).
* ``ppi`` adds ORCA's μ on *all* the LALM's answers (PPI++ with power tuning, ``ppi_py``;
  :func:`modelling.leaderboard.stats.ppi_mean`). It needs predictions from models that never trained on the
  answers they predict: a finished cross-fit (:mod:`modelling.leaderboard.crossfit`). With only in-sample
  predictions (the active model, trained on rated answers) it is refused and ``ppi`` is null; the human-only CI
  stands.
* ``orca`` is ORCA's mean μ and mean σ² over all the LALM's answers, rated or not: the only figure for LALMs no
  human rated (the ORCA-only rows).

Heavy imports (matplotlib) happen inside the functions that draw.
"""
from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings
from django.utils import timezone

from modelling.leaderboard import stats
from modelling.leaderboard.selectors import LeaderboardData, leaderboard_data_load
from modelling.orca.data import normalise_rating

#: Grouping keys of ``--by``.
BY_CHOICES = ("modality", "category")
#: Formats of the command and the export.
FORMATS = ("json", "csv", "markdown", "latex")


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
        return PredictionSet(None, "none", note="No ORCA model: train one and run a cross-fit for PPI estimates.")
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


@dataclass
class LeaderboardRow:
    """One LALM (ORCA paper, Table 5, extended). Means on the normalised scale unless named *_rating (1–5)."""

    lalm: str
    answers: int
    rated_answers: int
    ratings: int
    mean_rating: float | None
    sd_rating: float | None
    mean_correctness: float | None
    ci: tuple[float, float] | None
    answer_words: float | None
    judges: dict[str, float | None]
    orca: dict | None
    ppi: dict | None

    @property
    def orca_only(self) -> bool:
        return self.rated_answers == 0

    def as_json(self) -> dict:
        return {
            "lalm": self.lalm, "answers": self.answers, "rated_answers": self.rated_answers, "ratings": self.ratings,
            "mean_rating": self.mean_rating, "sd_rating": self.sd_rating, "mean_correctness": self.mean_correctness,
            "ci": list(self.ci) if self.ci is not None else None, "answer_words": self.answer_words,
            "judges": self.judges, "orca": self.orca, "ppi": self.ppi,
        }


@dataclass
class Leaderboard:
    """The leaderboard of one scope (a benchmark or all), optionally broken down by modality or category."""

    benchmark: str | None
    model_version: str | None
    prediction_source: str
    ppi_note: str
    rows: list[LeaderboardRow]
    pairwise: list[stats.PairwiseDifference]
    agreement: dict[str, dict | None]
    judges: list[str]
    by: str | None = None
    groups: list[tuple[str, list[LeaderboardRow]]] = field(default_factory=list)
    generated_at: str = ""
    question_values: dict[str, dict[int, float]] = field(default_factory=dict)
    question_mu: dict[str, dict[int, float]] = field(default_factory=dict)
    unrated_sigma: dict[str, list[float]] = field(default_factory=dict)
    answered: dict[str, set] = field(default_factory=dict)
    #: Mean valid scored ratings per rated answer (the budget planner's ratings per answer).
    ratings_per_answer: float = 1.0

    def as_json(self) -> dict:
        """The command's ``--json`` shape: {"benchmark", "model_version", "rows": [...]} (+ "by", "groups")."""
        out = {"benchmark": self.benchmark, "model_version": self.model_version,
               "rows": [r.as_json() for r in self.rows]}
        if self.by:
            out["by"] = self.by
            out["groups"] = [{"name": name, "rows": [r.as_json() for r in rows]} for name, rows in self.groups]
        return out

    def as_api(self) -> dict:
        """The API's shape: the JSON shape plus pairwise differences, system-level agreement and notes."""
        out = self.as_json()
        out.update({
            "prediction_source": self.prediction_source,
            "ppi_note": self.ppi_note,
            "pairwise": [p.as_dict() for p in self.pairwise],
            "system_agreement": self.agreement,
            "generated_at": self.generated_at,
        })
        return out


def _round(x, digits: int = 4):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else round(float(x), digits)


def _rows(
    data: LeaderboardData, answer_ids: list[int], preds: PredictionSet, *, resamples: int, seed: int,
) -> list[LeaderboardRow]:
    """One row per LALM with answers among ``answer_ids``, best human estimate first, ORCA-only rows last."""
    by_lalm: dict[str, list[int]] = defaultdict(list)
    for cid in answer_ids:
        by_lalm[data.answers[cid]["lalm"]].append(cid)
    rated = [cid for cid in answer_ids if data.scores.get(cid)]
    boot = stats.cluster_bootstrap_means(
        values=[np.mean([normalise_rating(s) for s in data.scores[c]]) for c in rated],
        clusters=[data.answers[c]["question"] for c in rated],
        groups=[data.answers[c]["lalm"] for c in rated],
        resamples=resamples, seed=seed,
    )
    rows = []
    for lalm, ids in by_lalm.items():
        scores = [s for c in ids for s in data.scores.get(c, [])]
        rated_ids = [c for c in ids if data.scores.get(c)]
        est = boot.get(lalm)
        judges = {}
        for judge, judged in sorted(data.judges.items()):
            values = [normalise_rating(judged[c]) for c in ids if c in judged]
            judges[judge] = _round(np.mean(values)) if values else None
        orca = None
        predicted = [c for c in ids if c in preds.mu]
        if predicted:
            orca = {"mu": _round(np.mean([preds.mu[c] for c in predicted])),
                    "var": _round(np.mean([preds.var[c] for c in predicted]), 5)}
        ppi = None
        if preds.ppi_allowed and len(predicted) == len(ids):
            result = _prediction_powered(data, ids, rated_ids, preds)
            if result is not None:
                ppi = {"estimate": _round(result.estimate), "ci": [_round(v) for v in result.ci]}
        rows.append(LeaderboardRow(
            lalm=lalm, answers=len(ids), rated_answers=len(rated_ids), ratings=len(scores),
            mean_rating=_round(np.mean(scores)) if scores else None,
            sd_rating=_round(np.std(scores, ddof=1)) if len(scores) >= 2 else None,
            mean_correctness=_round(est.estimate) if est else None,
            ci=tuple(_round(v) for v in est.ci) if est and est.ci else None,
            answer_words=_round(np.mean([data.answers[c]["words"] for c in ids]), 2),
            judges=judges, orca=orca, ppi=ppi,
        ))
    rows.sort(key=lambda r: (r.mean_correctness is None,
                             -(r.mean_correctness if r.mean_correctness is not None else (r.orca or {}).get("mu") or 0),
                             r.lalm))
    return rows


def _prediction_powered(data: LeaderboardData, ids: list[int], rated_ids: list[int], preds: PredictionSet):
    """PPI++ over the rated answers, or — when every answer of the LALM was decided by the leaderboard-precision
    policy — the active estimate over the drawn rated answers weighted 1/π; None with fewer than 3 labels (λ and
    the mean are both estimated from them)."""
    yhat_all = np.array([preds.mu[c] for c in ids])
    if all(c in data.inclusion for c in ids):
        sampled = np.array([data.inclusion[c][1] and bool(data.scores.get(c)) for c in ids])
        if sampled.sum() < 3:
            return None
        y = np.array([np.mean([normalise_rating(s) for s in data.scores[c]]) if data.scores.get(c) else np.nan
                      for c in ids])
        return stats.active_mean(y=y, yhat=yhat_all, pi=[data.inclusion[c][0] for c in ids], sampled=sampled)
    if len(rated_ids) < 3:
        return None
    y = [np.mean([normalise_rating(s) for s in data.scores[c]]) for c in rated_ids]
    return stats.ppi_mean(y=y, yhat=[preds.mu[c] for c in rated_ids], yhat_all=yhat_all)


def leaderboard_compute(
    *, benchmark: str | None = None, by: str | None = None, resamples: int | None = None, seed: int = 0,
    data: LeaderboardData | None = None,
) -> Leaderboard:
    """Compute the leaderboard of ``benchmark`` (a name, None = all benchmarks), optionally broken down ``by``
    modality or category.

    Args:
        resamples: bootstrap resamples (default ``MODELLING_BOOTSTRAP_RESAMPLES``).
        seed: bootstrap seed (the figures are reproducible).
        data: preloaded data (default: :func:`leaderboard_data_load`).

    Raises ValueError for an unknown ``by``.
    """
    if by is not None and by not in BY_CHOICES:
        raise ValueError(f"by must be one of {', '.join(BY_CHOICES)}; got {by!r}")
    resamples = settings.MODELLING_BOOTSTRAP_RESAMPLES if resamples is None else resamples
    data = data if data is not None else leaderboard_data_load(benchmark=benchmark)
    preds = leaderboard_predictions(candidate_ids=data.answers)
    ids = sorted(data.answers)
    rows = _rows(data, ids, preds, resamples=resamples, seed=seed)
    order = [r.lalm for r in rows]
    values: dict[str, dict[int, float]] = {name: {} for name in order}
    question_mu: dict[str, dict[int, float]] = {name: {} for name in order}
    unrated_sigma: dict[str, list[float]] = defaultdict(list)
    answered: dict[str, set] = defaultdict(set)
    for cid in ids:
        a = data.answers[cid]
        answered[a["lalm"]].add(a["question"])
        if data.scores.get(cid):
            values[a["lalm"]][a["question"]] = float(np.mean([normalise_rating(s) for s in data.scores[cid]]))
            if cid in preds.mu:
                question_mu[a["lalm"]][a["question"]] = preds.mu[cid]
        elif cid in preds.var:
            unrated_sigma[a["lalm"]].append(math.sqrt(max(0.0, preds.var[cid])))
    rated_order = [name for name in order if values[name]]
    pairwise = stats.pairwise_differences({name: values[name] for name in rated_order})
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
        ppi_note=preds.note, rows=rows, pairwise=pairwise, agreement=agreement, judges=judge_names, by=by,
        generated_at=timezone.now().isoformat(timespec="seconds"), question_values=values,
        question_mu=question_mu, unrated_sigma=dict(unrated_sigma), answered=dict(answered),
        ratings_per_answer=_ratings_per_answer(data),
    )
    if by is not None:
        groups: dict[str, list[int]] = defaultdict(list)
        for cid in ids:
            groups[data.answers[cid][by] or "(none)"].append(cid)
        board.groups = [(name, _rows(data, groups[name], preds, resamples=resamples, seed=seed))
                        for name in sorted(groups)]
    return board


def _ratings_per_answer(data: LeaderboardData) -> float:
    n_scores = [len(s) for s in data.scores.values() if s]
    return float(np.mean(n_scores)) if n_scores else 1.0


def leaderboard_budget_plan(*, board: Leaderboard, a: str, b: str) -> stats.BudgetPlan:
    """About how many more ratings (uniform human-only vs active with ORCA) make ``a`` − ``b`` significant.

    Raises ValueError when the two LALMs share fewer than 2 rated questions.
    """
    va, vb = board.question_values.get(a, {}), board.question_values.get(b, {})
    shared = sorted(set(va) & set(vb))
    if len(shared) < 2:
        raise ValueError(f"{a} and {b} share {len(shared)} rated questions; the planner needs at least 2")
    ma, mb = board.question_mu.get(a, {}), board.question_mu.get(b, {})
    predicted = None
    if board.prediction_source == "crossfit" and all(q in ma and q in mb for q in shared):
        predicted = [ma[q] - mb[q] for q in shared]
    return stats.budget_plan(
        diffs=[va[q] - vb[q] for q in shared], ratings_per_answer=board.ratings_per_answer,
        available_pairs=len(board.answered.get(a, set()) & board.answered.get(b, set())),
        predicted_diffs=predicted,
        sigma_unrated=(board.unrated_sigma.get(a, []) + board.unrated_sigma.get(b, [])) if predicted else None,
    )


# --- renderings ---------------------------------------------------------------------------------------------------


def _fmt(x, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def _ci(ci) -> str:
    return "–" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def table_columns(board: Leaderboard) -> list[str]:
    """Column headers of the flat table (Markdown, CSV, LaTeX, the datasheet)."""
    return (["LALM", "answers", "rated answers", "ratings", "mean rating (1–5)", "sd", "mean correctness",
             "95% CI (cluster bootstrap)", "words"] + [f"judge: {j}" for j in board.judges]
            + ["ORCA μ", "ORCA σ²", "PPI estimate", "PPI 95% CI"])


def table_cells(board: Leaderboard, row: LeaderboardRow) -> list[str]:
    lalm = row.lalm + (" (ORCA only)" if row.orca_only else "")
    return ([lalm, str(row.answers), str(row.rated_answers), str(row.ratings), _fmt(row.mean_rating, 2),
             _fmt(row.sd_rating, 2), _fmt(row.mean_correctness), _ci(row.ci), _fmt(row.answer_words, 1)]
            + [_fmt(row.judges.get(j)) for j in board.judges]
            + [_fmt((row.orca or {}).get("mu")), _fmt((row.orca or {}).get("var"), 4),
               _fmt((row.ppi or {}).get("estimate")), _ci((row.ppi or {}).get("ci"))])


def _sections(board: Leaderboard) -> list[tuple[str | None, list[LeaderboardRow]]]:
    return [(None, board.rows)] + [(f"{board.by}: {name}", rows) for name, rows in board.groups]


def leaderboard_markdown(board: Leaderboard, *, heading_level: int = 2) -> str:
    """The table(s) as Markdown, with the scope, the model version and the PPI note."""
    h = "#" * heading_level
    lines = [f"{h} Leaderboard: {board.benchmark or 'all benchmarks'}", "",
             f"ORCA model version: {board.model_version or 'none'} ({board.prediction_source}). "
             "Means on the normalised scale (r − 1)/4 unless marked 1–5.", ""]
    if board.ppi_note:
        lines += [board.ppi_note, ""]
    for title, rows in _sections(board):
        if title:
            lines += [f"{h}# {title}", ""]
        cols = table_columns(board)
        lines.append("| " + " | ".join(cols) + " |")
        lines.append("|" + "---|" * len(cols))
        lines += ["| " + " | ".join(table_cells(board, r)) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def leaderboard_csv(board: Leaderboard) -> str:
    """The table(s) as CSV; a ``group`` column holds the breakdown value ('' for the overall rows)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["group"] + table_columns(board))
    for title, rows in _sections(board):
        for r in rows:
            writer.writerow([title or ""] + table_cells(board, r))
    return out.getvalue()


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "_": r"\_", "#": r"\#", "$": r"\$", "{": r"\{",
        "}": r"\}", "–": "--", "μ": r"$\mu$", "σ": r"$\sigma$", "²": r"$^2$"}


def _tex(text: str) -> str:
    return "".join(_TEX.get(ch, ch) for ch in text)


def leaderboard_latex(board: Leaderboard) -> str:
    """The table(s) as LaTeX ``tabular`` environments (booktabs rules)."""
    parts = []
    for title, rows in _sections(board):
        cols = table_columns(board)
        body = [r"\begin{tabular}{l" + "r" * (len(cols) - 1) + "}", r"\toprule",
                " & ".join(_tex(c) for c in cols) + r" \\", r"\midrule"]
        body += [" & ".join(_tex(c) for c in table_cells(board, r)) + r" \\" for r in rows]
        body += [r"\bottomrule", r"\end{tabular}"]
        caption = f"% {title}" if title else f"% Leaderboard: {board.benchmark or 'all benchmarks'}; ORCA " \
                                             f"{board.model_version or 'none'}"
        parts.append("\n".join([caption] + body))
    return "\n\n".join(parts) + "\n"


def leaderboard_datasheet_section(benchmark) -> str:
    """The datasheet's leaderboard section for a dataset export of ``benchmark`` (a ``Benchmark`` or None)."""
    board = leaderboard_compute(benchmark=benchmark.name if benchmark is not None else None)
    return leaderboard_markdown(board, heading_level=2)


def leaderboard_render(board: Leaderboard, *, fmt: str) -> str:
    """``board`` in one of :data:`FORMATS`."""
    import json

    if fmt == "json":
        return json.dumps(board.as_json())
    return {"csv": leaderboard_csv, "markdown": leaderboard_markdown, "latex": leaderboard_latex}[fmt](board)


def forest_plot_svg(board: Leaderboard) -> str:
    """Forest plot of the overall rows: human mean with its cluster-bootstrap CI, PPI with its CI, ORCA's mean μ.

    Returns an inline ``<svg …>`` string (matplotlib, Agg backend, no pyplot state; as the agreement chart).
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    rows = board.rows
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "orca-leaderboard", "font.size": 9}):
        fig = Figure(figsize=(8, 0.35 * max(len(rows), 3) + 1.0), layout="constrained")
        ax = fig.subplots()
        ys = np.arange(len(rows))[::-1]
        for y, r in zip(ys, rows):
            if r.mean_correctness is not None:
                lo, hi = r.ci or (r.mean_correctness, r.mean_correctness)
                ax.errorbar(r.mean_correctness, y + 0.12, xerr=[[r.mean_correctness - lo], [hi - r.mean_correctness]],
                            fmt="o", color="tab:blue", capsize=3, markersize=4,
                            label="human (95 % cluster bootstrap)" if y == ys[0] else None)
            if r.ppi is not None:
                est = r.ppi["estimate"]
                lo, hi = r.ppi["ci"]
                ax.errorbar(est, y - 0.12, xerr=[[max(0, est - lo)], [max(0, hi - est)]], fmt="s",
                            color="tab:green", capsize=3, markersize=4, label="PPI++ (human + ORCA)")
            if r.orca is not None:
                ax.plot(r.orca["mu"], y, marker="x", color="tab:orange", linestyle="none", label="ORCA mean μ")
        ax.set_yticks(ys, [r.lalm + (" (ORCA only)" if r.orca_only else "") for r in rows])
        ax.set_xlim(0, 1)
        ax.set_xlabel("mean correctness (normalised, (r − 1)/4)")
        ax.grid(True, axis="x", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        if unique:
            ax.legend(unique.values(), unique.keys(), loc="lower right", fontsize=7)
        if not rows:
            ax.text(0.5, 0.5, "no candidate answers yet", ha="center", va="center", transform=ax.transAxes)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]


def _leaderboard_data_state(*, benchmark: str | None, by: str | None) -> tuple:
    """What the leaderboard reads, as a tuple that changes whenever its figures can: the valid ratings, the ORCA
    predictions (cross-fitted ones included), the candidate answers, the judges' scores and active flags, and the
    routing decisions (their inclusion probabilities weight the active estimate). A handful of aggregate queries."""
    from django.db.models import Count, Max, Q

    from annotation.models import CandidateAnswer, JudgeRating
    from modelling.models import RoutingDecision
    from modelling.selectors import valid_ratings_fingerprint
    from modelling.services.agreement_cache import predictions_state

    answers = CandidateAnswer.objects.aggregate(n=Count("id"), last=Max("id"))
    judged = JudgeRating.objects.aggregate(n=Count("id"), last=Max("id"),
                                          inactive=Count("id", filter=Q(judge__is_active=False)))
    routed = RoutingDecision.objects.aggregate(last=Max("id"))
    return (benchmark or "-", by or "-", valid_ratings_fingerprint(), *predictions_state(),
            answers["n"], answers["last"], judged["n"], judged["last"], judged["inactive"], routed["last"],
            settings.MODELLING_BOOTSTRAP_RESAMPLES)


def leaderboard_cached(
    *, benchmark: str | None = None, by: str | None = None,
) -> tuple[Leaderboard, str]:
    """(leaderboard, forest plot SVG) of ``benchmark`` and ``by`` as :func:`leaderboard_compute` and
    :func:`forest_plot_svg` give them, computed once per change of the data they
    read (:func:`_leaderboard_data_state`) and kept in the cache, so the page and the API do not bootstrap and
    draw on every request (about 0.6 s on the seed-108 data)."""
    from modelling.services.agreement_cache import cached_by_data

    def compute():
        data = leaderboard_data_load(benchmark=benchmark)
        board = leaderboard_compute(benchmark=benchmark, by=by, data=data)
        return board, forest_plot_svg(board)

    return cached_by_data(name="leaderboard-board-svg", state=_leaderboard_data_state(benchmark=benchmark, by=by),
                          compute=compute)
