"""A TCP proxy that delays every byte by a fixed time each way, on its own thread.

The benchmarks' PostgreSQL runs on loopback, where a round trip costs about
0.05 ms; a team's state database is across a network, 0.5-5 ms away.  Put
this proxy in front of it to see what the round trips cost:

    port = start_delay_proxy("127.0.0.1", 5432, one_way_ms=1.0)
    # postgresql://postgres@127.0.0.1:{port}/test

Data is forwarded in order, each chunk ``one_way_ms`` after it arrived
(so a round trip gains twice that), without limiting bandwidth.
"""

from __future__ import annotations

import asyncio
import socket
import threading


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def forward() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                writer.close()
                return
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.ensure_future(forward())
    try:
        while True:
            data = await reader.read(65536)
            queue.put_nowait((loop.time() + delay, data))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
        writer.close()


# Connections forwarded so far, by the proxy's port: a benchmark prints it, to
# show that its database traffic went through the proxy at all.
FORWARDED: dict[int, int] = {}


def start_delay_proxy(host: str, port: int, one_way_ms: float) -> int:
    """Start the proxy to ``host:port`` on a free loopback port (returned); it runs
    until the process ends."""
    delay = one_way_ms / 1000
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    ready = threading.Event()

    async def serve() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                up_reader, up_writer = await asyncio.open_connection(host, port)
            except OSError:
                writer.close()
                return
            FORWARDED[mine] = FORWARDED.get(mine, 0) + 1
            await asyncio.gather(_pipe(reader, up_writer, delay), _pipe(up_reader, writer, delay))

        server = await asyncio.start_server(handle, sock=listener)
        ready.set()
        async with server:
            await server.serve_forever()

    mine = int(listener.getsockname()[1])
    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True,
                     name="delay-proxy").start()
    ready.wait(10)
    return mine
