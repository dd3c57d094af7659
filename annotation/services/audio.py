"""Audio clips: one stored file per content, with its duration, sample rate and channels read by soundfile."""
import hashlib
from pathlib import Path

import soundfile
from django.core.files import File

from annotation.models import AudioClip

#: File extensions the importers look for when linking clips (all read by libsndfile >= 1.1).
AUDIO_EXTENSIONS = ("wav", "flac", "mp3", "ogg")


class AudioReadError(ValueError):
    """A file that soundfile (libsndfile) cannot read as audio."""


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def audio_clip_from_path(*, path: Path) -> AudioClip:
    """Return the ``AudioClip`` holding the bytes of ``path``, copying the file into storage if it is new.

    Clips are deduplicated by the SHA-256 of the file's bytes: a file already stored (under any name) returns the
    existing row unchanged. A new clip gets ``duration_s`` (seconds, float), ``sample_rate`` (Hz) and ``channels``
    from the file's header, and ``original_name`` = the file's name.

    Call inside the caller's transaction; note that a rollback does not remove a copied file from storage (the
    importers delete the files of clips they created when their import fails).

    Raises:
        AudioReadError: soundfile cannot read the file as audio.
        OSError: the file cannot be opened.
    """
    path = Path(path)
    sha256 = _sha256_of(path)
    existing = AudioClip.objects.filter(sha256=sha256).first()
    if existing is not None:
        return existing
    try:
        info = soundfile.info(str(path))
    except RuntimeError as exc:  # soundfile.LibsndfileError subclasses RuntimeError
        raise AudioReadError(f"{path.name}: not readable as audio ({exc})") from exc
    clip = AudioClip(
        original_name=path.name,
        sha256=sha256,
        duration_s=info.frames / info.samplerate,
        sample_rate=info.samplerate,
        channels=info.channels,
    )
    with path.open("rb") as fh:
        clip.file.save(path.name, File(fh), save=False)
    clip.save()
    return clip
