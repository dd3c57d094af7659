"""API rate limits (DRF throttles) keyed by the client address of ``config.proxies.client_ip``, the same one the
login lockout uses, so a forged ``X-Forwarded-For`` changes neither. Rates: ``API_THROTTLE_*`` settings."""
from rest_framework.throttling import AnonRateThrottle, ScopedRateThrottle, UserRateThrottle

from config.proxies import client_ip


class ClientIpMixin:
    """A DRF throttle's client identity: the client address as ``config.proxies.client_ip`` reads it (trusted
    proxies only), "unknown" when there is none."""

    def get_ident(self, request) -> str:
        return client_ip(request) or "unknown"


class AnonThrottle(ClientIpMixin, AnonRateThrottle):
    """Requests without a login, per client address (rate ``anon``)."""


class UserThrottle(ClientIpMixin, UserRateThrottle):
    """Requests of a logged-in user, per user (rate ``user``)."""


class TokenObtainThrottle(ClientIpMixin, ScopedRateThrottle):
    """``POST /api/auth/token/`` per client address (rate ``auth-token``), on top of the per-account lockout."""
