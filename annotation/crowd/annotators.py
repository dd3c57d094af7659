"""An annotator's quality status (active / warned / paused) and the one-action invalidation of their ratings.

Pausing takes the annotator's user row lock, the lock every "next item" request takes first
(``queue_lease_transaction_begin``), so once :func:`annotator_status_set` returns no request hands the annotator a
new item, and their open assignments are released in the same transaction.

Invalidation marks the annotator's valid ratings ``is_valid=False`` with the admin's reason (the same flag and
count refresh a correction uses, ``annotation.services.versions``), so alpha, exports, the leaderboard and ORCA
training leave them out on their next read. Nothing is deleted: :func:`annotator_ratings_restore` makes exactly
those ratings valid again, except ones whose question version has been superseded meanwhile.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.crowd.models import AnnotatorQuality, RatingInvalidation
from annotation.models import Assignment, CandidateAnswer, ImportAccount, Rating
from annotation.services.audit import audit_record
from annotation.services.versions import candidate_counts_refresh


def _candidates_of(rating_ids: list[int]):
    return CandidateAnswer.objects.filter(pk__in=Rating.objects.filter(pk__in=rating_ids).values("candidate_id"))


def annotator_status_set(*, annotator, status: str, reason: str = "", by=None) -> AnnotatorQuality:
    """Set ``annotator``'s status (``AnnotatorQuality.Status``) with ``reason``; audited (``quality.status``).

    Pausing releases the annotator's open assignments (marked expired) and, because it holds the annotator's row
    lock, no "next item" request in flight can hand out an item after it commits.

    Import-only accounts (``annotation.models.ImportAccount``: the pseudonymised raters of imported ratings, who
    cannot log in) are never served items, so they are not warned or paused; they can be set active (clearing a
    status given before this rule).

    Raises:
        ValidationError: an unknown status; warning or pausing an import-only account.
    """
    if status not in AnnotatorQuality.Status.values:
        raise ValidationError({"status": f"Unknown status {status!r}."})
    if status != AnnotatorQuality.Status.ACTIVE and ImportAccount.objects.filter(user_id=annotator.pk).exists():
        raise ValidationError({"status": f"{annotator.get_username()} is an import-only account (the rater of "
                                         "imported ratings): it is never served items, so it is not warned or "
                                         "paused. Invalidate its ratings if they should not count."})
    with transaction.atomic():
        # FOR NO KEY UPDATE conflicts with the queue's FOR UPDATE of this row (so requests in flight finish
        # first and later ones see the pause) but not with the KEY SHARE locks that inserts referencing the user
        # take (a skip or rating of theirs in flight), which would otherwise deadlock with the release below.
        get_user_model().objects.select_for_update(no_key=True).filter(pk=annotator.pk).first()
        row, _ = AnnotatorQuality.objects.select_for_update().get_or_create(annotator=annotator)
        old = {"status": row.status, "status_reason": row.status_reason}
        if row.status == status and row.status_reason == reason:
            return row
        row.status, row.status_reason, row.status_changed_at = status, reason, timezone.now()
        row.save(update_fields=["status", "status_reason", "status_changed_at"])
        released = 0
        if status == AnnotatorQuality.Status.PAUSED:
            released = Assignment.objects.filter(annotator=annotator, status=Assignment.Status.OPEN).update(
                status=Assignment.Status.EXPIRED)
        audit_record(actor=by, action="quality.status", obj=row, old=old,
                     new={"status": status, "status_reason": reason, "released_assignments": released})
        return row


def annotator_ratings_invalidate(*, annotator, reason: str, by) -> RatingInvalidation:
    """Invalidate every valid rating of ``annotator`` with ``reason`` in one transaction; returns the action's row
    (which lists the ratings, for :func:`annotator_ratings_restore`). Candidate counts are refreshed, so the items
    go back to the queue for other annotators. Audited (``quality.invalidate``).

    Raises:
        ValidationError: an empty reason.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why this annotator's ratings stop counting."})
    with transaction.atomic():
        ratings = Rating.objects.select_for_update().filter(annotator=annotator, is_valid=True)
        ids = list(ratings.values_list("pk", flat=True))
        full_reason = f"annotator invalidated: {reason}"
        Rating.objects.filter(pk__in=ids).update(is_valid=False, invalid_reason=full_reason)
        candidate_counts_refresh(candidates=_candidates_of(ids))
        action = RatingInvalidation.objects.create(annotator=annotator, reason=reason, rating_ids=ids, created_by=by)
        audit_record(actor=by, action="quality.invalidate", obj=action, old=None,
                     new={"annotator": annotator.pk, "reason": reason, "ratings": len(ids)})
        return action


def annotator_ratings_restore(*, invalidation: RatingInvalidation, by) -> int:
    """Undo ``invalidation``: make its ratings valid again where they are still invalid for that reason, their
    question version is still current (a rating of a since-corrected version stays invalid) and their candidate
    answer has not become a gold item or attention check meanwhile (those never count). Returns the number
    restored. Audited (``quality.invalidate_undo``).

    Raises:
        ValidationError: the action was already undone.
    """
    with transaction.atomic():
        action = RatingInvalidation.objects.select_for_update().get(pk=invalidation.pk)
        if action.undone_at is not None:
            raise ValidationError({"invalidation": "This invalidation was already undone."})
        full_reason = f"annotator invalidated: {action.reason}"
        restorable = Rating.objects.filter(
            pk__in=action.rating_ids, is_valid=False, invalid_reason=full_reason,
            question_version__question__current_version=F("question_version"), candidate__quality_item__isnull=True,
        )
        ids = list(restorable.values_list("pk", flat=True))
        Rating.objects.filter(pk__in=ids).update(is_valid=True, invalid_reason="")
        candidate_counts_refresh(candidates=_candidates_of(ids))
        action.undone_at, action.undone_by = timezone.now(), by
        action.save(update_fields=["undone_at", "undone_by"])
        audit_record(actor=by, action="quality.invalidate_undo", obj=action, old=None,
                     new={"annotator": action.annotator_id, "ratings": len(ids)})
        invalidation.undone_at, invalidation.undone_by = action.undone_at, by
        return len(ids)


