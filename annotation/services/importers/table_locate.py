"""Locating the audio a table's cell names (a path under an audio root folder or zip file, an http(s) URL, a key
in the file storage, or the audio's bytes) as a local file named by its content (:class:`AudioLocator`).
"""
from __future__ import annotations

import hashlib
import math
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from annotation.outbound import url_download
from annotation.services.importers.reader import ImportFormatError


def is_missing(value) -> bool:
    """True for a cell with no value: None, NaN (pandas, Parquet), or ""."""
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def _audio_bytes(value) -> bytes | None:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict) and isinstance(value.get("bytes"), bytes | bytearray):
        return bytes(value["bytes"])
    return None


def _audio_text(value) -> str:
    if isinstance(value, dict):  # a datasets Audio value without bytes: its path
        value = value.get("path") or ""
    if not isinstance(value, str):
        raise ValueError("expected a path, URL, storage key or the audio's bytes")
    return value.strip()


def _audio_extension(head: bytes) -> str | None:
    """The extension of the audio type the bytes ``head`` show (``wav``, ``flac``, ``ogg``, ``mp3``) or None."""
    from annotation.services.audio import UPLOAD_FORMATS, audio_format_sniff

    return UPLOAD_FORMATS.get(audio_format_sniff(head=head) or "")


def _not_audio(name: str, head: bytes) -> ValueError:
    return ValueError(f"{name}: not a WAV, FLAC, Ogg or MP3 file (it starts with bytes {head[:8].hex()})")


