"""Reads for the annotation pages, each checking the user's access (HackSoft selectors, Zulip ``access_*``).

Rating is blind: nothing here returns other annotators' ratings or any model's score for an item being rated.
"""
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Q, QuerySet
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from annotation.access import ADMIN, RATERS, STAFF, has_role, require_role
from annotation.crowd.items import candidates_without_quality_items
from annotation.models import Assignment, AudioClip, Benchmark, CandidateAnswer, Job, Rating
from annotation.services.assignment import RATING_PAGE_RELATED, candidates_open_for_annotator
from annotation.services.target_ratings import target_ratings_expression
from annotation.teams.scope import benchmark_readable, benchmarks_readable, readable, readable_candidate_q


def rating_counting_queryset() -> QuerySet[Rating]:
    """The ratings that count (Krippendorff's alpha, ORCA training, judge correlations, routing): valid *and* made
    on their question's current version.

    A correction invalidates the ratings of the old version in the same transaction that makes the new one
    current, so the second test is a guard: a rating that somehow stayed valid on a superseded version never
    reaches a statistic. Unscoped and unordered; the caller checks access.
    """
    return Rating.objects.filter(is_valid=True, question_version__question__current_version=F("question_version"))


def rating_seconds_on_task_expression() -> Coalesce:
    """A rating's seconds on task as the statistics read them (an expression for ``annotate``/``values``): the
    server's measure, ``server_seconds_on_task`` (assignment handed out → rating stored; every rating made here since
    migration 0012 has one), else the client's ``seconds_on_task`` for the rows without it: ratings stored before
    the server measured time, whose client number is the only one, and imported ratings (the file's number, if it
    had one). NULL when neither is known. The client's number of a rating made here is never used (any script can
    send one)."""
    return Coalesce("server_seconds_on_task", "seconds_on_task")


def assignment_get_for_annotator(*, user, assignment_pk: int, page: bool = True) -> Assignment:
    """The user's own assignment ``assignment_pk``; with ``page`` (default) everything the rating page shows is
    loaded too (``RATING_PAGE_RELATED``), else only the candidate answer.

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such assignment, or it belongs to someone else.
    """
    require_role(user, *RATERS)
    related = RATING_PAGE_RELATED if page else ("candidate",)
    try:
        return Assignment.objects.select_related(*related).get(pk=assignment_pk, annotator=user)
    except Assignment.DoesNotExist:
        raise Http404("No such assignment.") from None


def audio_clip_get_for_user(*, user, clip_pk: int) -> AudioClip:
    """The audio clip ``clip_pk`` if ``user`` may hear it: it belongs to a question of a benchmark they read
    (:func:`annotation.teams.scope.readable_q`: admins any; experts their team's benchmarks); an annotator or
    crowd participant moreover only when they were assigned or rated a candidate answer of that question which
    they still read (:func:`~annotation.teams.scope.readable_candidate_q`), so leaving a team ends the audio
    access its old assignments gave.

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such clip, or the user may not hear it (the same answer: another team's clip is not given
            away).
    """
    require_role(user, *RATERS)
    clips = AudioClip.objects.filter(pk=clip_pk)
    if has_role(user, *STAFF):
        clips = readable(clips, user=user, path="questions__benchmark")
    else:
        own = CandidateAnswer.objects.filter(Q(assignments__annotator=user) | Q(ratings__annotator=user))
        own = own.filter(readable_candidate_q(user=user, path=""))
        clips = clips.filter(questions__versions__candidates__in=own.values("pk"))
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
    """The user's progress per benchmark, for every benchmark they read (:mod:`annotation.teams.scope`) and rated
    or could rate now, ordered by name."""
    require_role(user, *RATERS)
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
    benchmarks = benchmarks_readable(user=user).filter(pk__in=set(rated) | set(available))
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
    """The benchmark ``benchmark_pk`` for the rating queue, if the user reads it (:mod:`annotation.teams.scope`).

    Raises:
        PermissionDenied: the user may not rate.
        Http404: no such benchmark, or one of another team (the same answer: a forced ``?benchmark=`` learns
            neither its name nor whether it has items left).
    """
    require_role(user, *RATERS)
    benchmark = benchmark_readable(user=user, pk=benchmark_pk)
    if benchmark is None:
        raise Http404("No such benchmark.")
    return benchmark


