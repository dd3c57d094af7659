"""Audio is stored and served as the audio its bytes are, never as what its name says (issue #34 item 2): a WAV/HTML
or WAV/JS polyglot named ``page.html`` or ``evil.js`` is stored as ``<sha256>.wav`` and ``/audio/<pk>/`` answers it
with ``audio/wav``, an inline disposition with a sanitised name and a sandbox CSP; a clip stored with an unsafe name
before this (old rows) is served the same way, its type sniffed from the stored bytes
(annotation.services.audio, annotation.views.audio)."""
import hashlib

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.urls import reverse

from annotation.models import AudioClip, Question
from annotation.services.audio import AudioReadError, audio_clip_from_path
from annotation.services.importers import TableImportError, table_import
from tests.factories import QuestionFactory, UserFactory
from tests.table_files import write_csv, write_wav

pytestmark = pytest.mark.django_db

HTML = b"<html><body><script>fetch('/team/users/').then(r => r.text()).then(alert)</script></body></html>"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def expert_client(client):
    client.force_login(UserFactory(is_staff=True, roles=["expert"]))
    return client


def _polyglot(tmp_path, name: str) -> bytes:
    """A real WAV file whose bytes also hold an HTML page (a WAV chunk libsndfile skips): a browser sniffing it
    as HTML would run the script."""
    wav = write_wav(tmp_path / "tone.wav").read_bytes()
    chunk = b"junk" + len(HTML).to_bytes(4, "little") + HTML
    data = wav[:12] + chunk + wav[12:]
    data = data[:4] + (len(data) - 8).to_bytes(4, "little") + data[8:]
    (tmp_path / name).write_bytes(data)
    return data


def test_a_polyglot_named_page_html_is_imported_as_wav_and_served_as_audio_in_a_sandbox(tmp_path, expert_client):
    folder = tmp_path / "audio"
    folder.mkdir()
    data = _polyglot(folder, "page.html")
    _polyglot(folder, "evil.js")
    table = write_csv(tmp_path / "t.csv", ["q", "ref", "answer", "audio"],
                      [("What plays?", "A tone.", "A", "page.html")])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    table_import(path=table, benchmark_name="B", mapping=mapping, audio_root=folder)
    clip = Question.objects.get().audio
    assert clip.file.name.endswith(f"/{hashlib.sha256(data).hexdigest()}.wav")
    assert clip.original_name == "page.html"  # shown only
    response = expert_client.get(reverse("annotation:audio", args=[clip.pk]))
    assert response.status_code == 200
    assert response["Content-Type"] == "audio/wav"
    assert response["Content-Disposition"] == 'inline; filename="page.wav"'
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == data


def test_a_clip_stored_under_an_unsafe_name_before_is_served_by_its_sniffed_type(tmp_path, expert_client):
    data = _polyglot(tmp_path, "page.html")
    name = default_storage.save("audio/2024/01/page.html", ContentFile(data))
    clip = AudioClip.objects.create(file=name, original_name='x"; filename=evil.html\r\nSet-Cookie: a=b.js',
                                    sha256=hashlib.sha256(data).hexdigest(), duration_s=0.2, sample_rate=16000)
    QuestionFactory(audio=clip)
    url = reverse("annotation:audio", args=[clip.pk])
    for response in (expert_client.get(url), expert_client.get(url, HTTP_RANGE="bytes=0-99"), expert_client.head(url)):
        assert response["Content-Type"] == "audio/wav"
        assert response["Content-Disposition"] == 'inline; filename="x_filename_evil_html_Set-Cookie_a_b.wav"'
        assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"
    js = default_storage.save("audio/2024/01/evil.js", ContentFile(b"alert(document.cookie)//" + bytes(64)))
    script = AudioClip.objects.create(file=js, original_name="evil.js", sha256="0" * 64, duration_s=1.0,
                                      sample_rate=16000)
    QuestionFactory(audio=script)
    assert expert_client.get(reverse("annotation:audio", args=[script.pk])).status_code == 404


def test_only_sniffed_audio_types_are_stored(tmp_path):
    (tmp_path / "song.wav").write_bytes(b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>")
    with pytest.raises(AudioReadError, match=r"song\.wav: not readable as audio: not a WAV, FLAC, Ogg or MP3 file"):
        audio_clip_from_path(path=tmp_path / "song.wav")
    assert not AudioClip.objects.exists()
    table = write_csv(tmp_path / "t.csv", ["q", "ref", "answer", "audio"], [("Q", "R", "A", "song.wav")])
    mapping = {"columns": {"question": "q", "reference": "ref", "candidate": "answer", "audio": "audio"},
               "defaults": {"lalm": "M"}}
    with pytest.raises(TableImportError, match="not a WAV, FLAC, Ogg or MP3 file"):
        table_import(path=table, benchmark_name="B", mapping=mapping, audio_root=tmp_path)


def test_a_storage_key_with_a_foreign_extension_is_copied_under_a_safe_name(tmp_path):
    """A table's storage key is used as it is only when its name ends with the sniffed type's extension."""
    data = write_wav(tmp_path / "tone.wav", pitch=700).read_bytes()
    key = default_storage.save("benchmarks/clip.html", ContentFile(data))
    clip = audio_clip_from_path(path=tmp_path / "tone.wav", stored_name=key)
    assert clip.file.name != key and clip.file.name.endswith(".wav")
    same_type = default_storage.save("benchmarks/other.WAV", ContentFile(write_wav(tmp_path / "b.wav", pitch=710)
                                                                         .read_bytes()))
    assert audio_clip_from_path(path=tmp_path / "b.wav", stored_name=same_type).file.name == same_type
