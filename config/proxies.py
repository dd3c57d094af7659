"""The client's IP address, for login lockouts (django-axes) and API throttles (DRF), behind a known number of
reverse proxies.

``TRUSTED_PROXY_COUNT`` (settings) is how many proxies that append to ``X-Forwarded-For`` stand between the client
and gunicorn. 0: the peer address (``REMOTE_ADDR``) is the client; nothing in the headers is believed. n > 0: the
n-th address from the right of ``X-Forwarded-For`` is the client, i.e. the one the outermost trusted proxy saw; what
a client writes into the header itself lies further left and is never used. The count is only safe when gunicorn
cannot be reached except through those proxies (``docker/compose.yaml`` publishes it on 127.0.0.1 only).
"""
from django.conf import settings


def client_ip(request) -> str | None:
    """The client's address as a string (IPv4 or IPv6), or None when the request carries none.

    A request whose ``X-Forwarded-For`` holds fewer addresses than ``TRUSTED_PROXY_COUNT`` did not pass through all
    the proxies; its peer address is used instead.
    """
    remote = request.META.get("REMOTE_ADDR") or None
    count = getattr(settings, "TRUSTED_PROXY_COUNT", 0)
    if count <= 0:
        return remote
    forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    if len(forwarded) < count:
        return remote
    return forwarded[-count]
