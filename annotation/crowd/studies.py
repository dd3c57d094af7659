"""Crowd studies (Prolific, MTurk, ...): entry links, quota and completion code, and the study report.

An entry link ``/study/<slug>/?PROLIFIC_PID=...&STUDY_ID=...&SESSION_ID=...`` (parameter names configurable per
study) is checked by :func:`study_link_check`: the study must be enabled, the participant id must be one of its
platform's ids (Prolific: 24 hexadecimal characters) and the study id must be the study's own. Opening the link
(GET) only shows the welcome page; its "Start the study" button (a POST, so it carries the CSRF token of the
participant's own browser) calls :func:`study_enter`, which creates or resumes a pseudonymous annotator without a
password: the account is named from a hash of the platform parameter and participant id, so one participant id
never gets a second account, and a returning participant resumes where they left off (their open assignment, quota
progress and qualification are kept). A study with ``signed_links`` also wants ``sig``, an HMAC of the participant
id and study id (:func:`study_link_signature`), for links an admin sends out one by one. Every refusal is the same
:class:`StudyEntryRefused`, so a link cannot be used to find out which studies exist or are open (README,
"Security and integrity").
"""
from __future__ import annotations

import hashlib
import logging
import statistics
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import quote, urlencode

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone
from django.utils.crypto import constant_time_compare, salted_hmac

from annotation.crowd.models import (
    GENERIC_ID_RE,
    SIGNATURE_PARAM,
    AnnotatorQuality,
    QualityCheck,
    Study,
    StudyParticipant,
)
from annotation.crowd.selectors import study_participation_get
from annotation.models import Rating
from annotation.services.audit import audit_record, audited_fields_set
from annotation.services.exports.writers import csv_text

logger = logging.getLogger(__name__)


class StudyEntryRefused(Exception):
    """The entry link does not let anyone in: no such study, not enabled, an id missing or not the platform's, the
    wrong study id, or the study is full. ``str()`` is the reason for the log; participants all see one message."""


@dataclass(frozen=True)
class StudyLink:
    """An entry link that passed :func:`study_link_check`: its study and the platform's ids it carries."""

    study: Study
    participant_id: str
    external_study_id: str
    session_id: str

    @property
    def username(self) -> str:
        """The participant's account name (shared by every study with the same participant parameter)."""
        return _username(param=self.study.participant_param, participant_id=self.participant_id)


def participant_id_normalise(*, study: Study, value: str) -> str:
    """A platform id (participant, study or session id) as the platform writes it, so one person is one id: trimmed,
    and for Prolific (24 hexadecimal characters, case-insensitive) in lower case, the way Prolific writes its ids.
    Other platforms' ids are kept as typed (MTurk worker ids and most others are case-sensitive). Used before an id
    is matched, signed, turned into an account name or stored."""
    value = (value or "").strip()
    return value.lower() if study.platform == Study.Platform.PROLIFIC else value


def _username(*, param: str, participant_id: str) -> str:
    digest = hashlib.sha256(f"{param}:{participant_id}".encode()).hexdigest()[:20]
    return f"crowd-{digest}"


def study_items_done(*, participant: StudyParticipant) -> int:
    """Items ``participant`` rated in the study's benchmark (real items and checks alike: each is paid work)."""
    return study_items_done_for(user_id=participant.user_id, benchmark_id=participant.study.benchmark_id)


def study_items_done_for(*, user_id: int, benchmark_id: int) -> int:
    """Ratings of user ``user_id`` on questions of benchmark ``benchmark_id`` (any version, valid or not)."""
    return Rating.objects.filter(annotator_id=user_id, question_version__question__benchmark_id=benchmark_id).count()


