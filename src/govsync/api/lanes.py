"""A read lane: one keep-alive HTTP/1.1 connection as an httpx transport, over asyncio
streams and h11, for the many reads a refresh has in flight at once.

httpcore, httpx's own transport, spent 1.6 ms of CPU a call here (its pool, and
anyio's cancel scopes around every read and write): 0.33 s of the 209 calls that
refresh 1,000 recorded objects, more than the refresh's waiting.  The same
requests over asyncio streams with h11 (the HTTP/1.1 parser httpcore itself
uses) take 0.47 ms a call.  aiohttp takes as little a call but 0.25 s to import
(it builds two TLS contexts at import), the whole of a small refresh.  Requests
and responses stay httpx's, so the client's retries and errors are unchanged:
a connection that could not be made is ``httpx.ConnectError`` or
``ConnectTimeout`` (nothing was sent); anything after is a read or write error,
or a protocol error (sent, no answer).  A connection is never shared between two
requests at once (a lane carries one call at a time) and is dropped after any
failure, a cancelled call, or an answer that does not leave it reusable.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

import h11
import httpx

# What is read from the socket at a time.
_CHUNK = 65536


class StreamLane(httpx.AsyncBaseTransport):
    """One connection, opened when first needed and again after a failure."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._tls = tls
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._h11: h11.Connection | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        done = False
        try:
            if not self._reusable():
                await self._connect(request.url, timeouts.get("connect"))
            response = await self._exchange(request, timeouts)
            done = True
            return response
        finally:
            if not done:  # failed or cancelled midway: the connection's state is unknown
                self._drop()

    async def warm(self, url: httpx.URL, timeout: float | None) -> None:
        """Open the connection before a call needs it.  A failure is left to that call,
        which connects again and says why it could not."""
        with contextlib.suppress(httpx.ConnectError, httpx.ConnectTimeout):
            await self._connect(url, timeout)

    def _reusable(self) -> bool:
        return (self._writer is not None and self._reader is not None
                and not self._reader.at_eof() and not self._writer.is_closing())

    async def _connect(self, url: httpx.URL, timeout: float | None) -> None:
        self._drop()
        https = url.scheme == "https"
        host = url.host
        port = url.port or (443 if https else 80)
        try:
            async with asyncio.timeout(timeout):
                self._reader, self._writer = await asyncio.open_connection(
                    host, port, ssl=self._tls if https else None,
                    server_hostname=host if https else None, limit=_CHUNK)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"connecting to {host}:{port} timed out") from exc
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}") from exc
        self._h11 = h11.Connection(h11.CLIENT)

    async def _exchange(self, request: httpx.Request,
                        timeouts: dict[str, float | None]) -> httpx.Response:
        conn, reader, writer = self._h11, self._reader, self._writer
        assert conn is not None and reader is not None and writer is not None
        content = request.content
        try:
            parts = [conn.send(h11.Request(method=request.method, target=request.url.raw_path,
                                           headers=request.headers.raw))]
            if content:
                parts.append(conn.send(h11.Data(data=content)))
            parts.append(conn.send(h11.EndOfMessage()))
            data = b"".join(p for p in parts if p)
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        try:
            async with asyncio.timeout(timeouts.get("write")):
                writer.write(data)
                await writer.drain()
        except TimeoutError as exc:
            raise httpx.WriteTimeout("writing the request timed out") from exc
        except OSError as exc:
            raise httpx.WriteError(f"{type(exc).__name__}: {exc}") from exc
        head: h11.Response | None = None
        body: list[bytes] = []
        read_timeout = timeouts.get("read")
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is h11.NEED_DATA:
                try:
                    async with asyncio.timeout(read_timeout):
                        chunk = await reader.read(_CHUNK)
                except TimeoutError as exc:
                    raise httpx.ReadTimeout("reading the answer timed out") from exc
                except OSError as exc:
                    raise httpx.ReadError(f"{type(exc).__name__}: {exc}") from exc
                if not chunk and head is None:
                    raise httpx.RemoteProtocolError(
                        "Server disconnected without sending a response.")
                conn.receive_data(chunk)
            elif isinstance(event, h11.InformationalResponse):
                continue
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise httpx.RemoteProtocolError("the server closed the connection mid-answer")
        assert head is not None
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:  # "Connection: close", or an answer that did not wait for the request
            self._drop()
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1",
                                      "reason_phrase": bytes(head.reason)}
        return httpx.Response(head.status_code, headers=list(head.headers),
                              content=b"".join(body), request=request, extensions=extensions)

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
        self._h11 = None

    async def aclose(self) -> None:
        writer = self._writer
        self._drop()
        if writer is not None:
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
