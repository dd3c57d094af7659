"""The *k* rule: how many valid ratings a candidate answer wants (ORCA paper, section 3.2), written once for the
ORM and for the work queue's plain SQL (:mod:`annotation.services.queue_sql`).

``k`` of a candidate answer = its own ``CandidateAnswer.target_ratings`` (set by routing), else its benchmark's
``Benchmark.target_ratings``, else ``settings.ANNOTATION_TARGET_RATINGS``: the first that is set. Both forms below
list the same sources in the same order; ``tests/annotation/test_assignment.py`` checks that the SQL queue and the
ORM pick the same candidates.
"""
from django.conf import settings
from django.db.models import IntegerField, Value
from django.db.models.functions import Coalesce

#: Where k comes from, first set wins, as lookups from a candidate answer; then the setting.
_OWN = "target_ratings"
_BENCHMARK = "question_version__question__benchmark__target_ratings"


def target_ratings_default() -> int:
    """The platform's k (``settings.ANNOTATION_TARGET_RATINGS``), for candidates and benchmarks that set none."""
    return settings.ANNOTATION_TARGET_RATINGS


def target_ratings_expression(*, via: str = "", own: bool = True) -> Coalesce:
    """Query expression giving each candidate answer's ``k`` (an int >= 1).

    Args:
        via: lookup path from the queryset's model to the candidate answer, ending in ``__`` (``""`` for
            ``CandidateAnswer`` querysets, ``"candidate__"`` for ``Rating`` ones).
        own: False leaves out the candidate's own ``target_ratings``: the k it gets when routing sets none.
    """
    sources = ([via + _OWN] if own else []) + [via + _BENCHMARK]
    return Coalesce(*sources, Value(target_ratings_default()), output_field=IntegerField())


def target_ratings_sql(*, candidate: str = "c", benchmark: str = "b") -> str:
    """SQL for ``k`` of the candidate answer aliased ``candidate`` whose benchmark is joined as ``benchmark``.

    Takes one parameter, :func:`target_ratings_default`.
    """
    return f"COALESCE({candidate}.target_ratings, {benchmark}.target_ratings, %s)"
