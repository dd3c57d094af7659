"""Provider set-up, written once: which server a model call goes to, with which key, and whether it may go there.

Every model call of the platform is built here: candidate answers of an LALM row (:mod:`.answers`), rationales
(:mod:`.rationale`), LLM judges (``annotation.services.judging``) and the AI suggestions of refinement
(``refinement.services.suggestions``). :func:`endpoint_resolve` turns a provider name and a row's ``settings``
into an :class:`Endpoint` (server, model, key) or refuses with the reason; :func:`chat_for` builds the client.

The rules (README, "Security and integrity"):

* **Key variables.** ``settings.api_key_env`` names the environment variable holding the key (keys never sit in
  the database) and must match ``PROVIDER_API_KEY_ENV_PATTERN`` (shell glob, default ``*_API_KEY``), so
  ``DATABASE_URL`` or ``DJANGO_SECRET_KEY`` can never be sent. Checked when a row is saved (the models' ``clean``)
  and again at use.
* **Keys are bound to hosts, fail closed.** A provider's default key (``GEMINI_API_KEY``, ``OPENAI_COMPAT_API_KEY``)
  is sent only to its default server — Google's endpoint or ``GEMINI_BASE_URL``; ``OPENAI_COMPAT_BASE_URL``, each
  with its scheme, host and port — or to the hosts ``PROVIDER_KEY_HOSTS`` binds to it. Another variable is sent
  only to the hosts that setting lists for it: a variable it does not list goes nowhere. A listed host gets the
  key over https only, or over http when the host is private and ``PROVIDER_PRIVATE_NETWORKS`` allows it (a lab
  server), so ``http://bound-host:443`` never carries a key unencrypted. A row that relies on the default key
  and points elsewhere gets no key (an OpenAI-compatible server that needs none still works; Gemini, which needs
  one, is unavailable with the reason); a row that *names* a variable and points where it may not go is refused.
* **No private hosts from the browser.** A ``base_url`` typed into a row (form, admin, API) may reach only globally
  routable addresses unless ``PROVIDER_PRIVATE_NETWORKS`` lists the network (local model servers, e.g. llama.cpp on
  127.0.0.1, are a real use: list ``127.0.0.0/8``). The form checks every address the host resolves to
  (:func:`annotation.outbound.url_address_problem`; a host that does not resolve yet is saved with a note), and the
  clients check again where they connect (:func:`annotation.outbound.guarded_transport`: the addresses really
  connected to, for every request), so a changed DNS answer cannot point a saved row inward. The operator's own
  ``GEMINI_BASE_URL`` and ``OPENAI_COMPAT_BASE_URL`` are trusted as configured. Clients do not follow redirects, so
  an allowed host cannot bounce a request (and its key) elsewhere.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from annotation.outbound import addresses_problem, url_address_problem, url_host

from .base import Availability, ProviderUnavailable, RateLimiter, RetryPolicy

GEMINI = "gemini"
OPENAI = "openai"
PROVIDERS = (GEMINI, OPENAI)
#: Where google-genai sends requests when no base URL is given.
GEMINI_DEFAULT_URL = "https://generativelanguage.googleapis.com"
#: Each provider's default key variable (read from the settings of the same name).
DEFAULT_KEY_VARIABLE = {GEMINI: "GEMINI_API_KEY", OPENAI: "OPENAI_COMPAT_API_KEY"}

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ProviderSetupError(ProviderUnavailable):
    """A provider cannot be set up as configured. ``field`` names the setting at fault (``provider``, ``model``,
    ``base_url``, ``api_key_env``; '' for none), so a form shows the message beside it."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Endpoint:
    """Where one model is asked.

    Attributes:
        provider: ``gemini`` or ``openai``. model: the model name sent.
        base_url: the server ('' for Google's endpoint). api_key: the key sent ('' for none).
        key_variable: the variable ``api_key`` came from ('' when no key is sent).
        note: why a default key is not sent ('' otherwise), for the connection test and logs.
        guarded: the base URL was typed into a row (not the operator's), so its client connects only to the
            addresses :func:`annotation.outbound.guarded_transport` allows.
    """

    provider: str
    model: str
    base_url: str
    api_key: str
    key_variable: str
    note: str = ""
    guarded: bool = False

    @property
    def host(self) -> str:
        """``host:port`` the requests go to."""
        return _host_label(*url_host(self.base_url or GEMINI_DEFAULT_URL))


