"""Pages of the modelling app. Thin: check access, validate the query string, call services, render."""
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render
from django.views.decorators.http import require_GET

from modelling.models import AgreementLevel
from modelling.selectors import agreement_snapshot_history, user_can_view_agreement, valid_ratings_load
from modelling.services.agreement import RELIABLE_ALPHA, TENTATIVE_ALPHA, agreement_report
from modelling.services.charts import agreement_chart_svg

#: Rows shown in the pairwise and leave-one-out tables.
TABLE_TOP = 20
#: Annotator pairs need this many shared candidate answers to be listed.
PAIR_MIN_SHARED = 10


@login_required
@require_GET
def agreement_page(request):
    """Krippendorff's alpha per scope with CIs, variance share, annotator tables and the alpha-over-time chart.

    Staff, experts and admins only: annotators get 403 so rating stays blind. ``?level=interval`` switches the
    level of measurement (ordinal by default).
    """
    if not user_can_view_agreement(user=request.user):
        raise PermissionDenied("Agreement figures are visible to experts and admins only.")
    level = request.GET.get("level", AgreementLevel.ORDINAL)
    if level not in AgreementLevel.values:
        level = AgreementLevel.ORDINAL
    report = agreement_report(
        ratings=valid_ratings_load(),
        level=level,
        resamples=settings.MODELLING_BOOTSTRAP_RESAMPLES,
        min_shared=PAIR_MIN_SHARED,
        top=TABLE_TOP,
    )
    snapshots = list(agreement_snapshot_history(level=level))
    context = {
        "level": level,
        "levels": AgreementLevel.choices,
        "report": report,
        "chart_svg": agreement_chart_svg(snapshots=snapshots, level=level),
        "n_snapshots": len(snapshots),
        "snapshot_every": settings.MODELLING_SNAPSHOT_EVERY,
        "reliable_alpha": RELIABLE_ALPHA,
        "tentative_alpha": TENTATIVE_ALPHA,
        "pair_min_shared": PAIR_MIN_SHARED,
        "table_top": TABLE_TOP,
    }
    return render(request, "modelling/agreement.html", context)
