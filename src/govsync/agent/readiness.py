"""Whether the agent is ready (``/readyz``): its first round done, its repository
cloned or fetched in the last round, and, when its environments name endpoints,
at least one of them reachable in the last round.

An endpoint is reachable when a TCP connection to its host and port opens within
``PROBE_SECONDS`` (plans read the state, not the API, so the round itself does
not tell); ``local`` (the embedded server) always is.  ``/readyz`` says only
ready or not: why not is the environments' status and the log's.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

PROBE_SECONDS = 3.0
PORTS = {"http": 80, "https": 443}


def reachable(endpoint: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether a connection to ``endpoint``'s host and port opens."""
    if endpoint == "local":
        return True
    try:
        parts = urlsplit(endpoint)
        host, port = parts.hostname, parts.port or PORTS.get(parts.scheme.lower())
    except ValueError:
        return False
    if not host or port is None:
        return False
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def ready(*, fetched: bool, endpoints: Iterable[str | None]) -> bool:
    """The last round's readiness: the repository fetched (or none to fetch), and one
    named endpoint reachable (or none named)."""
    if not fetched:
        return False
    named = sorted({e for e in endpoints if e})
    if not named:
        return True
    if any(reachable(e) for e in named):
        return True
    log.warning("agent: not ready: no endpoint of its environments is reachable (%d tried)",
                len(named))
    return False
