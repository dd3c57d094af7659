"""Request body limits enforced before the body is read (issue #34; README "Security and integrity").

Django checks an uploaded file's size only once the whole request has been received (spooled to a temporary file),
so a form with a size limit still lets a client send gigabytes. :class:`RequestBodyLimitMiddleware` answers 413
from the declared ``Content-Length`` before any middleware or view touches ``request.POST``/``request.FILES``: the
import page's upload may carry ``IMPORT_UPLOAD_MAX_BYTES`` (its table, audio zip and mapping together; the same for
the *Attach audio* page's files), the admin's
audio upload ``AUDIO_UPLOAD_MAX_BYTES``, every other request ``REQUEST_BODY_MAX_BYTES``. A body without a
``Content-Length`` (chunked) is never read by Django's WSGI request (it reads ``CONTENT_LENGTH`` bytes, 0 then).
The reverse proxy in front (``docker/nginx.conf``) refuses the same sizes before they reach gunicorn.
"""
from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse

#: Multipart framing and the form's other fields beside the files of an upload route.
FORM_SLACK_BYTES = 1024 * 1024
#: URL name (``resolver_match.view_name``) -> the setting that bounds its uploads.
UPLOAD_ROUTES = {
    "annotation:imports": "IMPORT_UPLOAD_MAX_BYTES",
    "annotation:import-audio-attach": "IMPORT_UPLOAD_MAX_BYTES",
    "admin:annotation_audioclip_add": "AUDIO_UPLOAD_MAX_BYTES",
}


def body_limit(view_name: str) -> tuple[int, str]:
    """``(largest body in bytes, the setting it comes from)`` for requests to the URL named ``view_name``."""
    setting = UPLOAD_ROUTES.get(view_name)
    if setting is None:
        return settings.REQUEST_BODY_MAX_BYTES, "REQUEST_BODY_MAX_BYTES"
    return getattr(settings, setting) + FORM_SLACK_BYTES, setting


class RequestBodyLimitMiddleware:
    """413 for a request whose ``Content-Length`` exceeds :func:`body_limit` of its URL (400 for a malformed one),
    checked in ``process_view``, before the CSRF check reads the form. Put it before ``CsrfViewMiddleware``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        declared = request.META.get("CONTENT_LENGTH") or "0"
        try:
            length = int(declared)
        except ValueError:
            return HttpResponse("Malformed Content-Length.", status=400, content_type="text/plain; charset=utf-8")
        match = request.resolver_match
        limit, setting = body_limit(match.view_name if match is not None else "")
        if length > limit:
            return HttpResponse(
                f"The request body is {length} bytes, over the limit of {limit} bytes here ({setting}); nothing "
                "of it was read.", status=413, content_type="text/plain; charset=utf-8")
        return None
