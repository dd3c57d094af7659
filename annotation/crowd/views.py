"""Crowd study and quality pages (thin views): the entry link and its welcome page, the completion page, and the
admins' pages for studies (list, create, edit, enable, report, CSV), gold items and attention checks, and the
quality policy with each benchmark's insertion rates."""
from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from rest_framework.throttling import SimpleRateThrottle

from annotation.access import ADMIN, role_required
from annotation.api.throttles import ClientIpMixin
from annotation.crowd import selectors
from annotation.crowd.forms import (
    AttentionCheckForm,
    BenchmarkQualityForm,
    CandidateSearchForm,
    GoldItemForm,
    QualityItemEditForm,
    QualityPolicyForm,
    SignedLinksForm,
    StudyForm,
)
from annotation.crowd.items import (
    POLICY_FIELDS,
    attention_check_create,
    benchmark_quality_set,
    gold_item_mark,
    quality_item_update,
    quality_policy,
    quality_policy_set,
)
from annotation.crowd.models import BenchmarkQuality, Study
from annotation.crowd.speed import study_fast_participants
from annotation.crowd.studies import (
    STUDY_FIELDS,
    StudyEntryRefused,
    study_completion_for,
    study_completion_url,
    study_enabled_set,
    study_enter,
    study_entry_link,
    study_link_check,
    study_link_is_for,
    study_report,
    study_report_csv,
    study_save,
    study_signed_links,
)
from annotation.forms import errors_text, form_add_validation_error, query_pk

logger = logging.getLogger(__name__)

_BACKEND = "django.contrib.auth.backends.ModelBackend"


class StudyEntryThrottle(ClientIpMixin, SimpleRateThrottle):
    """Requests to entry links per client address (``config.proxies.client_ip``, the address the login lockout
    and API throttles use), at ``settings.STUDY_ENTRY_THROTTLE`` (e.g. ``"30/minute"``; None: unlimited). Counts
    live in Django's cache (``CACHE_URL``), shared by all web processes when that is Redis."""

    scope = "study-entry"

    def get_rate(self) -> str | None:
        return settings.STUDY_ENTRY_THROTTLE

    def get_cache_key(self, request, view) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def _refused(request: HttpRequest, reason: str) -> HttpResponse:
    """The one answer to every refused entry link: the same 404 page whatever the reason, so links cannot be used
    to find out which studies exist or are open (the reason is logged)."""
    logger.info("study entry refused: %s", reason)
    return render(request, "crowd/study_message.html", {
        "title": "Study not available",
        "message": "This study link is not valid, or the study is not open. Please return to the platform you "
                   "came from.",
    }, status=404)


@require_http_methods(["GET", "POST"])
def study_entry(request: HttpRequest, slug: str) -> HttpResponse:
    """The study entry link. GET: the welcome page with a "Start the study" button; POST (that button, with the
    CSRF token of this browser): create or resume the participant, log them in and send them to their first item.

    Someone signed in as another user is never switched (no login CSRF): they are told to log out first.
    Throttled per client address; every refusal is the same 404.
    """
    throttle = StudyEntryThrottle()
    if not throttle.allow_request(request, None):
        wait = throttle.wait()
        response = render(request, "crowd/study_message.html", {
            "title": "Too many requests",
            "message": "Too many study links were opened from your address. Please wait a minute and try again.",
        }, status=429)
        if wait:
            response["Retry-After"] = str(max(1, int(wait)))
        return response
    try:
        link = study_link_check(slug=slug, params=request.GET)
    except StudyEntryRefused as exc:
        link, reason = None, str(exc)
    if request.user.is_authenticated:
        if link is not None and study_link_is_for(link=link, user=request.user):
            return HttpResponseRedirect(reverse("annotation:next"))  # already this participant: carry on
        logger.info("study entry refused: signed in as %s", request.user.get_username())
        return render(request, "crowd/study_message.html", {
            "title": "You are signed in as someone else",
            "message": f"You are signed in as {request.user.get_username()}. A study link signs in a study "
                       "participant, so log out first and then open the link again.",
            "logout": True,
        }, status=403)
    if link is None:
        return _refused(request, reason)
    study = link.study
    if request.method == "GET":
        return render(request, "crowd/study_welcome.html",
                      {"study": study, "audio": selectors.study_audio_for(study=study)})
    try:
        participant = study_enter(slug=slug, params=request.GET)
    except StudyEntryRefused as exc:
        return _refused(request, str(exc))
    login(request, participant.user, backend=_BACKEND)
    return HttpResponseRedirect(reverse("annotation:next"))


@require_GET
@login_required
def study_done(request: HttpRequest) -> HttpResponse:
    """The completion code once the participant reached the quota (and a redirect to the platform)."""
    participant = study_completion_for(user=request.user)
    if participant is None:
        return HttpResponseRedirect(reverse("annotation:next"))
    study = participant.study
    return render(request, "crowd/study_done.html",
                  {"study": study, "code": study.completion_code, "redirect_url": study_completion_url(study=study)})