def rating_list_for_annotator(*, user, benchmark: Benchmark | None = None):
    """The user's own ratings of candidate answers they still read (:func:`~annotation.teams.scope.
    readable_candidate_q`: a member removed from a team no longer sees, nor edits, that benchmark's items), newest
    first, annotated with ``k`` and ``current_version_id`` (for the edit rule, see
    ``annotation.services.rating.rating_is_editable``), with candidate, question and benchmark loaded."""
    from django.db.models import F

    require_role(user, *RATERS)
    qs = (
        Rating.objects.filter(annotator=user)
        .filter(readable_candidate_q(user=user, path="candidate__"))
        .select_related("candidate", "question_version__question__benchmark")
        .annotate(
            k=_rating_target_ratings(),
            candidate_count=F("candidate__valid_rating_count"),
            current_version_id=F("question_version__question__current_version_id"),
        )
        .order_by("-created_at", "-pk")
    )
    if benchmark is not None:
        qs = qs.filter(question_version__question__benchmark=benchmark)
    return qs


def _rating_target_ratings():
    """``k`` of a rating's candidate answer, for ``Rating`` querysets."""
    return target_ratings_expression(via="candidate__")


def rating_get_for_edit(*, user, rating_pk: int) -> Rating:
    """The user's own rating ``rating_pk`` (annotated like :func:`rating_list_for_annotator`).

    Raises:
        PermissionDenied: the user may not rate. Http404: no such rating, or someone else's.
    """
    rating = rating_list_for_annotator(user=user).filter(pk=rating_pk).first()
    if rating is None:
        raise Http404("No such rating.")
    return rating


# --- the admin/expert overview -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatorThroughput:
    """One annotator's pace: ratings ``total``, ``today`` and in the ``last_7_days``; ``median_s`` the median
    seconds on task per item, as the server measured them (:func:`rating_seconds_on_task_expression`; None when no
    timing was recorded); ``per_hour`` = 3600 / median_s. ``imported``:
    how many of the ratings came from a file (an import-only account's are all imported); ``today`` and
    ``last_7_days`` count only ratings made here."""

    username: str
    total: int
    today: int
    last_7_days: int
    median_s: float | None
    per_hour: float | None
    imported: int = 0


@dataclass(frozen=True)
class RatingOverview:
    """Queue state for experts/admins: ``histogram`` = [(valid ratings, candidate answers)] over rateable
    candidates (current versions of active questions), ``complete``/``incomplete`` counts against each
    candidate's k, ``ratings`` (valid; ``imported`` of them came from files) and ``annotators`` (throughput rows,
    busiest first)."""

    histogram: list[tuple[int, int]]
    max_count: int
    complete: int
    incomplete: int
    ratings: int
    annotators: list[AnnotatorThroughput]
    imported: int = 0


