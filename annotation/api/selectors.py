"""Reads for the API, each scoped to what the user may see (HackSoft selectors; roles from ``annotation.access``).

* annotators: their own ratings, the candidate answers they were assigned or rated, and the questions behind those
  at the version they rated; they rate blind, so their serializers leave out LALMs, rating counts, question status
  and correction reasons (``user_sees_blind``);
* experts: their own ratings and the ratings of questions with an open item in a refinement queue;
  every candidate answer and question;
* admins: everything.

Each of these is moreover cut to the benchmarks the user reads (:mod:`annotation.teams.scope`, the one rule of
every read): another team's question, candidate answer, rating or benchmark is a 404 or is left out of a list.
"""
from django.apps import apps
from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery

from annotation.access import ADMIN, EXPERT, STAFF, has_role, roles_of
from annotation.models import CandidateAnswer, Question, QuestionVersion, Rating
from annotation.teams.scope import benchmarks_readable, readable, readable_candidate_q


def user_sees_blind(user) -> bool:
    """True for a user who is neither expert nor admin: they see only what blind rating allows."""
    return not has_role(user, *STAFF)


def _queue_question_filter(prefix: str) -> Q:
    """Questions with an open refinement item. annotation does not import refinement (README, Layout): the
    relation is named through the ORM, and matches nothing when that app is not installed."""
    if not apps.is_installed("refinement"):
        return Q(pk__in=[])
    return Q(**{f"{prefix}correction_items__status": "open"})


def benchmark_list_for_user(*, user) -> QuerySet:
    """Benchmarks ``user`` reads, by name (``/api/benchmarks/``): admins all; everyone else the ones of their team,
    the open ones when they are in no team, a crowd participant their study's (:mod:`annotation.teams.scope`)."""
    return benchmarks_readable(user=user)


def rating_list_for_user(*, user) -> QuerySet[Rating]:
    """Ratings ``user`` may read, newest last, with candidate, version and annotator joined: an expert's of the
    benchmarks they read, an annotator's of the candidate answers they still read
    (:func:`~annotation.teams.scope.readable_candidate_q`)."""
    roles = roles_of(user)
    ratings = Rating.objects.select_related("candidate__lalm", "question_version__question", "annotator")
    if ADMIN in roles:
        return ratings.order_by("id")
    if EXPERT in roles:
        scope = Q(annotator=user) | _queue_question_filter("question_version__question__")
        ratings = readable(ratings, user=user, path="question_version__question__benchmark")
        return ratings.filter(pk__in=Rating.objects.filter(scope).values("pk")).order_by("id")
    return ratings.filter(readable_candidate_q(user=user, path="candidate__")).filter(annotator=user).order_by("id")


def candidate_list_for_user(*, user) -> QuerySet[CandidateAnswer]:
    """Candidate answers ``user`` may read: of the benchmarks they read for experts (admins: all); an annotator's
    assigned or rated ones that they still read (:func:`~annotation.teams.scope.readable_candidate_q`: leaving a
    team ends the access its assignments gave)."""
    candidates = CandidateAnswer.objects.select_related("lalm", "question_version__question")
    if not user_sees_blind(user):
        return readable(candidates, user=user, path="question_version__question__benchmark").order_by("id")
    mine = Q(assignments__annotator=user) | Q(ratings__annotator=user)
    own = CandidateAnswer.objects.filter(mine).filter(readable_candidate_q(user=user, path=""))
    return candidates.filter(pk__in=own.values("pk")).order_by("id")


def question_list_for_user(*, user, detail: bool = False) -> QuerySet[Question]:
    """Questions ``user`` may read, by id.

    Experts and admins: every question of the benchmarks they read (:mod:`annotation.teams.scope`; admins: all)
    with its current version (``detail``: every version prefetched).
    Annotators: only the questions of their own ratings and assignments that they still read
    (:func:`candidate_list_for_user`), each annotated with ``rated_version_id`` (the newest version they rated or
    were assigned) and with only those versions prefetched, so nothing newer or older than what they saw is read.
    """
    questions = Question.objects.select_related("benchmark", "current_version").order_by("id")
    if not user_sees_blind(user):
        questions = readable(questions, user=user, path="benchmark")
        return questions.prefetch_related("versions") if detail else questions
    seen = QuestionVersion.objects.filter(
        pk__in=candidate_list_for_user(user=user).values("question_version_id")
    )
    newest = seen.filter(question=OuterRef("pk")).order_by("-number").values("pk")[:1]
    return (
        questions.annotate(rated_version_id=Subquery(newest))
        .filter(rated_version_id__isnull=False)
        .prefetch_related(Prefetch("versions", queryset=seen))
    )
