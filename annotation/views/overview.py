"""The rating overview for experts and admins: ratings per item, complete items, annotators' throughput."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation import selectors
from annotation.access import STAFF, role_required
from annotation.forms import query_benchmark_pk


@require_GET
@role_required(*STAFF)
def overview(request: HttpRequest) -> HttpResponse:
    """Experts and admins: ratings per item histogram, items complete/incomplete, annotators' throughput."""
    benchmark = None
    pk = query_benchmark_pk(request.GET)
    if pk is not None:
        benchmark = selectors.benchmark_get_for_overview(user=request.user, benchmark_pk=pk)
    data = selectors.rating_overview(user=request.user, benchmark=benchmark)
    bars = [
        {"count": count, "n": n, "percent": round(100 * n / data.max_count) if data.max_count else 0}
        for count, n in data.histogram
    ]
    context = {"data": data, "bars": bars, "benchmark": benchmark,
               "benchmarks": selectors.benchmark_list_for_overview(user=request.user)}
    return render(request, "annotation/overview.html", context)
