"""The alpha-over-time chart's time axis reads as dates (modelling/services/charts.py, ``_time_axis``)."""
import re
from datetime import UTC, datetime, timedelta

import pytest

from modelling.models import AgreementSnapshot
from modelling.services.charts import agreement_chart_svg

pytestmark = pytest.mark.django_db


def _texts(svg: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", text).strip() for text in re.findall(r"<text[^>]*>(.*?)</text>", svg, re.S)]


def _snapshots(times: list[datetime]) -> list[AgreementSnapshot]:
    rows = []
    for n, when in enumerate(times):
        row = AgreementSnapshot.objects.create(scope="all", level="ordinal", alpha=0.5 + 0.01 * n, ci_low=0.4,
                                               ci_high=0.6, n_items=10 + n, n_ratings=30 + 3 * n)
        AgreementSnapshot.objects.filter(pk=row.pk).update(created_at=when)
        row.refresh_from_db()
        rows.append(row)
    return rows


def test_snapshots_seconds_apart_get_hour_and_minute_ticks_not_fractions_of_a_second(settings):
    """The newcomer's case: snapshots written within a second read "58.1945 58.1950" on the axis."""
    settings.TIME_ZONE = "UTC"
    start = datetime(2026, 3, 14, 9, 26, 58, 194_500, tzinfo=UTC)
    svg = agreement_chart_svg(snapshots=_snapshots([start + timedelta(milliseconds=300 * n) for n in range(4)]),
                              level="ordinal")
    texts = _texts(svg)
    ticks = [t for t in texts if re.fullmatch(r"\d\d:\d\d", t)]
    assert len(ticks) >= 3, texts
    assert not [t for t in texts if re.fullmatch(r"\d+\.\d{3,}", t)], texts  # no "58.1945"
    assert "2026-Mar-14" in texts and "snapshot time (UTC)" in texts  # the date once, and the time zone
    # The valid-ratings axis counts ratings (30 to 39): whole numbers only (alpha's axis is the one with decimals).
    assert not [t for t in texts if re.fullmatch(r"\d+\.\d+", t) and float(t) > 1], texts


def test_snapshots_over_weeks_get_day_ticks(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    texts = _texts(agreement_chart_svg(snapshots=_snapshots([start + timedelta(days=7 * n) for n in range(4)]),
                                       level="ordinal"))
    assert "snapshot time (Europe/Berlin)" in texts
    assert [t for t in texts if re.fullmatch(r"Mar|\d\d?", t)], texts
    assert not [t for t in texts if re.fullmatch(r"\d+\.\d{3,}", t)], texts
