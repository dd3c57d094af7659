"""The agreement page: Krippendorff's alpha per scope as ratings accumulate (experts and admins)."""

from django.conf import settings
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.access import STAFF, role_required
from annotation.teams.scope import benchmarks_readable, reads_every_benchmark
from modelling.models import AgreementLevel
from modelling.services.agreement import RELIABLE_ALPHA, TENTATIVE_ALPHA
from modelling.services.agreement_cache import (
    PAIR_MIN_SHARED,
    TABLE_TOP,
    agreement_chart_cached,
    agreement_report_cached,
)


@role_required(*STAFF)
@require_GET
def agreement_page(request):
    """Krippendorff's alpha per scope with CIs, variance share, annotator tables and the alpha-over-time chart.

    Staff, experts and admins only: annotators get 403 so rating stays blind. ``?level=interval`` switches the
    level of measurement (ordinal by default). The statistics are computed once per change of the valid ratings
    (``agreement_report_cached``); the page says when and from how many ratings. An expert of a team (who does not
    read every benchmark) gets the figures of the ratings of their benchmarks only, and the page names them.
    """
    level = request.GET.get("level", AgreementLevel.ORDINAL)
    if level not in AgreementLevel.values:
        level = AgreementLevel.ORDINAL
    # Teams: who does not read every benchmark sees the figures of their benchmarks only (annotation.teams.scope).
    names = None
    if not reads_every_benchmark(user=request.user):
        names = tuple(benchmarks_readable(user=request.user).values_list("name", flat=True))
    cached = agreement_report_cached(level=level, benchmarks=names)
    chart_svg, n_snapshots = agreement_chart_cached(level=level, benchmarks=names)
    context = {
        "scope_benchmarks": names,
        "level": level,
        "levels": AgreementLevel.choices,
        "report": cached.report,
        "computed": cached,
        "chart_svg": chart_svg,
        "n_snapshots": n_snapshots,
        "snapshot_every": settings.MODELLING_SNAPSHOT_EVERY,
        "reliable_alpha": RELIABLE_ALPHA,
        "tentative_alpha": TENTATIVE_ALPHA,
        "pair_min_shared": PAIR_MIN_SHARED,
        "table_top": TABLE_TOP,
    }
    return render(request, "modelling/agreement.html", context)
