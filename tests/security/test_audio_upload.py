"""Audio uploads: the type is sniffed from the bytes, size and duration are limited, bad files are refused with a
message and nothing is stored (annotation.services.audio.audio_clip_from_upload, admin add form)."""
import io

import numpy as np
import pytest
import soundfile
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.models import AudioClip
from annotation.services.audio import AudioReadError, audio_clip_from_upload, audio_format_sniff
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def audio_bytes(*, seconds: float = 0.5, rate: int = 16000, fmt: str = "WAV", seed: int = 0) -> bytes:
    samples = (0.1 * np.sin(np.arange(int(seconds * rate)) * (0.05 + seed * 0.001))).astype("float32")
    buffer = io.BytesIO()
    soundfile.write(buffer, samples, rate, format=fmt)
    return buffer.getvalue()


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.mark.parametrize("fmt", ["WAV", "FLAC", "OGG"])
def test_a_valid_clip_is_stored_with_duration_and_rate_read_from_the_file(fmt):
    clip = audio_clip_from_upload(upload=SimpleUploadedFile("interview.bin", audio_bytes(seconds=1.5, fmt=fmt)))
    assert (clip.duration_s, clip.sample_rate, clip.channels) == (1.5, 16000, 1)
    assert clip.original_name == "interview.bin"
    assert clip.file.name.endswith(f".{fmt.lower()}")  # stored under the sniffed type, not the given name


def test_the_type_comes_from_the_bytes_not_the_name():
    assert audio_format_sniff(head=audio_bytes()[:16]) == "WAV"
    assert audio_format_sniff(head=b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") is None
    with pytest.raises(AudioReadError, match=r"photo\.wav: not a WAV, FLAC, Ogg or MP3 file"):
        audio_clip_from_upload(upload=SimpleUploadedFile("photo.wav", b"\x89PNG\r\n\x1a\n" + b"\x00" * 200))
    with pytest.raises(AudioReadError, match="not a WAV"):
        audio_clip_from_upload(upload=SimpleUploadedFile("notes.mp3", b"<html><script>alert(1)</script></html>"))
    assert not AudioClip.objects.exists()


def test_a_truncated_or_corrupt_file_is_refused():
    data = audio_bytes(seconds=1.0, fmt="FLAC")
    with pytest.raises(AudioReadError, match=r"cut\.flac: not readable as FLAC audio"):
        audio_clip_from_upload(upload=SimpleUploadedFile("cut.flac", data[: len(data) // 3]))
    with pytest.raises(AudioReadError, match="not readable as WAV"):
        audio_clip_from_upload(upload=SimpleUploadedFile("header.wav", b"RIFF\x24\x00\x00\x00WAVEjunk" + b"\x00" * 20))
    assert not AudioClip.objects.exists()


def test_size_and_duration_limits_come_from_settings(settings):
    settings.AUDIO_UPLOAD_MAX_BYTES = 1000
    with pytest.raises(AudioReadError, match=r"big\.wav: \d+ bytes is over the upload limit of 1000 bytes"):
        audio_clip_from_upload(upload=SimpleUploadedFile("big.wav", audio_bytes(seconds=1.0)))
    settings.AUDIO_UPLOAD_MAX_BYTES = 10_000_000
    settings.AUDIO_UPLOAD_MAX_SECONDS = 2
    with pytest.raises(AudioReadError, match=r"long\.wav: 3\.0 s of audio is over the limit of 2 s"):
        audio_clip_from_upload(upload=SimpleUploadedFile("long.wav", audio_bytes(seconds=3.0)))
    with pytest.raises(AudioReadError, match="empty"):
        audio_clip_from_upload(upload=SimpleUploadedFile("empty.wav", b""))
    assert not AudioClip.objects.exists()


def test_an_admin_adds_a_clip_by_upload_and_a_bad_file_gets_a_message(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    url = "/admin/annotation/audioclip/add/"
    page = client.get(url)
    assert page.status_code == 200 and b'name="upload"' in page.content and b'name="duration_s"' not in page.content

    bad = client.post(url, {"upload": SimpleUploadedFile("fake.wav", b"this is not audio at all")})
    assert bad.status_code == 200
    assert "fake.wav: not a WAV, FLAC, Ogg or MP3 file" in bad.content.decode()
    assert not AudioClip.objects.exists()

    good = client.post(url, {"upload": SimpleUploadedFile("birds.ogg", audio_bytes(seconds=2.0, fmt="OGG"))})
    assert good.status_code == 302
    clip = AudioClip.objects.get()
    assert (clip.original_name, clip.duration_s) == ("birds.ogg", 2.0)
    assert client.get(f"/admin/annotation/audioclip/{clip.pk}/change/").status_code == 200
