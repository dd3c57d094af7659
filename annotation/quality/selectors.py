"""Reads for the quality pages, each checking access (annotation.selectors conventions)."""
from __future__ import annotations

from django.db import connection
from django.http import Http404

from annotation.access import ADMIN, require_role
from annotation.quality.models import (
    AnnotatorQuality,
    QualificationAttempt,
    QualityCheck,
    Study,
    StudyParticipant,
)


def rating_page_quality_context(*, user, assignment) -> dict:
    """What the rating page adds for quality control: ``qualification`` (``{"n", "total"}`` while the user's
    qualification attempt runs and an item is shown) and ``quality_notice`` (why there is nothing to rate: paused,
    qualification over or unavailable, study complete), both None when they do not apply."""
    context = {"qualification": None, "quality_notice": None}
    if assignment is not None:
        # Plain SQL: it runs on every rating page, where building the ORM query cost more than running it.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT number, total, done_items FROM "
                f"{connection.ops.quote_name(QualificationAttempt._meta.db_table)}"
                " WHERE annotator_id = %s AND passed IS NULL ORDER BY number DESC LIMIT 1", [user.pk])
            row = cursor.fetchone()
        if row is not None:
            context["qualification"] = {"n": row[2] + 1, "total": row[1], "number": row[0]}
        return context
    status = AnnotatorQuality.objects.filter(annotator=user).first()
    if status is not None and status.status == AnnotatorQuality.Status.PAUSED:
        context["quality_notice"] = "Your account is paused: an admin will look at your ratings before you continue."
        return context
    last = QualificationAttempt.objects.filter(annotator=user).order_by("-number").first()
    if last is not None and last.passed is False and (status is None or status.qualified_at is None):
        from annotation.quality.items import quality_policy

        if last.number >= quality_policy().qualification_attempts:
            context["quality_notice"] = (f"You did not reach the qualification's pass mark ({last.passed_items} of "
                                         f"{last.total} items matched the experts). Thank you for your time.")
    return context


def study_get_for_admin(*, user, study_pk: int) -> Study:
    """Study ``study_pk`` for an admin.

    Raises:
        PermissionDenied: the user is not an admin. Http404: no such study.
    """
    require_role(user, ADMIN, message="Only admins may read study reports.")
    try:
        return Study.objects.select_related("benchmark").get(pk=study_pk)
    except Study.DoesNotExist:
        raise Http404("No such study.") from None


def study_participation_get(*, user) -> StudyParticipant | None:
    """The logged-in user's latest study participation, or None."""
    if not getattr(user, "is_authenticated", False):
        return None
    return StudyParticipant.objects.select_related("study").filter(user=user).order_by("-joined_at").first()


def quality_checks_for_annotator(*, user, annotator) -> list[QualityCheck]:
    """An annotator's quality checks, newest first, for admins.

    Raises:
        PermissionDenied: the user is not an admin.
    """
    require_role(user, ADMIN, message="Only admins may read quality checks.")
    return list(QualityCheck.objects.select_related("item", "rating").filter(annotator=annotator)
                .order_by("-created_at")[:200])