def _hash_named(path: Path, name: str) -> Path:
    """Rename the audio file ``path`` (a download or copy made here) to ``<sha256>.<sniffed extension>`` in its
    folder; ``name`` (the file's name where it came from) only for the error. Raises ``ValueError`` (removing the
    file) when its bytes are no WAV, FLAC, Ogg or MP3."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        head = fh.read(64)
        digest.update(head)
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    extension = _audio_extension(head)
    if extension is None:
        path.unlink(missing_ok=True)
        raise _not_audio(name, head)
    return path.replace(path.parent / f"{digest.hexdigest()}.{extension}")


@dataclass(frozen=True)
class LocatedAudio:
    """A table's audio as a local file (``path``); ``stored_name`` is the storage key when the audio already is
    in the file storage (no copy needed); ``name`` the file's name where it came from (the zip member's, the URL's
    or the key's last part), kept as the clip's ``original_name`` only: files made here are named by the SHA-256
    of their bytes and the extension of their sniffed audio type, never by a name from the table or a zip."""

    path: Path
    stored_name: str = ""
    name: str = ""


class AudioLocator:
    """Finds the audio a table's cell names and puts it in a local file, in this order:

    1. bytes (a ``datasets`` Audio value, a binary column) → written to a file named by their SHA-256;
    2. ``http://`` or ``https://`` → downloaded (at most ``max_bytes``, ``timeout_s`` per request; no private,
       loopback or link-local host unless ``PROVIDER_PRIVATE_NETWORKS`` lists it: :mod:`annotation.outbound`);
    3. a path relative to ``root``: a folder (the path may not leave it), or a zip file (the member of that path,
       or the one member whose path ends with it, e.g. ``a.wav`` in ``wavs/a.wav``); the zip is refused as a whole
       when a member's name is absolute or leaves its folder (:func:`annotation.services.archives.zip_open`);
    4. a key of the file storage (``django-storages``: S3 or the local media folder), copied to a local file.

    Files made here (1, 2, 4 and zip members) live in ``workdir`` until the caller removes it, each named
    ``<sha256>.<extension of its sniffed audio type>``; bytes of no audio type are refused. Each distinct value is
    located once.
    """

    def __init__(self, *, root: Path | None, workdir: Path, max_bytes: int, timeout_s: float = 60.0):
        from annotation.services.archives import ArchiveError, zip_limits, zip_open

        self.root = Path(root) if root else None
        self.workdir = Path(workdir)
        self.max_bytes, self.timeout_s = max_bytes, timeout_s
        self._zip = None
        self._done: dict[str, LocatedAudio] = {}
        if self.root is not None and self.root.is_file():
            if not zipfile.is_zipfile(self.root):
                raise ImportFormatError(file=self.root.name, problem="the audio root is neither a folder nor a "
                                        "zip file")
            try:
                self._zip = zip_open(self.root, **zip_limits())
            except ArchiveError as exc:
                raise ImportFormatError(file=self.root.name, problem=str(exc)) from exc
        elif self.root is not None and not self.root.is_dir():
            raise ImportFormatError(file=str(self.root), problem="the audio root does not exist")

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()

    def key(self, value) -> str:
        """What identifies the audio of ``value``: ``sha256:<hex>`` for bytes, else the trimmed text."""
        data = _audio_bytes(value)
        if data is not None:
            return "sha256:" + hashlib.sha256(data).hexdigest()
        return _audio_text(value)

    def locate(self, value) -> LocatedAudio:
        """The local file of ``value``'s audio. Raises ``ValueError`` saying why it cannot be found or read."""
        key = self.key(value)
        if key in self._done:
            return self._done[key]
        self.workdir.mkdir(parents=True, exist_ok=True)
        data = _audio_bytes(value)
        if data is not None:
            extension = _audio_extension(data[:64])
            if extension is None:
                raise _not_audio("the audio bytes", data)
            path = self.workdir / f"{key.split(':', 1)[1]}.{extension}"
            path.write_bytes(data)
            located = LocatedAudio(path)
        elif key.lower().startswith(("http://", "https://")):
            located = self._download(key)
        else:
            located = self._under_root(key) or self._in_storage(key)
        self._done[key] = located
        return located

    def _download(self, url: str) -> LocatedAudio:
        import httpx

        name = PurePosixPath(httpx.URL(url).path).name or "audio"
        folder = self.workdir / "url"
        folder.mkdir(parents=True, exist_ok=True)
        # No private or loopback hosts unless PROVIDER_PRIVATE_NETWORKS allows them; redirects are checked too.
        path = url_download(url=url, path=folder / f".part-{hashlib.sha256(url.encode()).hexdigest()}",
                            max_bytes=self.max_bytes, timeout_s=self.timeout_s)
        return LocatedAudio(_hash_named(path, name), name=name)

    def _under_root(self, name: str) -> LocatedAudio | None:
        if self.root is None:
            return None
        relative = PurePosixPath(name.replace("\\", "/"))
        parts = [p for p in relative.parts if p not in (".", "/")]
        if not parts or ".." in parts:
            raise ValueError("the audio path must stay under the audio root")
        if self._zip is None:
            path = self.root.joinpath(*parts).resolve()
            if not path.is_relative_to(self.root.resolve()):
                raise ValueError("the audio path must stay under the audio root")
            return LocatedAudio(path, name=path.name) if path.is_file() else None
        member = "/".join(parts)
        if member not in self._zip.members:
            ends = [m for m in self._zip.members if m.endswith("/" + member)]
            if len(ends) > 1:
                raise ValueError(f"{len(ends)} files in the zip file end with this path: {', '.join(ends[:3])}")
            if not ends:
                return None
            member = ends[0]
        from annotation.services.archives import ArchiveError

        try:
            path = self._zip.extract(member, self.workdir / "zip", max_bytes=self.max_bytes,
                                     extension=_audio_extension, kind="WAV, FLAC, Ogg or MP3 audio")
        except ArchiveError as exc:
            raise ValueError(str(exc)) from exc
        return LocatedAudio(path, name=PurePosixPath(member).name)

    def _in_storage(self, name: str) -> LocatedAudio:
        from django.core.files.storage import default_storage

        try:
            exists = default_storage.exists(name)
        except Exception:  # noqa: BLE001 - a storage backend refusing the name (e.g. a path outside MEDIA_ROOT)
            exists = False
        if not exists:
            where = "under the audio root" if self.root is not None else "under an audio root (none was given)"
            raise ValueError(f"audio not found: not a file {where}, not an http(s) URL, not a key in the file storage")
        folder = self.workdir / "storage"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f".part-{hashlib.sha256(name.encode()).hexdigest()}"
        with default_storage.open(name, "rb") as source, path.open("wb") as target:
            shutil.copyfileobj(source, target)
        base = PurePosixPath(name).name
        return LocatedAudio(_hash_named(path, base), stored_name=name, name=base)
