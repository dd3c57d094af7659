"""Zip files given to the table importer are read without ever using a member's name as a path (issue #34 items 1
and 6): an absolute, ``../``, backslash or drive-letter member refuses the zip with the member's name and writes
nothing outside the work folder — audio zips on the command line, in the browser's draft and in the preview
player, table zips, and ``datasets`` folders whose ``state.json`` names data files elsewhere
(annotation.services.archives, annotation.services.importers.table_zip and .table_locate).

Every path a crafted member points at lies inside the test's own ``tmp_path`` (``tempfile.tempdir`` is set to a
folder in it), so even the old code, which wrote there, touched nothing else.
"""
import json
import re
import tempfile
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import AudioClip, Benchmark, Question, TableImport
from annotation.services.archives import ArchiveError, member_name_problem, zip_open
from annotation.services.importers import ImportFormatError
from annotation.services.importers.table_sources import table_read
from tests.factories import UserFactory
from tests.table_files import NEWCOMER_COLUMNS, NEWCOMER_MAPPING, NEWCOMER_ROWS, write_csv, write_table, write_wav

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def folders(settings, tmp_path, monkeypatch):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # work folders (and ../ targets) stay in here


@pytest.fixture
def admin_client(client):
    client.force_login(UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]))
    return client


def table_zip_extract(path: Path, folder: Path) -> Path:
    from annotation.services.importers.table_zip import table_zip_extract as extract

    return extract(path, folder)


def _evil_audio_zip(tmp_path: Path, member: str) -> Path:
    """The newcomer's audio zip with ``dog.wav`` stored under the crafted name ``member`` (ending in /dog.wav)."""
    target = tmp_path / "evil-audio.zip"
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr(zipfile.ZipInfo(member), write_wav(tmp_path / "dog.wav", pitch=300).read_bytes())
        for index, name in enumerate(("talk.wav", "piano.wav"), start=1):
            archive.writestr(f"wavs/{name}", write_wav(tmp_path / name, pitch=300 + 100 * index).read_bytes())
    return target


def _crafted(tmp_path: Path) -> list[tuple[str, Path]]:
    """(member name, the file the old code wrote for it): an absolute member and a ../ member."""
    planted = tmp_path / "planted" / "dog.wav"
    return [(str(planted), planted),
            ("../../escaped/dog.wav", tmp_path / "tmp" / "escaped" / "dog.wav")]


def _outside_files(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "planted", tmp_path / "tmp" / "escaped") if p.exists()]


@pytest.mark.parametrize("case", [0, 1], ids=["absolute", "dotdot"])
def test_an_escaping_audio_zip_member_on_the_command_line_is_refused_by_name_and_writes_nothing_outside(
        tmp_path, case):
    member, _ = _crafted(tmp_path)[case]
    archive = _evil_audio_zip(tmp_path, member)
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    mapping = tmp_path / "mapping.json"
    mapping.write_text(json.dumps(NEWCOMER_MAPPING))
    with pytest.raises(CommandError) as excinfo:
        call_command("import_table", str(table), "--benchmark", "B", "--mapping", str(mapping),
                     "--audio-root", str(archive))
    assert f"the member {member!r} leaves the zip file's folder" in str(excinfo.value)
    assert _outside_files(tmp_path) == []
    assert not Benchmark.objects.exists() and not AudioClip.objects.exists()


