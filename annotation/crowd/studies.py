"""Crowd studies (Prolific, MTurk, ...): entry links, quota and completion code, and the study report.

An entry link ``/study/<slug>/?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=...`` (parameter names configurable per
study) creates or resumes a pseudonymous annotator without a password: the account is named from a hash of the
platform parameter and participant id, so one participant id never gets a second account, and a returning
participant resumes where they left off (their open assignment, quota progress and qualification are kept).
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import statistics
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.crowd.models import AnnotatorQuality, QualityCheck, Study, StudyParticipant
from annotation.crowd.selectors import study_participation_get
from annotation.models import Rating
from annotation.services.audit import audit_record

_ID_RE = re.compile(r"^[A-Za-z0-9_.:@-]{1,200}$")


class StudyClosed(Exception):
    """The entry link names no enabled study, or the study is full; ``str()`` is the message for the participant."""


def _username(*, param: str, participant_id: str) -> str:
    digest = hashlib.sha256(f"{param}:{participant_id}".encode()).hexdigest()[:20]
    return f"crowd-{digest}"


def study_items_done(*, participant: StudyParticipant) -> int:
    """Items ``participant`` rated in the study's benchmark (real items and checks alike: each is paid work)."""
    return study_items_done_for(user_id=participant.user_id, benchmark_id=participant.study.benchmark_id)


def study_items_done_for(*, user_id: int, benchmark_id: int) -> int:
    """Ratings of user ``user_id`` on questions of benchmark ``benchmark_id`` (any version, valid or not)."""
    return Rating.objects.filter(annotator_id=user_id, question_version__question__benchmark_id=benchmark_id).count()


def study_enter(*, slug: str, params) -> StudyParticipant:
    """Create or resume the participant named by ``params`` (a mapping such as ``request.GET``) in study ``slug``.

    Returns the participation (its ``user`` is the passwordless annotator account to log in). The account is in
    the ``annotator`` group and is shared by every study that uses the same participant parameter.

    Raises:
        StudyClosed: no such study, it is not enabled, or it reached ``max_participants`` (a returning participant
            is always let back in).
        ValidationError: ``{"participant_id": ...}`` missing or malformed id; ``{"study_id": ...}`` the platform's
            study id differs from the configured one.
    """
    study = Study.objects.select_related("benchmark").filter(slug=slug).first()
    if study is None or not study.is_enabled:
        raise StudyClosed("This study is not open. Please return to the platform you came from.")
    participant_id = (params.get(study.participant_param) or "").strip()
    if not _ID_RE.match(participant_id):
        raise ValidationError({"participant_id": f"The link must carry your {study.participant_param}."})
    external = (params.get(study.study_param) or "").strip() if study.study_param else ""
    if study.external_study_id and external != study.external_study_id:
        raise ValidationError({"study_id": "This link belongs to a different study."})
    session = (params.get(study.session_param) or "").strip()[:200] if study.session_param else ""
    now = timezone.now()
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=study.pk)  # serialises the cap check
        existing = StudyParticipant.objects.filter(study=locked, participant_id=participant_id).first()
        if existing is not None:
            existing.session_id, existing.last_seen_at = session or existing.session_id, now
            existing.save(update_fields=["session_id", "last_seen_at"])
            return existing
        if locked.max_participants is not None and locked.participants.count() >= locked.max_participants:
            raise StudyClosed("This study is full. Please return to the platform you came from.")
        User = get_user_model()
        username = _username(param=locked.participant_param, participant_id=participant_id)
        try:
            with transaction.atomic():
                user, created = User.objects.get_or_create(username=username)
        except IntegrityError:  # a concurrent first entry of the same participant made it
            user, created = User.objects.get(username=username), False
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
            user.groups.add(Group.objects.get(name="annotator"))
            AnnotatorQuality.objects.get_or_create(annotator=user)
        participant = StudyParticipant.objects.create(
            study=locked, user=user, participant_id=participant_id, session_id=session,
            external_study_id=external, last_seen_at=now,
        )
        audit_record(actor=None, actor_label=f"participant {username}", action="study.join", obj=participant,
                     old=None, new={"study": locked.pk, "user": user.pk, "new_account": created})
        participant.study = locked
        return participant


def study_completion_for(*, user) -> StudyParticipant | None:
    """The user's latest participation if it reached the quota (marking ``completed_at`` the first time), else
    None (also for anonymous users and non-participants). The view then shows the completion code and sends the
    participant to ``completion_url``."""
    participant = study_participation_get(user=user)
    if participant is None:
        return None
    if participant.completed_at is None:
        if study_items_done(participant=participant) < participant.study.quota:
            return None
        participant.completed_at = timezone.now()
        participant.save(update_fields=["completed_at"])
    return participant


