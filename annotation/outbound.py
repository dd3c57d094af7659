"""Requests the server sends to addresses people typed: which hosts it may reach, and a download that keeps to them.

An address typed into the platform — the ``base_url`` of an LALM or judge (:mod:`annotation.providers.setup`), the
URL of a table or of an audio file given to the table importer (:mod:`annotation.services.importers`) — may reach
only globally routable addresses (Python's ``ipaddress`` ``is_global``, not multicast), unless
``PROVIDER_PRIVATE_NETWORKS`` lists the network (a model server or file server on the same machine or lab network
is a real use: ``127.0.0.0/8``, ``10.0.0.0/8``). Otherwise whoever may type a URL could make the server read its own
admin ports, the cloud's metadata service (169.254.169.254, Alibaba Cloud's 100.100.100.200 in the shared range
100.64.0.0/10) or the lab's intranet and show the answer back.

The check runs where the connection is made: :func:`guarded_transport` is an ``httpx`` transport whose every TCP
connection resolves the host itself, checks every address, and connects to the checked address (TLS still
verifies the host name), so a DNS answer that changes between a check and the request (DNS rebinding) cannot slip
an inner address in, and every redirect hop is checked the same way. :func:`url_address_problem` is the same
check ahead of time, for a form's message; a host that does not resolve yet may be saved (the request checks it).
"""
from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

#: Redirects :func:`url_download` follows (each one checked like the first URL).
MAX_REDIRECTS = 5


def url_host(url: str) -> tuple[str, int]:
    """``(host, port)`` of an http(s) URL, the host in lower case, the port defaulted by the scheme.

    Raises:
        ValueError: not an http or https URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http:// or https:// URL with a host")
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError(f"{url!r} has no valid port: {error}") from None
    return parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80)


def _allowed_networks() -> list:
    networks = []
    for entry in settings.PROVIDER_PRIVATE_NETWORKS:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError as error:
            raise ImproperlyConfigured(f"PROVIDER_PRIVATE_NETWORKS: {entry!r} is not a network ({error})") from None
    return networks


def _is_public(address) -> bool:
    """Globally routable (``is_global``) and not multicast; an IPv4-mapped IPv6 address counts as its IPv4 one."""
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_global and not address.is_multicast


def _resolve(host: str, port: int) -> list:
    """Every address ``host`` stands for (itself when it is an address literal). Raises ``socket.gaierror``."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass  # a name: resolved below (outside the handler, so its errors carry no parse error as context)
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos))


def addresses_problem(host: str, addresses) -> str:
    """Why the server may not connect to ``host`` at ``addresses`` ('' when every one is allowed): the first
    address that is not globally routable and not in a network of ``PROVIDER_PRIVATE_NETWORKS``."""
    allowed = _allowed_networks()
    for address in sorted(addresses, key=str):
        if _is_public(address) or any(address in network for network in allowed):
            continue
        kind = ("loopback" if address.is_loopback else "link-local" if address.is_link_local
                else "private or reserved" if address.is_private or address.is_reserved
                else "non-public (shared, multicast or special-purpose)")
        return (f"{host} is a {kind} address ({address}); servers on such networks are reached only when "
                "PROVIDER_PRIVATE_NETWORKS lists the network (e.g. 127.0.0.0/8 for a server on this machine)")
    return ""


def url_address_problem(url: str, *, unresolved_ok: bool = False) -> str:
    """Why the server may not send a request to ``url`` ('' when it may): not an http(s) URL, a host that does not
    resolve (unless ``unresolved_ok``: a row saved now whose host will resolve later; its requests are checked when
    made), or an address that is not globally routable and not in a network ``PROVIDER_PRIVATE_NETWORKS`` lists.
    Every address the host name resolves to is checked."""
    try:
        host, port = url_host(url)
    except ValueError as error:
        return str(error)
    try:
        addresses = _resolve(host, port)
    except (socket.gaierror, UnicodeError) as error:
        return "" if unresolved_ok else f"the host {host!r} does not resolve ({error})"
    return addresses_problem(host, addresses)


def url_unresolved_note(url: str) -> str:
    """A note for a ``base_url`` whose host does not resolve yet ('' when it resolves or is no http(s) URL)."""
    try:
        host, port = url_host(url)
        _resolve(host, port)
    except ValueError:
        return ""
    except (socket.gaierror, UnicodeError):
        return (f"The host {host!r} does not resolve yet. The row is saved; its address is checked when a request "
                "is made (a connection test tells you when it works).")
    return ""


class AddressRefused(Exception):
    """A connection :func:`guarded_transport` refused: its host resolves to an address the server may not reach.
    Raised as a subclass that is also the ``ConnectError`` of the client's httpcore, so httpx (or httpx2) raises
    its ``ConnectError`` with this message, caused by this error. ``problem``: why."""

    def __init__(self, message: str, *, problem: str = ""):
        super().__init__(message)
        self.problem = problem or message


