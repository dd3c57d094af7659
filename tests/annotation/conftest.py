"""Fixtures of the import pages' tests (``test_import_table_views*.py``)."""
import pytest

from tests.factories import UserFactory


@pytest.fixture
def import_folders(settings, tmp_path):
    """Uploaded tables and stored audio under the test's own folder."""
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"


@pytest.fixture
def admin_client(client):
    """A client logged in as an admin of the platform (the role, not only Django's superuser flag)."""
    client.force_login(UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]))
    return client
