"""Which environment variables an LALM or judge may read its API key from.

``settings.api_key_env`` on an ``LALM`` or ``Judge`` names the variable holding the key, so keys never sit in the
database. Unchecked, an admin (or a stolen admin session) could name ``DATABASE_URL`` or ``DJANGO_SECRET_KEY`` and
have it sent as a bearer token to any ``base_url``. Only names matching ``PROVIDER_API_KEY_ENV_PATTERN`` (a shell
glob, case-sensitive; default ``*_API_KEY``) are allowed: at creation (the models' ``clean()``, which the admin
runs) and at use (availability checks and client construction).
"""
from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase

from django.conf import settings

from .base import ProviderUnavailable

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def api_key_env_error(provider_settings: dict | None) -> str:
    """Why ``provider_settings["api_key_env"]`` may not be used ('' when it is absent or allowed).

    The name must be a plain environment variable name matching ``settings.PROVIDER_API_KEY_ENV_PATTERN``.
    """
    name = (provider_settings or {}).get("api_key_env")
    if name in (None, ""):
        return ""
    pattern = settings.PROVIDER_API_KEY_ENV_PATTERN
    if not isinstance(name, str) or not _NAME_RE.match(name) or not fnmatchcase(name, pattern):
        return (f"api_key_env {name!r} is not allowed: it must name an environment variable matching "
                f"{pattern!r} (PROVIDER_API_KEY_ENV_PATTERN), so no other secret of the server is ever sent "
                "to a provider")
    return ""


def api_key_from_env(*, provider_settings: dict | None, default: str) -> str:
    """The API key for a provider: the variable named by ``provider_settings["api_key_env"]`` ('' when unset in
    the environment), or ``default`` when no variable is named.

    Raises:
        ProviderUnavailable: the name is not allowed (see :func:`api_key_env_error`).
    """
    error = api_key_env_error(provider_settings)
    if error:
        raise ProviderUnavailable(error)
    name = (provider_settings or {}).get("api_key_env")
    return os.environ.get(name, "") if name else default
