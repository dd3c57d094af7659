"""Admin export page: start an export with splits from the browser, watch it, download it; the audit log page."""
import io
import zipfile

import pytest

from annotation.models import Job
from tests.factories import AnnotatorFactory, RatingFactory, UserFactory

pytestmark = pytest.mark.django_db


def test_an_admin_exports_a_split_dataset_from_the_browser_and_downloads_it(client, tmp_path, settings):
    settings.EXPORT_DIR = tmp_path
    for _ in range(3):
        RatingFactory()
    client.force_login(UserFactory(roles=["admin"], is_superuser=True, is_staff=True))
    assert "New export" in client.get("/exports/").content.decode()
    response = client.post("/exports/", {"what": "dataset", "formats": ["orca-jsonl", "parquet"],
                                         "split": "unseen-questions", "seed": "1"})
    job = Job.objects.get(kind=Job.Kind.EXPORT)
    assert response.status_code == 302 and response["Location"] == f"/exports/{job.pk}/"
    page = client.get(f"/exports/{job.pk}/").content.decode()
    assert "Download the zip file" in page and "Krippendorff" in page
    download = client.get(f"/exports/{job.pk}/download/")
    names = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).namelist()
    assert {"README.md", "train.jsonl", "dev.parquet", "test.jsonl"} <= set(names)
    audit = client.get("/audit/").content.decode()
    assert "export.start" in audit and "export.finish" in audit


def test_an_export_with_one_rating_per_item_says_why_alpha_is_not_defined(client, tmp_path, settings):
    settings.EXPORT_DIR = tmp_path
    for _ in range(3):
        RatingFactory()  # three candidate answers, one rating each: no pair of scores to compare
    client.force_login(UserFactory(roles=["admin"], is_superuser=True, is_staff=True))
    client.post("/exports/", {"what": "dataset", "formats": ["orca-jsonl"], "split": "none", "seed": "0"})
    job = Job.objects.get(kind=Job.Kind.EXPORT)
    page = client.get(f"/exports/{job.pk}/").content.decode()
    assert page.count("not defined: one rating per item") == 2  # interval and ordinal
    assert 'class="progress-wide"' in page  # drawn the panel's width, not 10rem
    download = client.get(f"/exports/{job.pk}/download/")
    readme = zipfile.ZipFile(io.BytesIO(b"".join(download.streaming_content))).read("README.md").decode()
    assert "Krippendorff's alpha (ordinal, valid scored ratings): not defined: one rating per item" in readme


def test_the_export_form_names_what_is_missing(client):
    client.force_login(UserFactory(roles=["admin"], is_superuser=True, is_staff=True))
    response = client.post("/exports/", {"what": "benchmark", "split": "none", "seed": "0"})
    assert response.status_code == 200 and "Choose the benchmark to export." in response.content.decode()


def test_annotators_cannot_open_the_export_or_audit_pages(client):
    client.force_login(AnnotatorFactory())
    assert client.get("/exports/").status_code == 403
    assert client.get("/audit/").status_code == 403
