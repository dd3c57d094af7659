"""Reads for the quality pages, each checking access (annotation.selectors conventions)."""
from __future__ import annotations

from django.db import connection
from django.db.models import Count, F, Q
from django.http import Http404

from annotation.access import ADMIN, require_role
from annotation.crowd.models import (
    BenchmarkQuality,
    QualificationAttempt,
    QualityCheck,
    QualityItem,
    Study,
    StudyParticipant,
)
from annotation.models import CandidateAnswer, Question, QuestionVersion, Rating


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


def study_list_for_admin(*, user) -> list[Study]:
    """Every study, newest first, with its benchmark and ``n_participants``, for admins.

    Raises:
        PermissionDenied: the user is not an admin.
    """
    require_role(user, ADMIN, message="Only admins manage crowd studies.")
    return list(Study.objects.select_related("benchmark").annotate(n_participants=Count("participants")))


def study_audio_for(*, study: Study) -> str:
    """Whether the items of ``study``'s benchmark come with audio clips: ``all``, ``some`` or ``none`` (questions
    of an imported benchmark may have none). The welcome page says "listen to the clip" only where there is one.
    Read before a participant is signed in (the welcome page), so no user is checked."""
    counts = Question.objects.filter(benchmark_id=study.benchmark_id).aggregate(
        with_audio=Count("pk", filter=Q(audio__isnull=False)), without=Count("pk", filter=Q(audio__isnull=True)))
    if not counts["with_audio"]:
        return "none"
    return "some" if counts["without"] else "all"


def study_progress_for(*, user) -> dict | None:
    """``{"n", "total"}`` for the rating page's "Item n of N" of a study participant (n = items rated in the study's
    benchmark + 1, N the quota), or None for anyone else and once the quota is reached. One query."""
    # Plain SQL, like qualification_progress_for: it runs on every rating page.
    q = connection.ops.quote_name
    sp, st = q(StudyParticipant._meta.db_table), q(Study._meta.db_table)
    rating, version, question = (q(m._meta.db_table) for m in (Rating, QuestionVersion, Question))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT st.quota, (SELECT COUNT(*) FROM {rating} r JOIN {version} v ON v.id = r.question_version_id "
            f"JOIN {question} qu ON qu.id = v.question_id WHERE r.annotator_id = sp.user_id "
            "AND qu.benchmark_id = st.benchmark_id) "
            f"FROM {sp} sp JOIN {st} st ON st.id = sp.study_id WHERE sp.user_id = %s "
            "ORDER BY sp.joined_at DESC LIMIT 1", [user.pk])
        row = cursor.fetchone()
    if row is None or row[1] >= row[0]:
        return None
    return {"n": row[1] + 1, "total": row[0]}


def quality_item_list_for_admin(*, user) -> list[QualityItem]:
    """Every gold item and attention check with its question and candidate text and ``n_checks``/``n_passed``,
    active ones first, for admins.

    Raises:
        PermissionDenied: the user is not an admin.
    """
    require_role(user, ADMIN, message="Only admins manage gold items and attention checks.")
    return list(QualityItem.objects.select_related(
        "candidate__question_version__question__benchmark", "candidate__lalm",
    ).annotate(n_checks=Count("checks"), n_passed=Count("checks", filter=Q(checks__passed=True)))
        .order_by("-is_active", "-created_at"))


def quality_item_get_for_admin(*, user, item_pk: int) -> QualityItem:
    """Quality item ``item_pk`` with its candidate answer and question, for admins.

    Raises:
        PermissionDenied: the user is not an admin. Http404: no such item.
    """
    require_role(user, ADMIN, message="Only admins manage gold items and attention checks.")
    item = QualityItem.objects.select_related("candidate__question_version__question__benchmark").filter(
        pk=item_pk).first()
    if item is None:
        raise Http404("No such quality item.")
    return item


def candidate_search_for_admin(*, user, text: str, limit: int = 20) -> list[CandidateAnswer]:
    """Candidate answers on current question versions whose question's external id equals ``text`` or whose answer
    contains it (case-insensitive), with question, benchmark, LALM and ``quality_item`` loaded, at most ``limit``;
    empty for empty ``text``. For admins picking gold items and attention checks.

    Raises:
        PermissionDenied: the user is not an admin.
    """
    require_role(user, ADMIN, message="Only admins manage gold items and attention checks.")
    text = text.strip()
    if not text:
        return []
    return list(CandidateAnswer.objects.select_related(
        "question_version__question__benchmark", "lalm", "quality_item",
    ).filter(Q(question_version__question__external_id=text) | Q(text__icontains=text),
             question_version__question__current_version=F("question_version"))
        .order_by("question_version__question__benchmark__name", "question_version__question__external_id", "pk")
        [:limit])


def benchmark_quality_list_for_admin(*, user) -> list[BenchmarkQuality]:
    """Every benchmark's insertion settings, by benchmark name, for admins.

    Raises:
        PermissionDenied: the user is not an admin.
    """
    require_role(user, ADMIN, message="Only admins set the quality policy.")
    return list(BenchmarkQuality.objects.select_related("benchmark").order_by("benchmark__name"))


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
