"""An HTTP protocol for uvicorn whose connections the app can drop.

Fault injection has to produce the failure real networks have: the server
did the work, then the connection vanished without a response.  ASGI has no
way to say "abort the TCP connection", so ``run()`` gives uvicorn this
protocol class: every connection registers itself under its peer address
(what the app sees as ``scope["client"]``), and the app calls ``drop()`` on
it.  ``drop()`` aborts the transport (the peer sees a reset, not a clean
close) and marks the request cycle disconnected at once, so uvicorn neither
sends a response nor logs an error for the app returning without one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

Peer = tuple[str, int]


class DroppableH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, registered in ``CONNECTIONS`` while open."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.client is not None:
            CONNECTIONS[(self.client[0], self.client[1])] = self

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client is not None:
            peer = (self.client[0], self.client[1])
            if CONNECTIONS.get(peer) is self:
                del CONNECTIONS[peer]
        super().connection_lost(exc)

    def drop(self) -> None:
        """Abort the connection: no response, the peer sees a reset."""
        if self.cycle is not None:
            self.cycle.disconnected = True
        self.transport.abort()


# Open connections of this process by peer address.
CONNECTIONS: dict[Peer, DroppableH11Protocol] = {}


def connection_of(scope: dict[str, Any] | Any) -> DroppableH11Protocol | None:
    """The droppable connection that carries a request, if it has one."""
    client = scope.get("client")
    if not client:
        return None
    return CONNECTIONS.get((client[0], client[1]))
