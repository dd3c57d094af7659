"""Expert corrections: a new immutable question version and its effects, planned, shown, then saved atomically.

ORCA paper, sections 3.3 and 5.2. Saving a correction of question ``Q`` from version ``v`` to ``v+1``:

1. ``v+1`` is created by ``annotation.services.versions.question_version_create`` (source ``expert``; author,
   time, reason, queue in the reason and in :class:`~refinement.models.Correction` rows, one per changed field);
2. every valid rating of ``v`` is invalidated (kept, ``is_valid=False`` with the reason; never deleted) by
   ``ratings_invalidate_for_version``;
3. re-entry (section 3.3, "corrected data feeds back into Stage 1b"):

   * a changed question or reference answer starts Stage 1b for ``v+1``: one candidate-answer job per active LALM
     whose provider is available here (``annotation.providers.answers.answer_availability``);
   * candidate answers of ``v`` are copied onto ``v+1`` for re-rating (new rows, ``valid_rating_count`` 0) for
     every LALM that is not regenerated -- all of them when only the rationale or transcript changed; none when
     the question text changed (an answer to another question is not worth rating);

4. every open correction item of the question is closed as ``corrected`` with ``v+1`` and the claim released.

All of it is one transaction: any error leaves nothing written. :func:`correction_plan` computes the same effects
without writing, for the confirmation page.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotation.models import LALM, CandidateAnswer, Job, Question, QuestionVersion, Rating
from annotation.providers.answers import answer_availability
from annotation.services.audit import audit_record
from annotation.services.jobs import job_start
from annotation.services.versions import (
    candidates_copy_to_version,
    question_version_create,
    ratings_invalidate_for_version,
)
from refinement.diffs import DiffPart, word_diff
from refinement.models import CorrectableField, Correction, CorrectionItem, Suggestion
from refinement.services.queues import question_claim, question_release

#: Fields whose change makes the existing candidate answers answers to a different item: Stage 1b re-entry.
REENTRY_FIELDS = frozenset({CorrectableField.QUESTION_TEXT, CorrectableField.REFERENCE_ANSWER})


class StaleVersionError(ValidationError):
    """The question got a newer version since the expert opened the form."""


@dataclass(frozen=True)
class FieldChange:
    """One changed field: name, old and new text, and the word diff between them."""

    field: str
    label: str
    old: str
    new: str
    diff: list[DiffPart]


@dataclass(frozen=True)
class CorrectionPlan:
    """What saving would do (shown to the expert before saving).

    Attributes:
        changes: the changed fields (unchanged ones are left out).
        ratings_to_invalidate: valid ratings of the base version that become invalid.
        candidates_on_base: candidate answers of the base version.
        regenerate_lalms: LALMs asked for new candidate answers (Stage 1b) for the new version.
        unavailable_lalms: (LALM, reason) for active LALMs that cannot regenerate here.
        copy_candidates: candidate answers copied onto the new version for re-rating.
        open_items: the open correction items the save closes.
    """

    question: Question
    base_version: QuestionVersion
    changes: list[FieldChange]
    ratings_to_invalidate: int
    candidates_on_base: int
    regenerate_lalms: list[LALM] = field(default_factory=list)
    unavailable_lalms: list[tuple[LALM, str]] = field(default_factory=list)
    copy_candidates: list[CandidateAnswer] = field(default_factory=list)
    open_items: list[CorrectionItem] = field(default_factory=list)

    @property
    def changed_fields(self) -> list[str]:
        return [c.field for c in self.changes]

    @property
    def reentry(self) -> bool:
        return bool(REENTRY_FIELDS & set(self.changed_fields))


@dataclass(frozen=True)
class CorrectionResult:
    """What a save did: the new version, Correction rows, ratings invalidated, jobs started, candidates copied."""

    version: QuestionVersion
    corrections: list[Correction]
    ratings_invalidated: int
    jobs: list[Job]
    copied_candidates: list[CandidateAnswer]
    closed_items: int


def _normalise(text: str) -> str:
    # Browsers send CRLF; versions store LF, and trailing whitespace is never a correction.
    return (text or "").replace("\r\n", "\n").strip()


def correction_plan(*, question: Question, base_version: QuestionVersion, texts: dict[str, str]) -> CorrectionPlan:
    """Compute the effects of saving ``texts`` over ``base_version`` without writing anything.

    Args:
        texts: field name (:class:`~refinement.models.CorrectableField`) -> new text; fields left out are unchanged.

    Raises:
        ValidationError: unknown field, nothing changed, or the question/reference would become empty.
        StaleVersionError: ``base_version`` is no longer the question's current version.
    """
    unknown = set(texts) - set(CorrectableField.values)
    if unknown:
        raise ValidationError({"field": f"cannot correct {', '.join(sorted(unknown))}"})
    question.refresh_from_db(fields=["current_version", "status"])
    if question.current_version_id != base_version.pk:
        raise StaleVersionError(
            f"{question} has a newer version (v{question.current_version.number}) than the one edited "
            f"(v{base_version.number}); reload and redo the correction."
        )
    changes = []
    for name in CorrectableField.values:
        if name not in texts:
            continue
        old, new = getattr(base_version, name), _normalise(texts[name])
        if new == _normalise(old):
            continue
        if not new and name in REENTRY_FIELDS:
            raise ValidationError({name: f"The {CorrectableField(name).label.lower()} cannot be empty."})
        changes.append(FieldChange(field=name, label=CorrectableField(name).label, old=old, new=new,
                                   diff=word_diff(old, new)))
    if not changes:
        raise ValidationError("Nothing changed: edit at least one field.")

    candidates = list(CandidateAnswer.objects.filter(question_version=base_version).select_related("lalm"))
    regenerate, unavailable = [], []
    if REENTRY_FIELDS & {c.field for c in changes} and question.status != Question.Status.ACTIVE:
        unavailable = [
            (lalm, f"the question is {question.get_status_display().lower()}")
            for lalm in LALM.objects.filter(is_active=True).order_by("name")
        ]
    elif REENTRY_FIELDS & {c.field for c in changes} and question.audio_id is None:
        # An LALM answers from the audio (Stage 1b): without a clip there is nothing to ask it.
        unavailable = [
            (lalm, "the question has no audio clip") for lalm in LALM.objects.filter(is_active=True).order_by("name")
        ]
    elif REENTRY_FIELDS & {c.field for c in changes}:
        for lalm in LALM.objects.filter(is_active=True).order_by("name"):
            availability = answer_availability(lalm=lalm)
            if availability.ok:
                regenerate.append(lalm)
            else:
                unavailable.append((lalm, availability.reason))
    question_changed = any(c.field == CorrectableField.QUESTION_TEXT for c in changes)
    regenerated_ids = {lalm.pk for lalm in regenerate}
    copy = [] if question_changed else [c for c in candidates if c.lalm_id not in regenerated_ids]
    return CorrectionPlan(
        question=question,
        base_version=base_version,
        changes=changes,
        ratings_to_invalidate=Rating.objects.filter(question_version=base_version, is_valid=True).count(),
        candidates_on_base=len(candidates),
        regenerate_lalms=regenerate,
        unavailable_lalms=unavailable,
        copy_candidates=copy,
        open_items=list(CorrectionItem.objects.filter(question=question, status=CorrectionItem.Status.OPEN)),
    )


def correction_reason_clean(reason: str | None) -> str:
    """The reason of a correction, stripped: every correction says why (kept on the version and its Correction rows).

    Raises:
        ValidationError: ``{"reason": ...}`` when it is empty or only white space.
    """
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "Say why you corrected the item before saving."})
    return reason


def correction_save(
    *,
    question: Question,
    base_version: QuestionVersion,
    texts: dict[str, str],
    expert,
    reason: str,
    queue: str = "",
    suggestions: dict[str, Suggestion] | None = None,
) -> CorrectionResult:
    """Save an expert's correction with all its effects in one transaction (see the module docstring).

    Args:
        texts: field -> new text, as for :func:`correction_plan`.
        expert: the user correcting; must hold the question's claim or gets it.
        reason: why (required); stored on the version and every Correction row.
        queue: the queue the expert worked from ('' if none), recorded on the Correction rows.
        suggestions: field -> the accepted AI :class:`Suggestion` the text came from (marked accepted).

    Returns:
        :class:`CorrectionResult`.

    Raises:
        ValidationError / StaleVersionError: as :func:`correction_plan`; empty reason.
        refinement.services.queues.ClaimedByAnotherExpert: another expert holds the question.
    """
    reason = correction_reason_clean(reason)
    suggestions = suggestions or {}
    for name, suggestion in suggestions.items():
        if (
            suggestion.question_id != question.pk
            or suggestion.field != name
            or suggestion.status != Suggestion.Status.DONE
        ):
            raise ValidationError({name: "That AI suggestion is not a ready proposal for this field of this question."})
    with transaction.atomic():
        # Lock the question first so two saves of one question serialise and the second sees a stale version.
        locked = Question.objects.select_for_update().get(pk=question.pk)
        question_claim(question=locked, expert=expert)
        plan = correction_plan(question=locked, base_version=base_version, texts=texts)
        fields = ", ".join(c.label.lower() for c in plan.changes)
        version = question_version_create(
            question=locked,
            source=QuestionVersion.Source.EXPERT,
            reason=f"Expert correction ({queue or 'no queue'}) of {fields}: {reason}",
            created_by=expert,
            **{c.field: c.new for c in plan.changes},
        )
        corrections = [
            Correction.objects.create(
                question=locked,
                field=change.field,
                queue=queue,
                old_text=change.old,
                new_text=change.new,
                from_version=base_version,
                to_version=version,
                suggestion=suggestions.get(change.field),
                expert=expert,
                reason=reason,
            )
            for change in plan.changes
        ]
        for suggestion in suggestions.values():
            Suggestion.objects.filter(pk=suggestion.pk).update(
                status=Suggestion.Status.ACCEPTED, decided_at=timezone.now()
            )
        invalidated = ratings_invalidate_for_version(
            version=base_version, reason=f"Question corrected in v{version.number} ({fields}) by {expert}: {reason}"
        )
        copied = candidates_copy_to_version(candidates=plan.copy_candidates, version=version)
        jobs = candidates_reentry_start(version=version, lalms=plan.regenerate_lalms, created_by=expert)
        now = timezone.now()
        closed = CorrectionItem.objects.filter(question=locked, status=CorrectionItem.Status.OPEN).update(
            status=CorrectionItem.Status.CORRECTED,
            closed_at=now,
            closed_by=expert,
            close_reason=reason,
            closed_version=version,
            updated_at=now,
        )
        question_release(question=locked, expert=expert)
        audit_record(actor=expert, action="question.correct", obj=version, old={c.field: c.old for c in plan.changes},
                     new={**{c.field: c.new for c in plan.changes}, "ratings_invalidated": invalidated,
                          "suggestions_accepted": sorted(s.pk for s in suggestions.values())})
    question.current_version = version
    return CorrectionResult(
        version=version,
        corrections=corrections,
        ratings_invalidated=invalidated,
        jobs=jobs,
        copied_candidates=copied,
        closed_items=closed,
    )


def candidates_reentry_start(*, version: QuestionVersion, lalms: list[LALM], created_by) -> list[Job]:
    """Start Stage 1b for one corrected version: one candidate-answer job per LALM (ORCA paper, section 3.3).

    Uses ``annotation.services.jobs.job_start`` (kind ``candidates``, this question only); call inside the
    correction's transaction: the jobs' Celery messages are sent on commit, and a failure rolls the correction back.

    Raises:
        annotation.services.jobs.JobStartError: an LALM's provider became unavailable, or the question is not active.
    """
    question = version.question
    return [
        job_start(
            kind=Job.Kind.CANDIDATES,
            benchmark=question.benchmark,
            lalm=lalm,
            external_ids=[question.external_id],
            created_by=created_by,
        )
        for lalm in lalms
    ]
