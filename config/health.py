"""Liveness and readiness probes: ``/healthz`` (process up) and ``/readyz`` (database and broker reachable)."""
import logging

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


@require_GET
@never_cache
def healthz(request):
    """200 while the process serves requests."""
    return JsonResponse({"status": "ok"})


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # any driver error means "not ready"; report it, don't crash the probe
        connection.close()  # a broken connection must not be reused by the next request
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:  # kombu raises many transport-specific errors
        return f"{type(exc).__name__}: {exc}"
    return None


@require_GET
@never_cache
def readyz(request):
    """200 when the database and the Celery broker answer, else 503 naming what failed."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    ok = all(error is None for error in checks.values())
    if not ok:
        logger.warning("not ready: %s", {k: v for k, v in checks.items() if v})
    body = {"status": "ok" if ok else "unavailable", "checks": {k: v or "ok" for k, v in checks.items()}}
    return JsonResponse(body, status=200 if ok else 503)
