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
            pk, ``words`` the answer's length in whitespace-separated words, ``key`` its random key (0–1),
            ``metadata`` its candidate metadata ({name: text}, e.g. {"type": "short"}).
        scores: {candidate id: [score 1–5, ...]} valid scored ratings made on the current version.
        judges: {judge label: {candidate id: score 1–5}} of active judges (and imported judge ratings), parsed
            scores only.
        sampling: {benchmark pk: ``uniform`` | ``routed`` | ``active``}: ``active`` when its answers carry the
            leaderboard-precision policy's fixed draws, ``routed`` when routing by disagreement ever decided one of
            its answers (selection by priority, early stops), else ``uniform`` (the queue's random-key order).
        audit_share: {benchmark pk: its audit share (0–1)}.
        design: {candidate id: (π, u)} of answers with a fixed draw (drawn when u < π).
    """

    answers: dict[int, dict] = field(default_factory=dict)
    scores: dict[int, list[int]] = field(default_factory=dict)
    judges: dict[str, dict[int, float]] = field(default_factory=dict)
    sampling: dict[int, str] = field(default_factory=dict)
    audit_share: dict[int, float] = field(default_factory=dict)
    design: dict[int, tuple[float, float]] = field(default_factory=dict)


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
        "text", "random_key", "metadata",
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
    for cid, score in ratings.order_by("id").values_list("candidate_id", "score").iterator(chunk_size=5000):
        data.scores.setdefault(cid, []).append(score)
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
    return data


def _sampling(data: LeaderboardData) -> None:
    """Fill ``sampling``, ``audit_share`` and ``design`` from the routing tables (modelling's own)."""
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
    data.sampling = {b: ACTIVE if b in drawn else ROUTED if b in routed else UNIFORM for b in benchmarks}


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
