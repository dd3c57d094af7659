"""Request ids, job ids and structured logs.

Every log record carries ``request_id`` (from the ``X-Request-ID`` header or a new UUID, echoed in the response)
and ``job_id``/``job_kind``/``task_id`` while a Celery task works a job (``annotation.jobs`` binds the job), so one
request or one job can be followed across web and worker logs. ``LOG_FORMAT=json`` (the production default) writes
one JSON object per line via python-json-logger.
"""
import contextvars
import logging
import uuid
from contextlib import contextmanager

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
job_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("job_id", default="-")
job_kind_var: contextvars.ContextVar[str] = contextvars.ContextVar("job_kind", default="-")
task_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("task_id", default="-")


class ContextFilter(logging.Filter):
    """Adds ``request_id``, ``job_id``, ``job_kind`` and ``task_id`` attributes to every record ("-" when unknown)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        record.job_id = job_id_var.get()
        record.job_kind = job_kind_var.get()
        record.task_id = task_id_var.get()
        return True


class RequestIdMiddleware:
    """Binds a request id to the request's logs and returns it in the ``X-Request-ID`` response header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.headers.get("X-Request-ID", "")
        rid = incoming if 0 < len(incoming) <= 64 and incoming.isprintable() else uuid.uuid4().hex
        token = request_id_var.set(rid)
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(token)
        response["X-Request-ID"] = rid
        return response


@contextmanager
def job_log_context(job_id, kind: str = "-"):
    """Within the block, log records carry ``job_id`` (the primary key of a ``Job``, ``TrainingRun`` or
    ``CrossFitRun``) and ``job_kind`` (the ``Job`` kind, e.g. ``rationale``, or ``trainingrun``/``crossfitrun``,
    which tells the tables apart). ``annotation.jobs`` binds it around every job's work."""
    tokens = (job_id_var.set(str(job_id)), job_kind_var.set(str(kind)))
    try:
        yield
    finally:
        job_id_var.reset(tokens[0])
        job_kind_var.reset(tokens[1])


def connect_celery_signals() -> None:
    """Bind the Celery task id to log records while a task runs (called from ``config/celery.py``)."""
    from celery.signals import task_postrun, task_prerun

    tokens: dict[str, contextvars.Token] = {}

    @task_prerun.connect(weak=False)
    def _bind(task_id=None, **kwargs):
        tokens[task_id] = task_id_var.set(task_id or "-")

    @task_postrun.connect(weak=False)
    def _unbind(task_id=None, **kwargs):
        token = tokens.pop(task_id, None)
        if token is not None:
            task_id_var.reset(token)


def logging_config(*, fmt: str, level: str) -> dict:
    """The ``LOGGING`` dict: ``fmt`` is "json" or "plain"; ``level`` a logging level name."""
    formatters = {
        "plain": {
            "format": "%(asctime)s %(levelname)s %(name)s [req=%(request_id)s job=%(job_id)s] %(message)s",
        },
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(job_id)s %(job_kind)s %(task_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "config.observability.ContextFilter"}},
        "formatters": formatters,
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": fmt, "filters": ["context"]},
        },
        "root": {"handlers": ["console"], "level": level},
    }
