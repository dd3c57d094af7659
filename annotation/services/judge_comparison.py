"""LLM judges against humans: each judge's scores beside the mean human rating, and the fusion of several judges.

ORCA paper, section 5.6 and Table 6: per judge, Spearman ρ and Kendall τ against the mean human rating, MAE on the
normalised scale, and how many candidates it could not score; an average and a learned fusion of the judges.
Read by the judges' comparison page (``annotation.views.judges``); the judge runs that write the scores are in
:mod:`annotation.services.judging`.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from django.db.models import Avg, Count, F, Q

from annotation.access import STAFF, require_role
from annotation.judging.probability import GENERATE, PROBABILITY, PROBABILITY_YESNO
from annotation.models import Benchmark, CandidateAnswer, Judge, JudgeRating, Question

#: The note shown beside a judge's row on the comparison page: how its scores were made.
MODE_NOTES = {GENERATE: "generated reply, parsed", PROBABILITY: "probability: Σ p(k)·k",
              PROBABILITY_YESNO: "probability: 1 + 4·P(Yes)"}
#: ``prompt_variant`` of a toolkit judge's scores imported with a table (``annotation.services.importers``), and
#: their note.
IMPORTED_VARIANT = "imported"
IMPORTED_NOTE = "imported from the toolkit's file, its scale mapped to 1–5"


def _note(entry: dict) -> str:
    return IMPORTED_NOTE if entry.get("imported") else MODE_NOTES.get(entry["mode"], "")


def judge_list_for_staff(*, user):
    """All judges with their rating and failure counts. Raises ``PermissionDenied`` for non-staff."""
    require_role(user, *STAFF)
    return Judge.objects.annotate(
        n_ratings=Count("ratings"), n_failures=Count("ratings", filter=Q(ratings__score__isnull=True))
    ).order_by("name")


def _readable(rows, *, user, path: str):
    """``rows`` of the benchmarks ``user`` reads (``annotation.teams.scope``); all rows when ``user`` is None."""
    from annotation.teams.scope import readable

    return rows if user is None else readable(rows, user=user, path=path)


def human_means(*, benchmark: Benchmark | None = None, min_ratings: int = 2, user=None) -> dict[int, float]:
    """``{candidate_id: mean valid human score}`` for candidates with at least ``min_ratings`` valid scores (on
    current question versions: ``annotation.selectors.rating_counting_queryset``), of the benchmarks ``user`` reads
    when given."""
    from annotation.selectors import rating_counting_queryset

    qs = _readable(rating_counting_queryset().filter(score__isnull=False), user=user,
                   path="candidate__question_version__question__benchmark")
    if benchmark is not None:
        qs = qs.filter(candidate__question_version__question__benchmark=benchmark)
    rows = qs.values("candidate_id").annotate(n=Count("pk"), mean=Avg("score")).filter(n__gte=min_ratings).order_by()
    return {row["candidate_id"]: float(row["mean"]) for row in rows}


def judge_scores(*, benchmark: Benchmark | None = None, user=None) -> dict[str, dict]:
    """``{label: {"scores": {candidate_id: score}, "expected": {...}, "failures": n, "mode": m}}`` per judge (of the
    benchmarks ``user`` reads when given).

    Labels: the judge's name; imported/legacy rows without a judge row are ``"<judge_name> / <prompt_variant>"``.
    ``expected`` holds generate-mode expected scores only (in the ``probability`` mode the score *is* Σ p(k)·k);
    ``mode`` is the mode of the judge's latest row.
    """
    qs = _readable(JudgeRating.objects.select_related("judge"), user=user,
                   path="candidate__question_version__question__benchmark")
    if benchmark is not None:
        qs = qs.filter(candidate__question_version__question__benchmark=benchmark)
    out: dict[str, dict] = {}
    for judge_name, variant, judge_id, name, candidate_id, score, expected, mode in qs.values_list(
        "judge_name", "prompt_variant", "judge_id", "judge__name", "candidate_id", "score", "expected_score", "mode"
    ).order_by("pk"):
        label = name if judge_id else f"{judge_name} / {variant}"
        entry = out.setdefault(label, {"scores": {}, "expected": {}, "failures": 0, "mode": mode,
                                       "imported": not judge_id and variant == IMPORTED_VARIANT})
        entry["mode"] = mode
        if score is None:
            entry["failures"] += 1
            continue
        entry["scores"][candidate_id] = float(score)
        if expected is not None and mode == GENERATE:
            entry["expected"][candidate_id] = float(expected)
    return out


@dataclass(frozen=True)
class JudgeCoverage:
    """How many of the benchmark's candidate answers (current versions) a judge scored: ``scored`` + ``failures``
    + missing = ``candidates``."""

    label: str
    mode: str
    candidates: int
    scored: int
    failures: int

    @property
    def missing(self) -> int:
        return self.candidates - self.scored - self.failures


def judge_coverage(*, benchmark: Benchmark | None = None, user=None) -> list[JudgeCoverage]:
    """Per judge: scored and failed candidate answers among the current versions' ones (of the benchmarks ``user``
    reads when given; judges of the platform by name, imported judges' scores as
    ``"<judge_name> / <prompt_variant>"``)."""
    current = CandidateAnswer.objects.filter(question_version__question__current_version=F("question_version"))
    current = _readable(current, user=user, path="question_version__question__benchmark")
    if benchmark is not None:
        current = current.filter(question_version__question__benchmark=benchmark)
    total = current.count()
    rows = (
        JudgeRating.objects.filter(judge__isnull=False, candidate__in=current)
        .values("judge__name", "judge__mode")
        .annotate(scored=Count("pk", filter=Q(score__isnull=False)), failures=Count("pk", filter=Q(score__isnull=True)))
        .order_by("judge__name")
    )
    imported = (
        JudgeRating.objects.filter(judge__isnull=True, candidate__in=current)
        .values("judge_name", "prompt_variant", "mode")
        .annotate(scored=Count("pk", filter=Q(score__isnull=False)), failures=Count("pk", filter=Q(score__isnull=True)))
        .order_by("judge_name", "prompt_variant")
    )
    return [JudgeCoverage(label=row["judge__name"], mode=row["judge__mode"], candidates=total, scored=row["scored"],
                          failures=row["failures"]) for row in rows] + [
        JudgeCoverage(label=f"{row['judge_name']} / {row['prompt_variant']}", mode=row["mode"], candidates=total,
                      scored=row["scored"], failures=row["failures"]) for row in imported]


@dataclass(frozen=True)
class AgreementRow:
    """One judge (or fusion) against the mean human rating.

    ``n``: items compared; ``spearman``/``kendall``: rank correlations (None with < 3 items or constant
    scores); ``mae``: mean absolute error on the 1–5 scale; ``mae_mu``: the same on the paper's 0–1 scale
    ((score − 1) / 4, i.e. MAE_μ of Table 2); ``failures``: unparsable replies stored.
    """

    label: str
    n: int
    spearman: float | None
    kendall: float | None
    mae: float | None
    mae_mu: float | None
    failures: int = 0
    note: str = ""


def agreement_row(*, label: str, predicted: dict[int, float], human: dict[int, float], failures: int = 0,
                  note: str = "") -> AgreementRow:
    """Spearman ρ, Kendall τ and MAE of ``predicted`` against ``human`` over their common candidates (scipy)."""
    from scipy.stats import kendalltau, spearmanr

    keys = sorted(set(predicted) & set(human))
    xs = [predicted[k] for k in keys]
    ys = [human[k] for k in keys]
    rho = tau = mae = None
    if keys:
        mae = sum(abs(x - y) for x, y in zip(xs, ys, strict=True)) / len(keys)
    if len(keys) >= 3 and len(set(xs)) > 1 and len(set(ys)) > 1:
        rho = float(spearmanr(xs, ys).statistic)
        tau = float(kendalltau(xs, ys).statistic)
        rho = None if math.isnan(rho) else rho
        tau = None if math.isnan(tau) else tau
    return AgreementRow(label=label, n=len(keys), spearman=rho, kendall=tau, mae=mae,
                        mae_mu=mae / 4 if mae is not None else None, failures=failures, note=note)


def fusion_average(*, scores_by_judge: dict[str, dict[int, float]]) -> dict[int, float]:
    """Simple average of the judges' scores per candidate (over the judges that scored it)."""
    sums: dict[int, list[float]] = {}
    for scores in scores_by_judge.values():
        for candidate_id, score in scores.items():
            sums.setdefault(candidate_id, []).append(score)
    return {k: statistics.fmean(v) for k, v in sums.items()}


