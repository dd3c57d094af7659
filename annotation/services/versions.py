"""Question versions: every change to a question's texts is a new immutable ``QuestionVersion``.

Used by Stage 1 jobs (transcript, rationale), imports and Stage 3 corrections (ORCA paper, section 3.3).
"""
from django.db import transaction
from django.db.models import Count, F, Max, OuterRef, Subquery
from django.db.models.functions import Coalesce

from annotation.models import CandidateAnswer, Question, QuestionVersion, Rating

#: Text fields a new version may change; the others are copied from the current version.
VERSIONED_FIELDS = (
    "question_text",
    "reference_answer",
    "rationale",
    "transcript",
    "transcript_language",
    "transcript_segments",
)


def version_values(*, current: QuestionVersion | None, changes: dict, clear_transcript_language: bool = False) -> dict:
    """The field values of a question's next version: ``current``'s :data:`VERSIONED_FIELDS` (none for a first
    version) with ``changes`` applied, so a field not changed is carried over (a Stage 1 transcript or rationale
    survives a correction of the reference answer).

    When ``changes`` replaces the transcript text without giving its own ``transcript_segments``, the old Whisper
    segments are emptied instead of carried over: they timed the old words. ``transcript_language`` (the audio's
    language, as Whisper detected it) is carried over too, unless ``clear_transcript_language``: imports ask for
    that (an ORCA file brings a transcript of unknown origin without Whisper's metadata); an expert's correction of
    the text (:func:`question_version_create`) keeps it.
    """
    values = {name: getattr(current, name) for name in VERSIONED_FIELDS} if current is not None else {}
    if current is not None and changes.get("transcript", current.transcript) != current.transcript:
        values["transcript_segments"] = []
        if clear_transcript_language:
            values["transcript_language"] = ""
    values.update(changes)
    return values


#: Question fields that are not texts of a version (and not the pointers that services move): an admin may
#: change them with :func:`question_details_set`.
QUESTION_DETAIL_FIELDS = (
    "audio", "audio_ref", "modality", "modality_detail", "category", "sub_category", "choices", "extra",
)


def question_details_set(*, question: Question, values: dict, by) -> Question:
    """Change ``question``'s details (names in :data:`QUESTION_DETAIL_FIELDS`: audio, modality, category, choices,
    ...) without making a version: its texts, status and current version change only through versions and
    corrections. Validated (``full_clean``) and audited (``question.details``, old → new of the changed fields).

    Raises:
        ValidationError: a field outside :data:`QUESTION_DETAIL_FIELDS`, or what ``full_clean`` finds.
    """
    from annotation.services.audit import audited_fields_set

    with transaction.atomic():
        row = Question.objects.select_for_update().get(pk=question.pk)
        audited_fields_set(row=row, values=values, allowed=QUESTION_DETAIL_FIELDS, action="question.details", by=by,
                           noun="question detail")
        return row


