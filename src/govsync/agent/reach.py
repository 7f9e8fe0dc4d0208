"""How a notification sink is reached (issue 30): where the agent's operator allows
sinks to send (``SinkPolicy``: ``--allow-sink-host``, ``--github-api``; the
repository's project file cannot widen it), which proxy the environment names,
and one deadline for a whole attempt (``DeadlineBackend``: plain sockets whose
every step is cut short at it, so a sink that trickles its answer, headers
included, still ends in time).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpcore
import httpx

from govsync.agentconfig import GITHUB_API, Sink, SinkType
from govsync.envvars import AGENT_GITHUB_API, AGENT_SINK_HOSTS, CREDENTIALS, OWN
from govsync.errors import AgentError
from govsync.redact import url as safe_url
from govsync.served import loopback
from govsync.values import SecretRef


class Refused(AgentError):
    """A sink that the agent's operator does not allow: it is not tried again."""


def host_entry(text: str) -> str:
    """One ``--allow-sink-host`` value, normalised: ``HOST`` (any port) or ``HOST:PORT``
    (``[::1]:PORT`` for IPv6); ValueError for anything else."""
    value = text.strip().lower()
    if "://" in value or "/" in value or "@" in value or not value:
        raise ValueError(f"--allow-sink-host {text!r}: write a host name or address, with "
                         ":PORT or without (such as hooks.slack.com or "
                         "alerts.example.com:8443)")
    host, port = _split_host(value)
    if not host or (port is not None and not 0 < port < 65536):
        raise ValueError(f"--allow-sink-host {text!r}: write HOST or HOST:PORT")
    return _entry(host, port)


def _split_host(value: str) -> tuple[str, int | None]:
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    else:
        host, port = value, ""
    if port and not port.isdigit():
        return "", None
    return host, int(port) if port else None


def _entry(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if port is None else f"{shown}:{port}"


@dataclass(frozen=True)
class SinkPolicy:
    """Where this agent's sinks may send, and which variables they may read: the
    operator's word (``--allow-sink-host``, ``--github-api``), never the project
    file's.  ``hosts``: ``host_entry`` values; ``credentials``: values that no sink is
    given (govsync's API key, its state URL...), whatever variable holds them."""

    hosts: frozenset[str] = frozenset()
    github_api: str = GITHUB_API
    credentials: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def of(cls, hosts: Iterable[str], github_api: str | None,
           environ: Mapping[str, str]) -> SinkPolicy:
        """The policy of the command line's values (ValueError naming a bad one)."""
        api = (github_api or GITHUB_API).rstrip("/")
        if not api.startswith(("https://", "http://")):
            raise ValueError(f"--github-api {github_api!r}: write the GitHub API's URL, such "
                             f"as {GITHUB_API}")
        entries = frozenset(host_entry(h) for text in hosts for h in text.replace(",", " ")
                            .split())
        held = (environ.get(v) for v in CREDENTIALS)
        return cls(entries, api, frozenset(v for v in held if v))

    def refusal(self, sink: Sink, environ: Mapping[str, str], *,
                keys: Iterable[str | None] = ()) -> str | None:
        """Why this agent may not send to ``sink`` (None: it may).  ``keys``: more
        values no sink is given (the API key of the environment it notifies about)."""
        held = self.credentials | {k for k in keys if k}
        for what, value in (("url", sink.url), ("secret", sink.secret), ("token", sink.token)):
            if not isinstance(value, SecretRef):
                continue
            if value.variable in OWN or environ.get(value.variable) in held:
                return (f"{sink.type} sink {sink.name}: its {what} reads {value.variable}, "
                        "which holds one of govsync's own credentials: a sink is given only "
                        "a variable of its own")
        if sink.type == SinkType.GITHUB:
            if sink.api_url is not None and sink.api_url.rstrip("/") != self.github_api:
                return (f"github sink {sink.name}: apiUrl {safe_url(sink.api_url)} is not the "
                        f"GitHub API this agent was given ({self.github_api}): its operator "
                        f"sets it with --github-api (or {AGENT_GITHUB_API})")
            return None
        url = environ.get(sink.url.variable) if isinstance(sink.url, SecretRef) else sink.url
        if not url:
            return None  # not set: said when it is sent
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            return f"{sink.type} sink {sink.name}: its url is not a URL"
        if parsed.scheme not in ("http", "https") or not parsed.host:
            return f"{sink.type} sink {sink.name}: its url is not an http:// or https:// URL"
        if not self.allows(parsed.host, parsed.port or (443 if parsed.scheme == "https"
                                                        else 80)):
            host = _entry(parsed.host, parsed.port)
            return (f"{sink.type} sink {sink.name}: host {host} is not one this agent may "
                    f"send to: its operator allows it with --allow-sink-host {host} (or "
                    f"{AGENT_SINK_HOSTS})")
        return None

    def allows(self, host: str, port: int) -> bool:
        host = host.lower()
        return _entry(host, None) in self.hosts or _entry(host, port) in self.hosts


def proxy_of(scheme: str, host: str, environ: Mapping[str, str]) -> httpcore.Proxy | None:
    """The HTTP proxy the environment names for ``scheme`` (HTTPS_PROXY, HTTP_PROXY,
    ALL_PROXY, and NO_PROXY's exceptions, as curl reads them); never for loopback."""
    def get(name: str) -> str:
        return environ.get(name.lower()) or environ.get(name) or ""

    url = get(f"{scheme.upper()}_PROXY") or get("ALL_PROXY")
    if not url or loopback(host):
        return None
    for entry in get("NO_PROXY").replace(",", " ").split():
        name = entry.lower().lstrip(".").split(":")[0]
        if entry == "*" or host.lower() == name or host.lower().endswith("." + name):
            return None
    return httpcore.Proxy(url)


class DeadlineBackend(httpcore.NetworkBackend):
    """Plain sockets (httpcore's), every step cut short at one deadline: a sink that
    trickles its answer, headers included, byte by byte still ends in time."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.inner = httpcore.SyncBackend()

    def left(self, timeout: float | None) -> float:
        remaining = self.until - time.monotonic()
        if remaining <= 0:
            raise httpcore.ReadTimeout("the deadline passed")
        return remaining if timeout is None else min(timeout, remaining)

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self.inner.connect_tcp(
            host, port, self.left(timeout), local_address, socket_options), self)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("no unix sockets")

    def sleep(self, seconds: float) -> None:
        time.sleep(min(seconds, max(0.0, self.until - time.monotonic())))


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, backend: DeadlineBackend) -> None:
        self.inner = inner
        self.backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, self.backend.left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, self.backend.left(timeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return DeadlineStream(self.inner.start_tls(
            ssl_context, server_hostname, self.backend.left(timeout)), self.backend)

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)
