"""Reads for the annotation pages, each checking the user's access (HackSoft selectors, Zulip ``access_*``).

Rating is blind: nothing here returns other annotators' ratings or any model's score for an item being rated.
"""
from dataclasses import dataclass
from datetime import datetime

from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q
from django.http import Http404
from django.utils import timezone

from annotation.models import Assignment, AudioClip, Benchmark, Rating
from annotation.services.accounts import user_roles
from annotation.services.assignment import candidates_open_for_annotator

#: Groups whose members may rate (staff may too).
RATER_ROLES = frozenset({"annotator", "expert", "admin"})


def user_can_rate(*, user) -> bool:
    """True for active, logged-in users in the annotator, expert or admin group, and for staff."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_staff or bool(user_roles(user) & RATER_ROLES)


def access_rating(*, user) -> None:
    """Raise ``PermissionDenied`` unless ``user`` may rate (see :func:`user_can_rate`)."""
    if not user_can_rate(user=user):
        raise PermissionDenied("Only annotators, experts and admins may rate.")


def assignment_get_for_annotator(*, user, assignment_pk: int) -> Assignment:
    """The user's own assignment ``assignment_pk`` with everything the rating page shows loaded.

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such assignment, or it belongs to someone else.
    """
    access_rating(user=user)
    try:
        return Assignment.objects.select_related(
            "candidate__question_version__question__benchmark",
            "candidate__question_version__question__audio",
        ).get(pk=assignment_pk, annotator=user)
    except Assignment.DoesNotExist:
        raise Http404("No such assignment.") from None


def audio_clip_get_for_user(*, user, clip_pk: int) -> AudioClip:
    """The audio clip ``clip_pk`` if ``user`` may hear it: staff always; raters when it belongs to a question
    they were assigned or rated.

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such clip, or the user has no item that uses it.
    """
    access_rating(user=user)
    clips = AudioClip.objects.filter(pk=clip_pk)
    if not user.is_staff:
        clips = clips.filter(
            Q(questions__versions__candidates__assignments__annotator=user)
            | Q(questions__versions__candidates__ratings__annotator=user)
        )
    clip = clips.distinct().first()
    if clip is None:
        raise Http404("No such audio clip.")
    return clip


@dataclass(frozen=True)
class BenchmarkProgress:
    """One row of an annotator's progress table.

    ``today`` and ``total``: the user's ratings (valid or not) on the benchmark, today (``TIME_ZONE`` day) and
    ever; ``available``: candidate answers the queue could give the user now (see
    ``candidates_open_for_annotator``).
    """

    benchmark_pk: int
    name: str
    today: int
    total: int
    available: int


def rating_progress_for_annotator(*, user, now: datetime | None = None) -> list[BenchmarkProgress]:
    """The user's progress per benchmark, for every benchmark they rated or could rate now, ordered by name."""
    access_rating(user=user)
    now = now or timezone.now()
    start_of_day = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    bench = "candidate__question_version__question__benchmark"
    rated = {
        row[bench]: row
        for row in Rating.objects.filter(annotator=user)
        .values(bench)
        .annotate(total=Count("pk"), today=Count("pk", filter=Q(created_at__gte=start_of_day)))
        .order_by()
    }
    available = {
        row["question_version__question__benchmark"]: row["n"]
        for row in candidates_open_for_annotator(annotator=user, now=now)
        .values("question_version__question__benchmark")
        .annotate(n=Count("pk"))
        .order_by()
    }
    benchmarks = Benchmark.objects.filter(pk__in=set(rated) | set(available)).order_by("name")
    return [
        BenchmarkProgress(
            benchmark_pk=b.pk,
            name=b.name,
            today=rated.get(b.pk, {}).get("today", 0),
            total=rated.get(b.pk, {}).get("total", 0),
            available=available.get(b.pk, 0),
        )
        for b in benchmarks
    ]


def benchmark_get_for_rating(*, user, benchmark_pk: int) -> Benchmark:
    """The benchmark ``benchmark_pk`` for the rating queue.

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such benchmark.
    """
    access_rating(user=user)
    try:
        return Benchmark.objects.get(pk=benchmark_pk)
    except Benchmark.DoesNotExist:
        raise Http404("No such benchmark.") from None
