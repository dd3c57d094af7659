"""The Celery application shared by the web process, the workers and beat.

Broker: ``CELERY_BROKER_URL`` (Redis or RabbitMQ in production; kombu's ``filesystem://`` transport under
``var/broker`` in the embedded default, so nothing else has to run). Task rows (``annotation.Job``) carry the
state users see, so no result backend is configured.

Settings: ``DJANGO_SETTINGS_MODULE`` when set, else production (DEBUG off, no default secret), as ``config.wsgi``:
a worker started bare must never run with the local settings' DEBUG and development key. ``config`` imports this
module, so the default applies to anything that imports ``config`` first. ``manage.py`` (local settings,
``make run`` and its ``runplatform`` workers), pytest (``pytest.ini``), the Dockerfile and the benchmarks set the
module explicitly.
"""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

app = Celery("orca_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from config.observability import connect_celery_signals  # noqa: E402

connect_celery_signals()
