"""The agreement page's statistics computed once per new data, not per request.

:func:`agreement_report` (alpha per scope with bootstrap CIs, pairwise and leave-one-out tables) takes about half
a second on the real data (5,573 ratings) and grows with the ratings. :func:`agreement_report_cached` keeps its
result in Django's cache (``CACHES``; Redis in production so web processes and the Celery worker share it) under
a key made of the level, the bootstrap settings and :func:`modelling.selectors.valid_ratings_fingerprint`: the
first request after ratings change computes it, every later one reads it, and any change of the valid ratings
(new, edited, invalidated by a correction) makes a new key. The beat task that writes agreement snapshots also
warms the cache (:func:`agreement_reports_warm`), so the page is usually fast even for the first visitor.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from modelling.selectors import valid_ratings_fingerprint, valid_ratings_load
from modelling.services.agreement import (
    DEFAULT_SEED,
    LEVELS,
    AgreementReport,
    AgreementResult,
    agreement_by_scope,
    agreement_report,
)

#: Rows shown in the pairwise and leave-one-out tables.
TABLE_TOP = 20
#: Annotator pairs need this many shared candidate answers to be listed.
PAIR_MIN_SHARED = 10
#: Cached reports expire after a week even if no rating changes (a stale key is never read again anyway).
CACHE_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class CachedAgreementReport:
    """An :class:`AgreementReport` with where it came from.

    Attributes:
        report: the statistics.
        computed_at: when they were computed (aware datetime).
        compute_s: how long computing took, in seconds.
        n_ratings: valid scored ratings they were computed from.
        from_cache: True when this request read them from the cache.
    """

    report: AgreementReport
    computed_at: datetime
    compute_s: float
    n_ratings: int
    from_cache: bool


def _benchmarks_key(benchmarks: tuple[str, ...] | None) -> str:
    """A cache-key part for a set of benchmark names: "all" for None, else a short hash of the sorted names."""
    if benchmarks is None:
        return "all"
    return hashlib.sha256("\x1f".join(sorted(benchmarks)).encode()).hexdigest()[:16]


def agreement_report_cached(*, level: str, resamples: int | None = None,
                            benchmarks: tuple[str, ...] | None = None) -> CachedAgreementReport:
    """The agreement report of the valid ratings at ``level``, from the cache when the ratings have not changed.

    ``resamples`` defaults to ``MODELLING_BOOTSTRAP_RESAMPLES``. ``benchmarks``: names of the benchmarks whose
    ratings count (None: every benchmark), for an expert of a team (``annotation.teams.scope``): each set is
    computed and cached on its own. Raises ValueError for an unknown level (as :func:`agreement_report`).
    """
    resamples = settings.MODELLING_BOOTSTRAP_RESAMPLES if resamples is None else resamples
    computed = []

    def compute() -> dict:
        started = time.perf_counter()
        ratings = valid_ratings_load()
        if benchmarks is not None:
            ratings = ratings.subset(np.isin(ratings.benchmark, list(benchmarks)))
        report = agreement_report(ratings=ratings, level=level, resamples=resamples, seed=DEFAULT_SEED,
                                  min_shared=PAIR_MIN_SHARED, top=TABLE_TOP)
        computed.append(True)
        return {"report": report, "computed_at": timezone.now(), "compute_s": time.perf_counter() - started,
                "n_ratings": len(ratings)}

    entry = cached_by_data(name=f"agreement-report:{level}",
                           state=(resamples, PAIR_MIN_SHARED, TABLE_TOP, valid_ratings_fingerprint(),
                                  _benchmarks_key(benchmarks)), compute=compute)
    return CachedAgreementReport(**entry, from_cache=not computed)


def agreement_alphas_cached(*, level: str) -> tuple[list[AgreementResult], datetime]:
    """(alpha per scope at ``level``, overall first, as :func:`agreement_by_scope` with no bootstrap; when they were
    computed), once per change of the valid ratings: the point estimates a summary needs (the dashboard), without
    the agreement page's bootstrap intervals and tables."""
    return cached_by_data(
        name=f"agreement-alphas:{level}", state=(valid_ratings_fingerprint(),),
        compute=lambda: (agreement_by_scope(ratings=valid_ratings_load(), level=level, resamples=0,
                                            seed=DEFAULT_SEED), timezone.now()),
    )


def agreement_chart_cached(*, level: str, benchmarks: tuple[str, ...] | None = None) -> tuple[str, int]:
    """(SVG of the alpha-over-time chart at ``level``, number of snapshots drawn), drawn once per new snapshot.

    Drawing with matplotlib takes about 0.2 s; the chart only changes when a snapshot is written, so the key is
    the level with the count and newest id of its snapshots (one aggregate query). ``benchmarks``: draw only the
    ``benchmark:NAME`` snapshots of these names (None: every scope), as :func:`agreement_report_cached`.
    """
    from django.db.models import Count, Max

    from modelling.models import AgreementSnapshot
    from modelling.selectors import agreement_snapshot_history
    from modelling.services.charts import agreement_chart_svg

    snapshots = AgreementSnapshot.objects.filter(level=level)
    history = agreement_snapshot_history(level=level)
    if benchmarks is not None:
        scopes = [f"benchmark:{name}" for name in benchmarks]
        snapshots, history = snapshots.filter(scope__in=scopes), history.filter(scope__in=scopes)
    state = snapshots.aggregate(n=Count("id"), last=Max("id"))
    svg = cached_by_data(
        name=f"agreement-chart:{level}", state=(state["n"], state["last"], _benchmarks_key(benchmarks)),
        compute=lambda: agreement_chart_svg(snapshots=list(history), level=level),
    )
    return svg, state["n"]


def cached_by_data(*, name: str, state: tuple, compute):
    """``compute()``'s result, computed once per ``state`` (a tuple describing the data it reads, e.g. the ratings'
    fingerprint and the predictions' state) and kept in the cache; for expensive figures and charts of pages. The
    key holds the state's SHA-256, not the state itself: a state may carry user text (a benchmark's name) of any
    length and characters, which a cache key must not (memcached: ≤ 250 characters, no spaces or control
    characters)."""
    digest = hashlib.sha256(repr(tuple(state)).encode()).hexdigest()
    key = f"orca:{name}:v2:{digest}"
    value = cache.get(key)
    if value is None:
        value = compute()
        cache.set(key, value, CACHE_SECONDS)
    return value


def predictions_state() -> tuple:
    """(count, newest id, sum of μ) of every ORCA prediction: changes when a model scores (or re-scores) answers."""
    from django.db.models import Count, Max, Sum

    from modelling.models import Prediction

    row = Prediction.objects.aggregate(n=Count("id"), last=Max("id"), mu=Sum("mu"))
    return row["n"], row["last"], round(row["mu"] or 0.0, 6)


def agreement_reports_warm() -> int:
    """Compute the report and chart of every level unless cached already; returns how many reports were computed
    (0 to 2)."""
    computed = 0
    for level in LEVELS:
        computed += not agreement_report_cached(level=level).from_cache
        agreement_chart_cached(level=level)
    return computed
