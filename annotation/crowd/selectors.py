"""Reads for the quality pages, each checking access (annotation.selectors conventions)."""
from __future__ import annotations

from django.db import connection
from django.http import Http404

from annotation.access import ADMIN, require_role
from annotation.crowd.models import (
    QualificationAttempt,
    QualityCheck,
    Study,
    StudyParticipant,
)


def qualification_progress_for(*, user) -> dict | None:
    """``{"n", "total", "number"}`` of ``user``'s running qualification attempt (item n of total, attempt number)
    for the rating page's "Qualification: item n of N", or None when no attempt runs. One query."""
    # Plain SQL: it runs on every rating page, where building the ORM query cost more than running it.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT number, total, done_items FROM "
            f"{connection.ops.quote_name(QualificationAttempt._meta.db_table)}"
            " WHERE annotator_id = %s AND passed IS NULL ORDER BY number DESC LIMIT 1", [user.pk])
        row = cursor.fetchone()
    return None if row is None else {"n": row[2] + 1, "total": row[1], "number": row[0]}


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
