"""Expert pages of Stage 3 (ORCA paper, sections 3.3 and 5.2): queues, item review, correction, history, report.

Thin views: experts and admins only (``annotation.access``; annotators get 403); each parses the request and calls
one service. No GET writes: flags are evaluated by the beat task every minute, and the queue overview says when
(and offers "Evaluate now", which queues the same task for a worker).

The correction page is one form. Its buttons post an ``action``, and each action has its own handler
(:data:`CORRECTION_ACTIONS`): ``suggest:<field>`` queues an AI suggestion, ``accept:<id>`` copies a ready proposal
into its field (still editable, nothing saved), ``reject:<id>`` rejects it, ``preview`` shows the diffs and every
effect of saving, and ``save`` (from the preview) saves. The suggestion
panel polls with htmx until the job is done; without JavaScript a reload shows it.
"""
from dataclasses import dataclass
from dataclasses import field as dc_field
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from annotation.access import ADMIN, STAFF, has_role, role_required
from annotation.forms import errors_text, query_benchmark_pk
from annotation.jobs.registry import task_send
from annotation.models import Question
from refinement import selectors
from refinement.forms import CorrectionForm, DismissForm, QueueFilterForm, SendToQueueForm
from refinement.models import CorrectableField, CorrectionItem, Queue, Suggestion
from refinement.services.corrections import (
    CorrectionPlan,
    correction_plan,
    correction_reason_clean,
    correction_save,
)
from refinement.services.queues import ClaimedByAnotherExpert, item_dismiss, item_open, question_claim, question_release
from refinement.services.suggestions import (
    suggestion_availability,
    suggestion_for_review,
    suggestion_reject,
    suggestion_request,
)

#: Items per page of a queue (the page renders every row's texts; a long queue is paged, not cut).
QUEUE_PAGE_SIZE = 50
#: The beat's flag evaluation, queued by "Evaluate now".
FLAGS_TASK = "refinement.tasks.flags_refresh_task"


def _question(request, question_id: int) -> Question:
    try:
        return selectors.question_for_expert(user=request.user, question_id=question_id)
    except Question.DoesNotExist:
        raise Http404("No such question") from None


#: The query parameters that tie an item page to the queue it was opened from (queue and the queue's filters).
QUEUE_CONTEXT = ("queue", "benchmark", "modality", "category")


def _queue_query(data) -> str:
    """``queue=…&benchmark=…`` from ``data`` (a QueryDict), the empty ones left out: what item pages pass on."""
    return urlencode([(key, data[key]) for key in QUEUE_CONTEXT if data.get(key)])


def _item_url(question: Question, request: HttpRequest | None = None) -> str:
    """The item page, keeping the queue it was opened from (``request``'s query) for "back to queue" and "next"."""
    url = reverse("refinement:item", args=[question.pk])
    query = _queue_query(request.GET) if request is not None else ""
    return f"{url}?{query}" if query else url


def _queue_navigation(request: HttpRequest, question: Question) -> dict | None:
    """The queue the item page was opened from (``?queue=`` and its filters): its label, the link back to it and
    the next item in it; None without a (valid) queue."""
    queue = request.GET.get("queue", "")
    if queue not in Queue.values:
        return None
    chosen = QueueFilterForm(request.GET).filters()
    filters = urlencode([(key, request.GET[key]) for key in QUEUE_CONTEXT[1:] if request.GET.get(key)])
    return {
        "label": Queue(queue).label,
        "url": reverse("refinement:queue", args=[queue]) + (f"?{filters}" if filters else ""),
        "next": selectors.queue_next_for_user(user=request.user, queue=queue, question_id=question.pk, **chosen),
        "query": _queue_query(request.GET),
    }


@require_GET
@role_required(*STAFF)
def index(request: HttpRequest) -> HttpResponse:
    """Queue overview: open items per queue, links, and when the flags were last evaluated (the beat task
    ``refinement.tasks.flags_refresh_task`` evaluates new ratings every minute; reading this page writes nothing)."""
    counts = selectors.queue_counts_for_user(user=request.user)
    queues = [(key, label, counts[key]) for key, label in Queue.choices]
    context = {"queues": queues, "flags_evaluated_at": selectors.flags_evaluated_at()}
    return render(request, "refinement/index.html", context)