def _guarded_backend_class(core):
    """The network backend class for the httpcore module ``core`` (``httpcore``, or ``httpcore2`` of httpx2): its
    synchronous backend, except that a TCP connection resolves its host here, checks every address
    (:func:`addresses_problem`) and connects to a checked one; Unix sockets are refused."""
    refused = type("AddressRefused", (AddressRefused, core.ConnectError), {})

    class GuardedBackend(core.NetworkBackend):
        def __init__(self):
            self._inner = core.SyncBackend()

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            try:
                addresses = _resolve(host, port)
            except (socket.gaierror, UnicodeError) as error:
                raise core.ConnectError(f"the host {host!r} does not resolve ({error})") from None
            if problem := addresses_problem(host, addresses):
                raise refused(f"{host} is not allowed: {problem}", problem=problem)
            error: Exception | None = None
            for address in addresses:
                try:
                    return self._inner.connect_tcp(str(address), port, timeout=timeout,
                                                   local_address=local_address, socket_options=socket_options)
                except core.ConnectError as exc:
                    error = exc
            raise error or core.ConnectError(f"the host {host!r} has no address")

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            raise refused("Unix sockets are not reached from typed addresses")

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return GuardedBackend


_BACKENDS: dict[str, type] = {}


def connect_refusal(error: BaseException) -> AddressRefused | None:
    """The :class:`AddressRefused` behind ``error`` (a client library's connection error, following
    ``__cause__``/``__context__``), or None: lets a provider say why a request was not sent."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, AddressRefused):
            return error
        seen.add(id(error))
        error = _cause_of(error)
    return None


def _cause_of(error: BaseException) -> BaseException | None:
    """What ``error`` was raised from (``raise ... from``), or during (unless ``from None`` suppressed it)."""
    if error.__cause__ is not None:
        return error.__cause__
    return None if error.__suppress_context__ else error.__context__


def guarded_transport(*, library: str = "httpx", **kwargs):
    """An ``HTTPTransport`` of ``library`` (``httpx``, or its fork ``httpx2`` that the openai client uses;
    ``kwargs`` as the transport's own) whose connections reach only the addresses :func:`addresses_problem`
    allows, checked on the addresses it really connects to, for every request and so every redirect hop. The
    clients of typed addresses use it: :func:`url_download`, and the OpenAI-compatible and Gemini clients of rows
    with their own ``base_url`` (:mod:`annotation.providers.setup`)."""
    import importlib

    http = importlib.import_module(library)
    core = importlib.import_module("httpcore2" if library == "httpx2" else "httpcore")
    if library not in _BACKENDS:
        _BACKENDS[library] = _guarded_backend_class(core)
    transport = http.HTTPTransport(**kwargs)
    transport._pool._network_backend = _BACKENDS[library]()  # the library builds the pool; its backend is ours
    return transport


def url_download(*, url: str, path: Path, max_bytes: int, timeout_s: float = 60.0) -> Path:
    """Download ``url`` into ``path`` (its folder must exist) with ``httpx``: at most ``max_bytes`` bytes,
    ``timeout_s`` per request, following at most :data:`MAX_REDIRECTS` redirects, each target checked by
    :func:`url_address_problem` before it is asked and again on the address it connects to
    (:func:`guarded_transport`). Returns ``path``.

    Raises:
        ValueError: a lowercase sentence saying why (a refused address, "the URL answered HTTP 404", a file over
            ``max_bytes``, "cannot download the URL (ConnectError: …)"); a partial file is removed.
    """
    import httpx

    try:
        with httpx.Client(follow_redirects=False, timeout=timeout_s, transport=guarded_transport()) as client:
            for _hop in range(MAX_REDIRECTS + 1):
                if problem := url_address_problem(url):
                    raise ValueError(f"{url} is not allowed: {problem}")
                with client.stream("GET", url) as response:
                    if response.is_redirect and "location" in response.headers:
                        url = urljoin(url, response.headers["location"])
                        continue
                    if response.status_code != 200:
                        raise ValueError(f"the URL answered HTTP {response.status_code}")
                    size = 0
                    with path.open("wb") as fh:
                        for chunk in response.iter_bytes():
                            size += len(chunk)
                            if size > max_bytes:
                                raise ValueError(f"the file at the URL is over the limit of {max_bytes} bytes")
                            fh.write(chunk)
                    return path
            raise ValueError(f"the URL redirected more than {MAX_REDIRECTS} times")
    except httpx.HTTPError as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc.__cause__, AddressRefused):  # the host resolved elsewhere when it was connected to
            raise ValueError(f"{url} is not allowed: {exc.__cause__.problem}") from exc
        raise ValueError(f"cannot download the URL ({type(exc).__name__}: {exc})") from exc
    except ValueError:
        path.unlink(missing_ok=True)
        raise
