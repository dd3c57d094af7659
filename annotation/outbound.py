"""Requests the server sends to addresses people typed: which hosts it may reach, and a download that keeps to them.

An address typed into the platform — the ``base_url`` of an LALM or judge (:mod:`annotation.providers.setup`), the
URL of a table or of an audio file given to the table importer (:mod:`annotation.services.importers`) — may not
reach a private, loopback, link-local, multicast or reserved address, unless ``PROVIDER_PRIVATE_NETWORKS`` lists
its network (a model server or file server on the same machine or lab network is a real use: ``127.0.0.0/8``,
``10.0.0.0/8``). Otherwise whoever may type a URL could make the server read its own admin ports, the cloud's
metadata service (169.254.169.254) or the lab's intranet and show the answer back. Host names are resolved and
every address they resolve to is checked. :func:`url_download` checks every redirect too, so a public host cannot
bounce the request inward.

Not covered: a host name whose DNS answer changes between the check and the request (DNS rebinding).
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
    return not (address.is_private or address.is_loopback or address.is_link_local or address.is_multicast
                or address.is_reserved or address.is_unspecified)


def url_address_problem(url: str) -> str:
    """Why the server may not send a request to ``url`` ('' when it may): not an http(s) URL, a host that does not
    resolve, or an address in a private, loopback, link-local, multicast or reserved network that
    ``PROVIDER_PRIVATE_NETWORKS`` does not list. Every address the host name resolves to is checked."""
    try:
        host, port = url_host(url)
    except ValueError as error:
        return str(error)
    try:
        addresses = {ipaddress.ip_address(host)}
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as error:
            return f"the host {host!r} does not resolve ({error})"
        addresses = {ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}
    allowed = _allowed_networks()
    for address in sorted(addresses, key=str):
        if _is_public(address) or any(address in network for network in allowed):
            continue
        kind = ("loopback" if address.is_loopback else "link-local" if address.is_link_local
                else "private or reserved")
        return (f"{host} is a {kind} address ({address}); servers on such networks are reached only when "
                "PROVIDER_PRIVATE_NETWORKS lists the network (e.g. 127.0.0.0/8 for a server on this machine)")
    return ""


def url_download(*, url: str, path: Path, max_bytes: int, timeout_s: float = 60.0) -> Path:
    """Download ``url`` into ``path`` (its folder must exist) with ``httpx``: at most ``max_bytes`` bytes,
    ``timeout_s`` per request, following at most :data:`MAX_REDIRECTS` redirects, each target checked by
    :func:`url_address_problem` before it is asked. Returns ``path``.

    Raises:
        ValueError: a lowercase sentence saying why (a refused address, "the URL answered HTTP 404", a file over
            ``max_bytes``, "cannot download the URL (ConnectError: …)"); a partial file is removed.
    """
    import httpx

    try:
        with httpx.Client(follow_redirects=False, timeout=timeout_s) as client:
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
        raise ValueError(f"cannot download the URL ({type(exc).__name__}: {exc})") from exc
    except ValueError:
        path.unlink(missing_ok=True)
        raise