@dataclass
class LearnedFusion:
    """Weighted judge fusion with per-judge calibration (ORCA paper, section 5.6 "Aggregation").

    Each judge's score is first calibrated to the human scale with isotonic regression (monotone, clipped to
    1–5); the calibrated scores are then combined with non-negative least-squares weights plus an intercept.
    ``judges`` fixes the input order; ``weights`` and ``intercept`` are the fitted combination.
    """

    judges: list[str]
    calibrators: list = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    intercept: float = 0.0
    n_train: int = 0

    def predict(self, rows: list[list[float]]) -> list[float]:
        """Fused scores (1–5) for rows of raw judge scores in ``judges`` order."""
        import numpy as np

        x = np.asarray(rows, dtype=float)
        calibrated = np.column_stack([cal.predict(x[:, i]) for i, cal in enumerate(self.calibrators)])
        return list(np.clip(calibrated @ np.asarray(self.weights) + self.intercept, 1.0, 5.0))


def fusion_fit(*, scores_by_judge: dict[str, dict[int, float]], human: dict[int, float],
               train_ids: set[int]) -> LearnedFusion | None:
    """Fit :class:`LearnedFusion` on the training candidates that every judge scored (scikit-learn).

    Returns None with fewer than 2 judges or fewer than 10 such training candidates.
    """
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LinearRegression

    judges = sorted(scores_by_judge)
    if len(judges) < 2:
        return None
    keys = sorted(k for k in train_ids & set(human) if all(k in scores_by_judge[j] for j in judges))
    if len(keys) < 10:
        return None
    y = [human[k] for k in keys]
    fusion = LearnedFusion(judges=judges, n_train=len(keys))
    columns = []
    for judge in judges:
        x = [scores_by_judge[judge][k] for k in keys]
        calibrator = IsotonicRegression(y_min=1.0, y_max=5.0, out_of_bounds="clip").fit(x, y)
        fusion.calibrators.append(calibrator)
        columns.append(calibrator.predict(x))
    import numpy as np

    design = np.column_stack(columns)
    regression = LinearRegression(positive=True).fit(design, y)
    fusion.weights = [float(w) for w in regression.coef_]
    fusion.intercept = float(regression.intercept_)
    return fusion