@require_POST
@role_required(*STAFF)
def flags_evaluate(request: HttpRequest) -> HttpResponse:
    """Queue an evaluation of the flag rules now (what the beat does every minute) for a worker, then go back to
    ``next`` (the dashboard or the queue overview)."""
    task_send(FLAGS_TASK)
    messages.success(request, "Flag evaluation queued: a worker reads the new ratings and fills the queues; reload "
                              "this page in a moment.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = reverse("refinement:index")
    return HttpResponseRedirect(back)


@require_GET
@role_required(*STAFF)
def queue(request: HttpRequest, queue: str) -> HttpResponse:
    """One queue: open items, most flags first, filtered by ``?benchmark=&modality=&category=``, 50 a page."""
    if queue not in Queue.values:
        raise Http404("No such queue")
    query_benchmark_pk(request.GET)  # ?benchmark=Nope: a 404 saying so, not every benchmark
    chosen = QueueFilterForm(request.GET).filters()
    items = selectors.queue_items_for_user(user=request.user, queue=queue, **chosen)
    page = Paginator(items, QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    filters = {key: value for key, value in (("benchmark", chosen["benchmark_id"] or ""),
                                             ("modality", chosen["modality"]),
                                             ("category", chosen["category"])) if value}
    items = list(page.object_list)
    context = {
        "queue": queue,
        "queue_label": Queue(queue).label,
        "items": items,
        "page": page,
        # Imported benchmarks often name no modality (at most "unknown (ORCA)") or category: a column without a
        # value on any row is left out.
        "show_modality": any(i.question.modality for i in items),
        "show_category": any(i.question.category for i in items),
        "filter_query": urlencode(filters),
        "total": page.paginator.count,
        "filters": selectors.queue_filter_choices(user=request.user),
        "chosen": {"benchmark": str(chosen["benchmark_id"] or ""), "modality": chosen["modality"],
                   "category": chosen["category"]},
    }
    return render(request, "refinement/queue.html", context)


@require_GET
@role_required(*STAFF)
def item(request: HttpRequest, question_id: int) -> HttpResponse:
    """Everything about one flagged question: flags, claim, texts, audio, what annotators said."""
    question = _question(request, question_id)
    review = selectors.question_review_for_user(user=request.user, question=question)
    return render(request, "refinement/item.html", {"question": question, "review": review, "queues": Queue.choices,
                                                    "can_force_release": has_role(request.user, ADMIN),
                                                    "in_queue": _queue_navigation(request, question)})


@require_POST
@role_required(*STAFF)
def claim(request: HttpRequest, question_id: int) -> HttpResponse:
    question = _question(request, question_id)
    try:
        question_claim(question=question, expert=request.user)
        messages.success(request, "You hold this item now; other experts see it as claimed.")
    except ClaimedByAnotherExpert as error:
        messages.error(request, str(error))
    return HttpResponseRedirect(_item_url(question, request))


@require_POST
@role_required(*STAFF)
def release(request: HttpRequest, question_id: int) -> HttpResponse:
    question = _question(request, question_id)
    force = request.POST.get("force") == "1" and has_role(request.user, ADMIN)
    if question_release(question=question, expert=request.user, force=force):
        messages.success(request, "Claim released.")
    return HttpResponseRedirect(_item_url(question, request))


@require_POST
@role_required(*STAFF)
def dismiss(request: HttpRequest, item_id: int) -> HttpResponse:
    """Close one flag with a reason; ratings stay valid."""
    try:
        flag = selectors.item_for_expert(user=request.user, item_id=item_id)
    except CorrectionItem.DoesNotExist:
        raise Http404("No such flag") from None
    form = DismissForm(request.POST)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return HttpResponseRedirect(_item_url(flag.question, request))
    try:
        item_dismiss(item=flag, expert=request.user, reason=form.cleaned_data["reason"])
        messages.success(request, f"Flag in the {flag.get_queue_display()} queue dismissed.")
    except ValidationError as error:
        messages.error(request, errors_text(error))
    except ClaimedByAnotherExpert as error:
        messages.error(request, str(error))
    return HttpResponseRedirect(_item_url(flag.question, request))


@require_POST
@role_required(*STAFF)
def send_to_queue(request: HttpRequest, question_id: int) -> HttpResponse:
    """Open an item by hand, e.g. a transcript problem reported in a comment -> transcript queue."""
    question = _question(request, question_id)
    form = SendToQueueForm(request.POST)
    if not form.is_valid():
        messages.error(request, errors_text(form))
        return HttpResponseRedirect(_item_url(question, request))
    try:
        item_open(
            question=question,
            queue=form.cleaned_data["queue"],
            opened_by=request.user,
            note=form.cleaned_data["note"],
        )
        messages.success(request, "Sent to the queue.")
    except ValidationError as error:
        messages.error(request, errors_text(error))
    return HttpResponseRedirect(_item_url(question, request))


@require_GET
@role_required(*STAFF)
def history(request: HttpRequest, question_id: int) -> HttpResponse:
    """Every version of the question, newest first, with word-level diffs."""
    question = _question(request, question_id)
    entries = selectors.version_history_for_user(user=request.user, question=question)
    return render(request, "refinement/history.html", {"question": question, "entries": entries})


@dataclass
class _CorrectionPage:
    """What the correction page shows: the texts in the form, the accepted suggestions, the version they are based
    on, the reason and queue, the preview's plan and the one error line (with the response status)."""

    texts: dict[str, str]
    accepted: dict[str, Suggestion] = dc_field(default_factory=dict)
    base_version_id: int | None = None
    reason: str = ""
    queue: str = ""
    plan: CorrectionPlan | None = None
    error: str = ""
    status: int = 200


def _posted_suggestions(form: CorrectionForm, question: Question) -> dict[str, Suggestion]:
    accepted = {}
    for name in CorrectableField.values:
        value = form.cleaned_data[f"suggestion_{name}"]
        suggestion = selectors.suggestion_of_question(question=question, suggestion_id=value, field=name)
        if suggestion is not None:
            accepted[name] = suggestion
    return accepted


def _correct_suggest(request, question, form, page: _CorrectionPage, field: str) -> None:
    """``suggest:<field>``: queue an AI suggestion for one field (the panel polls it)."""
    suggestion_request(question=question, field=field, requested_by=request.user,
                       instructions=form.cleaned_data["instructions"])


def _correct_accept(request, question, form, page: _CorrectionPage, suggestion_id: str) -> None:
    """``accept:<id>``: copy a ready proposal into its field (still editable; nothing is saved)."""
    suggestion = suggestion_for_review(question=question, suggestion_id=suggestion_id)
    page.texts[suggestion.field] = suggestion.proposed_text
    page.accepted[suggestion.field] = suggestion


def _correct_reject(request, question, form, page: _CorrectionPage, suggestion_id: str) -> None:
    """``reject:<id>``: reject a ready proposal."""
    suggestion_reject(suggestion=suggestion_for_review(question=question, suggestion_id=suggestion_id),
                      expert=request.user)


def _correct_preview(request, question, form, page: _CorrectionPage, argument: str) -> None:
    """``preview``: the diffs and every effect of saving; says so when the reason is still missing."""
    base_version = selectors.version_of_question(question=question, version_id=page.base_version_id)
    page.plan = correction_plan(question=question, base_version=base_version, texts=page.texts)
    try:
        correction_reason_clean(page.reason)
    except ValidationError as exc:
        page.error = errors_text(exc)


def _correct_save(request, question, form, page: _CorrectionPage, argument: str) -> HttpResponse:
    """``save`` (from the preview): save the new version with all its effects, then back to the item."""
    result = correction_save(
        question=question,
        base_version=selectors.version_of_question(question=question, version_id=page.base_version_id),
        texts=page.texts,
        expert=request.user,
        reason=page.reason,
        queue=page.queue,
        suggestions={k: v for k, v in page.accepted.items() if page.texts.get(k) is not None},
    )
    messages.success(
        request,
        f"Saved v{result.version.number}: {result.ratings_invalidated} rating(s) invalidated, "
        f"{len(result.copied_candidates)} candidate answer(s) back in the annotation queue, "
        f"{len(result.jobs)} candidate-answer job(s) started, {result.closed_items} flag(s) closed.",
    )
    return HttpResponseRedirect(_item_url(question, request))


#: The correction page's actions by the posted ``action``'s verb: ``suggest:<field>``, ``accept:<id>``,
#: ``reject:<id>``, ``preview``, ``save``. Any other value does nothing (the page is shown again).
CORRECTION_ACTIONS = {
    "suggest:": _correct_suggest,
    "accept:": _correct_accept,
    "reject:": _correct_reject,
    "preview": _correct_preview,
    "save": _correct_save,
}


@require_http_methods(["GET", "POST"])
@role_required(*STAFF)
def correct(request: HttpRequest, question_id: int) -> HttpResponse:
    """The correction form; a POST runs the one handler its ``action`` names (see the module docstring)."""
    question = _question(request, question_id)
    version = question.current_version
    form = CorrectionForm(request.POST if request.method == "POST" else request.GET)
    valid = form.is_valid()
    page = _CorrectionPage(texts={name: getattr(version, name) for name in CorrectableField.values},
                           base_version_id=version.pk, queue=form.cleaned_data.get("queue") or "")
    if request.method == "POST" and not valid:
        # Nothing is done with a post the form refuses; the page says why, with the current texts.
        page.error, page.status = errors_text(form), 400
    elif request.method == "POST":
        data = form.cleaned_data
        page.texts, page.accepted = form.texts(version), _posted_suggestions(form, question)
        page.base_version_id = data["base_version"] or version.pk
        page.reason = data["reason"]
        verb, colon, argument = data["action"].partition(":")
        handler = CORRECTION_ACTIONS.get(verb + colon)
        try:
            response = handler(request, question, form, page, argument) if handler else None
        except ClaimedByAnotherExpert as exc:
            page.error = str(exc)
        except ValidationError as exc:
            page.error, page.plan = errors_text(exc), None
        else:
            if response is not None:
                return response
    context = {
        "question": question,
        "version": version,
        "base_version_id": page.base_version_id,
        "fields": [(name, label, page.texts[name], page.accepted.get(name))
                   for name, label in CorrectableField.choices],
        "reason": page.reason,
        "queue": page.queue,
        "plan": page.plan,
        "error": page.error,
        "suggestions": selectors.suggestions_open_for_user(user=request.user, question=question),
        "availability": suggestion_availability(),
        "claim": selectors.claim_for_user(user=request.user, question=question),
        "queue_query": _queue_query(request.GET),
    }
    return render(request, "refinement/correct.html", context, status=page.status)


@require_GET
@role_required(*STAFF)
def suggestion_panel(request: HttpRequest, suggestion_id: int) -> HttpResponse:
    """The ``#suggestion`` partial of one AI suggestion (htmx polls it while queued or running)."""
    try:
        suggestion = selectors.suggestion_for_expert(user=request.user, suggestion_id=suggestion_id)
    except Suggestion.DoesNotExist:
        raise Http404("No such suggestion") from None
    return render(request, "refinement/correct.html#suggestion", {"suggestion": suggestion})


@require_GET
@role_required(*STAFF)
def report(request: HttpRequest) -> HttpResponse:
    """Corrections per field per benchmark, flags per queue, alpha of all vs valid vs invalidated ratings."""
    data = selectors.refinement_report_for_user(user=request.user)
    return render(request, "refinement/report.html", {"report": data})