def study_link_check(*, slug: str, params) -> StudyLink:
    """Check the entry link of study ``slug`` with query ``params`` (a mapping such as ``request.GET``); writes
    nothing.

    Raises:
        StudyEntryRefused: no such study or it is not enabled; the participant id is missing or not one of the
            platform's ids (:meth:`Study.id_pattern`); the study id is not the study's ``external_study_id``; a
            study with ``signed_links`` gets no or a wrong ``sig``; a session id is given but not letters, digits
            and ``_ . : @ -``. The reason is for the log only.
    """
    study = Study.objects.select_related("benchmark").filter(slug=slug).first()
    if study is None or not study.is_enabled:
        raise StudyEntryRefused(f"study {slug!r} does not exist or is not enabled")
    pattern = study.id_pattern()
    participant_id = participant_id_normalise(study=study, value=params.get(study.participant_param))
    if not pattern.match(participant_id):
        raise StudyEntryRefused(f"study {slug!r}: missing or malformed {study.participant_param}")
    external = participant_id_normalise(study=study, value=params.get(study.study_param))
    # an enabled study always has one (study_enabled_needs_id_and_cap)
    if external != participant_id_normalise(study=study, value=study.external_study_id):
        raise StudyEntryRefused(f"study {slug!r}: {study.study_param} is not this study's id")
    if study.signed_links and not constant_time_compare(
            str(params.get(SIGNATURE_PARAM) or ""), study_link_signature(study=study, participant_id=participant_id)):
        raise StudyEntryRefused(f"study {slug!r}: missing or wrong {SIGNATURE_PARAM}")
    session = participant_id_normalise(study=study, value=params.get(study.session_param)) \
        if study.session_param else ""
    if session and not GENERIC_ID_RE.match(session):  # stored only: any platform's session id format will do
        raise StudyEntryRefused(f"study {slug!r}: malformed {study.session_param}")
    return StudyLink(study=study, participant_id=participant_id, external_study_id=external, session_id=session)


def study_link_signature(*, study: Study, participant_id: str) -> str:
    """The ``sig`` of ``participant_id``'s entry link to ``study``: HMAC-SHA256 (Django's ``salted_hmac`` with
    ``SECRET_KEY``, salted per study) of the participant id and the study's platform id, 64 hex characters. A new
    ``SECRET_KEY`` or study id makes every signed link of the study invalid."""
    participant_id = participant_id_normalise(study=study, value=participant_id)
    external = participant_id_normalise(study=study, value=study.external_study_id)
    return salted_hmac(f"orca.study-link.{study.pk}", f"{participant_id}\n{external}",
                       algorithm="sha256").hexdigest()


def study_signed_links(*, study: Study, base_url: str, participant_ids: list[str]) -> list[tuple[str, str]]:
    """``(participant id, entry link)`` for each of ``participant_ids`` (blank lines and repeats left out): ``base_url``
    (the absolute /study/<slug>/ URL) with the participant id, the study id and its signature.

    Raises:
        ValidationError: ``{"participant_ids": ...}`` naming the ids that are not the platform's.
    """
    ids = list(dict.fromkeys(participant_id_normalise(study=study, value=pid) for pid in participant_ids
                             if pid.strip()))
    bad = [pid for pid in ids if not study.id_pattern().match(pid)]
    if bad:
        raise ValidationError({"participant_ids": "Not a participant id on this study's platform: "
                                                  f"{', '.join(bad[:5])}{' …' if len(bad) > 5 else ''}."})
    return [(pid, base_url + "?" + urlencode({
        study.participant_param: pid, study.study_param: study.external_study_id,
        SIGNATURE_PARAM: study_link_signature(study=study, participant_id=pid)})) for pid in ids]


def study_link_is_for(*, link: StudyLink, user) -> bool:
    """True when ``user`` is the account the link's participant logs in as."""
    return bool(getattr(user, "is_authenticated", False)) and user.get_username() == link.username