def study_completion_url(*, study: Study) -> str:
    """Where a finished participant goes: ``completion_url`` with ``{code}`` replaced, or '' when none is set."""
    return study.completion_url.replace("{code}", study.completion_code) if study.completion_url else ""


def study_entry_link(*, study: Study, base_url: str) -> str:
    """The URL to paste into the platform: ``base_url`` (the absolute /study/<slug>/ URL) with each configured
    parameter set to Prolific's placeholder form, e.g. ``?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID=...``."""
    params = [p for p in (study.participant_param, study.study_param, study.session_param) if p]
    return base_url + "?" + "&".join(f"{p}={{{{%{p}%}}}}" for p in params)


@dataclass(frozen=True)
class StudyRow:
    """One participant in the study report (seconds are time on task as the rating page measured it)."""

    participant_id: str
    username: str
    joined_at: object
    completed_at: object
    items: int
    median_seconds: float | None
    total_seconds: float
    hourly_pay: Decimal | None
    gold_accuracy: float | None
    attention_failures: int
    status: str


def study_report(*, study: Study) -> list[StudyRow]:
    """Per participant: items done, median and total seconds on task, the hourly pay the study's fixed reward per
    item implies at the median time (reward × 3600 / median s; Prolific judges pay on median completion time),
    gold accuracy (share of gold checks passed, None without one), failed attention checks and status."""
    rows = []
    participants = list(study.participants.select_related("user", "user__quality").order_by("joined_at"))
    users = [p.user_id for p in participants]
    # Three grouped queries for all participants, each scoped to the study's benchmark (an account is shared by
    # every study with the same participant parameter).
    in_study = Rating.objects.filter(annotator_id__in=users,
                                     question_version__question__benchmark_id=study.benchmark_id)
    items_of = dict(in_study.values("annotator_id").annotate(n=Count("pk")).values_list("annotator_id", "n"))
    seconds_of: dict[int, list[float]] = {user: [] for user in users}
    for user, value in in_study.filter(seconds_on_task__isnull=False).values_list("annotator_id", "seconds_on_task"):
        seconds_of[user].append(value)
    no_checks = {"gold": 0, "gold_ok": 0, "attention_failed": 0}
    checks_of = {row.pop("annotator_id"): row for row in QualityCheck.objects.filter(
        annotator_id__in=users, rating__question_version__question__benchmark_id=study.benchmark_id,
    ).values("annotator_id").annotate(
        gold=Count("pk", filter=Q(kind="gold")), gold_ok=Count("pk", filter=Q(kind="gold", passed=True)),
        attention_failed=Count("pk", filter=Q(kind="attention", passed=False)),
    )}
    for p in participants:
        seconds, items = seconds_of[p.user_id], items_of.get(p.user_id, 0)
        checks = checks_of.get(p.user_id, no_checks)
        median = statistics.median(seconds) if seconds else None
        pay = (Decimal(str(study.reward_per_item)) * Decimal(3600) / Decimal(str(median))).quantize(Decimal("0.01")) \
            if median else None
        status = getattr(getattr(p.user, "quality", None), "status", AnnotatorQuality.Status.ACTIVE)
        rows.append(StudyRow(
            participant_id=p.participant_id, username=p.user.username, joined_at=p.joined_at,
            completed_at=p.completed_at, items=items, median_seconds=median, total_seconds=float(sum(seconds)),
            hourly_pay=pay, gold_accuracy=(checks["gold_ok"] / checks["gold"]) if checks["gold"] else None,
            attention_failures=checks["attention_failed"], status=status,
        ))
    return rows


def study_report_csv(*, study: Study) -> str:
    """:func:`study_report` as CSV text (header row first; empty cells for missing values)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["participant_id", "username", "joined_at", "completed_at", "items", "median_seconds",
                     "total_seconds", f"hourly_pay_{study.currency}", "gold_accuracy", "attention_failures",
                     "status"])
    for r in study_report(study=study):
        writer.writerow([
            r.participant_id, r.username, r.joined_at.isoformat(), r.completed_at.isoformat() if r.completed_at else "",
            r.items, "" if r.median_seconds is None else f"{r.median_seconds:.1f}", f"{r.total_seconds:.1f}",
            "" if r.hourly_pay is None else str(r.hourly_pay),
            "" if r.gold_accuracy is None else f"{r.gold_accuracy:.3f}", r.attention_failures, r.status,
        ])
    return out.getvalue()
