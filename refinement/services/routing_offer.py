"""Offering questions that ORCA predicts to be ambiguous to the expert review queue (ORCA paper, 6.1).

Modelling's routing (``modelling.services.routing``) marks a candidate answer *predicted ambiguous* when its
predicted σ² is in the top ``ROUTING_EXPERT_QUANTILE`` of the active model's predictions, by logging a
``modelling.RoutingDecision`` row with ``expert=True``. Refinement may not be imported by modelling and this app
does not import modelling's code either: the rows are read through the ORM by app label (``apps.get_model``), so
the only coupling is the table.

Rule: a question whose current version has a candidate answer marked ambiguous by the *active* model gets an open
``expert`` correction item (origin ``rule``, evidence ``{"routing": {"<candidate id>": σ²}}``), unless one is open
already or an ``expert`` item of the question was closed after the marking (an expert already looked).
Run every minute by ``refinement.tasks.routing_offers_task``; idempotent.
"""
from __future__ import annotations

from collections import defaultdict

from django.apps import apps
from django.db import transaction
from django.db.models import F, Max

from annotation.models import Question
from refinement.models import CorrectionItem, Queue


def routing_expert_offers_refresh() -> int:
    """Open expert-queue items for questions with a predicted-ambiguous candidate (module docstring).

    Returns:
        The number of correction items opened. Does nothing when the modelling app is not installed.
    """
    try:
        decision_model = apps.get_model("modelling", "RoutingDecision")
    except LookupError:
        return 0
    marked = (
        decision_model.objects.filter(
            expert=True,
            model_version__is_active=True,
            candidate__question_version=F("candidate__question_version__question__current_version"),
        )
        .values_list("candidate__question_version__question_id", "candidate_id", "variance", "created_at")
    )
    by_question: dict[int, dict] = defaultdict(lambda: {"candidates": {}, "latest": None})
    for qid, cid, variance, created_at in marked:
        entry = by_question[qid]
        entry["candidates"][str(cid)] = round(variance, 5) if variance is not None else None
        entry["latest"] = created_at if entry["latest"] is None or created_at > entry["latest"] else entry["latest"]
    if not by_question:
        return 0
    ids = list(by_question)
    opened = 0
    with transaction.atomic():
        open_ids = set(
            CorrectionItem.objects.select_for_update()
            .filter(question_id__in=ids, queue=Queue.EXPERT, status=CorrectionItem.Status.OPEN)
            .values_list("question_id", flat=True)
        )
        closed = dict(
            CorrectionItem.objects.filter(question_id__in=ids, queue=Queue.EXPERT)
            .exclude(status=CorrectionItem.Status.OPEN)
            .values("question_id").annotate(closed=Max("closed_at")).values_list("question_id", "closed")
        )
        versions = dict(Question.objects.filter(pk__in=ids).values_list("pk", "current_version_id"))
        for qid, entry in sorted(by_question.items()):
            if qid in open_ids or versions.get(qid) is None:
                continue
            if closed.get(qid) is not None and entry["latest"] <= closed[qid]:
                continue
            CorrectionItem.objects.create(
                question_id=qid, queue=Queue.EXPERT, origin=CorrectionItem.Origin.RULE,
                flag_count=len(entry["candidates"]), evidence={"routing": entry["candidates"]},
                question_version_id=versions[qid],
            )
            opened += 1
    return opened
