"""Audio clips: one stored file per content, with its duration, sample rate and channels read by soundfile."""
import hashlib
from pathlib import Path, PurePosixPath

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


#: The audio types libsndfile reports (``soundfile.info(...).format``) for each sniffed type.
_DECODES_AS = {"WAV": {"WAV", "WAVEX"}, "FLAC": {"FLAC"}, "OGG": {"OGG"}, "MP3": {"MP3", "MPEG"}}


def audio_file_info(*, path: Path, name: str = ""):
    """The header of an audio file as libsndfile reads it (``soundfile.info``: ``frames``, ``samplerate``,
    ``channels``, ``format``), without storing anything. Only WAV, FLAC, Ogg and MP3 are accepted: the type is
    sniffed from the first bytes (:func:`audio_format_sniff`, never from the file name) and libsndfile must read
    the file as that same type. ``name``: the file's name in messages (default: ``path``'s).

    Raises:
        AudioReadError: bytes of no accepted type, or soundfile cannot read the file as that type.
    """
    name = name or Path(path).name
    try:
        with Path(path).open("rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise AudioReadError(f"{name}: not readable as audio ({exc})") from exc
    sniffed = audio_format_sniff(head=head)
    if sniffed is None:
        raise AudioReadError(f"{name}: not readable as audio: not a WAV, FLAC, Ogg or MP3 file (it starts with "
                             f"bytes {head[:8].hex()})")
    try:
        info = soundfile.info(str(path))
    except RuntimeError as exc:  # soundfile.LibsndfileError subclasses RuntimeError
        raise AudioReadError(f"{name}: not readable as audio ({exc})") from exc
    if info.format not in _DECODES_AS[sniffed]:
        raise AudioReadError(f"{name}: not readable as audio: the bytes look like {sniffed} but decode as "
                             f"{info.format}")
    return info


def audio_clip_from_path(*, path: Path, stored_name: str = "", original_name: str = "") -> AudioClip:
    """Return the ``AudioClip`` holding the bytes of ``path``, copying the file into storage if it is new.

    Clips are deduplicated by the SHA-256 of the file's bytes: a file already stored (under any name) returns the
    existing row unchanged. A new clip gets ``duration_s`` (seconds, float), ``sample_rate`` (Hz) and ``channels``
    from the file's header, and ``original_name`` = ``original_name`` or the file's name (shown only). It is stored
    as ``<sha256>.<extension of its sniffed type>`` (``wav``, ``flac``, ``ogg``, ``mp3``), never under a name from
    the file or a table, so a clip named ``page.html`` is stored and served as the audio it is.
    ``stored_name``: the file already is in the storage under this name (a table import's object-storage key;
    ``path`` is a local copy), so the clip points at it instead of storing a second copy — only when that name
    ends with the sniffed type's extension, else the clip is stored under its safe name.

    Call inside the caller's transaction; note that a rollback does not remove a copied file from storage (the
    importers delete the files of clips they created when their import fails).

    Raises:
        AudioReadError: the bytes are no WAV, FLAC, Ogg or MP3, or soundfile cannot read them as that type.
        OSError: the file cannot be opened.
    """
    path = Path(path)
    sha256 = _sha256_of(path)
    existing = AudioClip.objects.filter(sha256=sha256).first()
    if existing is not None:
        return existing
    name = original_name or path.name
    info = audio_file_info(path=path, name=name)
    extension = _extension_of(info.format)
    clip = AudioClip(
        original_name=name[:500],
        sha256=sha256,
        duration_s=info.frames / info.samplerate,
        sample_rate=info.samplerate,
        channels=info.channels,
    )
    if stored_name and PurePosixPath(stored_name).suffix.lower() == f".{extension}":
        clip.file.name = stored_name
    else:
        with path.open("rb") as fh:
            clip.file.save(f"{sha256}.{extension}", File(fh), save=False)
    clip.save()
    return clip


def _extension_of(decoded_format: str) -> str:
    return next(UPLOAD_FORMATS[sniffed] for sniffed, formats in _DECODES_AS.items() if decoded_format in formats)


#: Formats accepted from uploads, sniffed from the first bytes (never from the file name): name -> extension.
UPLOAD_FORMATS = {"WAV": "wav", "FLAC": "flac", "OGG": "ogg", "MP3": "mp3"}


def audio_format_sniff(*, head: bytes) -> str | None:
    """The audio container of a file from its first 12+ bytes: ``WAV``, ``FLAC``, ``OGG``, ``MP3`` or None.

    WAV: ``RIFF....WAVE``; FLAC: ``fLaC``; Ogg: ``OggS``; MP3: an ``ID3`` tag or an MPEG audio frame sync
    (11 set bits).
    """
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "WAV"
    if head[:4] == b"fLaC":
        return "FLAC"
    if head[:4] == b"OggS":
        return "OGG"
    if head[:3] == b"ID3" or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "MP3"
    return None


def audio_clip_from_upload(*, upload, max_bytes: int | None = None, max_seconds: float | None = None) -> AudioClip:
    """Validate an uploaded audio file and store it as an ``AudioClip`` (deduplicated like ``audio_clip_from_path``).

    Args:
        upload: a Django ``UploadedFile`` (``name``, ``size``, ``chunks()``); its name is kept as ``original_name``
            only, the stored name gets the extension of the sniffed format.
        max_bytes: largest accepted size in bytes (default ``settings.AUDIO_UPLOAD_MAX_BYTES``).
        max_seconds: longest accepted duration in seconds (default ``settings.AUDIO_UPLOAD_MAX_SECONDS``).

    The type is sniffed from the bytes (``audio_format_sniff``), then libsndfile (soundfile) must read the header
    as that same format and decode every frame, so a renamed, truncated or corrupt file is refused.

    Raises:
        AudioReadError: empty or too large, not WAV/FLAC/Ogg/MP3, unreadable or corrupt, no frames, or too long;
            the message names the file and the reason. Nothing is stored then.
    """
    import tempfile

    from django.conf import settings

    name = Path(upload.name or "upload").name
    max_bytes = settings.AUDIO_UPLOAD_MAX_BYTES if max_bytes is None else max_bytes
    max_seconds = settings.AUDIO_UPLOAD_MAX_SECONDS if max_seconds is None else max_seconds
    if not upload.size:
        raise AudioReadError(f"{name}: the file is empty")
    if upload.size > max_bytes:
        raise AudioReadError(f"{name}: {upload.size} bytes is over the upload limit of {max_bytes} bytes")
    with tempfile.TemporaryDirectory(prefix="orca-upload-") as folder:
        head = b""
        path = Path(folder) / "upload.bin"
        with path.open("wb") as fh:
            for chunk in upload.chunks():
                head = head or chunk[:16]
                fh.write(chunk)
        sniffed = audio_format_sniff(head=head)
        if sniffed is None:
            raise AudioReadError(f"{name}: not a WAV, FLAC, Ogg or MP3 file (it starts with bytes {head[:8].hex()})")
        typed = path.rename(Path(folder) / f"upload.{UPLOAD_FORMATS[sniffed]}")
        try:
            info = soundfile.info(str(typed))
            if info.format not in _DECODES_AS[sniffed]:
                raise AudioReadError(f"{name}: the bytes look like {sniffed} but decode as {info.format}")
            for _ in soundfile.blocks(str(typed), blocksize=1 << 16, dtype="float32"):
                pass
        except RuntimeError as exc:  # soundfile.LibsndfileError subclasses RuntimeError
            raise AudioReadError(f"{name}: not readable as {sniffed} audio ({exc})") from exc
        if info.frames <= 0 or info.samplerate <= 0:
            raise AudioReadError(f"{name}: the file holds no audio frames")
        duration_s = info.frames / info.samplerate
        if duration_s > max_seconds:
            raise AudioReadError(f"{name}: {duration_s:.1f} s of audio is over the limit of {max_seconds:g} s")
        clip = audio_clip_from_path(path=typed, original_name=name)
    return clip
