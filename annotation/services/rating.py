"""Stage 2 ratings: an annotator's 1–5 correctness score and feedback codes for a candidate answer.

ORCA paper, section 3.2 and Appendix A: a score on the 1–5 scale (``annotation.codes.SCORE_DEFINITIONS``), any of
the feedback codes Q, A, R, U, E (``CODE_DEFINITIONS``) and a free-text comment. A rating without a score is
allowed only with U or E (unable to judge).
"""
import math

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.codes import UNABLE_CODES, UnknownCodeError, normalize_codes
from annotation.crowd.items import quality_check_record, quality_item_for_candidate
from annotation.crowd.models import QUALITY_INVALID_REASON, AnnotatorQuality
from annotation.models import Assignment, CandidateAnswer, Question, Rating
from annotation.services import queue_sql
from annotation.services.assignment import insert_unless_raced, target_ratings_expression
from annotation.services.audit import audit_record
from annotation.teams.scope import works_on_candidate


def _clean_seconds(value: float | None, *, field: str) -> float | None:
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValidationError({field: f"{field} must be a number of seconds, got {value!r}."}) from None
    if not math.isfinite(value) or value < 0:
        raise ValidationError({field: f"{field} must be a finite number of seconds >= 0, got {value!r}."})
    return value


def _candidate_error(message: str, *, code: str) -> ValidationError:
    """A ``{"candidate": ...}`` error whose ``code`` says why the item cannot be rated."""
    return ValidationError({"candidate": ValidationError(message, code=code)})


def _no_open_assignment_error(*, candidate_id: int, annotator, now) -> ValidationError:
    """The ``{"assignment": ...}`` error for a rating without the rater's open, unexpired assignment on the
    candidate; its code says which case: ``skipped``, ``paused`` (pausing released the assignment: a paused
    annotator's item in hand is refused like every new one), ``expired`` or ``no_assignment``."""
    last = (
        Assignment.objects.filter(candidate_id=candidate_id, annotator=annotator)
        .order_by("-created_at", "-id")
        .only("status", "expires_at")
        .first()
    )
    if last is not None and last.status == Assignment.Status.SKIPPED:
        message, code = "You skipped this item, so it cannot be rated; take the next item.", "skipped"
    elif last is not None and last.status == Assignment.Status.EXPIRED and AnnotatorQuality.objects.filter(
            annotator=annotator, status=AnnotatorQuality.Status.PAUSED).exists():
        message = "Your account is paused, so this rating was not saved; an admin will look at your ratings."
        code = "paused"
    elif last is not None and (last.status == Assignment.Status.EXPIRED or last.expires_at <= now):
        when = timezone.localtime(last.expires_at).strftime("%H:%M")
        message = (f"Your time on this item ran out at {when} and it went back to the queue, so this rating was "
                   "not saved; take the next item.")
        code = "expired"
    else:
        message = ("You have no open assignment for this candidate answer; every rating is made on an item the "
                   "queue hands out (the rating page, or POST /api/assignments/next/).")
        code = "no_assignment"
    return ValidationError({"assignment": ValidationError(message, code=code)})


def rating_validate(*, score: int | None, codes) -> str:
    """Check a score and feedback codes; return the canonical code string (subset of ``"QARUE"``, in that order).

    Raises:
        ValidationError: ``{"score": ...}`` when the score is not an int 1–5, or is None without U or E;
            ``{"codes": ...}`` when a code is not one of Q, A, R, U, E.
    """
    try:
        code_string = normalize_codes(codes or "")
    except UnknownCodeError as exc:
        raise ValidationError({"codes": str(exc)}) from None
    if score is None:
        if not UNABLE_CODES & set(code_string):
            raise ValidationError(
                {"score": "Choose a score from 1 to 5, or tick U or E if you are unable to judge."}
            )
    elif isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise ValidationError({"score": f"The score must be a whole number from 1 to 5, got {score!r}."})
    return code_string


