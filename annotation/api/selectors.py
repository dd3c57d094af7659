"""Reads for the API, each scoped to what the user may see (HackSoft selectors; roles from ``annotation.access``).

* annotators: their own ratings, the candidate answers they were assigned or rated, and the questions behind those
  at the version they rated; they rate blind, so their serializers leave out LALMs, rating counts, question status
  and correction reasons (``user_sees_blind``);
* experts: their own ratings and the ratings of questions with an open item in a refinement queue;
  every candidate answer and question;
* admins: everything.
"""
from django.apps import apps
from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery

from annotation.access import ADMIN, EXPERT, STAFF, has_role, roles_of
from annotation.models import Assignment, CandidateAnswer, Question, QuestionVersion, Rating


def user_sees_blind(user) -> bool:
    """True for a user who is neither expert nor admin: they see only what blind rating allows."""
    return not has_role(user, *STAFF)


def _queue_question_filter(prefix: str) -> Q:
    """Questions with an open refinement item. annotation does not import refinement (README, Layout): the
    relation is named through the ORM, and matches nothing when that app is not installed."""
    if not apps.is_installed("refinement"):
        return Q(pk__in=[])
    return Q(**{f"{prefix}correction_items__status": "open"})


def rating_list_for_user(*, user) -> QuerySet[Rating]:
    """Ratings ``user`` may read, newest last, with candidate, version and annotator joined."""
    roles = roles_of(user)
    ratings = Rating.objects.select_related("candidate__lalm", "question_version__question", "annotator")
    if ADMIN in roles:
        return ratings.order_by("id")
    if EXPERT in roles:
        scope = Q(annotator=user) | _queue_question_filter("question_version__question__")
        return ratings.filter(scope).distinct().order_by("id")
    return ratings.filter(annotator=user).order_by("id")


def candidate_list_for_user(*, user) -> QuerySet[CandidateAnswer]:
    """Candidate answers ``user`` may read: all for experts and admins; an annotator's assigned or rated ones."""
    candidates = CandidateAnswer.objects.select_related("lalm", "question_version__question")
    if not user_sees_blind(user):
        return candidates.order_by("id")
    mine = Q(assignments__annotator=user) | Q(ratings__annotator=user)
    return candidates.filter(pk__in=CandidateAnswer.objects.filter(mine).values("pk")).order_by("id")


def question_list_for_user(*, user, detail: bool = False) -> QuerySet[Question]:
    """Questions ``user`` may read, by id.

    Experts and admins: every question with its current version (``detail``: every version prefetched).
    Annotators: only the questions of their own ratings and assignments, each annotated with ``rated_version_id``
    (the newest version they rated or were assigned) and with only those versions prefetched, so nothing newer or
    older than what they saw is read.
    """
    questions = Question.objects.select_related("benchmark", "current_version").order_by("id")
    if not user_sees_blind(user):
        return questions.prefetch_related("versions") if detail else questions
    seen = QuestionVersion.objects.filter(
        Q(pk__in=Rating.objects.filter(annotator=user).values("question_version_id"))
        | Q(pk__in=Assignment.objects.filter(annotator=user).values("candidate__question_version_id"))
    )
    newest = seen.filter(question=OuterRef("pk")).order_by("-number").values("pk")[:1]
    return (
        questions.annotate(rated_version_id=Subquery(newest))
        .filter(rated_version_id__isnull=False)
        .prefetch_related(Prefetch("versions", queryset=seen))
    )