@pytest.mark.parametrize("case", [0, 1], ids=["absolute", "dotdot"])
def test_an_escaping_audio_zip_member_is_refused_in_the_browser_and_by_the_preview_player(
        admin_client, tmp_path, case):
    member, _ = _crafted(tmp_path)[case]
    archive = _evil_audio_zip(tmp_path, member)
    table = write_csv(tmp_path / "my_benchmark.csv", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    response = admin_client.post(reverse("annotation:imports"), {
        "benchmark_name": "B", "upload": SimpleUploadedFile(table.name, table.read_bytes()),
        "audio_upload": SimpleUploadedFile(archive.name, archive.read_bytes())})
    for record in TableImport.objects.all():  # the old code made the draft: its preview player wrote the file
        admin_client.get(reverse("annotation:import-audio", args=[record.pk, 1]))
    assert _outside_files(tmp_path) == []
    assert response.status_code == 200  # the form again, with the error
    assert f"the member {member!r} leaves the zip file" in response.content.decode().replace("&#x27;", "'")
    assert not TableImport.objects.exists()

    # A draft made before the check (or by another way) is refused by the player, which writes nothing either.
    record = TableImport.objects.create(benchmark_name="B", source_kind="upload", source=table.name,
                                        file_path=str(table), file_format="csv", audio_root=str(archive),
                                        mapping=NEWCOMER_MAPPING, columns=list(NEWCOMER_COLUMNS), rows=9)
    player = admin_client.get(reverse("annotation:import-audio", args=[record.pk, 1]))
    assert player.status_code == 404 and _outside_files(tmp_path) == []


@pytest.mark.parametrize(("member", "problem"), [
    ("/etc/cron.d/x.csv", "an absolute path"), ("../../x.csv", "a '..' part"), ("data/../../x.csv", "a '..' part"),
    ("..\\..\\x.csv", "a backslash in its name"), ("C:/Windows/x.csv", "a drive letter"),
    ("C:x.csv", "a drive letter"),
])
def test_a_table_zip_with_an_escaping_member_is_refused_naming_it(tmp_path, member, problem):
    assert member_name_problem(member) == problem
    archive = tmp_path / "table.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("data/ok.csv", "a,b\n1,2\n")
        zf.writestr(zipfile.ZipInfo(member), "a,b\n1,2\n")
    with pytest.raises(ImportFormatError) as excinfo:
        table_zip_extract(archive, tmp_path / "out")
    assert str(excinfo.value) == (f"table.zip: the member {member!r} leaves the zip file's folder ({problem}); "
                                  "nothing was unpacked")
    assert not (tmp_path / "out").exists()


def test_a_table_file_is_unpacked_under_its_content_hash_and_checked_suffix(tmp_path):
    archive = tmp_path / "table.zip"
    csv_bytes = b"question,answer\nWhat?,This.\n"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("my data/__init__.py.csv", csv_bytes)
        zf.writestr("__MACOSX/my data/._x.csv", b"\x00\x05\x16\x07")
    path = table_zip_extract(archive, tmp_path / "out")
    import hashlib

    assert path == tmp_path / "out" / f"{hashlib.sha256(csv_bytes).hexdigest()}.csv"
    assert table_read(path).head(1) == [{"question": "What?", "answer": "This."}]
    fake = tmp_path / "fake.zip"
    with zipfile.ZipFile(fake, "w") as zf:
        zf.writestr("data.parquet", b"<html><script>alert(1)</script>")
    with pytest.raises(ImportFormatError, match=r"fake\.zip: the member 'data.parquet' is not a table file"):
        table_zip_extract(fake, tmp_path / "out2")


def test_member_count_and_unpacked_size_are_limited(tmp_path, settings):
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for index in range(3):
            zf.writestr(f"wavs/{index}.wav", b"\x00" * 10_000)
    settings.IMPORT_ARCHIVE_MAX_MEMBERS = 2
    with pytest.raises(ImportFormatError, match=r"many\.zip has 3 members, over the limit of 2"):
        table_zip_extract(archive, tmp_path / "out")
    settings.IMPORT_ARCHIVE_MAX_MEMBERS, settings.IMPORT_ARCHIVE_MAX_BYTES = 10, 25_000
    with pytest.raises(ImportFormatError, match=r"many\.zip unpacks to more than 25000 bytes"):
        table_zip_extract(archive, tmp_path / "out")
    with zip_open(archive, max_members=10, max_bytes=10**6) as checked, pytest.raises(
            ArchiveError, match=r"the member 'wavs/0.wav' is over the limit of 100 bytes"):
        checked.extract("wavs/0.wav", tmp_path / "out", max_bytes=100, extension=lambda head: "bin")


def _datasets_zip(tmp_path: Path, *, data_file: str | None = None, split: str | None = None) -> Path:
    """A zipped DatasetDict of the newcomer's rows; ``data_file`` replaces the file name its state.json lists and
    ``split`` the split name its dataset_dict.json lists."""
    folder = write_table(tmp_path / "hf", "hf", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    import datasets

    datasets.DatasetDict({"test": datasets.load_from_disk(str(folder))}).save_to_disk(str(tmp_path / "dd"))
    archive = tmp_path / "dataset.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((tmp_path / "dd").rglob("*")):
            if path.is_dir():
                continue
            data = path.read_bytes()
            if path.name == "state.json" and data_file is not None:
                state = json.loads(data)
                state["_data_files"] = [{"filename": data_file}]
                data = json.dumps(state).encode()
            if path.name == "dataset_dict.json" and split is not None:
                data = json.dumps({"splits": [split]}).encode()
            zf.writestr(f"my_dataset/{path.relative_to(tmp_path / 'dd')}", data)
    return archive


def test_a_zipped_datasets_folder_is_rebuilt_with_hash_named_data_files(tmp_path):
    folder = table_zip_extract(_datasets_zip(tmp_path), tmp_path / "out")
    assert folder == tmp_path / "out" / "dataset"
    [data_file] = (folder / "test").glob("*.arrow")
    assert re.fullmatch(r"[0-9a-f]{64}\.arrow", data_file.name)
    table = table_read(folder)
    assert (table.n_rows, table.names) == (9, list(NEWCOMER_COLUMNS))


def test_a_datasets_folder_whose_state_names_an_arrow_file_elsewhere_is_refused(tmp_path, admin_client):
    """load_from_disk maps whatever state.json's _data_files names: an absolute or ../ name read an Arrow file
    anywhere on the server (here: another dataset's, holding a secret)."""
    import datasets

    secret = tmp_path / "secret"
    datasets.Dataset.from_list([{"question": "the secret", "reference": "s3cr3t"}]).save_to_disk(str(secret))
    [secret_arrow] = secret.glob("*.arrow")
    for index, name in enumerate((str(secret_arrow), f"../../../../{secret_arrow.relative_to(tmp_path)}")):
        (tmp_path / f"case{index}").mkdir()
        archive = _datasets_zip(tmp_path / f"case{index}", data_file=name)
        with pytest.raises(ImportFormatError, match="leaves the datasets folder"):
            table_zip_extract(archive, tmp_path / f"case{index}" / "out")
        response = admin_client.post(reverse("annotation:imports"), {
            "benchmark_name": "B", "upload": SimpleUploadedFile(archive.name, archive.read_bytes())})
        assert response.status_code == 200 and "leaves the datasets folder" in response.content.decode()
        assert "s3cr3t" not in response.content.decode()
        assert not TableImport.objects.exists()
    # A datasets folder on the server (IMPORT_SERVER_DIRS, import_table) is checked the same way before reading.
    folder = write_table(tmp_path / "server", "hf", NEWCOMER_COLUMNS, NEWCOMER_ROWS)
    state = json.loads((folder / "state.json").read_text())
    state["_data_files"] = [{"filename": str(secret_arrow)}]
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(ImportFormatError, match="leaves the datasets folder"):
        table_read(folder)
    (folder / "link.arrow").symlink_to(secret_arrow)
    state["_data_files"] = [{"filename": "link.arrow"}]
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(ImportFormatError, match="'link.arrow' is not a file inside the datasets folder"):
        table_read(folder)


def test_a_split_name_that_is_a_path_is_refused(tmp_path):
    with pytest.raises(ImportFormatError, match=r"the split name '\.\./\.\./x' is not a name"):
        table_zip_extract(_datasets_zip(tmp_path, split="../../x"), tmp_path / "out")


def test_an_audio_zip_member_that_is_not_audio_is_refused_per_row(tmp_path):
    from annotation.services.importers import TableImportError, table_import

    archive = tmp_path / "audio.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("wavs/dog.wav", b"<html><script>alert(document.cookie)</script></html>")
    table = write_csv(tmp_path / "t.csv", ["q", "ref", "answer", "audio"], [("Q1", "R", "A", "dog.wav")])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    with pytest.raises(TableImportError) as excinfo:
        table_import(path=table, benchmark_name="B", mapping=mapping, audio_root=archive)
    assert [str(p) for p in excinfo.value.problems] == [
        "row 1: column 'audio': value 'dog.wav': audio.zip: the member 'wavs/dog.wav' is not WAV, FLAC, Ogg or MP3 "
        "audio (it starts with bytes 3c68746d6c3e3c73)"]
    assert not Question.objects.exists()
