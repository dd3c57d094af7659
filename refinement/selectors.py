"""Reads for the refinement pages and command; every user-facing selector checks that the user is an expert or an
admin (``annotation.access``); annotators get ``PermissionDenied``.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, Q, QuerySet

from annotation.access import STAFF, require_role
from annotation.agreement import krippendorff_alpha, value_counts_matrix
from annotation.models import Benchmark, CandidateAnswer, Modality, Question, QuestionVersion, Rating
from annotation.teams.scope import readable
from refinement.diffs import DiffPart, word_diff
from refinement.models import (
    CorrectableField,
    Correction,
    CorrectionItem,
    FlagWatermark,
    Queue,
    ReviewClaim,
    Suggestion,
)
from refinement.services.flags import WATERMARK_NAME

#: Version fields shown in the history, in this order.
HISTORY_FIELDS = (CorrectableField.QUESTION_TEXT, CorrectableField.REFERENCE_ANSWER, CorrectableField.RATIONALE,
                  CorrectableField.TRANSCRIPT)


def _scoped(rows: QuerySet, *, user, path: str) -> QuerySet:
    """``rows`` of the benchmarks ``user`` reads (reached by the lookup ``path``; :func:`annotation.teams.scope.
    readable`: an expert's team's benchmarks, or the open ones when they belong to no team; an admin's every one);
    every row when ``user`` is None (the beat's and commands' reads)."""
    return rows if user is None else readable(rows, user=user, path=path)


def _open_items(*, user=None) -> QuerySet[CorrectionItem]:
    """Open correction items; for an expert (not an admin), only of the benchmarks they work on (:func:`_scoped`)."""
    return _scoped(CorrectionItem.objects.filter(status=CorrectionItem.Status.OPEN), user=user,
                   path="question__benchmark")


def correction_items_for_user(*, user) -> QuerySet[CorrectionItem]:
    """Correction items of every status (open, corrected, dismissed) of the benchmarks ``user`` works on (experts;
    admins: all), by id: what ``/api/correction-items/`` lists. Closed items stay in, as on the question page's
    history: they are the record of what was flagged and how it ended; ``status=open`` is the queue.

    Raises:
        PermissionDenied: not an expert or admin.
    """
    require_role(user, *STAFF)
    return _scoped(CorrectionItem.objects.order_by("id"), user=user, path="question__benchmark")


def corrections_for_user(*, user) -> QuerySet[Correction]:
    """Expert corrections of the benchmarks ``user`` works on (experts; admins: all), by id, ``expert`` loaded.

    Raises:
        PermissionDenied: not an expert or admin.
    """
    require_role(user, *STAFF)
    return _scoped(Correction.objects.select_related("expert").order_by("id"), user=user, path="question__benchmark")


def queue_counts(*, user=None) -> dict[str, int]:
    """Open correction items per queue (only those ``user`` works on, when given, see :func:`_open_items`): every
    key of :class:`~refinement.models.Queue`, 0 when empty."""
    counts = dict.fromkeys(Queue.values, 0)
    rows = _open_items(user=user).values("queue").annotate(n=Count("id"))
    counts.update({row["queue"]: row["n"] for row in rows})
    return counts


def queue_counts_for_user(*, user) -> dict[str, int]:
    """:func:`queue_counts` of the items an expert works on."""
    require_role(user, *STAFF)
    return queue_counts(user=user)


def queue_items_for_user(
    *, user, queue: str, benchmark_id: int | None = None, modality: str = "", category: str = ""
) -> QuerySet[CorrectionItem]:
    """Open items of ``queue`` the user works on (experts: their benchmarks, :func:`_open_items`), most flags first,
    filtered by benchmark / modality / category (empty: all).

    Each item has ``question`` (with ``benchmark``, ``current_version``) and ``question.review_claim`` loaded and
    ``open_flags`` annotated (open items of the question across all queues).

    Raises:
        PermissionDenied: not an expert. ValueError: unknown queue.
    """
    require_role(user, *STAFF)
    if queue not in Queue.values:
        raise ValueError(f"unknown queue {queue!r}")
    items = _open_items(user=user).filter(queue=queue)
    if benchmark_id:
        items = items.filter(question__benchmark_id=benchmark_id)
    if modality:
        items = items.filter(question__modality=modality)
    if category:
        items = items.filter(question__category=category)
    return (
        items.select_related("question__benchmark", "question__current_version", "question__review_claim__expert")
        .annotate(
            open_flags=Count(
                "question__correction_items",
                filter=Q(question__correction_items__status=CorrectionItem.Status.OPEN),
            )
        )
        .order_by("-flag_count", "-open_flags", "opened_at", "pk")
    )


@dataclass(frozen=True)
class QueueNext:
    """The next item of a queue for an expert: its question's pk and external id."""

    question_id: int
    external_id: str


def queue_next_for_user(
    *, user, queue: str, question_id: int, benchmark_id: int | None = None, modality: str = "", category: str = ""
) -> QueueNext | None:
    """The open item after question ``question_id`` in ``queue``, in the queue page's order and filters
    (:func:`queue_items_for_user`), leaving out items another expert holds; the first such item when the question
    is not (or no longer) in the queue; None when nothing is left.

    Raises:
        PermissionDenied: not an expert. ValueError: unknown queue.
    """
    rows = list(
        queue_items_for_user(user=user, queue=queue, benchmark_id=benchmark_id, modality=modality, category=category)
        .values_list("question_id", "question__external_id", "question__review_claim__expert_id")
    )
    position = next((i for i, row in enumerate(rows) if row[0] == question_id), -1)
    for pk, external_id, holder in rows[position + 1:]:
        if pk != question_id and holder in (None, user.pk):
            return QueueNext(question_id=pk, external_id=external_id)
    return None


def queue_filter_choices(*, user=None) -> dict:
    """Choices of the queue filters: benchmarks, modalities, categories of questions with open items (those
    ``user`` works on, when given)."""
    open_questions = Question.objects.filter(pk__in=_open_items(user=user).values("question"))
    return {
        "benchmarks": list(Benchmark.objects.filter(questions__in=open_questions).distinct().values_list("pk", "name")),
        "modalities": Modality.choices,
        "categories": sorted(
            c for c in open_questions.values_list("category", flat=True).distinct() if c
        ),
    }


def question_for_expert(*, user, question_id: int) -> Question:
    """The question with benchmark, audio and current version, for an expert who works on its benchmark (admins:
    any question; :func:`_scoped`).

    Raises:
        PermissionDenied: not an expert. Question.DoesNotExist: no such question, or one of a benchmark the expert
            does not work on (another team's: the same answer, so its existence is not given away).
    """
    require_role(user, *STAFF)
    questions = _scoped(Question.objects.select_related("benchmark", "audio", "current_version"), user=user,
                        path="benchmark")
    return questions.get(pk=question_id)


def item_for_expert(*, user, item_id: int) -> CorrectionItem:
    """A correction item with its question, for an expert who works on its benchmark (raises like
    :func:`question_for_expert`)."""
    require_role(user, *STAFF)
    items = _scoped(CorrectionItem.objects.select_related("question__benchmark"), user=user,
                    path="question__benchmark")
    return items.get(pk=item_id)


def suggestion_for_expert(*, user, suggestion_id: int) -> Suggestion:
    """An AI suggestion of a question of a benchmark the expert reads (admins: any; raises like
    :func:`question_for_expert`: another team's suggestion is ``Suggestion.DoesNotExist``, as its question is)."""
    require_role(user, *STAFF)
    suggestions = _scoped(Suggestion.objects.select_related("question", "base_version"), user=user,
                          path="question__benchmark")
    return _with_diff(suggestions.get(pk=suggestion_id))


def _with_diff(suggestion: Suggestion) -> Suggestion:
    # ``diff``: word diff from the base version's text to the proposal (empty until the proposal is there).
    suggestion.diff = word_diff(getattr(suggestion.base_version, suggestion.field), suggestion.proposed_text)
    return suggestion


def suggestion_of_question(*, question: Question, suggestion_id: str, field: str = "") -> Suggestion | None:
    """The suggestion ``suggestion_id`` (a string from a form) if it belongs to ``question`` (and ``field``)."""
    # isdecimal, not isdigit: '²' is a digit that int() refuses. Longer than 18 digits cannot be a primary key.
    if not str(suggestion_id).isdecimal() or len(str(suggestion_id)) > 18:
        return None
    suggestions = Suggestion.objects.filter(pk=int(suggestion_id), question=question)
    if field:
        suggestions = suggestions.filter(field=field)
    return suggestions.first()


def version_of_question(*, question: Question, version_id: int | None) -> QuestionVersion:
    """The version ``version_id`` of ``question`` (the one a correction form was based on), or its current version
    when there is no such version of this question."""
    return question.versions.filter(pk=version_id).first() or question.current_version


def flags_evaluated_at():
    """When the flag rules last evaluated new ratings (``refinement.services.flags.flags_refresh_recent``, run by
    beat every minute): an aware datetime, or None before the first evaluation."""
    return FlagWatermark.objects.filter(name=WATERMARK_NAME).values_list("evaluated_at", flat=True).first()


def suggestions_open_for_user(*, user, question: Question) -> list[Suggestion]:
    """The latest AI suggestions on the question's current version that were not accepted (at most 8), each with
    ``diff`` (list of :class:`~refinement.diffs.DiffPart`) from the current text to the proposal."""
    require_role(user, *STAFF)
    suggestions = (
        Suggestion.objects.filter(question=question, base_version_id=question.current_version_id)
        .exclude(status=Suggestion.Status.ACCEPTED)
        .select_related("base_version")
        .order_by("-created_at")[:8]
    )
    return [_with_diff(s) for s in suggestions]


def claim_for_user(*, user, question: Question) -> ReviewClaim | None:
    """Who holds ``question`` now, or None."""
    require_role(user, *STAFF)
    return ReviewClaim.objects.select_related("expert").filter(question=question).first()


@dataclass
class CandidateReview:
    """One candidate answer with every rating (valid or not), the histogram of valid scores and listening time.

    ``histogram`` maps score 1..5 -> number of valid ratings; ``unable`` counts valid ratings without a score
    (codes U/E). ``audio_seconds`` is the total seconds of audio its raters played (None if never measured).
    """

    candidate: CandidateAnswer
    ratings: list[Rating]
    histogram: dict[int, int]
    unable: int
    audio_seconds: float | None
    max_count: int = 1


@dataclass(frozen=True)
class Disagreement:
    """One candidate answer whose valid scores disagree (a disagreement flag's evidence): the LALM that wrote it,
    the question version it answers, the sample variance of its scores (1–5 scale, n − 1) and the scores."""

    lalm: str
    version: int | None
    variance: float
    scores: list[int]


@dataclass
class QuestionReview:
    """Everything annotators said about a question, for the expert's item page.

    ``code_counts``: code -> valid ratings carrying it; ``comments``: (rating, comment) of every rating;
    ``candidates``: :class:`CandidateReview` for every candidate of every version, newest version first. Each open
    item of the disagreement queue carries ``disagreements``: [:class:`Disagreement`], its evidence with the LALM
    named instead of the candidate's id.
    """

    question: Question
    claim: ReviewClaim | None
    open_items: list[CorrectionItem]
    closed_items: list[CorrectionItem]
    code_counts: dict[str, int]
    candidates: list[CandidateReview] = field(default_factory=list)
    comments: list[Rating] = field(default_factory=list)


def question_review_for_user(*, user, question: Question) -> QuestionReview:
    """Build the :class:`QuestionReview` of ``question`` (raises ``PermissionDenied`` for non-experts)."""
    require_role(user, *STAFF)
    ratings = list(
        Rating.objects.filter(question_version__question=question)
        .select_related("annotator", "question_version")
        .order_by("id")
    )
    by_candidate: dict[int, list[Rating]] = defaultdict(list)
    for rating in ratings:
        by_candidate[rating.candidate_id].append(rating)
    candidates = (
        CandidateAnswer.objects.filter(question_version__question=question)
        .select_related("lalm", "question_version")
        .order_by("-question_version__number", "lalm__name")
    )
    reviews = []
    for candidate in candidates:
        rows = by_candidate.get(candidate.pk, [])
        valid = [r for r in rows if r.is_valid]
        histogram = {score: sum(r.score == score for r in valid) for score in range(1, 6)}
        played = [r.audio_seconds_played for r in rows if r.audio_seconds_played is not None]
        reviews.append(
            CandidateReview(
                candidate=candidate,
                ratings=rows,
                histogram=histogram,
                unable=sum(r.score is None for r in valid),
                audio_seconds=sum(played) if played else None,
                max_count=max([1, *histogram.values()]),
            )
        )
    items = list(
        CorrectionItem.objects.filter(question=question).select_related("opened_by", "closed_by").order_by("-opened_at")
    )
    by_pk = {str(review.candidate.pk): review.candidate for review in reviews}
    for item in items:
        item.disagreements = [
            Disagreement(
                lalm=by_pk[cid].lalm.name if cid in by_pk else f"a removed candidate answer (#{cid})",
                version=by_pk[cid].question_version.number if cid in by_pk else None,
                variance=row.get("variance"), scores=row.get("scores") or [],
            )
            for cid, row in ((item.evidence or {}).get("candidates") or {}).items()
        ]
    return QuestionReview(
        question=question,
        claim=ReviewClaim.objects.select_related("expert").filter(question=question).first(),
        open_items=[i for i in items if i.status == CorrectionItem.Status.OPEN],
        closed_items=[i for i in items if i.status != CorrectionItem.Status.OPEN],
        code_counts=dict(Counter(code for r in ratings if r.is_valid for code in r.codes)),
        candidates=reviews,
        comments=[r for r in ratings if r.comment.strip()],
    )


@dataclass
class VersionEntry:
    """One version with the word diffs of every field that changed from the previous version."""

    version: QuestionVersion
    diffs: list[tuple[str, list[DiffPart]]]
    corrections: list[Correction]


def version_history_for_user(*, user, question: Question) -> list[VersionEntry]:
    """Every version of ``question``, newest first, with word-level diffs against its predecessor."""
    require_role(user, *STAFF)
    versions = list(
        QuestionVersion.objects.filter(question=question).select_related("created_by", "job").order_by("number")
    )
    corrections = defaultdict(list)
    for correction in Correction.objects.filter(question=question).select_related("expert", "suggestion"):
        corrections[correction.to_version_id].append(correction)
    entries, previous = [], None
    for version in versions:
        diffs = []
        for name in HISTORY_FIELDS:
            old = getattr(previous, name) if previous else ""
            new = getattr(version, name)
            if previous is None or old != new:
                diffs.append((CorrectableField(name).label, word_diff(old, new)))
        entries.append(VersionEntry(version=version, diffs=diffs, corrections=corrections[version.pk]))
        previous = version
    return list(reversed(entries))


# --- reporting ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlphaRow:
    """Krippendorff's alpha (ordinal) of one set of ratings; ``alpha`` None when undefined (too few ratings)."""

    label: str
    alpha: float | None
    n_ratings: int
    n_candidates: int
    n_questions: int


@dataclass
class RefinementReport:
    """The refinement page: corrections per field per benchmark (ORCA paper, Table 1 shape), flags per queue
    (open, corrected, dismissed), and alpha of all vs valid vs invalidated ratings (the paper's 0.76/0.82/0.59)."""

    benchmarks: list[str]
    corrections: list[tuple[str, list[int], int]]
    correction_totals: list[int]
    flags: list[tuple[str, str, int, int, int]]
    alphas: list[AlphaRow]


def _alpha_row(label: str, rows: list[tuple[int, int, int]]) -> AlphaRow:
    scored = [(cid, score, qid) for cid, score, qid in rows if score is not None]
    if scored:
        ids = np.asarray([r[0] for r in scored])
        scores = np.asarray([r[1] for r in scored])
        alpha = krippendorff_alpha(value_counts=value_counts_matrix(candidate_ids=ids, scores=scores), level="ordinal")
    else:
        alpha = None
    return AlphaRow(
        label=label,
        alpha=alpha,
        n_ratings=len(scored),
        n_candidates=len({r[0] for r in scored}),
        n_questions=len({r[2] for r in scored}),
    )


def refinement_report(*, benchmark_id: int | None = None, user=None) -> RefinementReport:
    """Compute the :class:`RefinementReport` over every benchmark, or one; with ``user``, over the benchmarks they
    read only (:func:`_scoped`: an expert's team's; an admin's all).

    Corrections count distinct questions corrected per field (as the paper's Table 1: a question whose reference
    answer was corrected twice counts once). Alpha uses only scored ratings (U/E without a score are left out),
    units = candidate answers, ordinal level, via ``modelling.services.agreement`` (the ``krippendorff`` package).
    """
    corrections = Correction.objects.all()
    ratings = Rating.objects.all()
    items = CorrectionItem.objects.all()
    corrections = _scoped(corrections, user=user, path="question__benchmark")
    ratings = _scoped(ratings, user=user, path="question_version__question__benchmark")
    items = _scoped(items, user=user, path="question__benchmark")
    if benchmark_id:
        corrections = corrections.filter(question__benchmark_id=benchmark_id)
        ratings = ratings.filter(question_version__question__benchmark_id=benchmark_id)
        items = items.filter(question__benchmark_id=benchmark_id)
    table = defaultdict(set)
    for field_name, bench, qid in corrections.values_list("field", "question__benchmark__name", "question_id"):
        table[(field_name, bench)].add(qid)
    benchmarks = sorted({bench for _, bench in table})
    rows = []
    for name, label in CorrectableField.choices:
        counts = [len(table[(name, bench)]) for bench in benchmarks]
        rows.append((label, counts, sum(counts)))
    totals = [sum(r[1][i] for r in rows) for i in range(len(benchmarks))]
    totals.append(sum(totals))

    flag_counts = defaultdict(Counter)
    for row in items.values("queue", "status").annotate(n=Count("id")):
        flag_counts[row["queue"]][row["status"]] = row["n"]
    flags = [
        (key, label, flag_counts[key]["open"], flag_counts[key]["corrected"], flag_counts[key]["dismissed"])
        for key, label in Queue.choices
    ]

    all_rows = list(ratings.values_list("candidate_id", "score", "question_version__question_id", "is_valid"))
    alphas = [
        _alpha_row("All ratings", [r[:3] for r in all_rows]),
        _alpha_row("Valid ratings", [r[:3] for r in all_rows if r[3]]),
        _alpha_row("Invalidated ratings", [r[:3] for r in all_rows if not r[3]]),
    ]
    return RefinementReport(
        benchmarks=benchmarks, corrections=rows, correction_totals=totals, flags=flags, alphas=alphas
    )


def refinement_report_for_user(*, user, benchmark_id: int | None = None) -> RefinementReport:
    """:func:`refinement_report` of the benchmarks an expert reads (admins: all)."""
    require_role(user, *STAFF)
    return refinement_report(benchmark_id=benchmark_id, user=user)