# --- key variables --------------------------------------------------------------------------------------------
def api_key_env_error(provider_settings: dict | None) -> str:
    """Why ``provider_settings["api_key_env"]`` may not be used ('' when it is absent or allowed).

    The name must be a plain environment variable name matching ``settings.PROVIDER_API_KEY_ENV_PATTERN``.
    """
    name = (provider_settings or {}).get("api_key_env")
    if name in (None, ""):
        return ""
    pattern = settings.PROVIDER_API_KEY_ENV_PATTERN
    if not isinstance(name, str) or not _NAME_RE.match(name) or not fnmatchcase(name, pattern):
        return (f"api_key_env {name!r} is not allowed: it must name an environment variable matching "
                f"{pattern!r} (PROVIDER_API_KEY_ENV_PATTERN), so no other secret of the server is ever sent "
                "to a provider")
    return ""


def key_value(variable: str) -> str:
    """The key in ``variable``: the setting of that name for a default key variable (so ``.env`` and test
    overrides apply), else the process environment ('' when unset)."""
    if variable in DEFAULT_KEY_VARIABLE.values():
        return getattr(settings, variable, "") or ""
    return os.environ.get(variable, "")


# --- hosts ----------------------------------------------------------------------------------------------------
def _host_label(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def key_host_bindings() -> dict[str, list[tuple[str, int | None]]]:
    """``PROVIDER_KEY_HOSTS`` parsed: variable -> ``[(host, port or None for any port)]``.

    The setting is ``VAR=host[:port][,host...]`` entries separated by spaces or semicolons, e.g.
    ``GEMINI_API_KEY=gemini-proxy.lab.org LAB_API_KEY=gpu-box:8000,gpu-box-2``; a dict of the same shape is
    accepted too (test settings).

    Raises:
        ImproperlyConfigured: an entry is malformed (the entry is named).
    """
    raw = settings.PROVIDER_KEY_HOSTS
    if isinstance(raw, dict):
        entries = [(name, ",".join(hosts) if isinstance(hosts, list | tuple) else str(hosts))
                   for name, hosts in raw.items()]
    else:
        entries = []
        for entry in re.split(r"[\s;]+", raw or ""):
            if not entry:
                continue
            if "=" not in entry:
                raise ImproperlyConfigured(f"PROVIDER_KEY_HOSTS entry {entry!r} is not VAR=host[,host...]")
            entries.append(tuple(entry.split("=", 1)))
    bindings: dict[str, list[tuple[str, int | None]]] = {}
    for name, hosts in entries:
        if not _NAME_RE.match(name):
            raise ImproperlyConfigured(f"PROVIDER_KEY_HOSTS: {name!r} is not an environment variable name")
        for host in filter(None, (h.strip() for h in hosts.split(","))):
            match = re.fullmatch(r"\[?([A-Za-z0-9.\-:]+?)\]?(?::(\d+))?", host)
            if match is None:
                raise ImproperlyConfigured(f"PROVIDER_KEY_HOSTS: {host!r} (for {name}) is not host or host:port")
            bindings.setdefault(name, []).append(
                (match.group(1).lower(), int(match.group(2)) if match.group(2) else None))
    return bindings


def key_hosts(variable: str) -> list[tuple[str, int | None, str]]:
    """Where the key in ``variable`` may be sent: ``[(host, port or None for any port, scheme or '')]``. A default
    key variable's own servers carry their scheme (``https`` for Google's endpoint; ``GEMINI_BASE_URL``'s and
    ``OPENAI_COMPAT_BASE_URL``'s as the operator wrote them); hosts of ``PROVIDER_KEY_HOSTS`` carry '' (https, or
    http to a private host ``PROVIDER_PRIVATE_NETWORKS`` allows). Empty for a variable that is no provider's default
    and that ``PROVIDER_KEY_HOSTS`` does not list: its key goes nowhere (fail closed)."""
    def server(url: str) -> tuple[str, int | None, str]:
        return (*url_host(url), url.strip().split(":", 1)[0].lower())

    listed = [(host, port, "") for host, port in key_host_bindings().get(variable, [])]
    defaults: list[tuple[str, int | None, str]] = []
    if variable == DEFAULT_KEY_VARIABLE[GEMINI]:
        defaults.append(server(GEMINI_DEFAULT_URL))
        if settings.GEMINI_BASE_URL:
            defaults.append(server(settings.GEMINI_BASE_URL))
    elif variable == DEFAULT_KEY_VARIABLE[OPENAI] and settings.OPENAI_COMPAT_BASE_URL:
        defaults.append(server(settings.OPENAI_COMPAT_BASE_URL))
    return defaults + listed


def _private_and_allowed(host: str, port: int) -> bool:
    """True when every address of ``host`` is a private one that ``PROVIDER_PRIVATE_NETWORKS`` lists."""
    from annotation.outbound import _is_public, _resolve

    try:
        addresses = _resolve(host, port)
    except (OSError, UnicodeError):
        return False
    return bool(addresses) and not any(_is_public(a) for a in addresses) and not addresses_problem(host, addresses)


def key_may_go_to(*, variable: str, url: str) -> bool:
    """True when the key in ``variable`` may be sent to ``url``: a server of :func:`key_hosts` with the same host
    and port, and the same scheme where it has one, else https (http only to a private host that
    ``PROVIDER_PRIVATE_NETWORKS`` allows)."""
    host, port = url_host(url)
    scheme = url.strip().split(":", 1)[0].lower()
    for bound_host, bound_port, bound_scheme in key_hosts(variable):
        if host != bound_host or (bound_port is not None and bound_port != port):
            continue
        if scheme == bound_scheme or (not bound_scheme and (
                scheme == "https" or _private_and_allowed(host, port))):
            return True
    return False


def _binding_label(host: str, port: int | None, scheme: str) -> str:
    label = _host_label(host, port) if port else host
    return f"{scheme}://{label}" if scheme else f"{label} (https, or http on an allowed private network)"


# --- the endpoint ---------------------------------------------------------------------------------------------
def default_base_url(provider: str) -> str:
    """The operator's base URL of ``provider`` (``GEMINI_BASE_URL``, '' for Google's; ``OPENAI_COMPAT_BASE_URL``)."""
    return settings.GEMINI_BASE_URL if provider == GEMINI else settings.OPENAI_COMPAT_BASE_URL


def default_model(provider: str) -> str:
    """The operator's model of ``provider`` (``GEMINI_MODEL``, ``OPENAI_COMPAT_MODEL``)."""
    return settings.GEMINI_MODEL if provider == GEMINI else settings.OPENAI_COMPAT_MODEL


def endpoint_resolve(*, provider: str, conf: dict | None = None, model: str = "") -> Endpoint:
    """The server, model and key one model call uses, after every rule of the module docstring.

    Args:
        provider: ``gemini`` or ``openai``.
        conf: a row's settings (``base_url``, ``api_key_env``, ``model``; other keys are ignored here); None or {}
            for the operator's defaults (rationales, suggestions).
        model: the model name when it is not in ``conf`` (a judge's ``model`` column); default ``conf["model"]``,
            then ``GEMINI_MODEL`` / ``OPENAI_COMPAT_MODEL``.

    Raises:
        ProviderSetupError: an unknown provider, a key variable outside the pattern or bound elsewhere, a
            ``base_url`` that is malformed or private, no server or model for an OpenAI-compatible provider, no
            key for Gemini (its ``field`` names the setting at fault).
    """
    in_row = "" if conf is None else "no {} in the settings and "  # a row's settings, or the operator's only
    conf = conf or {}
    if provider not in PROVIDERS:
        raise ProviderSetupError(f"unknown provider {provider!r}; use gemini or openai", field="provider")
    if error := api_key_env_error(conf):
        raise ProviderSetupError(error, field="api_key_env")
    row_url = str(conf.get("base_url") or "").strip()
    if row_url and (problem := url_address_problem(row_url, unresolved_ok=True)):
        raise ProviderSetupError(f"base_url {row_url!r}: {problem}", field="base_url")
    base_url = row_url or default_base_url(provider)
    model = model or str(conf.get("model") or "") or default_model(provider)
    if provider == OPENAI and not base_url:
        raise ProviderSetupError(in_row.format("base_url") + "OPENAI_COMPAT_BASE_URL is not set", field="base_url")
    if provider == OPENAI and not model:
        raise ProviderSetupError(in_row.format("model") + "OPENAI_COMPAT_MODEL is not set", field="model")
    named = str(conf.get("api_key_env") or "")
    variable = named or DEFAULT_KEY_VARIABLE[provider]
    key, note = key_value(variable), ""
    target = base_url or GEMINI_DEFAULT_URL
    if key and not key_may_go_to(variable=variable, url=target):
        bound = ", ".join(_binding_label(*binding) for binding in key_hosts(variable))
        over = " over http" if target.lower().startswith("http:") else ""
        note = (f"{variable} is not sent to {_host_label(*url_host(target))}{over}: it is bound to "
                f"{bound or 'no host'} "
                f"(PROVIDER_KEY_HOSTS binds hosts to a key variable, e.g. {variable}=api.example.com)")
        if named:
            raise ProviderSetupError(note, field="api_key_env")
        key = ""
    if not key and not note:  # name the variable that was read, so "no key sent" says why
        note = f"{variable} is not set"
    if provider == GEMINI and not key:
        raise ProviderSetupError(note, field="api_key_env")
    return Endpoint(provider=provider, model=model, base_url=base_url, api_key=key,
                    key_variable=variable if key else "", note=note, guarded=bool(row_url))


def endpoint_label(endpoint: Endpoint) -> str:
    """Where ``endpoint`` sends its requests and with which key, in words (connection tests, logs); never the key."""
    if endpoint.api_key:
        key = f"key from {endpoint.key_variable}"
    else:
        key = f"no key sent ({endpoint.note})" if endpoint.note else "no key sent"
    return f"{endpoint.provider} · model {endpoint.model} at {endpoint.host} · {key}"


def endpoint_availability(*, name: str, provider: str, conf: dict | None = None, model: str = "") -> Availability:
    """:func:`endpoint_resolve` as an :class:`~.base.Availability` named ``name`` (the reason when refused)."""
    try:
        endpoint_resolve(provider=provider, conf=conf, model=model)
    except ProviderUnavailable as error:
        return Availability(name, False, str(error))
    return Availability(name, True)


def chat_for(endpoint: Endpoint, *, conf: dict | None = None, temperature: float | None = None,
             max_tokens: int | None = None, audio_input: bool = True, policy: RetryPolicy | None = None):
    """The client that asks ``endpoint``'s model: a :class:`~.gemini.GeminiAudioChat` or an
    :class:`~.openai_compat.OpenAICompatAudioChat`, with the retry policy (``policy`` or the settings'), the
    provider's rate limit (``conf["requests_per_minute"]`` or ``GEMINI_REQUESTS_PER_MINUTE`` /
    ``OPENAI_COMPAT_REQUESTS_PER_MINUTE``) and ``conf["timeout_s"]`` (default ``PREPARATION_REQUEST_TIMEOUT_S``).
    """
    from .gemini import GeminiAudioChat
    from .openai_compat import OpenAICompatAudioChat

    conf = conf or {}
    common = {
        "model": endpoint.model,
        "api_key": endpoint.api_key,
        "timeout_s": float(conf.get("timeout_s") or settings.PREPARATION_REQUEST_TIMEOUT_S),
        "policy": policy or RetryPolicy.from_settings(),
        "temperature": temperature,
    }
    if endpoint.provider == GEMINI:
        per_minute = conf.get("requests_per_minute", settings.GEMINI_REQUESTS_PER_MINUTE)
        limiter = RateLimiter(key="gemini", per_minute=int(per_minute))
        chat = GeminiAudioChat(base_url=endpoint.base_url, limiter=limiter, **common)
    else:
        per_minute = conf.get("requests_per_minute", settings.OPENAI_COMPAT_REQUESTS_PER_MINUTE)
        chat = OpenAICompatAudioChat(
            base_url=endpoint.base_url, max_tokens=max_tokens, audio_input=audio_input,
            limiter=RateLimiter(key=f"openai:{endpoint.base_url}", per_minute=int(per_minute)), **common,
        )
    chat.guarded = endpoint.guarded  # a typed base URL: connect only where annotation.outbound allows
    return chat
