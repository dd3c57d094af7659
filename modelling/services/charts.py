"""Server-rendered charts of agreement over time (matplotlib → inline SVG; no JavaScript, no CDN)."""
from __future__ import annotations

import io
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.utils import timezone

from modelling.models import AgreementSnapshot
from modelling.services.agreement import RELIABLE_ALPHA, TENTATIVE_ALPHA

#: The shortest span the time axis shows: snapshots seconds apart (a fresh import, a test) would otherwise get
#: second ticks that read "58.1945 58.1950"; an hour gives ticks in hours and minutes with the date beside them.
MIN_TIME_SPAN = timedelta(hours=1)


def _time_axis(ax, times: list[datetime]) -> None:
    """Dates on ``ax``'s x axis that read as dates: at least :data:`MIN_TIME_SPAN` wide around ``times``, 3–6 ticks
    in the site's time zone, labelled concisely (hours and minutes, the date once beside the axis)."""
    from matplotlib import dates as mdates

    first, last = min(times), max(times)
    if last - first < MIN_TIME_SPAN:
        middle = first + (last - first) / 2
        ax.set_xlim(middle - MIN_TIME_SPAN / 2, middle + MIN_TIME_SPAN / 2)
    zone = timezone.get_current_timezone()
    locator = mdates.AutoDateLocator(tz=zone, minticks=3, maxticks=6)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=zone))


def agreement_chart_svg(*, snapshots: Sequence[AgreementSnapshot], level: str) -> str:
    """Two panels of Krippendorff's alpha: against snapshot time and against the number of valid ratings.

    Args:
        snapshots: snapshots of one level, any scopes; 'all' is drawn thick with its 95 % CI band, each other
            scope (e.g. 'benchmark:MMAR') as a thin line. Snapshots with undefined alpha are skipped.
        level: the level shown in the title.

    Returns:
        An ``<svg …>`` element as a string (no XML prolog), ready to inline in HTML; it always contains
        dashed horizontal lines at alpha 0.67 (tentative) and 0.80 (reliable), Krippendorff 2004.

    matplotlib is imported here, with the Agg backend and no pyplot state, so web processes that never draw
    stay light and drawing is thread-safe.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    series: dict[str, list[AgreementSnapshot]] = {}
    for snap in sorted(snapshots, key=lambda s: (s.created_at, s.id or 0)):
        if snap.alpha is not None:
            series.setdefault(snap.scope, []).append(snap)
    scopes = sorted(series, key=lambda s: (s != "all", s))

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "orca-agreement", "font.size": 9,
                                 "text.parse_math": False}):
        fig = Figure(figsize=(10, 3.6), layout="constrained")
        ax_time, ax_count = fig.subplots(1, 2, sharey=True)
        for ax, x_of, xlabel in (
            (ax_time, lambda s: s.created_at, f"snapshot time ({timezone.get_current_timezone_name()})"),
            (ax_count, lambda s: s.n_ratings, "valid ratings"),
        ):
            for scope in scopes:
                points = series[scope]
                xs = [x_of(s) for s in points]
                ys = [s.alpha for s in points]
                overall = scope == "all"
                ax.plot(xs, ys, marker="o", markersize=3 if overall else 2, linewidth=2 if overall else 1,
                        label=scope, zorder=3 if overall else 2)
                if overall and all(s.ci_low is not None for s in points):
                    ax.fill_between(xs, [s.ci_low for s in points], [s.ci_high for s in points], alpha=0.2,
                                    label="all: 95 % CI", zorder=1)
            ax.axhline(RELIABLE_ALPHA, color="green", linestyle="--", linewidth=1,
                       label=f"{RELIABLE_ALPHA:.2f} reliable")
            ax.axhline(TENTATIVE_ALPHA, color="orange", linestyle="--", linewidth=1,
                       label=f"{TENTATIVE_ALPHA:.2f} tentative")
            ax.set_xlabel(xlabel)
            ax.grid(True, alpha=0.3)
        if scopes:
            _time_axis(ax_time, [s.created_at for scope in scopes for s in series[scope]])
            ax_count.xaxis.get_major_locator().set_params(integer=True)
        else:
            for ax in (ax_time, ax_count):
                ax.text(0.5, 0.5, "no snapshots yet", ha="center", va="center", transform=ax.transAxes)
        lows = [s.ci_low for scope in scopes for s in series[scope] if s.ci_low is not None]
        lows += [s.alpha for scope in scopes for s in series[scope]]
        ax_time.set_ylim(min([0.5, *lows]) - 0.02, 1.0)
        ax_time.set_ylabel(f"Krippendorff's alpha ({level})")
        ax_count.legend(loc="lower right", fontsize=7)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]
