"""Writing a candidate answer's routing fields (``target_ratings``, ``priority``) on behalf of whoever routes.

Annotation knows nothing about why: routing by ORCA's predicted disagreement lives in ``modelling`` and calls this
service (README, Layout: annotation imports neither modelling nor refinement). The workbench honours the fields
as it always did (``annotation.services.assignment``: closest-to-done first, then priority, then the random key; the
effective k is ``target_ratings``, else the benchmark's, else ``ANNOTATION_TARGET_RATINGS``).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError

from annotation.models import CandidateAnswer

#: Largest target a router may set (more raters than this is never useful on a 5-point scale).
MAX_TARGET_RATINGS = 20


def candidate_routing_set(*, candidate_ids: Iterable[int], target_ratings: int | None, priority: int) -> int:
    """Set ``target_ratings`` (None = the default k) and ``priority`` on these candidate answers in one UPDATE.

    Args:
        candidate_ids: primary keys of ``CandidateAnswer``; unknown ones are ignored.
        target_ratings: 0..``MAX_TARGET_RATINGS`` ratings wanted, or None to fall back to the benchmark's k; 0 means
            "not to be rated" (a sampling policy did not draw the answer; the queue never offers it).
        priority: queue priority, any integer (0 is the default; higher is offered first).

    Returns:
        The number of rows updated.

    Raises:
        ValidationError: target_ratings outside 0..MAX_TARGET_RATINGS.
    """
    if target_ratings is not None and not 0 <= target_ratings <= MAX_TARGET_RATINGS:
        raise ValidationError(
            {"target_ratings": f"must be between 0 and {MAX_TARGET_RATINGS} or empty, not {target_ratings}"}
        )
    ids = sorted(set(candidate_ids))
    if not ids:
        return 0
    return CandidateAnswer.objects.filter(pk__in=ids).update(target_ratings=target_ratings, priority=int(priority))