def study_enter(*, slug: str, params) -> StudyParticipant:
    """Create or resume the participant named by ``params`` (see :func:`study_link_check`) in study ``slug``.

    Returns the participation (its ``user`` is the passwordless annotator account to log in). The account is in
    the ``annotator`` group and is shared by every study that uses the same participant parameter. Audited
    (``study.join``) for a new participant.

    Raises:
        StudyEntryRefused: the link does not pass :func:`study_link_check`, or the study reached
            ``max_participants`` (a returning participant is always let back in).
    """
    link = study_link_check(slug=slug, params=params)
    now = timezone.now()
    with transaction.atomic():
        locked = Study.objects.select_for_update().get(pk=link.study.pk)  # serialises the cap check
        same = StudyParticipant.objects.filter(study=locked)
        # Prolific ids match whatever their case, also rows stored as typed before ids were normalised.
        same = same.filter(participant_id__iexact=link.participant_id) if locked.platform == Study.Platform.PROLIFIC \
            else same.filter(participant_id=link.participant_id)
        existing = same.order_by("joined_at").first()
        if existing is not None:
            existing.session_id, existing.last_seen_at = link.session_id or existing.session_id, now
            existing.save(update_fields=["session_id", "last_seen_at"])
            return existing
        if not locked.is_enabled or locked.participants.count() >= (locked.max_participants or 0):
            raise StudyEntryRefused(f"study {slug!r} is full or was disabled meanwhile")
        User = get_user_model()
        username = link.username
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
            study=locked, user=user, participant_id=link.participant_id, session_id=link.session_id,
            external_study_id=link.external_study_id, last_seen_at=now,
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
    """Where a finished participant goes: ``completion_url`` with ``{code}`` replaced by the completion code
    (URL-quoted), as the form's help text says; the URL as written when it has no ``{code}`` (then it already
    carries the code, which :meth:`Study.clean` checks); '' when none is set."""
    return study.completion_url.replace("{code}", quote(study.completion_code, safe="")) if study.completion_url \
        else ""


def study_entry_link(*, study: Study, base_url: str) -> str:
    """The URL to paste into the platform: ``base_url`` (the absolute /study/<slug>/ URL) with each configured
    parameter. Prolific: its placeholders, e.g. ``?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}...``,
    which Prolific fills in. Other platforms: the study id written out and ``{PARAM}`` where the platform's own
    placeholder for the participant (and session) id goes."""
    if study.platform == Study.Platform.PROLIFIC:
        values = {p: f"{{{{%{p}%}}}}" for p in (study.participant_param, study.study_param, study.session_param)}
    else:
        values = {study.participant_param: f"{{{study.participant_param}}}",
                  study.study_param: quote(study.external_study_id, safe="") or f"{{{study.study_param}}}",
                  study.session_param: f"{{{study.session_param}}}"}
    return base_url + "?" + "&".join(f"{param}={value}" for param, value in values.items() if param)


@dataclass(frozen=True)
class StudyRow:
    """One participant in the study report.

    Seconds are the server's time on task (assignment handed out → rating stored, ``server_seconds_on_task``);
    ``median_client_seconds`` is what the rating page reported, for comparison only (a missing value counts as
    nothing). ``progress`` is "completed" (the quota is reached), "in progress" or "not started"; ``quality`` is the
    annotator's status (active, warned or paused).
    """

    participant_id: str
    username: str
    joined_at: object
    completed_at: object
    items: int
    median_seconds: float | None
    total_seconds: float
    median_client_seconds: float | None
    hourly_pay: Decimal | None
    gold_accuracy: float | None
    attention_failures: int
    progress: str
    quality: str


def study_report(*, study: Study) -> list[StudyRow]:
    """Per participant: items done, median and total server seconds on task, the hourly pay the study's fixed reward
    per item implies at the median server time (reward × 3600 / median s; Prolific judges pay on median completion
    time), the client's median for comparison, gold accuracy (share of gold checks passed, None without one), failed
    attention checks, progress and quality status. Three queries whatever the number of participants."""
    rows = []
    participants = list(study.participants.select_related("user", "user__quality").order_by("joined_at"))
    users = [p.user_id for p in participants]
    # Grouped queries for all participants, each scoped to the study's benchmark (an account is shared by every
    # study with the same participant parameter).
    in_study = Rating.objects.filter(annotator_id__in=users,
                                     question_version__question__benchmark_id=study.benchmark_id)
    items_of: dict[int, int] = dict.fromkeys(users, 0)
    server_of: dict[int, list[float]] = {user: [] for user in users}
    client_of: dict[int, list[float]] = {user: [] for user in users}
    for user, server, client in in_study.values_list("annotator_id", "server_seconds_on_task", "seconds_on_task"):
        items_of[user] += 1
        if server is not None:
            server_of[user].append(server)
        if client is not None:
            client_of[user].append(client)
    no_checks = {"gold": 0, "gold_ok": 0, "attention_failed": 0}
    checks_of = {row.pop("annotator_id"): row for row in QualityCheck.objects.filter(
        annotator_id__in=users, rating__question_version__question__benchmark_id=study.benchmark_id,
    ).values("annotator_id").annotate(
        gold=Count("pk", filter=Q(kind="gold")), gold_ok=Count("pk", filter=Q(kind="gold", passed=True)),
        attention_failed=Count("pk", filter=Q(kind="attention", passed=False)),
    )}
    for p in participants:
        seconds, items = server_of[p.user_id], items_of[p.user_id]
        checks = checks_of.get(p.user_id, no_checks)
        median = statistics.median(seconds) if seconds else None
        pay = (Decimal(str(study.reward_per_item)) * Decimal(3600) / Decimal(str(median))).quantize(Decimal("0.01")) \
            if median else None
        progress = ("completed" if p.completed_at is not None or items >= study.quota
                    else "in progress" if items else "not started")
        quality = getattr(getattr(p.user, "quality", None), "status", AnnotatorQuality.Status.ACTIVE)
        rows.append(StudyRow(
            participant_id=p.participant_id, username=p.user.username, joined_at=p.joined_at,
            completed_at=p.completed_at, items=items, median_seconds=median, total_seconds=float(sum(seconds)),
            median_client_seconds=statistics.median(client_of[p.user_id]) if client_of[p.user_id] else None,
            hourly_pay=pay, gold_accuracy=(checks["gold_ok"] / checks["gold"]) if checks["gold"] else None,
            attention_failures=checks["attention_failed"], progress=progress, quality=quality,
        ))
    return rows


