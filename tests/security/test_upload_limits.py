"""Upload limits hold before the body is read, the mapping upload has one, and the import draft reads only the head
of a table in the web request (issue #34 item 6) (config/upload_limits.py, docker/nginx.conf,
annotation.services.importers.table_jobs)."""
import json
import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import TableImport
from annotation.services.importers import table_sources
from config.upload_limits import UPLOAD_ROUTES
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, records, write_csv

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]


class UnreadableBody:
    """A request body that fails the test if anything reads it."""

    def read(self, *args, **kwargs):
        raise AssertionError("the request body was read")

    readline = read


@pytest.mark.parametrize(("url", "setting"), [
    ("/imports/", "IMPORT_UPLOAD_MAX_BYTES"),
    ("/admin/annotation/audioclip/add/", "AUDIO_UPLOAD_MAX_BYTES"),
    ("/accounts/login/", "REQUEST_BODY_MAX_BYTES"),
])
def test_a_body_over_the_limit_is_refused_before_it_is_read(admin_browser, url, setting, settings):
    declared = getattr(settings, setting) + 2 * 1024 * 1024
    response = admin_browser.generic("POST", url, b"", content_type="multipart/form-data; boundary=x",
                                    CONTENT_LENGTH=str(declared), **{"wsgi.input": UnreadableBody()})
    assert response.status_code == 413
    assert "over the limit" in response.content.decode() and setting in response.content.decode()


def test_an_oversized_table_upload_gets_413_and_nothing_is_stored(admin_browser, settings, tmp_path):
    settings.IMPORT_UPLOAD_MAX_BYTES = 50_000
    table = write_csv(tmp_path / "big.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS * 3000)  # ~0.5 MB
    response = admin_browser.post(reverse("annotation:imports"), {
        "benchmark_name": "B", "upload": SimpleUploadedFile(table.name, table.read_bytes())})
    assert response.status_code == 413
    assert not TableImport.objects.exists() and not (Path(settings.IMPORT_DIR)).exists()


def test_the_mapping_upload_has_a_limit_checked_before_it_is_read(admin_browser, settings, tmp_path):
    settings.IMPORT_MAPPING_MAX_BYTES = 2000
    table = write_csv(tmp_path / "t.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    mapping = json.dumps(NEWCOMER_MAPPING) + " " * 5000  # valid JSON, too large
    page = admin_browser.post(reverse("annotation:imports"), {
        "benchmark_name": "B", "upload": SimpleUploadedFile(table.name, table.read_bytes()),
        "mapping_upload": SimpleUploadedFile("mapping.json", mapping.encode())}).content.decode()
    assert "over the limit of 2000 bytes for a mapping (IMPORT_MAPPING_MAX_BYTES)" in page
    assert not TableImport.objects.exists()


def test_the_draft_reads_only_the_head_of_a_large_json_table(admin_browser, tmp_path, monkeypatch):
    """The whole JSON list was parsed in the web request; now only its first rows are, and the rest — here
    truncated, which a full read would refuse — is left to the validation, which counts the rows. (Files up to
    JSON_WHOLE_READ_MAX_BYTES, 32 MiB, are parsed whole; the limit is lowered so that a small file stands for a
    large one.)"""
    monkeypatch.setattr(table_sources, "JSON_WHOLE_READ_MAX_BYTES", 1024)
    rows = records(NEWCOMER_COLUMNS, NEWCOMER_ROWS * 1000)  # 9000 rows
    text = json.dumps(rows)
    cut = text[: text.index("},", len(text) * 2 // 3) + 2] + '{"question": "unfinished'  # broken after ~6000 rows
    path = tmp_path / "big.json"
    path.write_text(cut)
    response = admin_browser.post(reverse("annotation:imports"), {
        "benchmark_name": "B", "upload": SimpleUploadedFile(path.name, path.read_bytes())})
    assert response.status_code == 302
    record = TableImport.objects.get()
    assert record.columns == list(NEWCOMER_COLUMNS) and record.rows is None  # not counted in the request
    assert record.mapping["columns"]["question"] == "question"


def test_the_reverse_proxy_refuses_the_same_sizes_as_the_app():
    conf = (ROOT / "docker" / "nginx.conf").read_text()
    mib = 1024 * 1024

    def limit(location: str | None) -> int:
        block = conf if location is None else conf[conf.index(f"location = {location} {{"):]
        return int(re.search(r"client_max_body_size (\d+)m;", block).group(1)) * mib

    assert limit(None) == django_settings.REQUEST_BODY_MAX_BYTES
    # every upload route of the app has a block of its own with the same limit (a route without one would get the
    # proxy's 10 MiB)
    for view_name, setting in UPLOAD_ROUTES.items():
        assert limit(reverse(view_name)) == getattr(django_settings, setting) + mib, view_name
    assert reverse("annotation:imports") == "/imports/"
    assert reverse("annotation:import-audio-attach") == "/imports/attach-audio/"


def test_the_app_code_in_the_image_belongs_to_root():
    """In the image /app was writable by the app user, so a file planted there (e.g. a .pyc) would run."""
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "COPY . /app" in dockerfile and "--chown=orca:orca . /app" not in dockerfile
    assert "chown -R orca:orca /app/var" in dockerfile


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("incremental", [False, True])
def test_the_head_of_a_json_list_reads_like_the_whole_file(tmp_path, wrapped, incremental, monkeypatch):
    """Above JSON_WHOLE_READ_MAX_BYTES the head is read incrementally (its row count unknown); below, the file is
    parsed whole and counted. Either way the head's rows are the whole file's first rows."""
    import gzip

    from annotation.services.importers.table_sources import table_read

    if incremental:
        monkeypatch.setattr(table_sources, "JSON_WHOLE_READ_MAX_BYTES", 0)
    rows = records(NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    document = {"data": rows} if wrapped else rows
    for path in (tmp_path / "t.json", tmp_path / "t.json.gz"):
        data = json.dumps(document, indent=1).encode()
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
        whole, head = table_read(path), table_read(path, nrows=4)
        assert (whole.n_rows, whole.total_rows, head.n_rows) == (9, 9, 4)
        assert head.total_rows == (None if incremental else 9)
        assert head.head(4) == whole.head(4) and head.names == whole.names
        assert table_read(path, nrows=100).head(100) == whole.head(100)


def test_the_incremental_head_of_a_judge_file_keeps_the_keys_before_its_list(tmp_path, monkeypatch):
    """AudioBench's ``*_judge_score.json`` is ``{"llama3_70b_judge": {...}, "details": [...]}``: read incrementally,
    the head is the ``details`` rows and the judge's aggregate comes along as ``meta`` (the scale is read from it)."""
    from annotation.services.importers.table_sources import table_read

    monkeypatch.setattr(table_sources, "JSON_WHOLE_READ_MAX_BYTES", 0)
    details = [{"question": f"q{i}", "rate_score": i % 2} for i in range(10)]
    path = tmp_path / "mmau_llama3_70b_judge_score.json"
    path.write_text(json.dumps({"llama3_70b_judge": {"judge_score": 50.0}, "details": details}))
    head, whole = table_read(path, nrows=3), table_read(path)
    assert head.meta == whole.meta == {"llama3_70b_judge": {"judge_score": 50.0}}
    assert head.head(3) == whole.head(3) and head.n_rows == 3 and whole.n_rows == 10
