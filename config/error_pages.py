"""The site's 404 page under ``DEBUG`` too (``make run`` runs with ``DEBUG`` on).

With ``DEBUG``, Django answers a missing page with its technical page, which lists every URL pattern of the
platform; the README promises the site's own page (``templates/404.html``: the address, why, the way home) in
development as in production. :class:`NotFoundPageMiddleware` answers both kinds of 404 with it: an address that
names no page (the URL resolver found nothing: ``request.resolver_match`` is None) and a view's ``Http404`` ("No such
connection test"), whose reason the page shows. Other errors keep Django's debug page, which is what ``DEBUG`` is for.
"""
from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import Resolver404


def _site_page(request: HttpRequest, exception: Exception) -> HttpResponse:
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)


class NotFoundPageMiddleware:
    """Under ``DEBUG``: a 404 is ``templates/404.html`` (through ``django.views.defaults.page_not_found``), never the
    technical 404 page. Without ``DEBUG`` Django does this itself, and the middleware does nothing."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.DEBUG and response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            # The resolver found nothing: Django's handler made the technical page (a view's own 404 answers,
            # e.g. a refused study link, have a resolver match and are kept).
            return _site_page(request, Resolver404({"path": request.path_info}))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if settings.DEBUG and isinstance(exception, Http404):
            return _site_page(request, exception)
        return None
