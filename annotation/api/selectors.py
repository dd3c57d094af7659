"""Reads for the API, each scoped to what the user may see (HackSoft selectors; issue 7's role matrix).

* annotators: their own ratings, and the candidate answers they were assigned or rated;
* experts: their own ratings and the ratings of questions with an open item in a refinement queue;
  every candidate answer;
* admins: everything.
"""
from django.apps import apps
from django.db.models import Q, QuerySet

from annotation.models import CandidateAnswer, Rating
from annotation.services.accounts import user_roles


def _queue_question_filter(prefix: str) -> Q:
    """Questions with an open refinement item. annotation does not import refinement (ARCHITECTURE.md): the
    relation is named through the ORM, and matches nothing when that app is not installed."""
    if not apps.is_installed("refinement"):
        return Q(pk__in=[])
    return Q(**{f"{prefix}correction_items__status": "open"})


def rating_list_for_user(*, user) -> QuerySet[Rating]:
    """Ratings ``user`` may read, newest last, with candidate, version and annotator joined."""
    roles = user_roles(user)
    ratings = Rating.objects.select_related("candidate__lalm", "question_version__question", "annotator")
    if "admin" in roles:
        return ratings.order_by("id")
    if "expert" in roles:
        scope = Q(annotator=user) | _queue_question_filter("question_version__question__")
        return ratings.filter(scope).distinct().order_by("id")
    return ratings.filter(annotator=user).order_by("id")


def candidate_list_for_user(*, user) -> QuerySet[CandidateAnswer]:
    """Candidate answers ``user`` may read: all for experts and admins; an annotator's assigned or rated ones."""
    candidates = CandidateAnswer.objects.select_related("lalm", "question_version__question")
    if user_roles(user) & {"expert", "admin"}:
        return candidates.order_by("id")
    mine = Q(assignments__annotator=user) | Q(ratings__annotator=user)
    return candidates.filter(pk__in=CandidateAnswer.objects.filter(mine).values("pk")).order_by("id")
