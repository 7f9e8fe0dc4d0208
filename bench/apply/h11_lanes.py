"""What a lighter HTTP stack would gain apply: govsync with h11 lanes (a what-if).

Runs the ``govsync`` command line with each of the client's lanes (one
kept-alive connection per call in flight) replaced by h11 over asyncio
streams, as bench/apply/bare.py sends its calls, in place of httpx's
transport, httpcore and anyio.  Everything else is govsync's own: the plan,
the live check, the state writes, the retry policy, the JSON.  The difference
between this process and a plain ``govsync apply`` on a fresh server is the
most that replacing the client's HTTP stack could gain.

For measurement only: plain http://, no proxy, no TLS, no timeouts, and a
dropped connection is not mapped to every error govsync's retry policy tells
apart.  It replaces the client's private lanes (``AsyncClient._lanes``), so
it follows that code; the test of the benchmarks runs it, so a change that
breaks it is seen.

    python bench/apply/h11_lanes.py [govsync arguments...]   # e.g. -q apply DIR --auto-approve
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

# As govsync's entry point does before httpx is imported: without it, httpx
# imports its own command line (rich, pygments), which govsync never pays.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import h11  # noqa: E402
import httpx  # noqa: E402

import govsync.api.client as client  # noqa: E402


class Lane:
    """One connection, in place of a lane's httpx transport: h11 over asyncio streams,
    opened on first use.  The client reads and closes what it returns as it does an
    httpx transport's answer."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
            self.conn = h11.Connection(h11.CLIENT)
        reader, writer = self.streams
        conn = self.conn
        writer.write(conn.send(h11.Request(method=request.method, target=request.url.raw_path,
                                           headers=list(request.headers.raw)))
                     + conn.send(h11.Data(data=request.content)) + conn.send(h11.EndOfMessage()))
        status, headers, chunks = 0, [], []
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    await self.aclose()
                    raise httpx.RemoteProtocolError("the server closed the connection")
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                status, headers = event.status_code, list(event.headers)
            elif isinstance(event, h11.Data):
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
        else:
            await self.aclose()
        return httpx.Response(status, headers=headers, content=b"".join(chunks))

    async def aclose(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


def patch() -> None:
    """Every client made from now on with lanes gets h11 lanes."""
    init = client.AsyncClient.__init__

    def __init__(self: Any, base_url: str, *args: Any, lanes: int = 1, **kw: Any) -> None:
        init(self, base_url, *args, lanes=lanes, **kw)
        if self._lanes is not None:
            url = httpx.URL(base_url)
            self._lanes = asyncio.Queue()
            for _ in range(lanes):
                self._lanes.put_nowait(Lane(url.host, url.port or 80))

    client.AsyncClient.__init__ = __init__  # type: ignore[method-assign]


if __name__ == "__main__":
    patch()
    from govsync.cli import main

    sys.argv[0] = "govsync"
    main()
