"""A fake OpenAI-compatible chat server (``POST /v1/chat/completions``), e.g. vLLM serving an audio LALM."""
from __future__ import annotations

from .base import FakeServer, Recorded, Reply


class FakeOpenAICompat(FakeServer):
    """Replies with ``reply(request) -> str`` (default: a fixed answer); script failures under ``"chat"``."""

    def __init__(self, *, reply=None):
        super().__init__()
        self.reply = reply or (lambda request: "A man is speaking about the weather.")

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def route(self, request: Recorded) -> Reply:
        if request.method == "POST" and request.path.split("?")[0] == "/v1/chat/completions":
            scripted = self.scripted("chat")
            if scripted:
                return scripted
            model = request.json().get("model", "fake")
            return Reply(200, {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": self.reply(request)},
                    "finish_reason": "stop",
                }],
                "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
            })
        return Reply(404, {"error": {"message": f"no route {request.method} {request.path}"}})