def rating_overview(*, user, benchmark: Benchmark | None = None, now: datetime | None = None) -> RatingOverview:
    """Ratings per item histogram, items complete/incomplete, and annotators' throughput and median seconds, over
    ``benchmark`` or every benchmark ``user`` reads (:mod:`annotation.teams.scope`: an expert's team's; an admin's
    all)."""
    import statistics
    from datetime import timedelta

    from annotation.models import CandidateAnswer, Question

    require_role(user, *STAFF)
    now = now or timezone.now()
    # Gold items and attention checks are never "complete": their ratings never count.
    candidates = candidates_without_quality_items(CandidateAnswer.objects.filter(
        question_version__question__current_version=F("question_version"),
        # Questions waiting for their audio are not served, but their imported ratings are the benchmark's.
        question_version__question__status__in=[Question.Status.ACTIVE, Question.Status.AUDIO_MISSING],
    ))
    ratings = rating_counting_queryset()
    candidates = readable(candidates, user=user, path="question_version__question__benchmark")
    ratings = readable(ratings, user=user, path="candidate__question_version__question__benchmark")
    if benchmark is not None:
        candidates = candidates.filter(question_version__question__benchmark=benchmark)
        ratings = ratings.filter(candidate__question_version__question__benchmark=benchmark)
    histogram = sorted(
        (row["valid_rating_count"], row["n"])
        for row in candidates.values("valid_rating_count").annotate(n=Count("pk")).order_by()
    )
    done = candidates.annotate(k=target_ratings_expression()).aggregate(
        complete=Count("pk", filter=Q(valid_rating_count__gte=F("k"))),
        incomplete=Count("pk", filter=Q(valid_rating_count__lt=F("k"))),
    )
    start_of_day = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    week_ago = now - timedelta(days=7)
    # Counts in SQL; only the seconds travel to Python, for the median (portable to SQLite, which has no
    # percentile aggregate). Reading every rating's timestamps here made the page grow slow with the ratings.
    per_user: dict[str, dict] = {
        row["annotator__username"]: {"total": row["total"], "today": row["today"], "week": row["week"], "seconds": [],
                                     "imported": row["imported"]}
        for row in ratings.values("annotator__username").annotate(
            total=Count("pk"),
            # An import's ratings were made elsewhere, at other times: they are no one's pace today.
            today=Count("pk", filter=Q(created_at__gte=start_of_day) & ~Q(source=Rating.Source.IMPORT)),
            week=Count("pk", filter=Q(created_at__gte=week_ago) & ~Q(source=Rating.Source.IMPORT)),
            imported=Count("pk", filter=Q(source=Rating.Source.IMPORT)),
        ).order_by()
    }
    # Server-measured seconds; the client's only for rows without them (rating_seconds_on_task_expression).
    for username, seconds in ratings.annotate(seconds=rating_seconds_on_task_expression()).filter(
        seconds__isnull=False
    ).values_list("annotator__username", "seconds"):
        per_user[username]["seconds"].append(seconds)
    annotators = []
    for username, row in per_user.items():
        median = statistics.median(row["seconds"]) if row["seconds"] else None
        annotators.append(AnnotatorThroughput(
            username=username, total=row["total"], today=row["today"], last_7_days=row["week"],
            median_s=round(median, 1) if median is not None else None,
            per_hour=round(3600 / median, 1) if median else None, imported=row["imported"],
        ))
    annotators.sort(key=lambda a: (-a.last_7_days, -a.total, a.username))
    return RatingOverview(
        histogram=histogram,
        max_count=max((n for _, n in histogram), default=0),
        complete=done["complete"],
        incomplete=done["incomplete"],
        ratings=ratings.count(),
        annotators=annotators,
        imported=sum(row["imported"] for row in per_user.values()),
    )


def benchmark_list_for_overview(*, user):
    """The benchmarks ``user`` reads, by name, for the overview's filter. Raises ``PermissionDenied`` like the
    overview."""
    require_role(user, *STAFF)
    return benchmarks_readable(user=user)


def benchmark_get_for_overview(*, user, benchmark_pk: int) -> Benchmark:
    """One benchmark ``user`` reads, for the overview. Raises ``PermissionDenied``, or ``Http404`` for no such
    benchmark and for another team's (the same answer)."""
    require_role(user, *STAFF)
    benchmark = benchmark_readable(user=user, pk=benchmark_pk)
    if benchmark is None:
        raise Http404("No such benchmark.")
    return benchmark


def export_jobs_for_user(*, user):
    """Export jobs, newest first (admins only).

    Raises:
        PermissionDenied: ``user`` is not an admin.
    """
    require_role(user, ADMIN)
    return Job.objects.filter(kind=Job.Kind.EXPORT).select_related("benchmark", "created_by").order_by("-created_at")


def export_job_for_user(*, user, job_pk: int) -> Job:
    """Export job ``job_pk`` for an admin.

    Raises:
        PermissionDenied: ``user`` is not an admin.
        Job.DoesNotExist: no such export job.
    """
    return export_jobs_for_user(user=user).get(pk=job_pk)