def completion_redirect(*, user) -> str | None:
    """The completion page's URL when ``user`` is a study participant who reached the quota, else None."""
    return reverse("crowd:study-done") if study_completion_for(user=user) is not None else None


def _entry_link(request: HttpRequest, study: Study) -> str:
    return study_entry_link(study=study, base_url=request.build_absolute_uri(
        reverse("crowd:study-entry", args=[study.slug])))


# --- Admins: studies ------------------------------------------------------------------------------------------


def _submitted(request: HttpRequest, form, save: Callable[[dict], str], *,
               to: str | Callable[[], str]) -> HttpResponse | None:
    """When ``form`` is valid, ``save(cleaned_data)`` (which calls one service and returns the success message) and
    redirect to ``to`` (or what ``to()`` returns after saving); a service's ``ValidationError`` goes beside the
    form's fields. None: show the form again."""
    if form.is_valid():
        try:
            message = save(form.cleaned_data)
        except ValidationError as exc:
            form_add_validation_error(form, exc)
        else:
            messages.success(request, message)
            return HttpResponseRedirect(to() if callable(to) else to)
    return None


@require_GET
@role_required(ADMIN)
def study_list(request: HttpRequest) -> HttpResponse:
    """Every study with its participants, quota, state and links to its report, form and entry link."""
    studies = selectors.study_list_for_admin(user=request.user)
    return render(request, "crowd/studies.html", {"studies": studies})


def _study_form_page(request: HttpRequest, *, study: Study | None) -> HttpResponse:
    """The study form (create when ``study`` is None): saved through :func:`study_save`, errors beside the fields."""
    form = StudyForm(request.POST or None, instance=study)
    if request.method == "POST":
        def save(data: dict) -> str:
            saved = study_save(study=study, values={name: data[name] for name in STUDY_FIELDS}, by=request.user)
            form.instance = saved
            return f"Study “{saved.name}” saved{' and enabled' if saved.is_enabled else ''}."

        def report() -> str:
            return reverse("crowd:study-report", args=[form.instance.pk])

        if done := _submitted(request, form, save, to=report):
            return done
        return render(request, "crowd/study_form.html", {"form": form, "study": study}, status=400)
    return render(request, "crowd/study_form.html", {"form": form, "study": study})


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def study_new(request: HttpRequest) -> HttpResponse:
    """Create a study."""
    return _study_form_page(request, study=None)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def study_edit(request: HttpRequest, study_pk: int) -> HttpResponse:
    """Change a study (also enable or disable it)."""
    return _study_form_page(request, study=selectors.study_get_for_admin(user=request.user, study_pk=study_pk))


@require_POST
@role_required(ADMIN)
def study_enable(request: HttpRequest, study_pk: int) -> HttpResponse:
    """Enable (``enabled=1``) or disable (``enabled=0``) a study; a refusal says what is missing. ``next=report``
    comes back to the study's report, else to the list."""
    study = selectors.study_get_for_admin(user=request.user, study_pk=study_pk)
    enabled = request.POST.get("enabled") == "1"
    try:
        study_enabled_set(study=study, enabled=enabled, by=request.user)
    except ValidationError as exc:
        why = errors_text(exc, labels=StudyForm(instance=study))
        messages.error(request, f"“{study.name}” was not enabled: {why}")
    else:
        messages.success(request, f"“{study.name}” is {'enabled: its entry link works' if enabled else 'disabled'}.")
    if request.POST.get("next") == "report":
        return HttpResponseRedirect(reverse("crowd:study-report", args=[study.pk]))
    return HttpResponseRedirect(reverse("crowd:studies"))


