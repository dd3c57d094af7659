"""The Django admin never reaches a path or URL that the platform's own forms would refuse (issue #34 item 3): a
table import's file, audio root, source and mapping cannot be added or changed there (an admin pointed a draft at
``/etc/passwd`` and the import preview showed it), and no model's path or URL field is writable in the admin unless
the admin saves it through the platform's validating service."""
import re

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from django.urls import reverse

from annotation.models import TableImport
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, write_csv

pytestmark = pytest.mark.django_db

#: Field names that hold a path or URL the server may read or send to (``settings``: an LALM's or judge's base URL
#: and key variable; ``mapping``: what a table import reads). (``Benchmark.source`` is a label, never read.)
PATH_OR_URL = re.compile(r"(path|url|root|dir|folder|file)$|^(settings|mapping)$")
#: Writable in the admin because the admin saves them through the platform's own validated service.
SAVED_THROUGH_SERVICES = {
    ("annotation", "study", "completion_url"),  # StudyAdmin saves with study_save, the study page's service
}


@pytest.fixture
def superuser():
    return get_user_model().objects.create_superuser("root", password="pw")


def test_the_admin_cannot_point_a_draft_at_etc_passwd(client, superuser, tmp_path, settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    table = write_csv(tmp_path / "t.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    record = TableImport.objects.create(benchmark_name="B", source_kind="upload", source="t.csv",
                                        file_path=str(table), file_format="csv", mapping=NEWCOMER_MAPPING,
                                        columns=list(NEWCOMER_COLUMNS), rows=9, created_by=superuser)
    client.force_login(superuser)
    change = reverse("admin:annotation_tableimport_change", args=[record.pk])
    page = client.get(change)
    assert page.status_code == 200 and b'name="file_path"' not in page.content  # shown, read-only
    response = client.post(change, {
        "benchmark_name": "B", "source_kind": "path", "source": "/etc/passwd", "file_path": "/etc/passwd",
        "file_format": "csv", "audio_root": "/", "mapping": '{"columns": {"question": "root:x:0:0:root"}}',
        "columns": "[]", "summary": "{}", "rows": "1"})
    assert response.status_code == 403
    record.refresh_from_db()
    assert (record.file_path, record.audio_root, record.source) == (str(table), "", "t.csv")
    assert client.get(reverse("admin:annotation_tableimport_add")).status_code == 403
    preview = client.get(reverse("annotation:import", args=[record.pk])).content.decode()
    assert "root:x:0:0" not in preview


def test_no_path_or_url_field_is_writable_in_the_admin(superuser):
    request = RequestFactory().get("/admin/")
    request.user = superuser
    writable = []
    for model, model_admin in admin.site._registry.items():
        fields = [f.name for f in model._meta.concrete_fields if PATH_OR_URL.search(f.name)]
        if not fields:
            continue
        if model_admin.has_change_permission(request, model()):
            readonly = set(model_admin.get_readonly_fields(request, model()))
            writable += [(model._meta.app_label, model._meta.model_name, name) for name in fields
                         if name not in readonly and name in model_admin.get_fields(request, model())]
        if model_admin.has_add_permission(request):
            shown = set(model_admin.get_fields(request)) - set(model_admin.get_readonly_fields(request))
            writable += [(model._meta.app_label, model._meta.model_name, name) for name in fields if name in shown]
    assert set(writable) <= SAVED_THROUGH_SERVICES, sorted(set(writable) - SAVED_THROUGH_SERVICES)