def question_version_create(
    *,
    question: Question,
    source: str,
    reason: str = "",
    created_by=None,
    job=None,
    **changes,
) -> QuestionVersion:
    """Create the next version of ``question`` with ``changes`` applied and make it current.

    Fields not in ``changes`` are copied from the current version (empty for the first version). Ratings and
    candidate answers are not touched: what happens to them is the caller's decision (see
    :func:`ratings_invalidate_for_version`).

    Args:
        question: the question; its row is locked for the duration (call inside or outside a transaction).
        source: a ``QuestionVersion.Source`` value.
        changes: new values for fields of :data:`VERSIONED_FIELDS`.

    Returns:
        The new version (number = previous highest + 1).

    Raises:
        ValueError: a key of ``changes`` is not a versioned field.
    """
    unknown = set(changes) - set(VERSIONED_FIELDS)
    if unknown:
        raise ValueError(f"not versioned fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        locked = Question.objects.select_for_update().get(pk=question.pk)
        current = locked.current_version
        values = version_values(current=current, changes=changes)
        last = locked.versions.aggregate(n=Max("number"))["n"] or 0
        version = QuestionVersion.objects.create(
            question=locked,
            number=last + 1,
            source=source,
            reason=reason,
            created_by=created_by,
            job=job,
            **values,
        )
        locked.current_version = version
        locked.save(update_fields=["current_version"])
    question.current_version = version
    return version


def ratings_invalidate_for_version(*, version: QuestionVersion, reason: str) -> int:
    """Mark every valid rating made on ``version`` invalid (kept, never deleted) and refresh candidate counts.

    Precondition: ``version`` is no longer its question's current version in this transaction (the caller made the
    new one current first, under the question's row lock).

    The candidate answers of ``version`` are locked (``SELECT ... FOR UPDATE``, in primary-key order) *before* the
    ratings are read. ``rating_submit`` checks the version under the same candidate lock, so a concurrent rating
    either committed before this statement reads the ratings (and is invalidated here) or waits for this
    transaction and then finds the version superseded (and is refused): no valid rating on an old version.

    Returns:
        The number of ratings invalidated.
    """
    with transaction.atomic():
        list(CandidateAnswer.objects.filter(question_version=version).order_by("pk").select_for_update()
             .values_list("pk", flat=True))
        # A new statement, so under READ COMMITTED it sees every rating committed while we waited for the locks.
        changed = Rating.objects.filter(question_version=version, is_valid=True).update(
            is_valid=False, invalid_reason=reason
        )
        candidate_counts_refresh(candidates=CandidateAnswer.objects.filter(question_version=version))
    return changed


def candidates_copy_to_version(*, candidates, version: QuestionVersion) -> list[CandidateAnswer]:
    """Copy ``candidates`` (candidate answers of an older version) onto ``version`` for re-rating: new rows with
    the same LALM, text, source job, k and priority, and no ratings (``valid_rating_count`` 0). ORCA paper, section
    3.3: an item whose context changed goes back to Stage 2.

    Returns:
        The new candidate answers, in the order given.
    """
    return [
        CandidateAnswer.objects.create(
            question_version=version,
            lalm=candidate.lalm,
            text=candidate.text,
            source_job=candidate.source_job,
            target_ratings=candidate.target_ratings,
            priority=candidate.priority,
        )
        for candidate in candidates
    ]


def version_supersede(*, old: QuestionVersion, new: QuestionVersion, reason: str) -> tuple[int, list[CandidateAnswer]]:
    """What a new version of a question already in Stage 2 does to the old one's work, as a correction does when
    only the rationale or transcript changed: the old version's valid ratings stop counting (kept, with
    ``reason``) and its candidate answers are copied onto ``new`` for re-rating.

    Call inside the transaction that made ``new`` current. Returns ``(ratings invalidated, copied candidates)``.
    """
    invalidated = ratings_invalidate_for_version(version=old, reason=reason)
    copied = candidates_copy_to_version(
        candidates=CandidateAnswer.objects.filter(question_version=old).select_related("lalm").order_by("pk"),
        version=new,
    )
    return invalidated, copied


def candidate_counts_refresh(*, candidates) -> int:
    """Recompute ``valid_rating_count`` for ``candidates`` (a queryset) from the ratings; returns rows updated."""
    valid = (
        Rating.objects.filter(candidate=OuterRef("pk"), is_valid=True)
        .order_by()
        .values("candidate")
        .annotate(n=Count("pk"))
        .values("n")
    )
    n_valid = Coalesce(Subquery(valid), 0)
    with transaction.atomic():
        # Lock first (PostgreSQL refuses FOR UPDATE with GROUP BY), then fix the stale counts in one UPDATE.
        ids = list(candidates.select_for_update().values_list("pk", flat=True))
        stale = (
            CandidateAnswer.objects.filter(pk__in=ids)
            .annotate(n_valid=n_valid)
            .exclude(valid_rating_count=F("n_valid"))
            .values_list("pk", flat=True)
        )
        return CandidateAnswer.objects.filter(pk__in=list(stale)).update(valid_rating_count=n_valid)
