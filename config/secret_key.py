"""Refuse weak ``DJANGO_SECRET_KEY`` values in production (``config.settings.production``).

Django signs sessions, password-reset links and CSRF tokens with the secret key; a short or published one lets
anyone forge them. Django's own ``check --deploy`` only warns (security.W009), so production refuses to start.
"""

#: Shortest key accepted (Django's ``check --deploy`` asks for at least 50 characters).
MIN_LENGTH = 50
#: Published values that must never sign anything: former and current samples of ``.env.example``, the Dockerfile's
#: build-time value, the local-settings default and common placeholders.
KNOWN_PLACEHOLDERS = frozenset({
    "change-me", "changeme", "change_me", "secret", "secret-key", "your-secret-key", "build-only",
    "django-insecure-local-development-only",
})
#: How to make a good one (printed in the error).
GENERATE_HINT = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"


def secret_key_problem(key: str) -> str | None:
    """Why ``key`` may not run production, or None when it may.

    Refused: a known placeholder (case-insensitive, also with a ``django-insecure-`` prefix), fewer than
    :data:`MIN_LENGTH` characters, or fewer than 5 distinct characters (``"x" * 50``).
    """
    normalized = key.strip().lower()
    if normalized in KNOWN_PLACEHOLDERS or normalized.startswith("django-insecure"):
        return "is a published placeholder"
    if len(key) < MIN_LENGTH:
        return f"has {len(key)} characters; at least {MIN_LENGTH} are needed"
    if len(set(key)) < 5:
        return "has fewer than 5 distinct characters"
    return None
