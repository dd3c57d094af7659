"""The Celery application shared by the web process, the workers and beat.

Broker: ``CELERY_BROKER_URL`` (Redis or RabbitMQ in production; kombu's ``filesystem://`` transport under
``var/broker`` in the embedded default, so nothing else has to run). The filesystem broker's folders are created
by whichever process configures the app first (web, worker or beat: :func:`broker_folders_ensure`), so
``manage.py runserver`` alone can queue work for a worker started later. Task rows (``annotation.Job``) carry the
state users see, so no result backend is configured.

Settings: ``DJANGO_SETTINGS_MODULE`` when set, else production (DEBUG off, no default secret), as ``config.wsgi``:
a worker started bare must never run with the local settings' DEBUG and development key. ``config`` imports this
module, so the default applies to anything that imports ``config`` first. ``manage.py`` (local settings,
``make run`` and its ``runplatform`` workers), pytest (``pytest.ini``), the Dockerfile and the benchmarks set the
module explicitly.
"""
import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

app = Celery("orca_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

#: The transport options naming the filesystem broker's folders (``config/settings/base.py``).
_FOLDER_OPTIONS = ("data_folder_in", "data_folder_out", "processed_folder", "control_folder")
#: The command that starts a worker beside ``manage.py runserver`` (local settings, both queues).
WORKER_COMMAND = ("DJANGO_SETTINGS_MODULE=config.settings.local .venv/bin/celery -A config worker -Q default,gpu "
                  "--loglevel INFO")


def _is_filesystem_broker(conf) -> bool:
    return str(conf.broker_url or "").startswith("filesystem://")


def broker_folders(conf=None) -> list[Path]:
    """The folders of the ``filesystem://`` broker (messages in and out, processed, exchange tables); empty for any
    other broker."""
    conf = conf or app.conf
    if not _is_filesystem_broker(conf):
        return []
    options = conf.broker_transport_options or {}
    return [Path(options[key]) for key in _FOLDER_OPTIONS if options.get(key)]


def broker_folders_ensure(conf=None) -> list[Path]:
    """Create the ``filesystem://`` broker's folders that are missing; returns them (empty for other brokers).

    Raises:
        OSError: a folder cannot be created (read-only disk, permissions).
    """
    folders = broker_folders(conf)
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return folders


def broker_reachable(*, timeout: float = 2.0, retries: int = 0) -> None:
    """Return when the broker can take a message now, else raise the transport's error: for ``filesystem://``
    its folders exist (created when missing) and are writable; for a server, a connection succeeds within
    ``timeout`` seconds and ``retries`` further attempts (kombu's back-off: 2 s, 4 s, ...).

    Raises:
        OSError: a filesystem broker folder cannot be created or written. Any exception of the transport (kombu,
            redis, amqp): the broker server does not answer.
    """
    folders = broker_folders_ensure()
    if folders:
        unwritable = [str(folder) for folder in folders if not os.access(folder, os.W_OK | os.X_OK)]
        if unwritable:
            raise PermissionError(f"not writable: {', '.join(unwritable)}")
        return
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=retries, timeout=timeout)


@app.on_after_configure.connect
def _create_broker_folders(sender, **kwargs) -> None:
    try:
        broker_folders_ensure(sender.conf)
    except OSError:  # reported where a task is sent (annotation.jobs.registry), with what to do
        pass


def broker_problem() -> str:
    """What a failed send means, in words for the person who pressed the button (no host, user or password)."""
    if _is_filesystem_broker(app.conf):
        folders = ", ".join(str(folder) for folder in broker_folders()[:2])
        return (f"the embedded broker (kombu filesystem://) could not write its message folder ({folders}); "
                "check that the folder is writable.")
    scheme = str(app.conf.broker_url or "").split("://", 1)[0] or "?"
    return f"the broker ({scheme}, named by CELERY_BROKER_URL) did not answer."


def broker_advice() -> tuple[str, list[tuple[str, str]]]:
    """What to do so queued work runs: a sentence, and the commands to run as (command, what it starts)."""
    if _is_filesystem_broker(app.conf):
        return ("Make the folder writable for the user that runs the web server (or remove it: it is created again), "
                "make sure a worker reads it, then press the button again.",
                [("make run", "the web server, a worker and beat together (the embedded default)"),
                 (WORKER_COMMAND, "a worker beside `manage.py runserver`")])
    return ("Start the broker that CELERY_BROKER_URL names and at least one worker, then press the button again.",
            [("docker compose -f docker/compose.yaml up -d redis worker beat", "with docker compose"),
             ("celery -A config worker -Q default,gpu", "a worker on this machine, with the same settings")])


from config.observability import connect_celery_signals  # noqa: E402

connect_celery_signals()
