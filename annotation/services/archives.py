"""Zip files people give the platform (a table zip, an audio zip, a zipped ``datasets`` folder), read without ever
using a member's name as a path.

A member name is data written by whoever made the zip: ``/app/annotation/x.py`` or ``../../x.py`` would be
written outside the work folder by ``ZipFile.extract``-style code that joins it to a folder (zip-slip; README,
"Security and integrity"). Here every member name is checked when the zip is opened — an absolute name, a ``..``
part, a backslash or a drive letter refuses the whole zip with an error naming the member — the member count and
the unpacked size are limited, and a member is written only under a safe name: the SHA-256 of its bytes plus an
extension decided by the caller from the bytes themselves (:meth:`CheckedZip.extract`).
"""
from __future__ import annotations

import hashlib
import re
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

_DRIVE = re.compile(r"^[A-Za-z]:")
_COPY_BLOCK = 1 << 20


class ArchiveError(ValueError):
    """A zip file the platform refuses: not a zip, a member whose name leaves the folder, too many members, too
    large unpacked, encrypted, or a member whose bytes are not what it must be. ``member`` names the member ('' for
    the whole zip); the message names the zip file and the member."""

    def __init__(self, message: str, *, member: str = ""):
        super().__init__(message)
        self.member = member


def member_name_problem(name: str) -> str:
    """Why the zip member ``name`` may not be used ('' when its name is a plain relative path): an absolute name
    (``/x``), a ``..`` part, a backslash (``a\\b``: a Windows path, which on Windows leaves the folder), a drive
    letter (``C:x``), a NUL character or an empty name."""
    if not name or not name.strip("/"):
        return "an empty name"
    if "\x00" in name:
        return "a NUL character in its name"
    if "\\" in name:
        return "a backslash in its name"
    if name.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(name):
        return "a drive letter"
    if ".." in PurePosixPath(name).parts:
        return "a '..' part"
    return ""


class CheckedZip:
    """An open zip file whose every member name was checked (:func:`zip_open`). ``members`` maps each file
    member's name (directories left out) to its ``ZipInfo``; names are only ever looked up, never joined to a path.
    Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: Path, archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo]):
        self.path, self._zip, self.members = path, archive, members

    def __enter__(self) -> CheckedZip:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def _refuse(self, member: str, problem: str) -> ArchiveError:
        return ArchiveError(f"{self.path.name}: the member {member!r} {problem}", member=member)

    def read_bytes(self, member: str, *, max_bytes: int) -> bytes:
        """The bytes of ``member`` (a small file such as a ``state.json``), at most ``max_bytes``.

        Raises:
            ArchiveError: no such member, or larger than ``max_bytes``.
        """
        if member not in self.members:
            raise ArchiveError(f"{self.path.name} has no member {member!r}", member=member)
        with self._zip.open(self.members[member]) as source:
            data = source.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise self._refuse(member, f"is over the limit of {max_bytes} bytes")
        return data

    def extract(self, member: str, folder: Path, *, max_bytes: int, extension: Callable[[bytes], str | None],
                kind: str = "") -> Path:
        """Write ``member`` into ``folder`` as ``<sha256 of its bytes>.<extension>`` and return that path.

        ``extension(head)`` gets the member's first 64 bytes and returns the extension (without the dot) that its
        bytes show, or None when they are not of an accepted kind (``kind`` names that kind in the error). The name
        of the member is never used. A member already extracted (same bytes) is the same file.

        Raises:
            ArchiveError: no such member, over ``max_bytes`` unpacked (counted while unpacking, whatever the zip's
                directory claims), or bytes of no accepted kind.
        """
        if member not in self.members:
            raise ArchiveError(f"{self.path.name} has no member {member!r}", member=member)
        info = self.members[member]
        if info.file_size > max_bytes:
            raise self._refuse(member, f"is over the limit of {max_bytes} bytes ({info.file_size} bytes unpacked)")
        folder.mkdir(parents=True, exist_ok=True)
        part = folder / f".part-{uuid.uuid4().hex}"
        digest, size, head = hashlib.sha256(), 0, b""
        try:
            with self._zip.open(info) as source, part.open("wb") as target:
                while block := source.read(_COPY_BLOCK):
                    size += len(block)
                    if size > max_bytes:
                        raise self._refuse(member, f"is over the limit of {max_bytes} bytes unpacked")
                    if len(head) < 64:
                        head += block[:64 - len(head)]
                    digest.update(block)
                    target.write(block)
            suffix = extension(head)
            if suffix is None:
                raise self._refuse(member, f"is not {kind or 'an accepted file'} (it starts with bytes "
                                           f"{head[:8].hex()})")
            final = folder / f"{digest.hexdigest()}.{suffix}"
            part.replace(final)
            return final
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, EOFError) as exc:
            raise self._refuse(member, f"cannot be unpacked ({exc})") from exc
        finally:
            part.unlink(missing_ok=True)


def zip_open(path: Path, *, max_members: int, max_bytes: int) -> CheckedZip:
    """Open the zip file at ``path`` after checking every member: a name that is absolute, has a ``..`` part, a
    backslash or a drive letter (:func:`member_name_problem`), an encrypted member, more than ``max_members``
    members or more than ``max_bytes`` unpacked (the sum of the sizes its directory declares; :meth:`CheckedZip.
    extract` also counts what it really unpacks) refuse the whole zip.

    Raises:
        ArchiveError: not a zip file, or the first problem found, naming the zip and the member.
    """
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(f"{path.name} is not a valid zip file ({exc})") from exc
    try:
        infos = archive.infolist()
        if len(infos) > max_members:
            raise ArchiveError(f"{path.name} has {len(infos)} members, over the limit of {max_members} "
                               "(IMPORT_ARCHIVE_MAX_MEMBERS)")
        total, members = 0, {}
        for info in infos:
            if problem := member_name_problem(info.filename):
                raise ArchiveError(f"{path.name}: the member {info.filename!r} leaves the zip file's folder "
                                   f"({problem}); nothing was unpacked", member=info.filename)
            if info.flag_bits & 0x1:
                raise ArchiveError(f"{path.name}: the member {info.filename!r} is encrypted", member=info.filename)
            total += info.file_size
            if total > max_bytes:
                raise ArchiveError(f"{path.name} unpacks to more than {max_bytes} bytes (IMPORT_ARCHIVE_MAX_BYTES)")
            if not info.is_dir():
                members[info.filename] = info
    except BaseException:
        archive.close()
        raise
    return CheckedZip(path, archive, members)


def zip_limits() -> dict:
    """``max_members`` and ``max_bytes`` of :func:`zip_open` from the settings ``IMPORT_ARCHIVE_MAX_MEMBERS`` and
    ``IMPORT_ARCHIVE_MAX_BYTES``."""
    from django.conf import settings

    return {"max_members": settings.IMPORT_ARCHIVE_MAX_MEMBERS, "max_bytes": settings.IMPORT_ARCHIVE_MAX_BYTES}