def rating_submit(
    *,
    candidate: CandidateAnswer,
    annotator,
    score: int | None,
    codes,
    comment: str = "",
    seconds_on_task: float | None = None,
    audio_seconds_played: float | None = None,
    source: str = Rating.Source.WEB,
    assignment: Assignment | None = None,
) -> Rating:
    """Record ``annotator``'s rating of ``candidate`` on its question version (ORCA paper, section 3.2, App. A).

    In one transaction, under the candidate's row lock: creates the ``Rating``, adds 1 to
    ``candidate.valid_rating_count`` and marks the annotator's open assignment(s) on the candidate submitted.
    Idempotent per (candidate, annotator): a second submit (double click, back button) returns the existing
    rating unchanged.

    Args:
        score: 1–5, or None only together with code U or E.
        codes: iterable of feedback codes or a string such as ``"ar"`` (any case and order).
        comment: free-text feedback (stripped).
        seconds_on_task: seconds from showing the item to submitting as the client measured them (>= 0), None if
            unmeasured; stored as reported. The server stores its own measure beside it,
            ``server_seconds_on_task`` (the assignment's ``created_at`` to now), which quality checks and the
            study report use.
        audio_seconds_played: seconds of audio the annotator played (>= 0), None if unmeasured.
        assignment: the assignment being answered; it must be the annotator's own on this candidate.

    Every rating needs the annotator's own open, unexpired assignment on the candidate (handed out by the queue,
    which shows neither the LALM, other ratings, judge scores nor predictions): so rating stays blind for every
    role, and a skipped or expired assignment cannot be rated (its slot may already be someone else's).

    Raises:
        ValidationError: with field names: ``score``/``codes``/``seconds_on_task``/``audio_seconds_played``
            for bad values, ``candidate`` when the question version is no longer current, the question is not
            active; ``assignment`` when it belongs to someone or something else, or the annotator holds no open,
            unexpired assignment on the candidate (code ``skipped``, ``expired`` or ``no_assignment``).
            ``candidate`` errors carry a code: ``stale_version``, ``inactive_question`` or ``not_member`` (the
            annotator no longer works on the benchmark: :mod:`annotation.teams.scope`; a member removed from a team
            cannot submit the item they held).
    """
    code_string = rating_validate(score=score, codes=codes)
    seconds_on_task = _clean_seconds(seconds_on_task, field="seconds_on_task")
    audio_seconds_played = _clean_seconds(audio_seconds_played, field="audio_seconds_played")
    comment = (comment or "").strip()
    if assignment is not None and (
        assignment.annotator_id != annotator.pk or assignment.candidate_id != candidate.pk
    ):
        raise ValidationError({"assignment": "This assignment belongs to another annotator or candidate answer."})

    now = timezone.now()
    with transaction.atomic():
        if not queue_sql.queue_lock(candidate_id=candidate.pk, skip_locked=False):
            raise CandidateAnswer.DoesNotExist(f"Candidate answer {candidate.pk} does not exist.")
        # A second statement, so its snapshot is taken after the lock: it sees whatever committed while we waited.
        state = queue_sql.queue_slot_state(candidate_id=candidate.pk, annotator_id=annotator.pk, now=now)
        if state["own_rating"] is not None:
            return Rating.objects.get(pk=state["own_rating"])
        if not state["current"]:
            raise _candidate_error(
                "This question was corrected since the item was shown; the old version cannot be rated.",
                code="stale_version",
            )
        if state["question_status"] != Question.Status.ACTIVE:
            raise _candidate_error(
                f"This question is {Question.Status(state['question_status']).label.lower()} and cannot be rated now.",
                code="inactive_question",
            )
        # A gold item or attention check: stored like any rating, but never valid (crowd/models.py).
        quality_item = quality_item_for_candidate(candidate_id=candidate.pk)
        # Teams: only who works on the benchmark now may rate it (leaving a team releases the member's items, and
        # this refuses the one in hand, also in a race with the release); qualification items are for everyone.
        if not (quality_item is not None and quality_item.in_qualification) and not works_on_candidate(
                user_id=annotator.pk, candidate_id=candidate.pk):
            raise _candidate_error(
                "This benchmark is no longer yours to rate (its team changed), so this rating was not saved; take "
                "the next item.", code="not_member")
        if not state["own_slot"]:
            raise _no_open_assignment_error(candidate_id=candidate.pk, annotator=annotator, now=now)
        # Time on task as the server saw it (assignment handed out -> rating stored): the client's number is kept
        # but never trusted, since any script can send one.
        server_seconds = max(0.0, (timezone.now() - state["own_slot_since"]).total_seconds())
        rating = Rating(
            candidate=candidate,
            question_version_id=state["question_version_id"],
            annotator=annotator,
            score=score,
            codes=code_string,
            comment=comment,
            seconds_on_task=seconds_on_task,
            server_seconds_on_task=server_seconds,
            audio_seconds_played=audio_seconds_played,
            source=source,
            is_valid=quality_item is None,
            invalid_reason="" if quality_item is None else QUALITY_INVALID_REASON,
        )
        # Field checks only: the rows were just read under the lock and rating_validate checked score and codes,
        # while the database constraints (one rating per pair, score 1–5, codes) still guard the insert. Skipping
        # full_clean's foreign-key, unique and constraint queries saves ten round trips per submit.
        rating.full_clean(exclude=["candidate", "question_version", "annotator"], validate_unique=False,
                          validate_constraints=False)
        # Submits of the same pair wait on the candidate's row lock and then see this rating; without row locks
        # (SQLite) a concurrent submit of the same annotator may commit first.
        def insert() -> Rating:
            rating.save(force_insert=True)
            return rating

        if insert_unless_raced(insert) is None:
            return Rating.objects.get(candidate_id=candidate.pk, annotator=annotator)
        if quality_item is None:
            CandidateAnswer.objects.filter(pk=candidate.pk).update(valid_rating_count=F("valid_rating_count") + 1)
        else:
            quality_check_record(rating=rating, item=quality_item)
        Assignment.objects.filter(candidate_id=candidate.pk, annotator=annotator, status=Assignment.Status.OPEN).update(
            status=Assignment.Status.SUBMITTED
        )
        audit_record(actor=annotator, action="rating.submit", obj=rating, old=None,
                     new={"score": score, "codes": code_string, "comment": comment, "source": source})
        return rating


