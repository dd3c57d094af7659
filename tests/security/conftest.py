"""Fixtures of the security tests.

``network_guard``: the tests of outbound checks (SSRF) must never send traffic off the machine, not even when they
run against old code that would connect: while it is active, a Python socket may connect only to a loopback
address, and a host name resolves only if it is ``localhost`` or the test gave it answers with
``network_guard.resolves(name, [addresses, ...])`` (one list per lookup, the last one repeated: a DNS answer that
changes). Every refused connection is recorded in ``network_guard.refused``.

``admin_browser``: the test client logged in as an admin, with media and imports in the test's own folder.
"""
import ipaddress
import socket

import pytest

from tests.factories import UserFactory


class NetworkGuard:
    def __init__(self, real_getaddrinfo):
        self._real = real_getaddrinfo
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []
        self.refused: list[tuple] = []

    def resolves(self, name: str, *answers: list[str]) -> None:
        """Lookups of ``name`` give ``answers[0]``, then ``answers[1]``, ... (the last one from then on)."""
        self.answers[name.lower()] = [list(a) for a in answers]

    def getaddrinfo(self, host, port, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else str(host)
        try:
            ipaddress.ip_address(name.strip("[]").split("%")[0])
        except ValueError:
            return self._answer(name, port, *args, **kwargs)
        return self._real(name.strip("[]"), port, *args, **kwargs)

    def _answer(self, name: str, port, *args, **kwargs):
        self.lookups.append(name)
        if name.lower() == "localhost":
            return self._real("127.0.0.1", port, *args, **kwargs)
        queue = self.answers.get(name.lower())
        if not queue:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: not resolved in tests (network_guard)")
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [info for address in addresses for info in self._real(address, port, *args, **kwargs)]

    def check(self, address) -> None:
        if isinstance(address, tuple) and address:
            host = str(address[0]).split("%")[0]
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = False
            if not loopback:
                self.refused.append(address)
                raise ConnectionRefusedError(f"network_guard: no connection to {address!r} from a test")


@pytest.fixture
def network_guard(monkeypatch):
    guard = NetworkGuard(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", guard.getaddrinfo)
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(sock, address):
        guard.check(address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        guard.check(address)
        return real_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    yield guard


@pytest.fixture
def admin_browser(client, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.IMPORT_DIR = tmp_path / "media" / "imports"
    client.force_login(UserFactory(username="adm", is_staff=True, is_superuser=True, roles=["admin"]))
    return client
