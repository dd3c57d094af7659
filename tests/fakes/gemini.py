"""A fake Gemini API: the Files API resumable upload and ``models/{model}:generateContent``.

Implements just what ``google-genai`` sends for ``client.files.upload`` and ``client.models.generate_content``
(v1beta paths). Script failures with ``fake.script("generate", Reply(429, headers={"Retry-After": "1"}), ...)``.
"""
from __future__ import annotations

import itertools
import re

from .base import FakeServer, Recorded, Reply


def error_body(code: int, status: str, message: str) -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


class FakeGemini(FakeServer):
    """Replies to generateContent with ``reply(request) -> str`` (default: a fixed rationale)."""

    def __init__(self, *, reply=None):
        super().__init__()
        self.reply = reply or (lambda request: "The speaker clearly says the answer in the audio.")
        self._ids = itertools.count(1)
        self.uploads: dict[str, bytes] = {}

    @property
    def generate_requests(self) -> list[Recorded]:
        return [r for r in self.requests if ":generateContent" in r.path]

    def route(self, request: Recorded) -> Reply:
        path = request.path.split("?")[0]
        if request.method == "POST" and re.fullmatch(r"/upload/v1(?:beta)?/files", path):
            scripted = self.scripted("upload")
            if scripted:
                return scripted
            session = next(self._ids)
            return Reply(200, {}, {"X-Goog-Upload-URL": f"{self.url}/upload-session/{session}",
                                   "X-Goog-Upload-Status": "active"})
        match = re.fullmatch(r"/upload-session/(\d+)", path)
        if request.method == "POST" and match:
            name = f"files/audio{match.group(1)}"
            self.uploads[name] = request.body
            file = {
                "name": name,
                "uri": f"{self.url}/v1beta/{name}",
                "mimeType": "audio/wav",
                "sizeBytes": str(len(request.body)),
                "state": "ACTIVE",
            }
            return Reply(200, {"file": file}, {"X-Goog-Upload-Status": "final"})
        match = re.fullmatch(r"/v1(?:beta)?/models/([^:]+):generateContent", path)
        if request.method == "POST" and match:
            scripted = self.scripted("generate")
            if scripted:
                return scripted
            return Reply(200, {
                "candidates": [{
                    "content": {"role": "model", "parts": [{"text": self.reply(request)}]},
                    "finishReason": "STOP",
                }],
                "usageMetadata": {"promptTokenCount": 120, "candidatesTokenCount": 30, "totalTokenCount": 150},
                "modelVersion": match.group(1),
            })
        return Reply(404, error_body(404, "NOT_FOUND", f"no route {request.method} {path}"))
