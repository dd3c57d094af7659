"""Which benchmarks a user works on: the membership rule, written once for the work queue's SQL and for the ORM.

A user **works on** a benchmark when

* they are a member of it (``BenchmarkMembership``), or
* they have no membership at all and the benchmark has no members (an open benchmark: without teams everyone
  works on everything, as before teams existed), or
* they take part in a crowd study of that benchmark (the admin who set up the study chose its benchmark for
  its participants).

So a member is served only their own benchmarks, and a benchmark given to a team is never served to anyone
outside it. The rating queue (:mod:`annotation.services.queue_sql`, :mod:`annotation.services.assignment`) applies
the rule to everyone who rates; the refinement queues apply it to experts (admins see every queue).
``tests/annotation/test_teams.py`` checks that the two forms agree.

A user **reads** a benchmark (:func:`readable_q`, the one rule of every read of the platform: pages, API, audio)
when they are an admin, or they work on it, except that a crowd-study participant reads only the benchmarks of
their studies and of their memberships (the study gate serves them nothing else, so the open benchmarks are not
theirs to read). What belongs to a benchmark someone does not read is answered as if it did not exist (404, or
left out of a list); the README's "Teams, users and invitations" section lists every surface and the few that
are deliberately global. ``tests/annotation/test_team_scope.py`` checks each surface.
"""
from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Q, QuerySet

from annotation.access import ADMIN, has_role
from annotation.crowd.models import Study, StudyParticipant
from annotation.teams.models import BenchmarkMembership


@cache
def _tables() -> tuple[str, str, str]:
    quote = connection.ops.quote_name
    return tuple(quote(model._meta.db_table) for model in (BenchmarkMembership, StudyParticipant, Study))


def works_on_sql(*, benchmark: str) -> str:
    """SQL condition: the user works on the benchmark whose id is the SQL expression ``benchmark`` (e.g.
    ``q.benchmark_id``). Takes three parameters, the user's id each time (:func:`works_on_params`)."""
    member, participant, study = _tables()
    return (
        f"(EXISTS (SELECT 1 FROM {member} tm WHERE tm.user_id = %s AND tm.benchmark_id = {benchmark}) "
        f"OR (NOT EXISTS (SELECT 1 FROM {member} tm WHERE tm.benchmark_id = {benchmark}) "
        f"AND NOT EXISTS (SELECT 1 FROM {member} tm WHERE tm.user_id = %s)) "
        f"OR EXISTS (SELECT 1 FROM {participant} tp JOIN {study} ts ON ts.id = tp.study_id "
        f"WHERE tp.user_id = %s AND ts.benchmark_id = {benchmark}))"
    )


def works_on_params(*, user_id: int) -> list[int]:
    """The parameters of :func:`works_on_sql` for ``user_id``."""
    return [user_id, user_id, user_id]


def works_on_q(*, user, path: str) -> Q:
    """The same rule as a filter: rows whose benchmark (reached by the lookup ``path``, e.g.
    ``"question_version__question__benchmark"``; ``"pk"`` for a ``Benchmark`` queryset) ``user`` works on."""
    mine = BenchmarkMembership.objects.filter(user=user).values("benchmark")
    if mine.exists():
        rule = Q(**{f"{path}__in": mine})
    else:
        rule = ~Q(**{f"{path}__in": BenchmarkMembership.objects.values("benchmark")})
    studies = Study.objects.filter(participants__user=user).values("benchmark")
    return rule | Q(**{f"{path}__in": studies})


def works_on_candidate(*, user_id: int, candidate_id: int) -> bool:
    """True when the user works on the benchmark of candidate answer ``candidate_id`` (one statement; False when
    there is no such candidate answer). The rating service asks it under the candidate's lock, so a member removed
    from a team cannot submit the item they held."""
    from annotation.models import CandidateAnswer, Question, QuestionVersion

    quote = connection.ops.quote_name
    candidate, version, question = (quote(m._meta.db_table) for m in (CandidateAnswer, QuestionVersion, Question))
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {works_on_sql(benchmark='q.benchmark_id')} FROM {candidate} c "
            f"JOIN {version} v ON v.id = c.question_version_id JOIN {question} q ON q.id = v.question_id "
            "WHERE c.id = %s",
            [*works_on_params(user_id=user_id), candidate_id],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


#: A filter every row passes, also when combined with ``|`` (``Q() | q`` is ``q``: an empty ``Q`` would drop an
#: admin's "everything" from an OR). ``pk IN ()`` is empty, so its negation is the whole table (no SQL at all).
EVERY_ROW = ~Q(pk__in=[])


def readable_q(*, user, path: str) -> Q:
    """The read rule as a filter: rows whose benchmark (reached by the lookup ``path``; ``"pk"`` for a
    ``Benchmark`` queryset) ``user`` reads. Admins read everything; a crowd-study participant the benchmarks of
    their studies and memberships; everyone else what they work on (:func:`works_on_q`)."""
    if has_role(user, ADMIN):
        return EVERY_ROW
    if StudyParticipant.objects.filter(user=user).exists():
        mine = BenchmarkMembership.objects.filter(user=user).values("benchmark")
        studies = Study.objects.filter(participants__user=user).values("benchmark")
        return Q(**{f"{path}__in": mine}) | Q(**{f"{path}__in": studies})
    return works_on_q(user=user, path=path)


def readable(rows: QuerySet, *, user, path: str) -> QuerySet:
    """``rows`` restricted to the benchmarks ``user`` reads (:func:`readable_q`)."""
    return rows.filter(readable_q(user=user, path=path))


def readable_candidate_q(*, user, path: str) -> Q:
    """Candidate answers (reached by ``path``: ``""`` for a ``CandidateAnswer`` queryset, ``"candidate__"`` for
    ratings) ``user`` reads: of a benchmark they read (:func:`readable_q`), or qualification items, which the queue
    hands to everyone whatever their team (the platform's entry test, ``annotation.crowd.queue``)."""
    return readable_q(user=user, path=f"{path}question_version__question__benchmark") | Q(
        **{f"{path}quality_item__in_qualification": True})


def benchmarks_readable(*, user) -> QuerySet:
    """The benchmarks ``user`` reads, by name: every list or choice of benchmarks shown to them."""
    from annotation.models import Benchmark

    return readable(Benchmark.objects.order_by("name"), user=user, path="pk")


def benchmark_readable(*, user, pk=None, name: str | None = None):
    """The benchmark with primary key ``pk`` (or ``name``) if ``user`` reads it, else None: the same answer as for a
    benchmark that does not exist, so a forced ``?benchmark=`` learns nothing about another team's benchmark."""
    rows = benchmarks_readable(user=user)
    if pk is not None:
        rows = rows.filter(pk=pk)
    elif name is not None:
        rows = rows.filter(name=name)
    else:
        return None
    return rows.first()


def reads_every_benchmark(*, user) -> bool:
    """True when ``user`` reads every benchmark (admins; everyone while no benchmark has a team): only then do
    figures over all benchmarks (the leaderboard's "All benchmarks", the agreement page's overall alpha) stay as
    they are; otherwise they are computed over the user's benchmarks or offered per benchmark."""
    from annotation.models import Benchmark

    if has_role(user, ADMIN):
        return True
    return not Benchmark.objects.exclude(readable_q(user=user, path="pk")).exists()
