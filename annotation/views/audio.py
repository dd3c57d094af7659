"""The audio stream of the rating pages, with HTTP Range support so the player can seek.

A clip is served as the audio its bytes are, never as what its name says: the ``Content-Type`` is the sniffed
``audio/*`` type (:func:`annotation.services.audio.audio_format_sniff`), and the response carries a sandbox
Content-Security-Policy, ``nosniff`` and an ``inline`` disposition with a sanitised file name, so a WAV/HTML polyglot
(stored under ``page.html`` before clips got safe names) is played, or downloaded, but never run as a page.
"""
import re
from pathlib import PurePosixPath

from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_http_methods

from annotation import selectors
from annotation.access import RATERS, role_required
from annotation.services.audio import UPLOAD_FORMATS, audio_format_sniff

_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")
_CHUNK = 64 * 1024
#: The media type of each sniffed audio type: the only types ``/audio/`` answers with.
AUDIO_MEDIA_TYPES = {"WAV": "audio/wav", "FLAC": "audio/flac", "OGG": "audio/ogg", "MP3": "audio/mpeg"}
#: The route's own Content-Security-Policy: nothing may load or run, and a document opened from here is sandboxed
#: (an opaque origin without scripts), whatever its bytes hold.
AUDIO_CSP = "default-src 'none'; sandbox"


def _parse_range(header: str, size: int) -> tuple[int, int] | None | str:
    """Parse a single-range ``Range`` header into inclusive (start, end).

    Returns None when the header should be ignored (absent, malformed or several ranges: serve the whole file)
    and ``"unsatisfiable"`` when it names no byte of a ``size``-byte file.
    """
    match = _RANGE_RE.match(header.strip()) if header else None
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix range: the last N bytes
        length = int(last)
        if length == 0:
            return "unsatisfiable"
        return max(size - length, 0), size - 1
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    if start >= size or (last and int(last) < start):
        return "unsatisfiable"
    return start, end


def _file_chunks(fh, start: int, length: int):
    try:
        fh.seek(start)
        remaining = length
        while remaining > 0:
            block = fh.read(min(_CHUNK, remaining))
            if not block:
                break
            remaining -= len(block)
            yield block
    finally:
        fh.close()


def _download_name(clip, sniffed: str) -> str:
    """The clip's file name for ``Content-Disposition``: the stem of its original name with only ASCII letters,
    digits, ``-`` and ``_`` kept (at most 80 of them; ``audio`` when none are left), plus the sniffed type's
    extension — no quote, semicolon, slash or line break can reach the header."""
    stem = PurePosixPath((clip.original_name or "").replace("\\", "/")).stem
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", stem).strip("_")[:80] or "audio"
    return f"{stem}.{UPLOAD_FORMATS[sniffed]}"


@require_http_methods(["GET", "HEAD"])
@role_required(*RATERS)
def audio(request: HttpRequest, clip_pk: int) -> HttpResponse:
    """Stream an audio clip with HTTP Range support (206 + Content-Range), so the player can seek.

    Access: see ``selectors.audio_clip_get_for_user``. The clip's SHA-256 is its strong ETag (If-Range honoured).
    The type is sniffed from the stored bytes (WAV, FLAC, Ogg, MP3; anything else answers 404), with the sandbox
    CSP :data:`AUDIO_CSP`.
    """
    clip = selectors.audio_clip_get_for_user(user=request.user, clip_pk=clip_pk)
    size = clip.file.size
    with clip.file.storage.open(clip.file.name, "rb") as fh:
        sniffed = audio_format_sniff(head=fh.read(16))
    if sniffed is None:  # stored before only audio was accepted: never served as anything else
        raise Http404("This clip is not WAV, FLAC, Ogg or MP3 audio.")
    etag = f'"{clip.sha256}"'

    byte_range = _parse_range(request.headers.get("Range", ""), size)
    if_range = request.headers.get("If-Range")
    if if_range is not None and if_range != etag:
        byte_range = None  # the client's copy is stale: send the whole file
    if byte_range == "unsatisfiable":
        response = HttpResponse(status=416)
        response["Content-Range"] = f"bytes */{size}"
        response["Accept-Ranges"] = "bytes"
        return response

    start, end = byte_range if byte_range else (0, size - 1)
    length = max(end - start + 1, 0)
    if request.method == "HEAD":
        response = HttpResponse(status=206 if byte_range else 200)
    else:
        response = StreamingHttpResponse(
            _file_chunks(clip.file.storage.open(clip.file.name, "rb"), start, length), status=206 if byte_range else 200
        )
    response["Content-Type"] = AUDIO_MEDIA_TYPES[sniffed]
    response["Content-Disposition"] = f'inline; filename="{_download_name(clip, sniffed)}"'
    response["Content-Security-Policy"] = AUDIO_CSP
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = etag
    response["Cache-Control"] = "private, max-age=3600"
    if byte_range:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    return response