@dataclass(frozen=True)
class JudgeComparison:
    """The comparison page's data: ``rows`` over all items with ≥ 2 valid human ratings (each judge, its expected
    score where present, the simple average); ``held_out_rows`` on the dev+test questions (judges, average and the
    learned fusion fitted on train); ``n_items`` human-rated items; ``fusion`` the fitted model or None;
    ``coverage`` each judge's scored share of all candidate answers in scope, rated by humans or not."""

    n_items: int
    rows: list[AgreementRow]
    held_out_rows: list[AgreementRow]
    fusion: LearnedFusion | None
    n_train: int
    n_held_out: int
    coverage: list[JudgeCoverage] = field(default_factory=list)


def judge_comparison(*, user, benchmark: Benchmark | None = None, min_human_ratings: int = 2,
                     seed: int = 13) -> JudgeComparison:
    """Each judge's Spearman ρ, Kendall τ and MAE against the mean human rating, plus the two fusions.

    Items: candidate answers with at least ``min_human_ratings`` valid human scores. The learned fusion is fitted
    on the train split of their questions (``split_unseen_questions``, 8:1:1 stratified, ``seed``) and evaluated
    with the judges on dev + test; over ``benchmark`` or every benchmark ``user`` reads (``annotation.teams.scope``:
    an expert's team's; an admin's all). Raises ``PermissionDenied`` for non-staff.
    """
    from annotation.services.splits import split_unseen_questions

    require_role(user, *STAFF)
    human = human_means(benchmark=benchmark, min_ratings=min_human_ratings, user=user)
    per_judge = judge_scores(benchmark=benchmark, user=user)
    scores_by_judge = {label: entry["scores"] for label, entry in per_judge.items() if entry["scores"]}
    rows = [agreement_row(label=label, predicted=entry["scores"], human=human, failures=entry["failures"],
                          note=_note(entry))
            for label, entry in sorted(per_judge.items())]
    for label, entry in sorted(per_judge.items()):
        if entry["expected"]:
            rows.append(agreement_row(label=f"{label} (expected score)", predicted=entry["expected"], human=human,
                                      note="Σ p(k)·k from log-probabilities"))
    average = fusion_average(scores_by_judge=scores_by_judge)
    if len(scores_by_judge) >= 2:
        rows.append(agreement_row(label="Average of judges", predicted=average, human=human, note="fusion"))

    candidate_question = dict(
        CandidateAnswer.objects.filter(pk__in=human).values_list("pk", "question_version__question_id")
    )
    questions = Question.objects.filter(pk__in=set(candidate_question.values())).values_list(
        "pk", "modality", "category"
    )
    split = split_unseen_questions(questions=list(questions), seed=seed)
    train_ids = {c for c, q in candidate_question.items() if q in split["train"]}
    held_ids = set(human) - train_ids
    fusion = fusion_fit(scores_by_judge=scores_by_judge, human=human, train_ids=train_ids)
    held_human = {k: v for k, v in human.items() if k in held_ids}
    held_rows = [agreement_row(label=label, predicted=scores, human=held_human,
                               note=_note(per_judge[label]))
                 for label, scores in sorted(scores_by_judge.items())]
    if len(scores_by_judge) >= 2:
        held_rows.append(agreement_row(label="Average of judges", predicted=average, human=held_human, note="fusion"))
    if fusion is not None:
        keys = sorted(k for k in held_ids if all(k in scores_by_judge[j] for j in fusion.judges))
        predicted = dict(zip(keys, fusion.predict([[scores_by_judge[j][k] for j in fusion.judges] for k in keys]),
                             strict=True)) if keys else {}
        held_rows.append(agreement_row(label="Learned weighted fusion", predicted=predicted, human=held_human,
                                       note=f"calibrated + weighted, fitted on {fusion.n_train} train items"))
    return JudgeComparison(n_items=len(human), rows=rows, held_out_rows=held_rows, fusion=fusion,
                           n_train=len(train_ids), n_held_out=len(held_ids),
                           coverage=judge_coverage(benchmark=benchmark, user=user))
