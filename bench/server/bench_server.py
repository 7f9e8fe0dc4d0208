"""Write throughput of the reference server over loopback.

Starts ``govsync serve --db <tmpfile>`` (one uvicorn worker) on a free
loopback port, then httpx AsyncClients keep CONCURRENCY requests in flight:
N CreateSpace calls, then N CreateHook calls.  Prints writes/s for each, and
checks that every object was stored.

    python bench/server/bench_server.py [-n 5000] [--concurrency 16] [--shared-client]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import KEY, cpu_seconds, start_server  # noqa: E402

HEADERS = {"X-API-KEY": KEY}


async def run_writes(clients: list[httpx.AsyncClient], path: str,
                     body: Callable[[int], dict[str, Any]], n: int,
                     server_pid: int) -> dict[str, float]:
    """Sends n writes, one in flight per worker (worker w on ``clients[w % len]``).

    Returns writes per second of wall time and, where /proc tells, per second
    of the server process's CPU time (what the server alone could sustain on
    one core: on a shared machine, the wall figure also measures the others).
    """
    # Bodies are encoded before the clock starts: the client's own JSON work
    # is not the server's throughput.
    payloads = [json.dumps(body(i)).encode() for i in range(n)]
    headers = {"Content-Type": "application/json"}
    next_index = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal next_index
        while next_index < n:
            i = next_index
            next_index += 1
            response = await client.post(path, content=payloads[i], headers=headers)
            if response.status_code != 200:
                raise SystemExit(f"{path}: {response.status_code} {response.text}")

    cpu_before = cpu_seconds(server_pid)
    started = time.perf_counter()
    await asyncio.gather(*(worker(c) for c in clients))
    result = {"wall": n / (time.perf_counter() - started)}
    cpu_after = cpu_seconds(server_pid)
    if cpu_after > cpu_before:
        result["server_cpu"] = n / (cpu_after - cpu_before)
    return result


async def bench(base: str, n: int, concurrency: int, shared: bool,
                server_pid: int) -> dict[str, dict[str, float]]:
    """CreateSpace then CreateHook throughput with `concurrency` requests in flight.

    By default each of the `concurrency` workers has its own AsyncClient (one
    keep-alive connection each): httpcore's connection pool spends time
    quadratic in the requests waiting on it, and with 16 requests on one
    pool the client, not the server, is what the benchmark would measure.
    ``shared`` puts every worker on one AsyncClient instead.
    """
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    count = 1 if shared else concurrency
    clients = [httpx.AsyncClient(base_url=base, headers=HEADERS, limits=limits, timeout=30)
               for _ in range(count)]
    workers = [clients[w % count] for w in range(concurrency)]
    try:
        # Warm up connections and code paths (not measured).
        await run_writes(workers, "/core.v1.SpaceService/CreateSpace",
                         lambda i: {"name": f"warm-{i}"}, concurrency * 4, server_pid)
        spaces = await run_writes(
            workers, "/core.v1.SpaceService/CreateSpace",
            lambda i: {"name": f"space-{i}", "description": "benchmark space",
                       "terminationProtection": i % 2 == 0},
            n, server_pid)
        hooks = await run_writes(
            workers, "/core.v1.HookService/CreateHook",
            lambda i: {"name": f"hook_{i}", "description": "benchmark hook",
                       "code": "export default function hook(input) { return input; }\n", "timeoutMs": 5000,
                       "allowlistedEnvironmentVariables": ["HOME", "PATH"],
                       "allowlistedNetworkHosts": ["api.example.com"]},
            n, server_pid)
        objects = (await clients[0].get("/_govsync/objects")).json()
        assert len(objects["Space"]) == n + concurrency * 4, len(objects["Space"])
        assert len(objects["Hook"]) == n, len(objects["Hook"])
    finally:
        for client in clients:
            await client.aclose()
    return {"CreateSpace": spaces, "CreateHook": hooks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="writes per operation")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--shared-client", action="store_true",
                        help="all workers on one AsyncClient (measures httpcore's pool too)")
    args = parser.parse_args()
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(str(Path(tmp) / "bench.db"), seed=False, wait=30)
        try:
            results = asyncio.run(bench(url, args.n, args.concurrency,
                                        args.shared_client, proc.pid))
        finally:
            proc.terminate()
            proc.wait(timeout=15)
    print(f"machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"n={args.n} per operation, concurrency {args.concurrency} "
          f"({'one shared AsyncClient' if args.shared_client else 'one AsyncClient per worker'}), "
          f"one uvicorn worker, SQLite file (WAL)")
    print(f"load average before: {load_before}")
    for op, rate in results.items():
        line = f"{op}: {rate['wall']:,.0f} writes/s"
        if "server_cpu" in rate:
            line += f" ({rate['server_cpu']:,.0f} writes per second of server CPU)"
        print(line)


if __name__ == "__main__":
    main()
