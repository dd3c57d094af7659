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
"""
from __future__ import annotations

from functools import cache

from django.db import connection
from django.db.models import Q

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
