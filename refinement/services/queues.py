"""Working the correction queues: claim a question (one expert at a time), open items by hand, dismiss.

ORCA paper, section 5.2: experts reviewed every flagged item and the questions nobody rated. A claim is per
question (a question may sit in several queues; its fields are corrected together), held in
:class:`~refinement.models.ReviewClaim`, whose one-to-one key makes a second expert's claim fail in the database.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import Question
from annotation.services.audit import audit_record
from refinement.models import CorrectionItem, Queue, ReviewClaim


class ClaimedByAnotherExpert(Exception):
    """The question is claimed by another expert; ``str()`` names them."""


def question_claim(*, question: Question, expert) -> ReviewClaim:
    """Claim ``question`` for ``expert``; idempotent for the holder.

    Raises:
        ClaimedByAnotherExpert: someone else holds it (the unique key on ``ReviewClaim.question`` decides races).
    """
    try:
        with transaction.atomic():
            claim = ReviewClaim.objects.create(question=question, expert=expert)
            audit_record(actor=expert, action="question.claim", obj=question, new={"claimed_by": expert.get_username()})
            return claim
    except IntegrityError:
        claim = ReviewClaim.objects.select_related("expert").filter(question=question).first()
        if claim is None:  # released between our insert and this read: try once more
            with transaction.atomic():
                claim = ReviewClaim.objects.create(question=question, expert=expert)
                audit_record(actor=expert, action="question.claim", obj=question,
                             new={"claimed_by": expert.get_username()})
                return claim
        if claim.expert_id == expert.pk:
            return claim
        raise ClaimedByAnotherExpert(f"{question} is claimed by {claim.expert}") from None


def question_release(*, question: Question, expert, force: bool = False) -> bool:
    """Release the expert's claim on ``question`` (``force`` releases anyone's: admins). Returns True if released."""
    claims = ReviewClaim.objects.filter(question=question)
    if not force:
        claims = claims.filter(expert=expert)
    with transaction.atomic():
        holders = list(claims.values_list("expert__username", flat=True))
        released = claims.delete()[0] > 0
        if released:
            audit_record(actor=expert, action="question.release", obj=question, old={"claimed_by": holders},
                         new={"claimed_by": None})
    return released


def item_open(*, question: Question, queue: str, opened_by, note: str, origin: str = CorrectionItem.Origin.EXPERT):
    """Put ``question`` into ``queue`` by hand (an expert sending a transcript problem, an admin pulling it in).

    If the question already has an open item in that queue, its flag count goes up by one and the note is
    appended. Returns the open :class:`CorrectionItem`.

    Raises:
        ValidationError: unknown queue, empty note, or a question without a version.
    """
    if queue not in Queue.values:
        raise ValidationError({"queue": f"unknown queue {queue!r} (expected one of {', '.join(Queue.values)})"})
    note = (note or "").strip()
    if not note:
        raise ValidationError({"note": "Say why the question needs review."})
    if question.current_version_id is None:
        raise ValidationError({"question": f"{question} has no version yet."})
    with transaction.atomic():
        item = (
            CorrectionItem.objects.select_for_update()
            .filter(question=question, queue=queue, status=CorrectionItem.Status.OPEN)
            .first()
        )
        if item is not None:
            item.flag_count += 1
            item.note = f"{item.note}\n{note}".strip()
            item.save(update_fields=["flag_count", "note", "updated_at"])
            return item
        return CorrectionItem.objects.create(
            question=question,
            queue=queue,
            origin=origin,
            flag_count=1,
            note=note,
            opened_by=opened_by,
            question_version_id=question.current_version_id,
        )


def questions_pull_unrated(*, questions, opened_by, note: str = "Never rated: review before annotation.") -> int:
    """Open an ``expert`` review item for each of ``questions`` that has no rating at all (ORCA paper's 128).

    Questions with ratings, without a version, or already open in the expert queue are skipped.
    Returns the number of items opened.
    """
    opened = 0
    candidates = (
        Question.objects.filter(pk__in=[q.pk for q in questions], current_version__isnull=False)
        .exclude(versions__ratings__isnull=False)
        .exclude(correction_items__queue=Queue.EXPERT, correction_items__status=CorrectionItem.Status.OPEN)
        .distinct()
    )
    with transaction.atomic():
        for question in candidates:
            item_open(
                question=question, queue=Queue.EXPERT, opened_by=opened_by, note=note,
                origin=CorrectionItem.Origin.ADMIN
            )
            opened += 1
    return opened


def item_dismiss(*, item: CorrectionItem, expert, reason: str) -> CorrectionItem:
    """Close ``item`` without a correction, e.g. "genuine disagreement -- keep"; ratings stay valid.

    The expert must hold (or gets) the question's claim; the claim is released once the question has no open item.

    Raises:
        ValidationError: empty reason, or the item is not open.
        ClaimedByAnotherExpert: another expert holds the question.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Give a reason for dismissing the flag."})
    with transaction.atomic():
        question_claim(question=item.question, expert=expert)
        updated = CorrectionItem.objects.filter(pk=item.pk, status=CorrectionItem.Status.OPEN).update(
            status=CorrectionItem.Status.DISMISSED,
            closed_at=timezone.now(),
            closed_by=expert,
            close_reason=reason,
            updated_at=timezone.now(),
        )
        if updated != 1:
            raise ValidationError({"item": "This flag is already closed."})
        audit_record(actor=expert, action="correction_item.dismiss", obj=item,
                     old={"status": CorrectionItem.Status.OPEN},
                     new={"status": CorrectionItem.Status.DISMISSED, "reason": reason})
        if not CorrectionItem.objects.filter(question=item.question, status=CorrectionItem.Status.OPEN).exists():
            question_release(question=item.question, expert=expert)
    item.refresh_from_db()
    return item
