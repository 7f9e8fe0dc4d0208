"""The server's own floor for apply's requests phase: a bare HTTP/1.1 client.

``govsync serve --latency-ms`` sleeps, then answers; one Python process does
the parsing, checks and SQLite write of every call, on the same cores as the
client.  So even a client that costs nothing cannot reach the perfect
scheduler's bound.  This client comes close to costing nothing: h11 (the
HTTP/1.1 state machine httpx itself uses) over asyncio streams, one kept-alive
connection per slot, no retries, no state, no JSON beyond the body.  It sends
``count`` independent creates (data labels) with ``parallelism`` in flight and
returns the wall time of its requests, which bench/apply/run.py sets beside
govsync's requests phase on a fresh server of its own.

    python bench/apply/bare.py URL [--count 1000] [--parallelism 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from urllib.parse import urlsplit

import h11

PATH = "/core.v1.InventoryService/CreateDataLabel"


async def _run(url: str, key: str, count: int, parallelism: int) -> float:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    pending = list(range(count))
    pending.reverse()

    async def slot() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        conn = h11.Connection(h11.CLIENT)
        while pending:
            i = pending.pop()
            body = json.dumps({"name": f"bare-{i}", "classifierType": "regex",
                               "classifierData": "[0-9]{4}"}).encode()
            writer.write(conn.send(h11.Request(method="POST", target=PATH, headers=[
                ("Host", parts.netloc), ("X-API-KEY", key), ("Accept", "application/json"),
                ("Content-Type", "application/json"), ("Content-Length", str(len(body)))]))
                + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            status = 0
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.EndOfMessage):
                    break
            if status != 200:
                raise SystemExit(f"bare client: create {i} answered {status}")
            conn.start_next_cycle()
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(slot() for _ in range(parallelism)))
    return time.perf_counter() - start


def requests_phase(url: str, key: str, count: int, parallelism: int) -> float:
    """Seconds for ``count`` creates at ``parallelism`` in flight (connections included)."""
    return asyncio.run(_run(url, key, count, parallelism))


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from common import KEY

    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=16)
    args = parser.parse_args()
    print(f"{requests_phase(args.url, KEY, args.count, args.parallelism):.2f} s")
