"""Reads of the leaderboard: the store's answers, ratings, judge scores and ORCA predictions.

Only candidate answers on their question's *current* version count, and only their *valid* scored ratings
(``is_valid=True``, score 1–5, made on that version): a correction makes the old version's ratings stop counting.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import F, Q

from annotation.crowd.items import candidates_without_quality_items
from annotation.models import CandidateAnswer, JudgeRating, Rating


@dataclass
class LeaderboardData:
    """Everything the leaderboard is computed from, one benchmark or all.

    Attributes:
        answers: {candidate id: {lalm, question, benchmark, modality, category, words}} — every candidate answer
            on its question's current version; ``question`` is the question's pk, ``words`` the answer's length in
            whitespace-separated words.
        scores: {candidate id: [score 1–5, ...]} valid scored ratings made on the current version.
        judges: {judge label: {candidate id: score 1–5}} of active judges (and imported judge ratings), parsed
            scores only.
        inclusion: {candidate id: (π, drawn)} for answers whose latest routing decision comes from the
            leaderboard-precision policy (``modelling.services.routing``): the probability it was drawn with and
            whether it was.
    """

    answers: dict[int, dict] = field(default_factory=dict)
    scores: dict[int, list[int]] = field(default_factory=dict)
    judges: dict[str, dict[int, float]] = field(default_factory=dict)
    inclusion: dict[int, tuple[float, bool]] = field(default_factory=dict)


def _current(qs, prefix: str = ""):
    return qs.filter(**{f"{prefix}question_version": F(f"{prefix}question_version__question__current_version")})


def leaderboard_data_load(*, benchmark: str | None = None) -> LeaderboardData:
    """Load the answers, valid ratings and judge scores of ``benchmark`` (a name; None = every benchmark)."""
    data = LeaderboardData()
    # Gold items and attention checks are the platform's own test items, not answers of an LALM.
    answers = _current(candidates_without_quality_items(CandidateAnswer.objects.all()))
    if benchmark is not None:
        answers = answers.filter(question_version__question__benchmark__name=benchmark)
    q = "question_version__question__"
    for pk, lalm, question, bench, modality, category, text in answers.values_list(
        "pk", "lalm__name", q + "id", q + "benchmark__name", q + "modality", q + "category", "text"
    ).order_by("pk").iterator(chunk_size=5000):
        data.answers[pk] = {"lalm": lalm, "question": question, "benchmark": bench, "modality": modality,
                            "category": category or "", "words": len(text.split())}
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
    data.inclusion = _inclusion(list(data.answers))
    return data


def _inclusion(candidate_ids: list[int]) -> dict[int, tuple[float, bool]]:
    from modelling.models import RoutingDecision

    latest: dict[int, tuple[str, float | None]] = {}
    for start in range(0, len(candidate_ids), 5000):
        for cid, reason, pi in RoutingDecision.objects.filter(candidate_id__in=candidate_ids[start:start + 5000]
                                                              ).order_by("id").values_list(
                "candidate_id", "reason", "inclusion_probability"):
            latest[cid] = (reason, pi)  # later decisions win
    selected = RoutingDecision.Reason.ACTIVE_SELECTED
    return {cid: (pi, reason == selected) for cid, (reason, pi) in latest.items() if pi is not None}