def rating_is_editable(*, rating: Rating, k: int, valid_rating_count: int, current_version_id: int | None) -> bool:
    """True while the annotator may still change ``rating``: it is valid, on the question's current version, and
    its candidate answer has fewer than ``k`` valid ratings (the item is not complete)."""
    return rating.is_valid and rating.question_version_id == current_version_id and valid_rating_count < k


def rating_update(*, rating: Rating, annotator, score: int | None, codes, comment: str = "") -> Rating:
    """Change the score, codes and comment of ``annotator``'s own ``rating`` while its item is not complete.

    In one transaction under the candidate's row lock (the lock ``rating_submit`` takes, so the completeness check
    cannot race a new rating). The rating stays one valid rating of the candidate, so
    ``CandidateAnswer.valid_rating_count`` does not change; timings and ``created_at`` are kept. The change is
    written to the audit log (``rating.update``, old → new).

    Raises:
        ValidationError: ``score``/``codes`` as in :func:`rating_validate`; ``rating`` (code ``not_yours``) when
            it belongs to someone else; ``candidate`` with code ``invalid`` (the rating no longer counts),
            ``stale_version`` (the question was corrected) or ``complete`` (the item has all its ratings).
    """
    code_string = rating_validate(score=score, codes=codes)
    comment = (comment or "").strip()
    if rating.annotator_id != annotator.pk:
        raise ValidationError(
            {"rating": ValidationError("This rating belongs to another annotator.", code="not_yours")}
        )
    with transaction.atomic():
        locked = (
            CandidateAnswer.objects.select_for_update(of=("self",))
            .annotate(k=target_ratings_expression())
            .select_related("question_version__question")
            .get(pk=rating.candidate_id)
        )
        current = Rating.objects.select_for_update().get(pk=rating.pk)
        if not current.is_valid:
            raise _candidate_error("This rating no longer counts (the question was corrected).", code="invalid")
        if locked.question_version.question.current_version_id != current.question_version_id:
            raise _candidate_error("This question was corrected since you rated it.", code="stale_version")
        if locked.valid_rating_count >= locked.k:
            raise _candidate_error("This item has all its ratings now; ratings of complete items are final.",
                                   code="complete")
        old = {"score": current.score, "codes": current.codes, "comment": current.comment}
        current.score, current.codes, current.comment = score, code_string, comment
        current.full_clean()
        current.save(update_fields=["score", "codes", "comment", "updated_at"])
        audit_record(actor=annotator, action="rating.update", obj=current, old=old,
                     new={"score": score, "codes": code_string, "comment": comment})
        return current
