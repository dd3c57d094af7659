"""503 Service Unavailable with ``Retry-After`` when PostgreSQL or the Celery broker is unreachable.

A database restart or a broker outage is not a bug in the request: the client should try again shortly. Without
this, the request ends as a 500, which an annotator reads as "my rating is broken" and a load balancer or client
library does not retry. The rating page (``static/js/rating.js``) retries a failed submit once, after the
``Retry-After`` delay; the submit is idempotent (one rating per annotator and candidate answer).

The middleware handles exceptions raised by views (Django's and DRF's: DRF re-raises what its exception handler
does not know). An outage that strikes after the view, in a middleware — the session saved at the very end of a
request (``SessionMiddleware``), the messages, the authentication lookup before the view — never reaches a
``process_exception``: Django turns it into its 500 handler's answer, so ``handler500`` (:func:`server_error`,
named in ``config/urls.py``) looks at the exception being handled and answers the same 503. The detail (host,
user, errno) goes to the log only, never into the response.

A button that queues work while the broker is not there (``annotation.jobs.registry.EnqueueError``, raised by the
one place that sends tasks) is answered here too: 503 with the platform's page (``templates/queue_unavailable.html``,
in the site's layout: only the broker is down, the database answers) saying what is wrong and what to do, or
``{"detail": ..., "advice": ...}`` for the API.
"""
from __future__ import annotations

import logging
import sys

from django.conf import settings
from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils.html import escape
from django.utils.http import url_has_allowed_host_and_scheme

from annotation.jobs.registry import EnqueueError

logger = logging.getLogger(__name__)

MESSAGE = "The service is briefly unavailable (database or task queue). Nothing was lost; try again in a moment."
#: The HTML answer. Not a template extending base.html on purpose: that one reads the session and the user, which
#: need the database that is down; and no form or htmx attribute here could post without base.html's CSRF header.
PAGE = (
    '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>Briefly unavailable · ORCA</title>'
    '<meta name="viewport" content="width=device-width, initial-scale=1"></head>'
    '<body><main><h1>Briefly unavailable</h1><p role="alert">{message}</p><p><a href="">Try again</a></p></main>'
    "</body></html>\n"
)


def _unavailable_errors() -> tuple[type[BaseException], ...]:
    """The exception classes that mean "a backing service is unreachable"."""
    import psycopg
    from kombu.exceptions import OperationalError as KombuOperationalError

    errors: list[type[BaseException]] = [DjangoOperationalError, DjangoInterfaceError, psycopg.OperationalError,
                                         psycopg.InterfaceError, KombuOperationalError]
    try:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError
    except ImportError:  # pragma: no cover - redis is in requirements.txt
        pass
    else:
        errors += [RedisConnectionError, RedisTimeoutError]
    return tuple(errors)


def _wants_json(request: HttpRequest) -> bool:
    return request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", "")


def _retry_later(response: HttpResponse) -> HttpResponse:
    response["Retry-After"] = str(settings.SERVICE_UNAVAILABLE_RETRY_AFTER_S)
    response["Cache-Control"] = "no-store"
    return response


def service_unavailable_response(request: HttpRequest) -> HttpResponse:
    """The 503 answer: JSON ``{"detail": ...}`` for the API and JSON clients, else a short HTML page; both with
    ``Retry-After: SERVICE_UNAVAILABLE_RETRY_AFTER_S`` seconds and ``Cache-Control: no-store``."""
    if _wants_json(request):
        return _retry_later(JsonResponse({"detail": MESSAGE}, status=503))
    return _retry_later(HttpResponse(PAGE.format(message=escape(MESSAGE)), status=503))


def queue_unavailable_response(request: HttpRequest, error: EnqueueError) -> HttpResponse:
    """The 503 answer to work that could not be queued: what is wrong (``error.problem``) and what to do
    (``error.advice``), as JSON ``{"detail", "advice"}`` for the API, else the platform's page; with
    ``Retry-After`` and ``Cache-Control: no-store``."""
    if _wants_json(request):
        advice = " ".join([error.advice, *(f"{what}: {command}" for command, what in error.commands)])
        return _retry_later(JsonResponse({"detail": error.problem, "advice": advice}, status=503))
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        back = ""
    response = TemplateResponse(request, "queue_unavailable.html", {"error": error, "back_url": back}, status=503)
    return _retry_later(response.render())


class ServiceUnavailableMiddleware:
    """Turn database and broker connection errors raised by a view into :func:`service_unavailable_response`, and
    work that could not be queued (``EnqueueError``) into :func:`queue_unavailable_response`."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.errors = _unavailable_errors()

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: BaseException) -> HttpResponse | None:
        if isinstance(exception, EnqueueError):
            logger.warning("503 for %s %s: %s (%s)", request.method, request.path, exception, exception.detail)
            return queue_unavailable_response(request, exception)
        return _answer_outage(request, exception, self.errors)


def _answer_outage(request: HttpRequest, exception: BaseException | None,
                   errors: tuple[type[BaseException], ...]) -> HttpResponse | None:
    """The logged 503 when ``exception`` is one of ``errors`` (an outage), else None."""
    if not isinstance(exception, errors):
        return None
    logger.warning("503 for %s %s: %s: %s", request.method, request.path, type(exception).__name__, exception,
                   exc_info=exception)
    return service_unavailable_response(request)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: :func:`service_unavailable_response` when the exception being handled means a backing
    service is unreachable (raised outside a view, e.g. by the session save at the end of a request), else
    the 500 page (``templates/500.html``, rendered by ``django.views.defaults.server_error`` without a request).
    Django calls it inside the ``except`` block of the failed request, so ``sys.exc_info()`` holds that
    exception."""
    from django.views.defaults import server_error as django_server_error

    return _answer_outage(request, sys.exc_info()[1], _unavailable_errors()) or django_server_error(request)
