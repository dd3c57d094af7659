"""Pages of routing by ORCA's predicted disagreement and of ORCA as an extra rater (issue #9). Thin: check access,
validate input, call one service, render.

Experts and admins read both pages; only admins switch routing on or off (it changes how many people rate what).
Annotators get 403 everywhere: predictions and routing reasons would unblind their rating.
"""
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.forms import query_pk
from annotation.services.accounts import user_is_admin
from modelling.models import AgreementLevel, ModelVersion, RaterSnapshot, RoutingDecision
from modelling.selectors import model_version_active, user_can_use_orca, valid_ratings_load
from modelling.services.rater import (
    calibration_compute,
    calibration_svg,
    predictions_of,
    rater_by_model_version,
    rater_history_svg,
)
from modelling.services.routing import (
    RoutingRules,
    routing_decision_list,
    routing_policy_load,
    routing_policy_set,
    routing_refresh,
    routing_summary,
)

DECISIONS_PER_PAGE = 50


def _require_viewer(request) -> None:
    if not user_can_use_orca(user=request.user):
        raise PermissionDenied("Routing and ORCA figures are visible to experts and admins only.")


@login_required
@require_GET
def routing_page(request):
    """The routing policy: on/off switch (admins), thresholds (settings), what it changed, and the decision log
    (``?reason=`` filters it) — which candidates got more or fewer raters and why."""
    _require_viewer(request)
    reason = request.GET.get("reason") or None
    if reason not in RoutingDecision.Reason.values:
        reason = None
    page = Paginator(routing_decision_list(reason=reason), DECISIONS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "modelling/routing.html", {
        "policy": routing_policy_load(),
        "rules": RoutingRules.from_settings(),
        "default_k": settings.ANNOTATION_TARGET_RATINGS,
        "summary": routing_summary(),
        "active": model_version_active(),
        "page": page,
        "reason": reason,
        "reasons": RoutingDecision.Reason.choices,
        "can_manage": user_is_admin(request.user),
    })


@login_required
@require_POST
def routing_switch(request):
    """Admins: ``enabled=on`` switches routing on (and evaluates), anything else off (and restores defaults);
    ``action=refresh`` re-evaluates now."""
    if not user_is_admin(request.user):
        raise PermissionDenied("Only admins may switch routing on or off.")
    if request.POST.get("action") == "refresh":
        result = routing_refresh(force=True)
        if result is None:
            messages.error(request, "Nothing evaluated: routing is off, no model is active, or scoring is pending.")
        else:
            messages.success(request, f"Re-evaluated {result.evaluated} candidate answers; {result.changed} changed.")
        return redirect("modelling:routing")
    enabled = request.POST.get("enabled") == "on"
    result = routing_policy_set(enabled=enabled, user=request.user)
    messages.success(
        request, f"Routing is {'on' if enabled else 'off'}; {result.changed} candidate answers changed."
    )
    return redirect("modelling:routing")


@login_required
@require_GET
def rater_page(request):
    """ORCA as an extra rater beside the human alpha (per model version, and the active model over time) and the
    calibration plots of one model version (``?version=<pk>``, default the active one)."""
    _require_viewer(request)
    level = request.GET.get("level", AgreementLevel.ORDINAL)
    if level not in AgreementLevel.values:
        level = AgreementLevel.ORDINAL
    rows = rater_by_model_version(level=level)
    versions = [v for v, _ in rows]
    chosen = None
    version_pk = query_pk(request.GET, "version")
    if version_pk is not None:
        chosen = next((v for v in versions if v.pk == version_pk), None)
    chosen = chosen or next((v for v in versions if v.is_active), None) or (versions[0] if versions else None)
    calibration = None
    if chosen is not None:
        calibration = calibration_compute(ratings=valid_ratings_load(), predictions=predictions_of(model_version=chosen))
    history = (
        RaterSnapshot.objects.filter(model_version=chosen, level=level).order_by("created_at", "id")
        if chosen is not None else RaterSnapshot.objects.none()
    )
    return render(request, "modelling/rater.html", {
        "level": level,
        "levels": AgreementLevel.choices,
        "rows": rows,
        "chosen": chosen,
        "calibration": calibration,
        "calibration_svg": calibration_svg(calibration=calibration) if calibration is not None else "",
        "history_svg": rater_history_svg(snapshots=list(history)),
        "n_versions": ModelVersion.objects.count(),
    })
