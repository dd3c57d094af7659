"""Reads of the leaderboard: the store's answers, ratings, judge scores and how each benchmark's answers were
chosen for rating.

Only candidate answers on their question's *current* version count, and only their *valid* scored ratings
(``is_valid=True``, score 1–5, made on that version): a correction makes the old version's ratings stop counting.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import F, Q

from annotation.crowd.items import candidates_without_quality_items
from annotation.models import CandidateAnswer, JudgeRating, Rating

#: How a benchmark's rated answers were chosen (``LeaderboardData.sampling``).
UNIFORM, ROUTED, ACTIVE = "uniform", "routed", "active"
#: Breakdowns every benchmark has (question fields); candidate metadata names (README, "Your own benchmark") add
#: their own.
BY_QUESTION_FIELDS = ("modality", "category")


@dataclass
class LeaderboardData:
    """Everything the leaderboard is computed from, one benchmark or all.

    Attributes:
        answers: {candidate id: {lalm, question, benchmark, benchmark_id, modality, category, words, key,
            metadata}} — every candidate answer on its question's current version; ``question`` is the question's
            pk, ``words`` the answer's length in whitespace-separated words, ``key`` its question's random key
            (0–1; every answer to the question has the same: the queue's order and the audit share, key < share),
            ``metadata`` its candidate metadata ({name: text}, e.g. {"type": "short"}).
        scores: {candidate id: [score 1–5, ...]} valid scored ratings made on the current version, oldest first.
        raters: {candidate id: [annotator id, ...]} aligned with ``scores`` (who gave each score).
        rated_at: {candidate id: [POSIX seconds, ...]} aligned with ``scores`` (when each rating was made; an
            imported rating: when it was imported).
        rating_epoch: {candidate id: [design epoch number, ...]} aligned with ``scores``: the epoch of the
            answer's benchmark in which each rating was made (``epochs``).
        judges: {judge label: {candidate id: score 1–5}} of active judges (and imported judge ratings), parsed
            scores only.
        sampling: {benchmark pk: ``uniform`` | ``routed`` | ``active``}: ``active`` when its answers carry the
            leaderboard-precision policy's fixed draws, ``routed`` when routing by disagreement ever decided one of
            its answers (selection by priority, early stops), else ``uniform`` (the queue's random-key order).
        audit_share: {benchmark pk: its audit share (0–1)}.
        design: {candidate id: (π, u)} of answers with a fixed draw (drawn when u < π): π the answer's own, u its
            question's (shared by every LALM's answer to the question). On a benchmark that ever used leaderboard
            precision every answer has one (answers created later are drawn when first read).
        epochs: {benchmark pk: [{"number", "policy" ("uniform" | "routed" | "active"), "audit_share" (routed: 0–1,
            else None), "started" (ISO 8601), "reason"}, ...]} oldest first; the last is the current design
            (``modelling.services.design``).
    """

    answers: dict[int, dict] = field(default_factory=dict)
    scores: dict[int, list[int]] = field(default_factory=dict)
    judges: dict[str, dict[int, float]] = field(default_factory=dict)
    sampling: dict[int, str] = field(default_factory=dict)
    audit_share: dict[int, float] = field(default_factory=dict)
    design: dict[int, tuple[float, float]] = field(default_factory=dict)
    raters: dict[int, list[int]] = field(default_factory=dict)
    rated_at: dict[int, list[float]] = field(default_factory=dict)
    rating_epoch: dict[int, list[int]] = field(default_factory=dict)
    epochs: dict[int, list[dict]] = field(default_factory=dict)


def _current(qs, prefix: str = ""):
    return qs.filter(**{f"{prefix}question_version": F(f"{prefix}question_version__question__current_version")})


def leaderboard_data_load(*, benchmark: str | None = None) -> LeaderboardData:
    """Load the answers, valid ratings, judge scores and sampling of ``benchmark`` (a name; None = every
    benchmark)."""
    data = LeaderboardData()
    # Gold items and attention checks are the platform's own test items, not answers of an LALM.
    answers = _current(candidates_without_quality_items(CandidateAnswer.objects.all()))
    if benchmark is not None:
        answers = answers.filter(question_version__question__benchmark__name=benchmark)
    q = "question_version__question__"
    for pk, lalm, question, bench, bench_id, modality, category, text, key, metadata in answers.values_list(
        "pk", "lalm__name", q + "id", q + "benchmark__name", q + "benchmark_id", q + "modality", q + "category",
        "text", q + "random_key", "metadata",
    ).order_by("pk").iterator(chunk_size=5000):
        data.answers[pk] = {"lalm": lalm, "question": question, "benchmark": bench, "benchmark_id": bench_id,
                            "modality": modality, "category": category or "", "words": len(text.split()),
                            "key": key, "metadata": metadata or {}}
    ratings = Rating.objects.filter(
        is_valid=True, score__isnull=False, question_version=F("candidate__question_version"),
        candidate__question_version=F("candidate__question_version__question__current_version"),
    )
    if benchmark is not None:
        ratings = ratings.filter(candidate__question_version__question__benchmark__name=benchmark)
    for cid, score, rater, when in ratings.order_by("id").values_list(
            "candidate_id", "score", "annotator_id", "created_at").iterator(chunk_size=5000):
        data.scores.setdefault(cid, []).append(score)
        data.raters.setdefault(cid, []).append(rater)
        data.rated_at.setdefault(cid, []).append(when.timestamp())
    judged = _current(JudgeRating.objects.filter(score__isnull=False), "candidate__").filter(
        Q(judge__isnull=True) | Q(judge__is_active=True), candidate__quality_item__isnull=True,
    )
    if benchmark is not None:
        judged = judged.filter(candidate__question_version__question__benchmark__name=benchmark)
    for cid, name, judge_name, variant, score in judged.values_list(
        "candidate_id", "judge__name", "judge_name", "prompt_variant", "score"
    ).iterator(chunk_size=5000):
        label = name or f"{judge_name} ({variant})"
        data.judges.setdefault(label, {})[cid] = float(score)
    _sampling(data)
    _epochs(data)
    return data


def _epochs(data: LeaderboardData) -> None:
    """Fill ``epochs`` (starting the first epoch of a benchmark that has none) and ``rating_epoch``."""
    from datetime import datetime

    from modelling.services.design import design_epochs, design_epochs_sync, epoch_at

    benchmarks = {a["benchmark_id"] for a in data.answers.values()}
    data.epochs = design_epochs(benchmark_ids=benchmarks)
    if benchmarks - data.epochs.keys():
        design_epochs_sync(reason="the design changed outside the switches (the ROUTING_AUDIT_SHARE setting)")
        data.epochs = design_epochs(benchmark_ids=benchmarks)
    starts = {b: ([datetime.fromisoformat(e["started"]).timestamp() for e in rows], [e["number"] for e in rows])
              for b, rows in data.epochs.items()}
    for cid, times in data.rated_at.items():
        begun, numbers = starts.get(data.answers[cid]["benchmark_id"], ([0.0], [1]))
        data.rating_epoch[cid] = [epoch_at(begun, numbers, t) for t in times]


def _sampling(data: LeaderboardData) -> None:
    """Fill ``sampling``, ``audit_share`` and ``design`` from the routing tables (modelling's own); answers on a
    benchmark that ever used leaderboard precision and have no draw yet get one now (``active_draws_ensure``)."""
    from modelling.models import ActiveDraw, RoutingDecision
    from modelling.services.routing import audit_shares

    ids = list(data.answers)
    benchmarks = {a["benchmark_id"] for a in data.answers.values()}
    shares = audit_shares()
    data.audit_share = {b: shares.get(b, 0.0) for b in benchmarks}
    routed, drawn = set(), set()
    for start in range(0, len(ids), 5000):
        chunk = ids[start:start + 5000]
        for cid, pi, u in ActiveDraw.objects.filter(candidate_id__in=chunk).values_list("candidate_id", "pi", "u"):
            data.design[cid] = (pi, u)
            drawn.add(data.answers[cid]["benchmark_id"])
        routed.update(data.answers[cid]["benchmark_id"] for cid in RoutingDecision.objects.filter(
            candidate_id__in=chunk).values_list("candidate_id", flat=True).distinct())
    _late_draws(data, drawn)
    data.sampling = {b: ACTIVE if b in drawn else ROUTED if b in routed else UNIFORM for b in benchmarks}


def _late_draws(data: LeaderboardData, drawn: set[int]) -> None:
    """Draw the answers without a draw on a benchmark that ever used leaderboard precision (answers created after
    the policy started or stopped: without a draw the benchmark's active estimate would wait for ever) with the
    active model's predictions (π ∝ σ; π = budget without one), and add them to ``design`` and ``drawn``."""
    from django.db import transaction
    from django.db.models import F

    from modelling.models import Prediction
    from modelling.selectors import model_version_active
    from modelling.services.design import active_benchmarks, active_draws_ensure

    scope = drawn | active_benchmarks().keys()  # cheap first: benchmarks with draws here or under the policy now
    missing = [cid for cid, a in data.answers.items() if a["benchmark_id"] in scope and cid not in data.design]
    if not missing:
        return
    benchmarks = active_benchmarks(ever=True)
    missing = [cid for cid in missing if data.answers[cid]["benchmark_id"] in benchmarks]
    active = model_version_active()
    predictions = {} if active is None else {cid: (mu, var) for cid, mu, var in Prediction.objects.filter(
        model_version=active, candidate__question_version__question__benchmark_id__in={
            data.answers[c]["benchmark_id"] for c in missing},
        candidate__question_version=F("candidate__question_version__question__current_version"),
    ).values_list("candidate_id", "mu", "variance")}
    with transaction.atomic():
        draws = active_draws_ensure(candidate_ids=missing, benchmarks=benchmarks, predictions=predictions,
                                    active=active)
    for cid, draw in draws.items():
        data.design[cid] = (draw.pi, draw.u)
        drawn.add(data.answers[cid]["benchmark_id"])


# --- breakdowns (``by``) ------------------------------------------------------------------------------------------

def leaderboard_by_choices(*, benchmark: str | None = None) -> list[str]:
    """What the leaderboard of ``benchmark`` (a name; None = every benchmark) can be broken down by: modality,
    category, then the candidate metadata names its imports kept (each table import's ``candidate_metadata``), in
    alphabetical order. Read from the import records, not the answers: a handful of rows on every database."""
    from annotation.models import TableImport

    imports = TableImport.objects.filter(imported_at__isnull=False, benchmark__isnull=False)
    if benchmark is not None:
        imports = imports.filter(benchmark__name=benchmark)
    names = set()
    for mapping in imports.values_list("mapping", flat=True):
        names.update((mapping or {}).get("candidate_metadata") or {})
    return [*BY_QUESTION_FIELDS, *sorted(n for n in names if n not in BY_QUESTION_FIELDS)]


def leaderboard_by_check(*, by: str | None, benchmark: str | None = None) -> str | None:
    """``by`` when the leaderboard of ``benchmark`` can be broken down by it (:func:`leaderboard_by_choices`).

    Raises:
        ValueError: an unknown ``by``; the message lists the choices.
    """
    if by is None or by in BY_QUESTION_FIELDS:
        return by
    choices = leaderboard_by_choices(benchmark=benchmark)
    if by not in choices:
        scope = f"benchmark {benchmark!r}" if benchmark else "the benchmarks"
        raise ValueError(f"by must be one of {', '.join(choices)} (the question fields and the candidate metadata "
                         f"of {scope}); got {by!r}")
    return by


def leaderboard_group(answer: dict, by: str) -> str:
    """The group of one answer of :class:`LeaderboardData` under breakdown ``by``: its question's modality or
    category, or its candidate metadata value of that name ("" when it has none)."""
    if by in BY_QUESTION_FIELDS:
        return answer[by]
    return (answer.get("metadata") or {}).get(by, "")
