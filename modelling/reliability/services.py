"""Rater reliability on the platform: compute every annotator's signals from the database, store a snapshot,
apply the policy's warn/pause thresholds (through ``annotation.crowd.annotators``), and read the ranking.

The agreement signals, U/E share and seconds on task use the ratings that count (``rating_counting_queryset``:
valid and on the question's current version, as alpha does); gold accuracy and attention failures come from
``QualityCheck`` rows. Seconds on task are the server's (``Rating.server_seconds_on_task``), the client's only for
ratings without them, stored before the server measured time or imported
(``annotation.selectors.rating_seconds_on_task_expression``).

Import-only accounts (``annotation.models.ImportAccount``: the pseudonymised raters of imported ratings, who cannot
log in and are never served items) are not ranked, warned or paused: they get no snapshot. Their ratings still count
where ratings count (alpha, the leaderboard, ORCA training) and are part of the crowd every platform annotator's
signals are compared with (the leave-one-out means, Dawid–Skene, the random share's crowd).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.access import STAFF, role_q
from annotation.crowd.annotators import annotator_status_set
from annotation.crowd.items import quality_policy
from annotation.crowd.models import AnnotatorQuality, QualityCheck
from annotation.models import ImportAccount
from annotation.selectors import rating_counting_queryset, rating_seconds_on_task_expression
from modelling.orca.metrics import json_finite
from modelling.reliability.models import ReliabilitySnapshot
from modelling.reliability.signals import RaterSignals, combined_risk, rater_signals_compute


def reliability_signals_load() -> dict[int, RaterSignals]:
    """Signals of every annotator with a valid rating or a quality check, combined risk filled in; their
    ``median_seconds`` is of the server-measured time on task (module docstring for rows without it)."""
    policy = quality_policy()
    rows = list(rating_counting_queryset().annotate(seconds=rating_seconds_on_task_expression()).values_list(
        "candidate_id", "annotator_id", "score", "codes", "seconds"))
    if rows:
        items, annotators, scores, codes, seconds = zip(*rows)
        scores_arr = np.array([np.nan if s is None else float(s) for s in scores])
        unable = np.array(["U" in c or "E" in c for c in codes])
        seconds_arr = np.array([np.nan if s is None else float(s) for s in seconds])
        signals = rater_signals_compute(item_ids=np.array(items), annotator_ids=np.array(annotators),
                                        scores=scores_arr, unable=unable, seconds=seconds_arr,
                                        min_items=policy.min_ratings, reference_risk=policy.pause_score)
    else:
        signals = {}
    checks = QualityCheck.objects.values("annotator_id").annotate(
        gold=Count("pk", filter=Q(kind="gold")), gold_ok=Count("pk", filter=Q(kind="gold", passed=True)),
        attention=Count("pk", filter=Q(kind="attention")),
        attention_failed=Count("pk", filter=Q(kind="attention", passed=False)))
    for row in checks:
        sig = signals.setdefault(row["annotator_id"],
                                 RaterSignals(annotator_id=row["annotator_id"], n_ratings=0, n_scored=0))
        sig.gold_checks, sig.attention_checks = row["gold"], row["attention"]
        sig.gold_accuracy = row["gold_ok"] / row["gold"] if row["gold"] else None
        sig.attention_failures = row["attention_failed"]
    combined_risk(signals, min_items=policy.min_ratings, max_attention_failures=policy.max_attention_failures)
    return signals


def _summary(sig: RaterSignals) -> str:
    parts = [f"combined risk {sig.combined:.2f}"]
    parts += [f"{name} risk {value:.2f}" for name, value in sorted(sig.risks.items()) if value > 0]
    if sig.loo_rho is not None:
        parts.append(f"leave-one-out rho {sig.loo_rho:.2f}")
    if sig.random_share is not None and sig.risks.get("random"):
        parts.append(f"random share {sig.random_share:.2f} ± {sig.random_share_se:.2f}")
    return "; ".join(parts)


@dataclass(frozen=True)
class ReliabilityRun:
    """What one computation did: annotators scored, and who was warned, paused or cleared."""

    computed_at: object
    annotators: int
    warned: list[int]
    paused: list[int]
    cleared: list[int]


def reliability_refresh(*, by=None) -> ReliabilityRun:
    """Compute the signals, store one :class:`ReliabilitySnapshot` per annotator and apply the thresholds of
    ``QualityPolicy``: combined risk >= ``pause_score`` pauses (when ``auto_pause``), >= ``warn_score`` warns, and
    a warned annotator back below ``warn_score`` is cleared. Paused annotators are never resumed automatically;
    staff are never warned or paused. Import-only accounts get no snapshot and no status (module docstring), though
    their ratings are part of the signals' crowd. Status changes are audited by ``annotator_status_set``.
    """
    policy = quality_policy()
    signals = reliability_signals_load()
    now = timezone.now()
    User = get_user_model()
    staff = set(User.objects.filter(role_q(*STAFF)).values_list("pk", flat=True))
    imported = set(ImportAccount.objects.values_list("user_id", flat=True))
    signals = {annotator_id: sig for annotator_id, sig in signals.items() if annotator_id not in imported}
    statuses = dict(AnnotatorQuality.objects.values_list("annotator_id", "status"))
    warned, paused, cleared, snapshots = [], [], [], []
    with transaction.atomic():
        for annotator_id, sig in signals.items():
            status = statuses.get(annotator_id, AnnotatorQuality.Status.ACTIVE)
            action = ""
            if sig.combined is not None and annotator_id not in staff and status != AnnotatorQuality.Status.PAUSED:
                user = User(pk=annotator_id)
                if policy.auto_pause and sig.combined >= policy.pause_score:
                    annotator_status_set(annotator=user, status=AnnotatorQuality.Status.PAUSED,
                                         reason=f"automatic: {_summary(sig)}", by=by)
                    action = "paused"
                    paused.append(annotator_id)
                elif sig.combined >= policy.warn_score and status != AnnotatorQuality.Status.WARNED:
                    annotator_status_set(annotator=user, status=AnnotatorQuality.Status.WARNED,
                                         reason=f"automatic: {_summary(sig)}", by=by)
                    action = "warned"
                    warned.append(annotator_id)
                elif sig.combined < policy.warn_score and status == AnnotatorQuality.Status.WARNED:
                    annotator_status_set(annotator=user, status=AnnotatorQuality.Status.ACTIVE,
                                         reason=f"automatic: back below the warning threshold ({_summary(sig)})",
                                         by=by)
                    action = "cleared"
                    cleared.append(annotator_id)
            snapshots.append(ReliabilitySnapshot(
                computed_at=now, annotator_id=annotator_id, n_ratings=sig.n_ratings, combined=sig.combined,
                signals=json_finite(sig.as_dict()), action=action))
        ReliabilitySnapshot.objects.bulk_create(snapshots)
    return ReliabilityRun(computed_at=now, annotators=len(signals), warned=warned, paused=paused, cleared=cleared)


#: Cache key of the data state the last reliability refresh saw (:func:`reliability_refresh_if_changed`).
_LAST_STATE_KEY = "orca:reliability:last-state:v1"


def reliability_data_state() -> tuple:
    """What :func:`reliability_refresh` reads, in four aggregate queries: the ratings that count (count, id sum,
    newest edit), the quality checks, the annotators' statuses and the policy's values. Equal states give equal
    signals and decisions."""
    from django.db.models import Max, Sum
    from django.forms.models import model_to_dict

    ratings = rating_counting_queryset().aggregate(n=Count("id"), ids=Sum("id"), last=Max("updated_at"))
    checks = QualityCheck.objects.aggregate(n=Count("id"), last=Max("id"))
    statuses = AnnotatorQuality.objects.aggregate(n=Count("pk"), last=Max("status_changed_at"))
    policy = tuple(sorted(model_to_dict(quality_policy()).items()))
    return (*ratings.values(), *checks.values(), *statuses.values(), policy)


def reliability_refresh_if_changed() -> ReliabilityRun | None:
    """:func:`reliability_refresh` unless nothing it reads changed since the last refresh (None then): the beat
    runs every 15 minutes, and an unchanged state would only store the same snapshot rows again."""
    from django.core.cache import cache

    if cache.get(_LAST_STATE_KEY) == reliability_data_state():
        return None
    run = reliability_refresh()
    cache.set(_LAST_STATE_KEY, reliability_data_state(), None)  # after the run: its own status changes included
    return run


@dataclass
class ReliabilityPage:
    """What the annotator-quality page shows: the latest computation's snapshots, highest combined risk first
    (``rows``; annotators without a risk last), when it ran (``computed_at``, None before the first), the
    paused annotators it does not list (``paused_elsewhere``: paused before rating or since it ran), and how many
    import-only accounts are left out (``import_accounts``; module docstring)."""

    rows: list
    computed_at: object
    paused_elsewhere: list
    import_accounts: int = 0


def reliability_page_load() -> ReliabilityPage:
    """The annotator-quality page's rows (:class:`ReliabilityPage`), import-only accounts left out (also their
    snapshots and statuses from before they were); four queries."""
    latest = ReliabilitySnapshot.objects.order_by("-computed_at").values_list("computed_at", flat=True).first()
    imported = ImportAccount.objects.values("user_id")
    rows = []
    if latest is not None:
        snapshots = ReliabilitySnapshot.objects.filter(computed_at=latest).exclude(
            annotator_id__in=imported).select_related("annotator", "annotator__quality")
        rows = sorted(snapshots, key=lambda s: (-(s.combined if s.combined is not None else -1), s.annotator_id))
    paused = list(AnnotatorQuality.objects.filter(status=AnnotatorQuality.Status.PAUSED)
                  .exclude(annotator_id__in=[row.annotator_id for row in rows]).exclude(annotator_id__in=imported)
                  .select_related("annotator").order_by("-status_changed_at"))
    return ReliabilityPage(rows=rows, computed_at=latest, paused_elsewhere=paused, import_accounts=imported.count())
