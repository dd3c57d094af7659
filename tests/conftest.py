"""Shared fixtures, and the hypothesis profile of CI."""
import os
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

from tests.judges import judged_items  # noqa: F401 - a fixture of the judge tests (annotation and e2e)

# CI (``.ci/run`` sets ORCA_CI=1) replays the same fuzz examples every run, so a red build always reproduces;
# local runs draw new examples each time and keep exploring.
hypothesis_settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("ORCA_CI"):
    hypothesis_settings.load_profile("ci")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """Path of ``../shared/data``; skips the test with a clear reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent (it sits beside the repository in CI)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """The test database, with the role groups of migration ``annotation.0002`` put back.

    ``--reuse-db`` (``pytest.ini``) keeps the database of the previous run, and that run's transactional tests
    flushed it at their end, data migrations' rows included.
    """
    from django.contrib.auth.models import Group

    from annotation.services.accounts import ROLES

    with django_db_blocker.unblock():
        for name in ROLES:
            Group.objects.get_or_create(name=name)


@pytest.fixture
def role_groups(transactional_db):
    """The role groups: transactional tests run on tables other such tests flushed, so the groups that migration
    0002 created may be gone."""
    from django.contrib.auth.models import Group

    from annotation.services.accounts import ROLES

    for name in ROLES:
        Group.objects.get_or_create(name=name)


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache (statistics cached by one test must not serve another's data)."""
    from django.core.cache import cache

    cache.clear()
    yield


def _celery_pools_reset(app) -> None:
    # Celery caches its connection and producer pools (built from broker_url) on first use; kombu keeps producer
    # pools in a global registry keyed by the broker URL, whose pool for a URL used again (the default broker, after
    # a test pointed at it) would still hold the connection pool closed here: "Acquire on closed pool".
    from kombu import pools

    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    app.amqp._producer_pool = None
    pools.reset()


@pytest.fixture
def celery_broker(monkeypatch):
    """Point the Celery app at another broker for one test, with tasks really sent (not eager) and no publish
    retry: ``celery_broker("redis://127.0.0.1:<port>/0")`` or ``celery_broker("filesystem://", data_folder_in=...)``.
    The app's settings and pools are restored afterwards."""
    from config.celery import app

    keys = ("broker_url", "broker_transport_options", "task_always_eager", "task_publish_retry")
    saved = {key: app.conf[key] for key in keys}

    def point(url: str, **transport_options) -> None:
        # Celery reads CELERY_BROKER_URL from the environment before its own setting.
        monkeypatch.setenv("CELERY_BROKER_URL", url)
        app.conf.update(broker_url=url, broker_transport_options=transport_options, task_always_eager=False,
                        task_publish_retry=False)
        _celery_pools_reset(app)

    yield point
    app.conf.update(saved)
    _celery_pools_reset(app)


@pytest.fixture
def broker_down(celery_broker):
    """The Celery app pointed at a Redis port nobody listens on: what a request sees while the broker is down."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    celery_broker(f"redis://127.0.0.1:{port}/0")
