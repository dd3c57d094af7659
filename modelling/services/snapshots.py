"""Agreement snapshots: Krippendorff's alpha recorded as ratings accumulate (ORCA paper, section 5.2).

Design. ``annotation`` must not import ``modelling`` (README, Layout: house rules), so the rating services cannot
call us when a rating arrives. Instead a Celery beat task (``agreement_snapshot_task``, every 5 minutes) asks
:func:`agreement_snapshots_refresh` whether at least ``MODELLING_SNAPSHOT_EVERY`` (default 100) new valid
ratings exist: *new* = the current number of valid scored ratings minus ``n_ratings`` of the newest overall
('all', ordinal) snapshot. A burst of ratings is therefore snapshotted within 5 minutes of crossing the
threshold, at most once per beat tick. Invalidations (Stage 3 corrections) lower the count, so they can delay a
threshold snapshot; the nightly run (``force=True``) writes snapshots regardless, so the chart never lags more
than a day.

A run writes one snapshot per level (ordinal and interval) for scope 'all' and for each benchmark with valid
ratings ('benchmark:<name>'), all in one transaction.
"""
from __future__ import annotations

from django.conf import settings
from django.db import transaction

from modelling.models import AgreementLevel, AgreementSnapshot
from modelling.selectors import agreement_snapshot_latest, valid_rating_count, valid_ratings_load
from modelling.services.agreement import DEFAULT_SEED, LEVELS, agreement_compute

#: The snapshot whose n_ratings the threshold check compares against.
THRESHOLD_SCOPE = "all"
THRESHOLD_LEVEL = AgreementLevel.ORDINAL


def snapshot_every() -> int:
    """``MODELLING_SNAPSHOT_EVERY``: new valid ratings between threshold snapshots (default 100, at least 1)."""
    return max(1, int(getattr(settings, "MODELLING_SNAPSHOT_EVERY", 100)))


def snapshot_resamples() -> int:
    """``MODELLING_BOOTSTRAP_RESAMPLES``: bootstrap replicates for the CI (default 1000)."""
    return int(getattr(settings, "MODELLING_BOOTSTRAP_RESAMPLES", 1000))


def agreement_new_rating_count() -> int:
    """Valid scored ratings now minus ``n_ratings`` of the newest 'all' ordinal snapshot (all of them if none)."""
    last = agreement_snapshot_latest(scope=THRESHOLD_SCOPE, level=THRESHOLD_LEVEL)
    return valid_rating_count() - (last.n_ratings if last else 0)


@transaction.atomic
def agreement_snapshots_write(
    *,
    trigger: str = AgreementSnapshot.Trigger.MANUAL,
    levels: tuple[str, ...] = LEVELS,
    resamples: int | None = None,
    seed: int = DEFAULT_SEED,
) -> list[AgreementSnapshot]:
    """Compute and store snapshots for 'all' and every benchmark at each level; returns them (empty if no ratings).

    Args:
        trigger: an ``AgreementSnapshot.Trigger`` value recorded on each row.
        levels: levels of measurement to snapshot.
        resamples: bootstrap replicates (default ``MODELLING_BOOTSTRAP_RESAMPLES``); 0 stores no CI.
        seed: bootstrap seed.
    """
    resamples = snapshot_resamples() if resamples is None else resamples
    ratings = valid_ratings_load()
    if len(ratings) == 0:
        return []
    scopes = [("all", ratings)] + [
        (f"benchmark:{name}", ratings.subset(ratings.benchmark == name)) for name in sorted(set(ratings.benchmark))
    ]
    snapshots = []
    for level in levels:
        for scope, subset in scopes:
            result = agreement_compute(ratings=subset, level=level, scope=scope, resamples=resamples, seed=seed)
            snapshots.append(
                AgreementSnapshot(
                    scope=scope,
                    level=level,
                    alpha=result.alpha,
                    ci_low=result.ci_low,
                    ci_high=result.ci_high,
                    n_items=result.n_items,
                    n_ratings=result.n_ratings,
                    trigger=trigger,
                )
            )
    for snapshot in snapshots:
        snapshot.full_clean()
        snapshot.save()
    return snapshots


def agreement_snapshots_refresh(*, force: bool = False, every: int | None = None) -> list[AgreementSnapshot]:
    """Write snapshots when at least ``every`` new valid ratings arrived since the last one, or always if ``force``.

    ``every`` defaults to ``MODELLING_SNAPSHOT_EVERY``. Forced runs are recorded as nightly, the others as
    threshold snapshots. Returns the rows written (empty when not due or when there are no valid ratings).
    """
    every = snapshot_every() if every is None else every
    if force:
        return agreement_snapshots_write(trigger=AgreementSnapshot.Trigger.NIGHTLY)
    if agreement_new_rating_count() < every:
        return []
    return agreement_snapshots_write(trigger=AgreementSnapshot.Trigger.THRESHOLD)
