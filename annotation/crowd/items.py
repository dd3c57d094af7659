"""Gold items, attention checks and their outcomes (issue: annotator quality control).

A quality item is a candidate answer with a :class:`~annotation.crowd.models.QualityItem` row. Its ratings are
``Rating`` rows written invalid (:data:`~annotation.crowd.models.QUALITY_INVALID_REASON`) by ``rating_submit``,
which calls :func:`quality_item_for_candidate` and :func:`quality_check_record`; so alpha, ORCA training, exports
and the leaderboard, which read valid ratings only, never see them. Marking a candidate answer gold invalidates the
ratings it already had (:func:`gold_item_mark`), so no rating of a gold item counts, whenever it was made.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.codes import UnknownCodeError, normalize_codes
from annotation.crowd.models import (
    GOLD_MARKED_INVALID_REASON,
    QUALITY_INVALID_REASON,
    AnnotatorQuality,
    BenchmarkQuality,
    QualificationAttempt,
    QualityCheck,
    QualityItem,
    QualityPolicy,
)
from annotation.models import LALM, Benchmark, CandidateAnswer, Question, Rating
from annotation.services.audit import audit_record, audited_fields_set
from annotation.services.versions import candidate_counts_refresh

#: The LALM row that "answers" attention checks (inactive, so no job ever asks it for candidate answers).
ATTENTION_LALM_NAME = "attention-check"


def quality_policy() -> QualityPolicy:
    """The site-wide :class:`QualityPolicy` (pk 1), created with its defaults on first use."""
    policy, _ = QualityPolicy.objects.get_or_create(pk=1)
    return policy


def _codes(codes) -> str:
    try:
        return normalize_codes(codes or "")
    except UnknownCodeError as exc:
        raise ValidationError({"expected_codes": str(exc)}) from None


def _range(min_score: int, max_score: int) -> None:
    for name, value in (("min_score", min_score), ("max_score", max_score)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise ValidationError({name: f"{name} must be a whole number from 1 to 5, got {value!r}."})
    if min_score > max_score:
        raise ValidationError({"max_score": f"The range {min_score}–{max_score} is empty (min above max)."})


def gold_item_mark(
    *, candidate: CandidateAnswer, min_score: int, max_score: int, expected_codes="", explanation: str = "",
    in_qualification: bool = False, by=None,
) -> QualityItem:
    """Make ``candidate`` a gold item accepting scores ``min_score``–``max_score`` (1–5, inclusive) and, if given,
    requiring ``expected_codes`` (subset of QARUE). Marking again updates the row (and reactivates it).

    The candidate's valid ratings made before stop counting: they are kept with ``is_valid=False`` and
    :data:`~annotation.crowd.models.GOLD_MARKED_INVALID_REASON` (so alpha, ORCA training, exports and the
    leaderboard leave them out) and are not quality checks. From now on the regular queue no longer offers it and
    ratings of it are quality checks. Holds the candidate's row lock, the lock ``rating_submit`` takes, so a rating
    in flight is either invalidated here or sees the gold item. Audited (``quality.gold_mark``, with the number of
    ratings invalidated).

    Raises:
        ValidationError: ``min_score``/``max_score`` outside 1–5 or an empty range; ``expected_codes`` unknown.
    """
    _range(min_score, max_score)
    codes = _codes(expected_codes)
    with transaction.atomic():
        CandidateAnswer.objects.select_for_update().filter(pk=candidate.pk).first()
        item, created = QualityItem.objects.select_for_update().get_or_create(
            candidate=candidate,
            defaults={"kind": QualityItem.Kind.GOLD, "min_score": min_score, "max_score": max_score,
                      "expected_codes": codes, "explanation": explanation.strip(),
                      "in_qualification": in_qualification, "created_by": by},
        )
        old = None if created else {"kind": item.kind, "min_score": item.min_score, "max_score": item.max_score,
                                    "expected_codes": item.expected_codes, "is_active": item.is_active}
        if not created:
            item.kind, item.min_score, item.max_score = QualityItem.Kind.GOLD, min_score, max_score
            item.expected_codes, item.explanation = codes, explanation.strip()
            item.in_qualification, item.is_active = in_qualification, True
            item.save()
        invalidated = Rating.objects.filter(candidate=candidate, is_valid=True).update(
            is_valid=False, invalid_reason=GOLD_MARKED_INVALID_REASON)
        if invalidated:
            candidate_counts_refresh(candidates=CandidateAnswer.objects.filter(pk=candidate.pk))
        audit_record(actor=by, action="quality.gold_mark", obj=item, old=old,
                     new={"kind": item.kind, "min_score": min_score, "max_score": max_score,
                          "expected_codes": codes, "in_qualification": in_qualification,
                          "invalidated_ratings": invalidated})
        return item


def attention_check_create(
    *, question: Question, text: str, expected_score: int, expected_codes="", explanation: str = "", by=None,
) -> QualityItem:
    """Create an attention check on ``question``'s current version: a candidate answer whose ``text`` asks for a
    specific response (e.g. "This is an attention check: rate this answer 2."), accepted only as
    ``expected_score`` (1–5) with ``expected_codes``. One attention check per question version.

    Raises:
        ValidationError: empty text, a score outside 1–5, unknown codes, a question without a current version, or
            a question version that already has an attention check.
    """
    text = (text or "").strip()
    if not text:
        raise ValidationError({"text": "Write the instruction the attention check gives."})
    _range(expected_score, expected_score)
    codes = _codes(expected_codes)
    if question.current_version_id is None:
        raise ValidationError({"question": f"Question {question} has no version yet."})
    with transaction.atomic():
        lalm, _ = LALM.objects.get_or_create(
            name=ATTENTION_LALM_NAME,
            defaults={"is_active": False, "description": "Attention checks written by admins (not a model)."},
        )
        if CandidateAnswer.objects.filter(question_version_id=question.current_version_id, lalm=lalm).exists():
            raise ValidationError({"question": f"Question {question} already has an attention check."})
        candidate = CandidateAnswer.objects.create(question_version_id=question.current_version_id, lalm=lalm,
                                                   text=text)
        item = QualityItem.objects.create(
            candidate=candidate, kind=QualityItem.Kind.ATTENTION, min_score=expected_score, max_score=expected_score,
            expected_codes=codes, explanation=explanation.strip(), created_by=by,
        )
        audit_record(actor=by, action="quality.attention_create", obj=item, old=None,
                     new={"question": question.pk, "text": text, "score": expected_score, "codes": codes})
        return item


def quality_item_deactivate(*, item: QualityItem, by=None) -> QualityItem:
    """Stop handing ``item`` out (its checks are kept). Audited (``quality.item_deactivate``)."""
    with transaction.atomic():
        QualityItem.objects.filter(pk=item.pk).update(is_active=False)
        audit_record(actor=by, action="quality.item_deactivate", obj=item, old={"is_active": item.is_active},
                     new={"is_active": False})
    item.is_active = False
    return item


def quality_item_update(
    *, item: QualityItem, min_score: int, max_score: int, expected_codes="", explanation: str = "",
    in_qualification: bool = False, is_active: bool = True, by=None,
) -> QualityItem:
    """Change a gold item's or attention check's accepted range (1–5, inclusive), expected codes, explanation,
    qualification use and whether it is handed out. Checks already recorded keep their outcome. Audited
    (``quality.item_update``, old → new of the changed fields); switching it off goes through
    :func:`quality_item_deactivate` (``quality.item_deactivate``).

    Raises:
        ValidationError: a score outside 1–5 or an empty range; unknown codes.
    """
    _range(min_score, max_score)
    codes = _codes(expected_codes)
    with transaction.atomic():
        row = QualityItem.objects.select_for_update().get(pk=item.pk)
        new = {"min_score": min_score, "max_score": max_score, "expected_codes": codes,
               "explanation": (explanation or "").strip(), "in_qualification": in_qualification}
        if is_active:
            new["is_active"] = True
        old = {name: getattr(row, name) for name, value in new.items() if getattr(row, name) != value}
        if old:
            for name in old:
                setattr(row, name, new[name])
            row.save(update_fields=list(old))
            audit_record(actor=by, action="quality.item_update", obj=row, old=old,
                         new={name: new[name] for name in old})
        if not is_active and row.is_active:
            quality_item_deactivate(item=row, by=by)
    for name in ("min_score", "max_score", "expected_codes", "explanation", "in_qualification", "is_active"):
        setattr(item, name, getattr(row, name))
    return item


#: The fields of the quality policy an admin sets.
POLICY_FIELDS = (
    "qualification_required", "qualification_items", "qualification_pass_mark", "qualification_attempts",
    "warn_score", "pause_score", "min_ratings", "max_attention_failures", "auto_pause",
)


def quality_policy_set(*, values: dict, by=None) -> QualityPolicy:
    """Change the site-wide quality policy: ``values`` maps names of :data:`POLICY_FIELDS` to new values. Validated
    (``full_clean``: shares and scores within 0–1, the warn score at most the pause score) and audited
    (``quality.policy_set``, old → new of the changed fields).

    Raises:
        ValidationError: a field outside :data:`POLICY_FIELDS`, or what ``full_clean`` finds (per field).
    """
    with transaction.atomic():
        quality_policy()
        row = QualityPolicy.objects.select_for_update().get(pk=1)
        audited_fields_set(row=row, values=values, allowed=POLICY_FIELDS, action="quality.policy_set", by=by,
                           noun="policy field")
        return row


def benchmark_quality_set(
    *, benchmark: Benchmark, gold_rate: float, attention_rate: float, min_seconds: float = 0.0,
    training_feedback: bool = False, by=None,
) -> BenchmarkQuality:
    """Set ``benchmark``'s insertion rates (probabilities 0–1 per next item; their sum at most 1), the minimum
    seconds on task of an attention check and training feedback. Audited (``quality.benchmark_set``).

    Raises:
        ValidationError: a rate outside 0–1, rates summing above 1, or negative seconds.
    """
    for name, value in (("gold_rate", gold_rate), ("attention_rate", attention_rate)):
        if not 0 <= value <= 1:
            raise ValidationError({name: f"{name} must be between 0 and 1, got {value!r}."})
    if gold_rate + attention_rate > 1:
        raise ValidationError({"attention_rate": "gold_rate + attention_rate must not exceed 1."})
    if min_seconds < 0:
        raise ValidationError({"min_seconds": "min_seconds must be >= 0."})
    with transaction.atomic():
        row, _ = BenchmarkQuality.objects.update_or_create(
            benchmark=benchmark,
            defaults={"gold_rate": gold_rate, "attention_rate": attention_rate, "min_seconds": min_seconds,
                      "training_feedback": training_feedback},
        )
        audit_record(actor=by, action="quality.benchmark_set", obj=row, old=None,
                     new={"gold_rate": gold_rate, "attention_rate": attention_rate, "min_seconds": min_seconds,
                          "training_feedback": training_feedback})
        return row


def quality_item_for_candidate(*, candidate_id: int) -> QualityItem | None:
    """The quality item on candidate ``candidate_id`` (active or not), or None for an ordinary candidate answer."""
    return QualityItem.objects.filter(candidate_id=candidate_id).first()


@dataclass(frozen=True)
class CheckOutcome:
    """Whether a rating passes a quality item, and why not (empty when it passes)."""

    passed: bool
    reason: str


def quality_check_evaluate(
    *, item: QualityItem, score: int | None, codes: str, server_seconds: float | None, min_seconds: float = 0.0,
) -> CheckOutcome:
    """Judge one rating of ``item``: the score must lie in ``[min_score, max_score]``, the codes must include the
    expected codes, and an attention check must take at least ``min_seconds`` of ``server_seconds`` (the rating's
    ``server_seconds_on_task``: assignment handed out → rating stored). The client's own number is never used,
    and a missing time counts as 0 s, so it fails a positive minimum.
    """
    reasons = []
    if score is None or not item.min_score <= score <= item.max_score:
        accepted = (f"{item.min_score}" if item.min_score == item.max_score
                    else f"{item.min_score}–{item.max_score}")
        reasons.append(f"score {score if score is not None else 'none'} not in {accepted}")
    missing = set(item.expected_codes) - set(codes)
    if missing:
        reasons.append("missing code(s) " + "".join(c for c in "QARUE" if c in missing))
    seconds = server_seconds or 0.0
    if item.kind == QualityItem.Kind.ATTENTION and min_seconds > 0 and seconds < min_seconds:
        reasons.append(f"{seconds:.1f} s on task, below {min_seconds:g} s")
    return CheckOutcome(passed=not reasons, reason="; ".join(reasons))


def quality_check_record(*, rating: Rating, item: QualityItem) -> QualityCheck:
    """Record the outcome of ``rating`` (just written, on ``item``'s candidate) as a :class:`QualityCheck`.

    If the annotator has a running qualification attempt and the item is a qualification item, the check counts
    toward it; when the attempt's last item is rated, the attempt is decided against the policy's pass mark and a
    pass sets ``AnnotatorQuality.qualified_at``. Call inside ``rating_submit``'s transaction.
    """
    config = BenchmarkQuality.objects.filter(
        benchmark__questions__versions__pk=rating.question_version_id).first()
    outcome = quality_check_evaluate(item=item, score=rating.score, codes=rating.codes,
                                     server_seconds=rating.server_seconds_on_task,
                                     min_seconds=config.min_seconds if config else 0.0)
    attempt = None
    if item.in_qualification:
        attempt = (QualificationAttempt.objects.select_for_update()
                   .filter(annotator_id=rating.annotator_id, passed__isnull=True).order_by("-number").first())
    check = QualityCheck.objects.create(
        rating=rating, item=item, annotator_id=rating.annotator_id, kind=item.kind, passed=outcome.passed,
        reason=outcome.reason, attempt=attempt,
        phase=QualityCheck.Phase.QUALIFICATION if attempt else QualityCheck.Phase.QUEUE,
    )
    if attempt is not None:
        attempt.done_items += 1
        attempt.passed_items += int(outcome.passed)
        if attempt.done_items >= attempt.total:
            policy = quality_policy()
            attempt.passed = attempt.passed_items >= policy.qualification_pass_mark * attempt.total - 1e-9
            attempt.finished_at = timezone.now()
            if attempt.passed:
                AnnotatorQuality.objects.update_or_create(annotator_id=rating.annotator_id,
                                                          defaults={"qualified_at": attempt.finished_at})
            audit_record(actor=rating.annotator, action="quality.qualification_finish", obj=attempt, old=None,
                         new={"passed": attempt.passed, "passed_items": attempt.passed_items,
                              "total": attempt.total})
        attempt.save()
    return check


def quality_feedback(*, rating: Rating) -> str | None:
    """Training-mode feedback after ``rating`` of a gold item ("Gold item: passed. <explanation>"), or None when
    the rating was not of a gold item or its benchmark has training feedback off."""
    if rating.is_valid or rating.invalid_reason != QUALITY_INVALID_REASON:
        return None  # an ordinary rating: no query on the submit path
    check = (QualityCheck.objects.select_related("item").filter(rating=rating, kind=QualityItem.Kind.GOLD)
             .first())
    if check is None:
        return None
    if not BenchmarkQuality.objects.filter(benchmark__questions__versions__pk=rating.question_version_id,
                                           training_feedback=True).exists():
        return None
    item = check.item
    accepted = f"{item.min_score}" if item.min_score == item.max_score else f"{item.min_score}–{item.max_score}"
    verdict = "your rating matches" if check.passed else f"your rating does not match ({check.reason})"
    text = f"Training item: the accepted score is {accepted}; {verdict}."
    if item.explanation:
        text += f" {item.explanation}"
    return text


def candidates_without_quality_items(candidates):
    """``candidates`` (a ``CandidateAnswer`` queryset) without gold items and attention checks: for readers that
    list candidate answers rather than valid ratings (per-LALM answer counts, model scores over all answers)."""
    return candidates.filter(quality_item__isnull=True)
