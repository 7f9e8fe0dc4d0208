"""How the dashboard (``govsync ui``) and the agent are served: uvicorn, with what it
lacks against clients that never finish (issue 30).

* ``GuardedH11``: uvicorn's HTTP/1.1, with at most ``MAX_CONNECTIONS`` open at
  once, so idle clients cannot use up the process's files, and
  ``REQUEST_SECONDS`` for a request's headers and body to arrive whole (then
  the connection is closed); idle keep-alive connections close after
  ``KEEP_ALIVE_SECONDS``, and a request's head is at most ``MAX_HEAD`` bytes.
  A connection accepted at the cap closes the idlest one instead (the one
  waiting longest for a request to arrive whole: one that sent nothing, part
  of a request, or nothing since its last answer); only where every other
  connection's request is being answered is the new one closed at once.  So
  connections that send nothing, however many and however often renewed,
  never keep a probe out: it is the newest, and sends its request at once
  (issue 41).
* ``LoopbackOnly``: without a token, a request must name this machine in its
  ``Host`` (127.0.0.1, localhost, [::1], any port), so that a web page whose
  name now resolves to 127.0.0.1 (DNS rebinding) cannot read the pages.
* ``config``: the uvicorn settings of both, leaving the process's logging as it is.
"""

from __future__ import annotations

import asyncio
import ipaddress

import h11
import uvicorn
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_CONNECTIONS = 100
REQUEST_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
MAX_HEAD = 16 * 1024


class GuardedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a connection cap and a request timeout."""

    _timer: asyncio.TimerHandle | None = None
    # Since when (loop time) this connection waits for a request to arrive whole;
    # None while one is answered.
    _waiting: float | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > MAX_CONNECTIONS:
            idlest = self._idlest()
            if idlest is None:
                transport.abort()  # every other one is being answered: closed at once
                return
            idlest._close_waiting()  # at the cap, the idlest makes way
        self._await_request()

    def _idlest(self) -> GuardedH11 | None:
        """The connection (not this one) waiting longest for its request, if any."""
        waiting = [c for c in self.connections if c is not self
                   and isinstance(c, GuardedH11) and c._waiting is not None
                   and not c.transport.is_closing()]
        return min(waiting, key=lambda c: c._waiting or 0.0, default=None)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._stop_timer()  # the request arrived whole
            self._waiting = None

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state == h11.IDLE:
            self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        self._waiting = None
        super().connection_lost(exc)

    def _await_request(self) -> None:
        self._stop_timer()
        self._waiting = self.loop.time()
        self._timer = self.loop.call_later(REQUEST_SECONDS, self._timed_out)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        self._close_waiting()

    def _close_waiting(self) -> None:
        """Close this connection, which waits for a request (nothing is being answered)."""
        self._stop_timer()
        self._waiting = None
        if not self.transport.is_closing():
            self.transport.close()


def config(app: ASGIApp) -> uvicorn.Config:
    """The uvicorn settings of the dashboard and the agent (one worker, no access log,
    proxy headers not trusted, the process's logging left alone)."""
    return uvicorn.Config(
        app, http=GuardedH11, workers=1, log_level="warning", log_config=None,
        access_log=False, proxy_headers=False, server_header=False, lifespan="off",
        limit_concurrency=MAX_CONNECTIONS + 1, timeout_keep_alive=KEEP_ALIVE_SECONDS,
        h11_max_incomplete_event_size=MAX_HEAD)


def loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets) is this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(value: str) -> str:
    """The host of a ``Host`` header (``[::1]:8420`` -> ``::1``)."""
    if value.startswith("["):
        return value[1:].partition("]")[0]
    return value.rpartition(":")[0] if value.count(":") == 1 else value


class LoopbackOnly:
    """ASGI middleware: a request whose Host is not this machine gets 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not loopback(host_of(Headers(scope=scope).get("host",
                                                                                      ""))):
            refusal = PlainTextResponse(
                "This server answers requests to 127.0.0.1, localhost or [::1] only: without "
                "a token, no other name may reach it.\n", status_code=400)
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
