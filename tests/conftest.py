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


@pytest.fixture(autouse=True)
def _empty_cache():
    """Each test starts with an empty cache (statistics cached by one test must not serve another's data)."""
    from django.core.cache import cache

    cache.clear()
    yield
