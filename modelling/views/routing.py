"""Pages of routing by ORCA's predicted disagreement and of ORCA as an extra rater. Thin: check access,
validate input, call one service, render.

Experts and admins read both pages; only admins switch routing on or off (it changes how many people rate what).
Annotators get 403 everywhere: predictions and routing reasons would unblind their rating.
"""
from datetime import datetime

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, Max
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text
from annotation.models import Benchmark
from annotation.teams.scope import benchmarks_readable, readable
from modelling.forms import BenchmarkRoutingForm
from modelling.models import (
    AgreementLevel,
    BenchmarkRouting,
    ModelVersion,
    RaterSnapshot,
    RoutingDecision,
)
from modelling.selectors import (
    model_version_active,
    valid_ratings_fingerprint,
    valid_ratings_load,
)
from modelling.services.agreement_cache import cached_by_data, predictions_state
from modelling.services.design import design_epochs
from modelling.services.orca_quality import orca_gates
from modelling.services.rater import (
    calibration_compute,
    calibration_svg,
    rater_by_source,
    rater_history_svg,
)
from modelling.services.routing import (
    RoutingRules,
    benchmark_routing_set,
    routing_decision_list,
    routing_policy_load,
    routing_policy_set,
    routing_refresh,
    routing_summary,
)

DECISIONS_PER_PAGE = 50


@role_required(*STAFF)
@require_GET
def routing_page(request):
    """The routing policy: on/off switch (admins), thresholds (settings), what it changed, and the decision log
    (``?reason=`` filters it) — which candidates got more or fewer raters and why."""
    reason = request.GET.get("reason") or None
    if reason not in RoutingDecision.Reason.values:
        reason = None
    # Teams: the log and the policies of the benchmarks the user reads (annotation.teams.scope); admins: all.
    decisions = readable(routing_decision_list(reason=reason), user=request.user,
                         path="candidate__question_version__question__benchmark")
    page = Paginator(decisions, DECISIONS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "modelling/routing.html", {
        "policy": routing_policy_load(),
        "rules": RoutingRules.from_settings(),
        "default_k": settings.ANNOTATION_TARGET_RATINGS,
        "summary": routing_summary(),
        "active": model_version_active(),
        "page": page,
        "reason": reason,
        "reasons": RoutingDecision.Reason.choices,
        "can_manage": has_role(request.user, ADMIN),
        "benchmark_policies": _benchmark_policies(user=request.user),
        "policy_choices": BenchmarkRouting.Policy.choices,
        "default_audit_share": settings.ROUTING_AUDIT_SHARE,
    })


def _benchmark_policies(*, user) -> list:
    rows = {r.benchmark_id: r for r in BenchmarkRouting.objects.all()}
    benchmarks = list(benchmarks_readable(user=user))
    gates = orca_gates()  # ORCA's quality gate per benchmark (modelling.services.orca_quality)
    epochs = design_epochs(benchmark_ids=[b.pk for b in benchmarks])  # modelling.services.design
    for b in benchmarks:
        b.orca = gates.get(b.pk)
        b.epoch = (epochs.get(b.pk) or [None])[-1]
        if b.epoch is not None:
            b.epoch = {**b.epoch, "started": datetime.fromisoformat(b.epoch["started"])}
        row = rows.get(b.pk) or BenchmarkRouting(benchmark=b)
        b.policy, b.policy_label, b.budget, b.floor = row.policy, row.get_policy_display(), row.budget, row.floor
        b.audit_share, b.audit_share_default = row.audit_share, row.audit_share is None
    return benchmarks


@role_required(ADMIN)
@require_POST
def routing_benchmark(request, pk: int):
    """Admins: choose a benchmark's routing policy (``policy``, ``budget``, ``floor``, ``audit_share``) and
    re-evaluate."""
    benchmark = get_object_or_404(Benchmark, pk=pk)
    form = BenchmarkRoutingForm(request.POST)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return redirect("modelling:routing")
    try:
        benchmark_routing_set(benchmark=benchmark, user=request.user, **form.cleaned_data)
    except ValidationError as exc:
        messages.error(request, errors_text(exc))
    else:
        messages.success(request, f"{benchmark.name} now follows the {form.cleaned_data['policy']} policy.")
    return redirect("modelling:routing")


@role_required(ADMIN)
@require_POST
def routing_switch(request):
    """Admins: ``enabled=on`` switches routing on (and evaluates), anything else off (and restores defaults);
    ``action=refresh`` re-evaluates now."""
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


def _calibration_with_chart(predictions: dict):
    calibration = calibration_compute(ratings=valid_ratings_load(), predictions=predictions)
    return calibration, calibration_svg(calibration=calibration)


@role_required(*STAFF)
@require_GET
def rater_page(request):
    """ORCA as an extra rater beside the human alpha, out of sample (the latest cross-fit, and each model version on
    the answers it never trained on), the active model over time, and the calibration plots of one source
    (``?source=<name>``, default the cross-fit, else the active model)."""
    level = request.GET.get("level", AgreementLevel.ORDINAL)
    if level not in AgreementLevel.values:
        level = AgreementLevel.ORDINAL
    # Alpha with ORCA per source, calibration and both charts change only with the ratings, predictions or
    # snapshots: computed once per change of those (cached), not per request.
    active = model_version_active()
    data_state = (level, valid_ratings_fingerprint(), getattr(active, "pk", None), *predictions_state())
    rows = cached_by_data(name="rater-rows", state=data_state, compute=lambda: rater_by_source(level=level))
    sources = [source for source, _ in rows]
    wanted = request.GET.get("source")
    chosen = next((s for s in sources if s.name == wanted), None) if wanted else None
    chosen = (chosen or next((s for s in sources if s.version is None), None)
              or next((s for s in sources if s.version is not None and s.version.is_active), None)
              or (sources[0] if sources else None))
    calibration, calibration_chart = None, ""
    if chosen is not None:
        calibration, calibration_chart = cached_by_data(
            name="rater-calibration", state=(chosen.name, *data_state),
            compute=lambda: _calibration_with_chart(chosen.predictions),
        )
    version = None if chosen is None else chosen.version
    history = (
        RaterSnapshot.objects.filter(model_version=version, level=level).order_by("created_at", "id")
        if version is not None else RaterSnapshot.objects.none()
    )
    history_state = history.aggregate(n=Count("id"), last=Max("id"))
    history_chart = cached_by_data(name="rater-history", state=(level, getattr(version, "pk", None),
                                                                 history_state["n"], history_state["last"]),
                                   compute=lambda: rater_history_svg(snapshots=list(history)))
    return render(request, "modelling/rater.html", {
        "level": level,
        "levels": AgreementLevel.choices,
        "rows": rows,
        "chosen": chosen,
        "calibration": calibration,
        "calibration_svg": calibration_chart,
        "history_svg": history_chart if version is not None else "",
        "n_versions": ModelVersion.objects.count(),
        "benchmark_gates": list(orca_gates().values()),
    })