@require_GET
@role_required(ADMIN)
def study_report_page(request: HttpRequest, study_pk: int) -> HttpResponse:
    """Admins: the study's participants, items, server time on task, implied hourly pay and quality; ``?format=csv``
    downloads it."""
    study = selectors.study_get_for_admin(user=request.user, study_pk=study_pk)
    if request.GET.get("format") == "csv":
        response = HttpResponse(study_report_csv(study=study), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="study-{study.slug}.csv"'
        return response
    # A signed study: ?participant_ids=... makes each participant's own link.
    links_form, links = SignedLinksForm(request.GET if "participant_ids" in request.GET else None), []
    if study.signed_links and links_form.is_valid():
        try:
            links = study_signed_links(study=study, participant_ids=links_form.cleaned_data["participant_ids"].split(
                "\n"), base_url=request.build_absolute_uri(reverse("crowd:study-entry", args=[study.slug])))
        except ValidationError as exc:
            form_add_validation_error(links_form, exc)
    rows = study_report(study=study)
    fast = study_fast_participants(rows=rows)
    return render(request, "crowd/study_report.html", {
        "study": study, "rows": [(row, fast.get(row.participant_id, "")) for row in rows], "fast": fast,
        "entry_link": _entry_link(request, study),
        "links_form": links_form, "links": links, "all_links": "\n".join(link for _, link in links)})


# --- Admins: gold items and attention checks ------------------------------------------------------------------


def _codes(data) -> str:
    return "".join(data.get("expected_codes") or [])


def _gold_save(request: HttpRequest):
    def save(data: dict) -> str:
        item = gold_item_mark(candidate=data["candidate"], min_score=data["min_score"], max_score=data["max_score"],
                              expected_codes=_codes(data), explanation=data["explanation"],
                              in_qualification=data["in_qualification"], by=request.user)
        return f"Gold item #{item.pk} added."
    return save


def _attention_save(request: HttpRequest):
    def save(data: dict) -> str:
        item = attention_check_create(question=data["question"], text=data["text"],
                                      expected_score=data["expected_score"], expected_codes=_codes(data),
                                      explanation=data["explanation"], by=request.user)
        return f"Attention check #{item.pk} added."
    return save


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def quality_items(request: HttpRequest) -> HttpResponse:
    """Gold items and attention checks: the list with their results, a search for candidate answers and
    questions, and the two forms that add them (``kind=gold`` / ``kind=attention`` in the POST)."""
    search = CandidateSearchForm(request.GET)
    text = search.cleaned_data["q"] if search.is_valid() else ""
    # "Use as gold item" / "Add an attention check" in the search results fill in the id.
    gold_form = GoldItemForm(initial={"candidate": query_pk(request.GET, "candidate")}, prefix="gold")
    attention_form = AttentionCheckForm(initial={"question": query_pk(request.GET, "question")}, prefix="attention")
    status = 200
    if request.method == "POST":
        if request.POST.get("kind") == "gold":
            gold_form = GoldItemForm(request.POST, prefix="gold")
            done = _submitted(request, gold_form, _gold_save(request), to=reverse("crowd:items"))
        else:
            attention_form = AttentionCheckForm(request.POST, prefix="attention")
            done = _submitted(request, attention_form, _attention_save(request), to=reverse("crowd:items"))
        if done:
            return done
        status = 400
    return render(request, "crowd/items.html", {
        "items": selectors.quality_item_list_for_admin(user=request.user),
        "search": search, "found": selectors.candidate_search_for_admin(user=request.user, text=text),
        "searched": bool(text), "gold_form": gold_form, "attention_form": attention_form,
    }, status=status)


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def quality_item(request: HttpRequest, item_pk: int) -> HttpResponse:
    """Change one gold item or attention check, or stop handing it out."""
    item = selectors.quality_item_get_for_admin(user=request.user, item_pk=item_pk)
    if request.method == "POST":
        form = QualityItemEditForm(request.POST)

        def save(data: dict) -> str:
            quality_item_update(item=item, min_score=data["min_score"], max_score=data["max_score"],
                                expected_codes=_codes(data), explanation=data["explanation"],
                                in_qualification=data["in_qualification"], is_active=data["is_active"],
                                by=request.user)
            return (f"{item.get_kind_display()} #{item.pk} saved"
                    f"{'' if item.is_active else '; it is no longer handed out'}.")

        if done := _submitted(request, form, save, to=reverse("crowd:items")):
            return done
        return render(request, "crowd/item.html", {"item": item, "form": form}, status=400)
    form = QualityItemEditForm(initial={
        "min_score": item.min_score, "max_score": item.max_score, "expected_codes": list(item.expected_codes),
        "explanation": item.explanation, "in_qualification": item.in_qualification, "is_active": item.is_active})
    return render(request, "crowd/item.html", {"item": item, "form": form})


# --- Admins: the quality policy and each benchmark's rates ----------------------------------------------------


@require_http_methods(["GET", "POST"])
@role_required(ADMIN)
def policy_page(request: HttpRequest) -> HttpResponse:
    """The quality policy (qualification, warn and pause thresholds) and each benchmark's insertion rates
    (``form=policy`` / ``form=rates`` in the POST; ``?edit=<pk>`` fills the rates form with that row)."""
    policy_form = QualityPolicyForm(instance=quality_policy(), prefix="policy")
    edit = query_pk(request.GET, "edit")
    rates_form = BenchmarkQualityForm(instance=BenchmarkQuality.objects.filter(pk=edit).first() if edit else None,
                                      prefix="rates")
    status = 200
    if request.method == "POST":
        if request.POST.get("form") == "policy":
            policy_form = QualityPolicyForm(request.POST, instance=quality_policy(), prefix="policy")

            def save(data: dict) -> str:
                quality_policy_set(values={name: data[name] for name in POLICY_FIELDS}, by=request.user)
                return "Quality policy saved."
            done = _submitted(request, policy_form, save, to=reverse("crowd:policy"))
        else:
            rates_form = BenchmarkQualityForm(request.POST, prefix="rates")

            def save(data: dict) -> str:
                benchmark_quality_set(benchmark=data["benchmark"], gold_rate=data["gold_rate"],
                                      attention_rate=data["attention_rate"], min_seconds=data["min_seconds"],
                                      training_feedback=data["training_feedback"], by=request.user)
                return f"Quality settings of {data['benchmark'].name} saved."
            done = _submitted(request, rates_form, save, to=reverse("crowd:policy"))
        if done:
            return done
        status = 400
    return render(request, "crowd/policy.html", {
        "policy_form": policy_form, "rates_form": rates_form,
        "rates": selectors.benchmark_quality_list_for_admin(user=request.user),
    }, status=status)
