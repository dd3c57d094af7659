"""A threaded ``http.server`` on 127.0.0.1 with scripted failures, shared by the fake Gemini and OpenAI servers."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    """One scripted reply: ``status``, ``body`` (dict → JSON, str → sent as is), extra ``headers``, ``delay_s``."""

    status: int = 200
    body: dict | str = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Recorded:
    """A request the fake received: ``method``, ``path``, ``headers`` (lower-case keys), raw ``body`` bytes."""

    method: str
    path: str
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body or b"null")


class FakeServer:
    """Base class: subclasses implement ``route(request) -> Reply``. Use as a context manager.

    ``script(kind, *replies)`` queues replies that the next requests of ``kind`` get instead of the normal
    reply (kinds are chosen by the subclass, e.g. ``"generate"``). ``requests`` lists every request received.
    """

    def __init__(self):
        self.requests: list[Recorded] = []
        self._scripts: dict[str, deque[Reply]] = {}
        self._lock = threading.Lock()
        self.delay_s = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output quiet
                pass

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with fake._lock:
                    fake.requests.append(request)
                reply = fake.route(request)
                if reply.delay_s or fake.delay_s:
                    time.sleep(reply.delay_s or fake.delay_s)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = payload.encode()
                try:
                    self.send_response(reply.status)
                    if not any(key.lower() == "content-type" for key in reply.headers):
                        self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                    pass

            do_GET = do_POST = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def script(self, kind: str, *replies: Reply) -> None:
        with self._lock:
            self._scripts.setdefault(kind, deque()).extend(replies)

    def scripted(self, kind: str) -> Reply | None:
        with self._lock:
            queue = self._scripts.get(kind)
            return queue.popleft() if queue else None

    def route(self, request: Recorded) -> Reply:  # pragma: no cover - subclasses implement
        raise NotImplementedError

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
