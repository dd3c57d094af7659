"""Flag rules: which valid ratings put a question into which correction queue (ORCA paper, sections 3.3, 5.2).

Rules (thresholds are settings, defaults in brackets), over the question's *valid* ratings:

* any rating with code Q [``REFINEMENT_CODE_MIN_RATINGS`` = 1] -> ``question`` queue;
* any rating with code R [1] -> ``reference`` queue;
* code A on >= ``REFINEMENT_RATIONALE_MIN_RATINGS`` [2] ratings, or on >= ``REFINEMENT_RATIONALE_MIN_SHARE``
  [0.5] of the question's valid ratings -> ``rationale`` queue;
* any rating with code U or E [1] -> ``expert`` queue (the queue page labels and filters it by modality);
* one candidate answer whose valid scores have sample variance (n - 1) >= ``REFINEMENT_DISAGREEMENT_VARIANCE``
  [1.0, the paper's threshold for genuine disagreement] -> ``disagreement`` queue.

The ``transcript`` queue is filled by experts by hand, never by a rule.

When flags are evaluated. ``annotation`` must not import ``refinement`` (README, Layout: house rules), so the
rating service cannot call us. :func:`flags_refresh_for_questions` is instead run (a) every minute by Celery beat
(``refinement.tasks.flags_refresh_task`` -> :func:`flags_refresh_recent`) over questions with ratings updated
since the :class:`~refinement.models.FlagWatermark`; (b) explicitly after imports
(``python manage.py refinement_queues`` refreshes before printing); (c) synchronously when an expert opens a queue
page. Evaluation is idempotent, so overlapping runs are harmless.

Re-flagging after a close. An item closed for (question, queue) is reopened only by evidence newer than the close:
a dismissal ("genuine disagreement -- keep") is not undone by the same ratings; a correction invalidates the old
ratings, so only ratings of the new version can flag it again.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotation.models import Question, Rating
from refinement.models import CorrectionItem, FlagWatermark, Queue

#: Queues filled by rules (the transcript queue is filled by experts).
RULE_QUEUES = (Queue.QUESTION, Queue.REFERENCE, Queue.RATIONALE, Queue.EXPERT, Queue.DISAGREEMENT)
WATERMARK_NAME = "ratings"


@dataclass(frozen=True)
class RatingFacts:
    """What the rules read of one valid rating: ids, score 1–5 or None, canonical codes (subset of "QARUE")."""

    id: int
    candidate_id: int
    score: int | None
    codes: str
    created_at: datetime


@dataclass(frozen=True)
class FlagRules:
    """Thresholds of the rules; :meth:`from_settings` reads the ``REFINEMENT_*`` settings."""

    code_min_ratings: int = 1
    rationale_min_ratings: int = 2
    rationale_min_share: float = 0.5
    disagreement_variance: float = 1.0

    @classmethod
    def from_settings(cls) -> FlagRules:
        return cls(
            code_min_ratings=settings.REFINEMENT_CODE_MIN_RATINGS,
            rationale_min_ratings=settings.REFINEMENT_RATIONALE_MIN_RATINGS,
            rationale_min_share=settings.REFINEMENT_RATIONALE_MIN_SHARE,
            disagreement_variance=settings.REFINEMENT_DISAGREEMENT_VARIANCE,
        )


@dataclass(frozen=True)
class Flag:
    """One fired rule: the queue, how many flags (ratings or candidates), the evidence and its newest time."""

    queue: str
    count: int
    evidence: dict
    latest_at: datetime


@dataclass
class FlagRefreshResult:
    """Counts of one refresh: questions evaluated, items opened, open items whose evidence changed."""

    questions: int = 0
    opened: int = 0
    updated: int = 0
    opened_by_queue: dict[str, int] = field(default_factory=dict)


def flag_rules_evaluate(*, ratings: Iterable[RatingFacts], rules: FlagRules | None = None) -> list[Flag]:
    """Apply the rules of this module to one question's valid ratings; pure (no database).

    Returns:
        The fired flags, in :data:`RULE_QUEUES` order. Evidence shapes: code queues
        ``{"codes": {"Q": n, ...}, "rating_ids": [...], "n_ratings": N}``; disagreement
        ``{"candidates": {"<candidate id>": {"variance": v, "scores": [...]}}}``.
    """
    rules = rules or FlagRules.from_settings()
    ratings = list(ratings)
    n = len(ratings)
    flags: list[Flag] = []

    def code_flag(queue: str, codes: str, fired) -> None:
        hits = [r for r in ratings if set(codes) & set(r.codes)]
        if hits and fired(len(hits)):
            counts = {c: sum(c in r.codes for r in hits) for c in codes}
            flags.append(
                Flag(
                    queue=queue,
                    count=len(hits),
                    evidence={"codes": counts, "rating_ids": sorted(r.id for r in hits), "n_ratings": n},
                    latest_at=max(r.created_at for r in hits),
                )
            )

    code_flag(Queue.QUESTION, "Q", lambda k: k >= rules.code_min_ratings)
    code_flag(Queue.REFERENCE, "R", lambda k: k >= rules.code_min_ratings)
    code_flag(
        Queue.RATIONALE,
        "A",
        lambda k: k >= rules.rationale_min_ratings or (n > 0 and k / n >= rules.rationale_min_share),
    )
    code_flag(Queue.EXPERT, "UE", lambda k: k >= rules.code_min_ratings)

    by_candidate: dict[int, list[RatingFacts]] = defaultdict(list)
    for r in ratings:
        if r.score is not None:
            by_candidate[r.candidate_id].append(r)
    disagreeing = {}
    latest = None
    for candidate_id, rows in sorted(by_candidate.items()):
        if len(rows) < 2:
            continue
        variance = statistics.variance([r.score for r in rows])
        if variance >= rules.disagreement_variance:
            disagreeing[str(candidate_id)] = {"variance": round(variance, 4), "scores": [r.score for r in rows]}
            newest = max(r.created_at for r in rows)
            latest = newest if latest is None or newest > latest else latest
    if disagreeing:
        flags.append(
            Flag(
                queue=Queue.DISAGREEMENT, count=len(disagreeing), evidence={"candidates": disagreeing}, latest_at=latest
            )
        )
    return flags


def _valid_rating_facts(question_ids: list[int]) -> dict[int, list[RatingFacts]]:
    rows = (
        Rating.objects.filter(question_version__question_id__in=question_ids, is_valid=True)
        .values_list("id", "candidate_id", "score", "codes", "created_at", "question_version__question_id")
        .order_by("id")
    )
    facts: dict[int, list[RatingFacts]] = defaultdict(list)
    for rid, cid, score, codes, created_at, qid in rows.iterator(chunk_size=2000):
        facts[qid].append(RatingFacts(id=rid, candidate_id=cid, score=score, codes=codes, created_at=created_at))
    return facts


def flags_refresh_for_questions(*, question_ids: Iterable[int], rules: FlagRules | None = None) -> FlagRefreshResult:
    """Evaluate the flag rules for these questions and open or update their rule-made correction items.

    For each fired rule: an open item of (question, queue) gets the new count and evidence; otherwise a new open
    item is created unless an item for that queue was closed after the newest evidence (see module docstring).
    Items are never closed here. One transaction per batch of questions; idempotent.

    Args:
        question_ids: primary keys of ``annotation.Question``; unknown ones are ignored.

    Returns:
        :class:`FlagRefreshResult`.
    """
    rules = rules or FlagRules.from_settings()
    ids = sorted(set(question_ids))
    result = FlagRefreshResult()
    for start in range(0, len(ids), 500):
        batch = ids[start : start + 500]
        with transaction.atomic():
            _refresh_batch(batch, rules, result)
    return result


def _refresh_batch(ids: list[int], rules: FlagRules, result: FlagRefreshResult) -> None:
    facts = _valid_rating_facts(ids)
    questions = {q.pk: q for q in Question.objects.filter(pk__in=ids).only("pk", "current_version_id")}
    open_items = {
        (item.question_id, item.queue): item
        for item in CorrectionItem.objects.select_for_update().filter(
            question_id__in=ids, status=CorrectionItem.Status.OPEN, queue__in=RULE_QUEUES
        )
    }
    last_closed = {
        (row["question_id"], row["queue"]): row["closed"]
        for row in CorrectionItem.objects.filter(question_id__in=ids)
        .exclude(status=CorrectionItem.Status.OPEN)
        .values("question_id", "queue")
        .annotate(closed=Max("closed_at"))
    }
    for qid, question in questions.items():
        result.questions += 1
        if question.current_version_id is None:
            continue
        for flag in flag_rules_evaluate(ratings=facts.get(qid, ()), rules=rules):
            key = (qid, flag.queue)
            item = open_items.get(key)
            if item is not None:
                if item.flag_count != flag.count or item.evidence != flag.evidence:
                    item.flag_count = flag.count
                    item.evidence = flag.evidence
                    item.save(update_fields=["flag_count", "evidence", "updated_at"])
                    result.updated += 1
                continue
            closed = last_closed.get(key)
            if closed is not None and flag.latest_at <= closed:
                continue
            CorrectionItem.objects.create(
                question_id=qid,
                queue=flag.queue,
                origin=CorrectionItem.Origin.RULE,
                flag_count=flag.count,
                evidence=flag.evidence,
                question_version_id=question.current_version_id,
            )
            result.opened += 1
            result.opened_by_queue[flag.queue] = result.opened_by_queue.get(flag.queue, 0) + 1


def flags_refresh_recent(*, now: datetime | None = None) -> FlagRefreshResult:
    """Evaluate questions whose ratings were created or updated since the watermark, then advance it.

    Re-reads ``REFINEMENT_WATERMARK_OVERLAP_S`` seconds before the watermark so ratings committed late (their
    ``updated_at`` is set before commit) are not missed, but never before the last evaluation's time minus that
    overlap (it read everything committed earlier). The first run evaluates every rated question.
    Called by the beat task every minute and by ``refinement_queues``.
    """
    now = now or timezone.now()
    watermark, _ = FlagWatermark.objects.get_or_create(name=WATERMARK_NAME)
    ratings = Rating.objects.all()
    if watermark.ratings_updated_before is not None:
        overlap = timedelta(seconds=settings.REFINEMENT_WATERMARK_OVERLAP_S)
        since = watermark.ratings_updated_before - overlap
        if watermark.evaluated_at is not None:
            # A rating the last evaluation did not read is newer than the watermark or was committed after that
            # evaluation (so its updated_at is later than evaluated_at - overlap). Reading from further back only
            # repeats work: after a bulk import every rating lies within the overlap, and each visit of the queue
            # page re-evaluated them all until a new rating moved the watermark.
            since = max(since, min(watermark.ratings_updated_before, watermark.evaluated_at - overlap))
        ratings = ratings.filter(updated_at__gt=since)
    ratings = ratings.filter(updated_at__lte=now)
    question_ids = set(ratings.values_list("question_version__question_id", flat=True).distinct())
    newest = ratings.aggregate(m=Max("updated_at"))["m"]
    result = flags_refresh_for_questions(question_ids=question_ids)
    FlagWatermark.objects.filter(pk=watermark.pk).update(
        ratings_updated_before=max(filter(None, [newest, watermark.ratings_updated_before]), default=None),
        evaluated_at=now,
    )
    return result
