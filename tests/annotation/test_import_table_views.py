"""The admins' "New benchmark / Add data" pages: upload, detected columns and first rows, guessed drop-downs,
preview with audio, validation (dry run) with per-row problems, the import job, the mapping download."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotation.models import Benchmark, CandidateAnswer, Job, Question, Rating, TableImport
from tests.factories import AnnotatorFactory, UserFactory
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_ROWS, write_csv, write_wav_folder, zip_folder

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("import_folders")]


@pytest.fixture
def newcomer_files(tmp_path):
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    audio = zip_folder(write_wav_folder(tmp_path / "wavs"), tmp_path / "wavs.zip", prefix="wavs/")
    return table, audio


def _upload(client, table, audio=None, **fields):
    data = {"benchmark_name": "My benchmark", "upload": SimpleUploadedFile(table.name, table.read_bytes()), **fields}
    if audio is not None:
        data["audio_upload"] = SimpleUploadedFile(audio.name, audio.read_bytes())
    return client.post(reverse("annotation:imports"), data)


def _mapping_post(record: TableImport, **overrides) -> dict:
    """The mapping form as the page fills it from the saved (guessed) mapping."""
    from annotation.views.imports import MappingForm

    initial = MappingForm.initial_from(record)
    data = {k: v for k, v in initial.items() if v not in (None, "", []) and k != "wide_lalms"}
    data.update(overrides)
    return data


def test_only_admins_open_the_import_pages(client, tmp_path):
    url = reverse("annotation:imports")
    for user in (AnnotatorFactory(), UserFactory(is_staff=True, roles=["expert"])):
        client.force_login(user)
        assert client.get(url).status_code == 403
    client.logout()
    assert client.get(url).status_code == 302


def test_an_admin_uploads_a_table_and_sees_its_columns_first_rows_and_guessed_mapping(admin_client, newcomer_files):
    table, audio = newcomer_files
    response = _upload(admin_client, table, audio)
    record = TableImport.objects.get()
    assert response.status_code == 302 and response.url == reverse("annotation:import", args=[record.pk])
    assert (record.rows, record.columns, record.file_format) == (9, list(NEWCOMER_COLUMNS), "csv")
    assert record.mapping["columns"] == {"question": "question", "reference": "reference", "audio": "audio",
                                         "lalm": "model", "candidate": "response", "rating": "score"}
    assert record.mapping["rating_scale"] == {"0": 1, "0.5": 3, "1": 5}
    page = admin_client.get(response.url).content.decode()
    assert "<th scope=\"col\">response</th>" in page and "Probably a dog or a fox." in page
    assert '<option value="model" selected>model</option>' in page
    assert 'value="0=1, 0.5=3, 1=5"' in page
    assert Benchmark.objects.count() == 0  # nothing is imported yet


def test_preview_validate_import_and_download_the_mapping(admin_client, newcomer_files):
    table, audio = newcomer_files
    _upload(admin_client, table, audio)
    record = TableImport.objects.get()
    data = _mapping_post(record)
    preview = admin_client.post(reverse("annotation:import-preview", args=[record.pk]), data,
                                HTTP_HX_REQUEST="true").content.decode()
    assert preview.count("<audio controls") == 9 and "Probably a dog or a fox." in preview
    audio_url = reverse("annotation:import-audio", args=[record.pk, 1])
    assert audio_url in preview
    clip = admin_client.get(audio_url)
    assert clip.status_code == 200 and clip["Content-Type"] == "audio/wav" and clip.content[:4] == b"RIFF"

    validation = admin_client.post(reverse("annotation:import-validate", args=[record.pk]), data,
                                   HTTP_HX_REQUEST="true").content.decode()
    assert "Validation (dry run)" in validation and "candidate answers: 9 created" in validation
    assert Benchmark.objects.count() == 0 and Question.objects.count() == 0

    result = admin_client.post(reverse("annotation:import-run", args=[record.pk]), data,
                               HTTP_HX_REQUEST="true").content.decode()
    assert "Import #" in result and "Done" in result
    job = Job.objects.filter(kind=Job.Kind.IMPORT).latest("pk")
    assert (job.status, job.done, job.params["result"]["ratings_created"]) == (Job.Status.DONE, 9, 9)
    assert CandidateAnswer.objects.filter(question_version__question__benchmark__name="My benchmark").count() == 9
    assert Question.objects.filter(audio__isnull=False).count() == 3
    record.refresh_from_db()
    assert record.imported_at is not None and record.benchmark.name == "My benchmark"

    download = admin_client.get(reverse("annotation:import-mapping", args=[record.pk]))
    assert download["Content-Disposition"] == 'attachment; filename="mapping-my-benchmark.json"'
    assert json.loads(download.content) == record.mapping
    assert record.mapping["layout"] == "long" and record.mapping["imported_ratings"] == "complete"


def test_validation_lists_each_bad_row_with_its_column_value_and_reason(admin_client, tmp_path):
    rows = [*NEWCOMER_ROWS[:4], ("How many people speak?", "Two.", "SALMONN", "Three speakers.", "0.25", "x.wav")]
    table = write_csv(tmp_path / "bad.csv", NEWCOMER_COLUMNS, rows)
    _upload(admin_client, table)
    record = TableImport.objects.get()
    assert record.mapping["rating_scale"] == {"min": 0.0, "max": 1.0}  # guessed from 0, 0.25, 0.5, 1
    data = _mapping_post(record, col_audio="", scale_table="0=1, 0.5=3, 1=5", scale_min="", scale_max="")
    page = admin_client.post(reverse("annotation:import-validate", args=[record.pk]), data,
                             HTTP_HX_REQUEST="true").content.decode()
    assert "1 problem in the table's 5 rows (2 questions): the import would refuse this table." in page
    row = "<td class=\"num\">5</td><td>score</td><td>&#x27;0.25&#x27;</td><td>not on the rating scale (0, 0.5, 1)</td>"
    assert row in page
    page = admin_client.post(reverse("annotation:import-run", args=[record.pk]), data,
                             HTTP_HX_REQUEST="true").content.decode()
    assert "nothing was written" in page
    assert Benchmark.objects.count() == 0 and Rating.objects.count() == 0


def test_a_mapping_error_is_shown_before_anything_runs(admin_client, newcomer_files):
    table, _ = newcomer_files
    _upload(admin_client, table)
    record = TableImport.objects.get()
    data = _mapping_post(record, scale_table="")  # a rating column without a scale
    page = admin_client.post(reverse("annotation:import-run", args=[record.pk]), data,
                             HTTP_HX_REQUEST="true").content.decode()
    assert "Fix the mapping first" in page and "a rating column needs a rating_scale" in page
    assert not Job.objects.filter(kind=Job.Kind.IMPORT).exists()


def test_choosing_the_wide_layout_shows_lalm_column_choices(admin_client, tmp_path):
    table = write_csv(tmp_path / "wide.csv", ["id", "question", "reference", "qwen", "salmonn", "qwen_score"],
                      [("1", "Q", "R", "A", "B", "5")])
    _upload(admin_client, table)
    record = TableImport.objects.get()
    data = {**_mapping_post(record), "layout": "wide", "wide_lalms": ["qwen", "salmonn"]}
    fields = admin_client.post(reverse("annotation:import", args=[record.pk]), data,
                               HTTP_HX_REQUEST="true").content.decode()
    assert fields.strip().startswith('<div id="mapping-fields">')
    assert "Rating column of qwen" in fields and "Rating column of salmonn" in fields
    assert 'name="col_candidate"' not in fields
    data.update(wide_rating_0="qwen_score", scale_table="5=5", col_question_id="id")
    admin_client.post(reverse("annotation:import-run", args=[record.pk]), data, HTTP_HX_REQUEST="true")
    record.refresh_from_db()
    assert record.mapping["lalms"] == {"qwen": {"candidate": "qwen", "rating": "qwen_score"}, "salmonn": "salmonn"}
    assert sorted(CandidateAnswer.objects.values_list("lalm__name", "valid_rating_count")) == [
        ("qwen", 1), ("salmonn", 0)]


def test_a_saved_mapping_or_a_toolkit_preset_starts_the_mapping(admin_client, tmp_path):
    table = write_csv(tmp_path / "t.csv", ["Frage", "Antwort", "Modell", "Ausgabe"], [("Q", "R", "m", "A")])
    mapping = {"columns": {"question": "Frage", "reference": "Antwort", "lalm": "Modell", "candidate": "Ausgabe"}}
    response = _upload(admin_client, table, mapping_upload=SimpleUploadedFile("m.json", json.dumps(mapping).encode()))
    assert response.status_code == 302
    assert TableImport.objects.get().mapping == mapping
    log = tmp_path / "samples_mmau.jsonl"
    log.write_text(json.dumps({"doc_id": 0, "filtered_resps": ["A dog."]}) + "\n")
    response = _upload(admin_client, log, preset="lmms-eval")
    assert "a preset needs the LALM&#x27;s name" in response.content.decode()
    _upload(admin_client, log, preset="lmms-eval", lalm="Qwen2-Audio")
    assert TableImport.objects.latest("pk").mapping["defaults"] == {"lalm": "Qwen2-Audio"}


def test_server_paths_only_inside_import_server_dirs(admin_client, settings, tmp_path, newcomer_files):
    table, _ = newcomer_files
    url = reverse("annotation:imports")
    settings.IMPORT_SERVER_DIRS = []
    page = admin_client.post(url, {"benchmark_name": "B", "server_path": str(table)}).content.decode()
    assert "Server paths are switched off" in page
    settings.IMPORT_SERVER_DIRS = [tmp_path / "allowed"]
    (tmp_path / "allowed").mkdir()
    page = admin_client.post(url, {"benchmark_name": "B", "server_path": str(table)}).content.decode()
    assert "is not inside IMPORT_SERVER_DIRS" in page
    settings.IMPORT_SERVER_DIRS = [tmp_path]
    response = admin_client.post(url, {"benchmark_name": "B", "server_path": str(table),
                                       "audio_path": str(tmp_path / "wavs")})
    assert response.status_code == 302
    record = TableImport.objects.get()
    assert (record.file_path, record.audio_root) == (str(table), str(tmp_path / "wavs"))


def test_a_large_table_is_imported_by_a_worker(admin_client, settings, newcomer_files,
                                               django_capture_on_commit_callbacks):
    settings.IMPORT_INLINE_MAX_ROWS = 5
    table, audio = newcomer_files
    _upload(admin_client, table, audio)
    record = TableImport.objects.get()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        admin_client.post(reverse("annotation:import-run", args=[record.pk]), _mapping_post(record),
                          HTTP_HX_REQUEST="true")
    assert len(callbacks) == 1  # the job was sent to Celery after the commit (eager here)
    job = Job.objects.get(kind=Job.Kind.IMPORT)
    assert job.status == Job.Status.DONE and job.params["phase"] == "done"
    page = admin_client.get(reverse("annotation:import-job", args=[record.pk])).content.decode()
    assert "ratings: 9 created" in page and "hx-trigger=\"every 1s\"" not in page


def test_a_running_import_whose_worker_went_silent_is_failed_and_a_duplicate_message_does_nothing(settings):
    from datetime import timedelta

    from django.utils import timezone

    from annotation.services.importers.table_jobs import table_import_run, table_imports_fail_stale

    now = timezone.now()
    silent = Job.objects.create(kind=Job.Kind.IMPORT, status=Job.Status.RUNNING,
                                heartbeat_at=now - timedelta(seconds=settings.IMPORT_LEASE_S + 1))
    alive = Job.objects.create(kind=Job.Kind.IMPORT, status=Job.Status.RUNNING, heartbeat_at=now)
    assert table_imports_fail_stale(now=now) == 1
    silent.refresh_from_db()
    alive.refresh_from_db()
    assert silent.status == Job.Status.FAILED and "nothing was written" in silent.error
    assert alive.status == Job.Status.RUNNING
    assert table_import_run(job_pk=silent.pk) == ""  # not queued: a redelivered message is not claimed


def test_a_zip_of_a_datasets_folder_or_of_one_table_file_is_read_from_inside(admin_client, tmp_path):
    import zipfile

    from tests.table_files import write_table

    folder = write_table(tmp_path / "hf", "hf", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    archive = tmp_path / "dataset.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in folder.rglob("*"):
            zf.write(path, arcname=f"my_dataset/{path.relative_to(folder)}")
    assert _upload(admin_client, archive).status_code == 302
    record = TableImport.objects.get()
    assert (record.file_format, record.rows, record.columns) == ("hf", 9, list(NEWCOMER_COLUMNS))
    single = tmp_path / "one.zip"
    with zipfile.ZipFile(single, "w") as zf:
        zf.write(write_csv(tmp_path / "t.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS), arcname="data/t.csv")
    assert _upload(admin_client, single).status_code == 302
    assert TableImport.objects.latest("pk").file_format == "csv"
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("../../escape.csv", "a,b\n1,2\n")
    page = _upload(admin_client, evil).content.decode()
    assert "leaves the zip file&#x27;s folder" in page


def test_a_table_from_a_url(admin_client, tmp_path):
    from tests.table_files import serving

    table = write_csv(tmp_path / "remote.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS).read_bytes()
    with serving({"/data/remote.csv": table}) as base:
        url = reverse("annotation:imports")
        response = admin_client.post(url, {"benchmark_name": "B", "url": f"{base}/data/remote.csv"})
        assert response.status_code == 302
        record = TableImport.objects.get()
        assert (record.source_kind, record.source, record.rows) == ("url", f"{base}/data/remote.csv", 9)
        page = admin_client.post(url, {"benchmark_name": "B", "url": f"{base}/gone.csv"}).content.decode()
        assert "The URL answered HTTP 404." in page
        page = admin_client.post(url, {"benchmark_name": "B", "url": "file:///etc/passwd"}).content.decode()
        assert "Give an http:// or https:// URL." in page


def test_a_table_url_may_not_reach_a_private_address_unless_allowed_also_through_a_redirect(
        admin_client, tmp_path, settings):
    """The importer downloaded from any host (the cloud metadata service, the server's own ports); now it refuses
    what provider base URLs refuse, with the same setting (the test settings allow 127.0.0.0/8 and ::1)."""
    from tests.table_files import serving

    table = write_csv(tmp_path / "remote.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS).read_bytes()
    url = reverse("annotation:imports")
    with serving({"/remote.csv": table}, redirects={"/moved.csv": "http://169.254.169.254/latest/meta-data/"}) as base:
        settings.PROVIDER_PRIVATE_NETWORKS = []
        page = admin_client.post(url, {"benchmark_name": "B", "url": f"{base}/remote.csv"}).content.decode()
        assert "is a loopback address (127.0.0.1)" in page and "PROVIDER_PRIVATE_NETWORKS" in page
        settings.PROVIDER_PRIVATE_NETWORKS = ["127.0.0.0/8"]
        page = admin_client.post(url, {"benchmark_name": "B", "url": f"{base}/moved.csv"}).content.decode()
        assert "169.254.169.254 is a link-local address" in page
        assert not TableImport.objects.exists()
        assert admin_client.post(url, {"benchmark_name": "B", "url": f"{base}/remote.csv"}).status_code == 302
