"""An API endpoint: its identity, and the place it leads to.  The one way two endpoints
are compared (issue 41).

``identity(url)`` is what names an endpoint, in one spelling, without what
authenticates to it: the scheme and host without case, the host as IDNA and
without its trailing dots, an IP address in its canonical form, the scheme's
default port left out, the path with its dot segments resolved, repeated
slashes made one and trailing slashes dropped, and no user info, query or
fragment.  The state records it, and ``same`` compares two by it: the state's
recorded endpoint against the configured one (``--allow-endpoint-change``), the
operator's ``--allow-endpoint`` list, the endpoint an operator accepted a
workspace onto.  A state recorded before this spelling (``redact``-era: the URL
less its credentials and trailing slash) compares equal to its own endpoint,
as both sides are taken through ``identity``.

``Places`` decides whether two endpoints are one governed place
(``governance.governors``).  There an endpoint written another way must not
escape the approvals of the workspace that governs it, so the question is
wider than the spelling: two endpoints are one place when their identities
are equal, or when they have the same port and their hosts resolve to a
common address (``localhost`` and ``127.0.0.1``, a name and its address;
every loopback and unspecified address, and this machine's name, are this
machine).  Names are resolved concurrently, within ``RESOLVE_SECONDS`` in all.
A host that does not resolve in that time, or at all, leaves the question
open, and an open question is answered the safe way: the same place (its
first apply then needs the governing workspace's approvals; an endpoint whose
name does not resolve cannot be reached anyway).
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

# The whole time the names of one comparison may take to resolve.
RESOLVE_SECONDS = 3.0
DEFAULT_PORTS = {"http": 80, "https": 443}
# What every loopback and unspecified address, and this machine's own name, are.
THIS_MACHINE = "(this machine)"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def identity(endpoint: str) -> str:
    """``endpoint`` in its one spelling, without credentials (see the module's text).
    Not a URL (``local``): as given, less surrounding space and trailing slashes."""
    text = endpoint.strip()
    if not _SCHEME.match(text):
        return text.rstrip("/")
    parsed = _parse(text)
    if parsed is None:
        return _rough(text)
    scheme, host, port, path = parsed
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != DEFAULT_PORTS.get(scheme):
        shown += f":{port}"
    return f"{scheme}://{shown}{path}"


def same(one: str | None, other: str | None) -> bool:
    """Whether two endpoints (either may be a recorded identity) name one endpoint."""
    if one is None or other is None:
        return one is other
    return identity(one) == identity(other)


def _parse(text: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of a URL, each normalised; None if it cannot be read."""
    from urllib.parse import urlsplit  # loaded by the client already; not by validate

    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = _host(parts.hostname or "")
    if port is None:
        port = DEFAULT_PORTS.get(scheme)
    return scheme, host, port, _path(parts.path)


def _rough(text: str) -> str:
    """An endpoint that is not a valid URL (a port that is not a number): the URL less
    its credentials, query, fragment and trailing slashes, the scheme and host lower."""
    value = re.sub(r"(?i)^([a-z][a-z0-9+.\-]*://)[^/@?#]*@", r"\1", text)
    value = value.split("?", 1)[0].split("#", 1)[0].rstrip("/")
    head, sep, rest = value.partition("://")
    netloc, slash, path = rest.partition("/")
    return f"{head.lower()}{sep}{netloc.lower()}{slash}{path}".rstrip("/")


def _host(host: str) -> str:
    """A host without case, escapes or trailing dots, as IDNA; an IP in its one form."""
    from urllib.parse import unquote

    host = unquote(host).lower().rstrip(".")
    address = _address_literal(host)
    if address is not None:
        return address
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    return host


def _address_literal(host: str) -> str | None:
    """The canonical text of an IP address written as the host (the forms the system's
    resolver takes too: ``127.1``, ``0x7f.0.0.1``), None for a name."""
    import socket

    if ":" in host:
        try:
            return socket.inet_ntop(socket.AF_INET6,
                                    socket.inet_pton(socket.AF_INET6, host.split("%", 1)[0]))
        except (OSError, ValueError):
            return None
    last = host.rsplit(".", 1)[-1]
    if not last or not (last.isdigit() or last.startswith("0x")):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def _path(path: str) -> str:
    """The path with unreserved characters unescaped (other escapes in upper case), its
    dot segments resolved (RFC 3986, 5.2.4), repeated and trailing slashes dropped."""
    def unescape(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else f"%{match.group(1).upper()}"

    segments: list[str] = []
    for segment in _ESCAPE.sub(unescape, path).split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if segments:
                segments.pop()
            continue
        segments.append(segment)
    return "".join(f"/{s}" for s in segments)


# -- one place ----------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """Where an endpoint leads: its identity, and for a URL its port and the addresses
    its host resolves to (None: not resolved, in time or at all)."""

    identity: str
    port: int | None = None
    addresses: frozenset[str] | None = None
    url: bool = False

    def same(self, other: Place) -> bool:
        """Whether the two are one place (an open question answers yes)."""
        if self.identity == other.identity:
            return True
        if not (self.url and other.url) or self.port != other.port:
            return False
        if self.addresses is None or other.addresses is None:
            return True
        return bool(self.addresses & other.addresses)


class Places:
    """The places of some endpoints; their names are resolved together (within
    ``seconds``) the first time a comparison needs them, not where identities decide."""

    def __init__(self, endpoints: Iterable[str | None], *,
                 seconds: float = RESOLVE_SECONDS) -> None:
        self._parsed: dict[str, tuple[str, str, int | None, str] | None] = {}
        for endpoint in endpoints:
            if endpoint and endpoint not in self._parsed:
                text = endpoint.strip()
                self._parsed[endpoint] = _parse(text) if _SCHEME.match(text) else None
        self._seconds = seconds
        self._resolved: dict[tuple[str, int | None], frozenset[str]] | None = None

    def same(self, one: str | None, other: str | None) -> bool:
        """Whether ``one`` and ``other`` (both given to the constructor) are one place."""
        if not one or not other:
            return False
        if identity(one) == identity(other):
            return True
        return self.place(one).same(self.place(other))

    def place(self, endpoint: str) -> Place:
        """Where ``endpoint`` (given to the constructor) leads."""
        found = self._parsed[endpoint]
        if found is None:
            return Place(identity(endpoint))
        _, host, port, _ = found
        if self._resolved is None:
            hosts = {(p[1], p[2]) for p in self._parsed.values() if p is not None and p[1]}
            self._resolved = resolve(hosts, self._seconds)
        addresses = self._resolved.get((host, port)) if host else None
        return Place(identity(endpoint), port, addresses, url=True)


def resolve(hosts: Iterable[tuple[str, int | None]], seconds: float = RESOLVE_SECONDS
            ) -> dict[tuple[str, int | None], frozenset[str]]:
    """The addresses each (host, port) resolves to, all looked up at once; a host that
    did not resolve within ``seconds`` (or at all) is left out.  Loopback and
    unspecified addresses, and those of this machine's name, are ``THIS_MACHINE``."""
    import socket

    wanted = {*hosts}
    found: dict[tuple[str, int | None], frozenset[str]] = {}
    lock = threading.Lock()
    mine: set[str] = set()

    def look_up(host: str, port: int | None) -> None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError, ValueError):
            return
        with lock:
            found[(host, port)] = frozenset(_address(str(i[4][0])) for i in infos)

    def this_machine() -> None:
        try:
            name = socket.gethostname()
            infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError, ValueError):
            return
        with lock:
            mine.update(_address(str(i[4][0])) for i in infos)

    threads = [threading.Thread(target=look_up, args=key, daemon=True,
                                name=f"resolve:{key[0]}") for key in sorted(wanted, key=str)]
    threads.append(threading.Thread(target=this_machine, daemon=True, name="resolve:self"))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + seconds
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return {key: frozenset(THIS_MACHINE if a in mine else a for a in addresses)
                for key, addresses in found.items()}


def _address(text: str) -> str:
    """An address as places compare it: IPv4 for an IPv4-mapped IPv6 address, no zone,
    ``THIS_MACHINE`` for a loopback or unspecified one."""
    text = text.split("%", 1)[0].lower()
    if text.startswith("::ffff:") and "." in text:
        text = text.removeprefix("::ffff:")
    if text.startswith("127.") or text in ("0.0.0.0", "::1", "::"):
        return THIS_MACHINE
    return text
