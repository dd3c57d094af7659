"""The audit log page (admins): every recorded action, filtered and paged."""
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.access import ADMIN, role_required
from annotation.forms import AuditFilterForm
from annotation.services.audit import audit_events_for_user


@role_required(ADMIN)
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    form = AuditFilterForm(request.GET)
    form.is_valid()
    # A filter the form refuses (too long, a NUL character) is left out and said so; the others still apply.
    for name, errors in form.errors.items():
        messages.warning(request, f"Filter {name!r} ignored: {' '.join(errors)}")
    filters = {key: form.cleaned_data.get(key, "") for key in AuditFilterForm.base_fields}
    events = audit_events_for_user(user=request.user, **filters)
    page = Paginator(events, 100).get_page(request.GET.get("page"))
    return render(request, "annotation/exports/audit.html", {"page": page, "filters": filters})