def study_report_csv(*, study: Study) -> str:
    """:func:`study_report` as CSV text (header row first; empty cells for missing values), written by the exports'
    CSV writer, so no cell runs as a spreadsheet formula."""
    def number(value, digits: int) -> str:
        return "" if value is None else f"{value:.{digits}f}"

    from annotation.crowd.speed import study_fast_participants

    header = ["participant_id", "username", "joined_at", "completed_at", "items", "median_seconds", "total_seconds",
              "median_client_seconds", f"hourly_pay_{study.currency}", "gold_accuracy", "attention_failures",
              "progress", "quality", "unusually_fast"]
    report = study_report(study=study)
    fast = study_fast_participants(rows=report)
    rows = ([
        r.participant_id, r.username, r.joined_at.isoformat(), r.completed_at.isoformat() if r.completed_at else "",
        r.items, number(r.median_seconds, 1), number(r.total_seconds, 1), number(r.median_client_seconds, 1),
        "" if r.hourly_pay is None else str(r.hourly_pay), number(r.gold_accuracy, 3), r.attention_failures,
        r.progress, r.quality, fast.get(r.participant_id, ""),
    ] for r in report)
    return csv_text(header=header, rows=rows)


#: The fields of a study an admin sets (the platform's study form and the Django admin).
STUDY_FIELDS = (
    "name", "slug", "benchmark", "platform", "external_study_id", "participant_param", "study_param",
    "session_param", "signed_links", "quota", "max_participants", "completion_code", "completion_url",
    "instructions", "reward_per_item", "currency", "is_enabled",
)


def study_save(*, study: Study | None = None, values: dict, by) -> Study:
    """Create a study (``study`` None) or change ``study``: ``values`` maps names of :data:`STUDY_FIELDS` to their
    new values (fields left out keep theirs). Validated with ``full_clean`` (:meth:`Study.clean`: platform ids,
    parameter names, completion URL; an enabled study needs the platform's study id and a participant cap) and
    audited (``study.create`` with every field, ``study.update`` with the changed ones, old → new).

    Raises:
        ValidationError: a field outside :data:`STUDY_FIELDS`, or what ``full_clean`` finds (per field).
    """
    with transaction.atomic():
        if study is None:
            row = Study(created_by=by if getattr(by, "is_authenticated", False) else None)
        else:  # the entry links' lock: an entry in flight sees the study before or after the change, whole
            row = Study.objects.select_for_update().get(pk=study.pk)
        audited_fields_set(row=row, values=values, allowed=STUDY_FIELDS, by=by, noun="study field",
                           action="study.create" if study is None else "study.update")
        return row


def study_enabled_set(*, study: Study, enabled: bool, by) -> Study:
    """Enable or disable ``study`` (its entry links work only while it is enabled); audited like
    :func:`study_save`, whose rules apply.

    Raises:
        ValidationError: enabling a study without the platform's study id, its parameter or a participant cap.
    """
    return study_save(study=study, values={"is_enabled": enabled}, by=by)
