"""A fake OpenAI-compatible chat server (``POST /v1/chat/completions``), e.g. vLLM serving an audio LALM."""
from __future__ import annotations

import math
import re

from .base import FakeServer, Recorded, Reply

#: Probabilities the fake gives a score token k and its neighbours: k 0.6, k-1 0.3, k+1 0.1 (renormalised at the
#: ends of the scale), so Σ p·k differs from k: "4" → 3.8.
_SCORE_SPREAD = ((0, 0.6), (-1, 0.3), (1, 0.1))


#: Alternatives the fake gives a "Yes" or "No" token: the word itself 0.8, the other one 0.2.
_YESNO_SPREAD = 0.8


def fake_logprobs(text: str, top: int) -> dict:
    """OpenAI ``logprobs`` for ``text``: whitespace-led word tokens; digit tokens 1–5 get :data:`_SCORE_SPREAD`,
    "Yes"/"No" tokens the other word with 0.2."""
    content = []
    for token in re.findall(r"\s*\S+|\s+", text):
        digit = token.strip()
        if digit in {"Yes", "No"}:
            other = token.replace(digit, "No" if digit == "Yes" else "Yes")
            alternatives = [{"token": token, "logprob": math.log(_YESNO_SPREAD), "bytes": None},
                            {"token": other, "logprob": math.log(1 - _YESNO_SPREAD), "bytes": None}]
        elif digit in {"1", "2", "3", "4", "5"}:
            k = int(digit)
            spread = [(k + d, p) for d, p in _SCORE_SPREAD if 1 <= k + d <= 5]
            total = sum(p for _, p in spread)
            alternatives = [{"token": token.replace(digit, str(v)), "logprob": math.log(p / total), "bytes": None}
                            for v, p in spread]
        else:
            alternatives = [{"token": token, "logprob": -0.01, "bytes": None}]
        content.append({"token": token, "logprob": alternatives[0]["logprob"], "bytes": None,
                        "top_logprobs": alternatives[:top]})
    return {"content": content}


class FakeOpenAICompat(FakeServer):
    """Replies with ``reply(request) -> str`` (default: a fixed answer); script failures under ``"chat"``.

    When the request asks for ``logprobs``, the reply carries token log-probabilities (see :func:`fake_logprobs`),
    unless ``logprobs=False``: a server that ignores the parameter and sends ``"logprobs": null``.
    """

    def __init__(self, *, reply=None, logprobs: bool = True):
        super().__init__()
        self.reply = reply or (lambda request: "A man is speaking about the weather.")
        self.logprobs = logprobs

    @property
    def chat_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def route(self, request: Recorded) -> Reply:
        if request.method == "POST" and request.path.split("?")[0] == "/v1/chat/completions":
            scripted = self.scripted("chat")
            if scripted:
                return scripted
            body = request.json()
            model = body.get("model", "fake")
            text = self.reply(request)
            wanted = body.get("logprobs") and self.logprobs
            logprobs = fake_logprobs(text, int(body.get("top_logprobs") or 1)) if wanted else None
            return Reply(200, {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": logprobs,
                    "finish_reason": "stop",
                }],
                "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
            })
        return Reply(404, {"error": {"message": f"no route {request.method} {request.path}"}})
