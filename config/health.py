"""Liveness and readiness probes: ``/healthz`` (process up) and ``/readyz`` (database and broker reachable).

Both are public (load balancers and orchestrators call them without credentials), so they answer with a status only;
why a check failed (driver errors name hosts, ports and users) goes to the log.
"""
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
    from config.celery import broker_reachable

    try:
        broker_reachable(retries=1)  # one more try: a broker that is just restarting is still "ready"
    except Exception as exc:  # kombu raises many transport-specific errors
        return f"{type(exc).__name__}: {exc}"
    return None


@require_GET
@never_cache
def readyz(request):
    """``{"status": "ok"}`` (200) when the database and the Celery broker answer, else ``{"status": "unavailable"}``
    (503); the failed checks and their errors are logged (warning), never sent."""
    checks = {"database": _check_database(), "broker": _check_broker()}
    failed = {name: error for name, error in checks.items() if error is not None}
    if failed:
        logger.warning("not ready: %s", failed)
    return JsonResponse({"status": "unavailable" if failed else "ok"}, status=503 if failed else 200)
