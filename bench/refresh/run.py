"""bench/refresh: reading every recorded object before a plan (issue 32).

For each size N: a reference server (a process, ``--latency-ms``, 50 by default)
whose storage holds N objects of bench/plan's generated project (ten kinds:
hooks, policies, suspensions, reports, spaces, connectors, their AI providers,
labels, permissions, log queries), and a state that records them all as
applied.  Measured:

* the refresh alone (``refresh.read``: List pages where a kind has a List, else
  Gets, concurrently across kinds), wall seconds (median of --runs) and API
  calls, against the
  bound of reading them one by one at Terraform's default parallelism of 10
  (N x latency / 10) -- the goal is under a tenth of it;
* a no-op ``govsync plan`` (a process) with the refresh and with
  ``--refresh=false``, wall seconds (median of --runs), at each size up to
  --plan-max.

Usage: python bench/refresh/run.py [--sizes 1000,10000] [--latency-ms 50] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plan"))

from common import KEY, compile_package, start_server  # noqa: E402
from generate import STAMP, applied_entries, write  # noqa: E402

from govsync.api.kinds import BY_KIND  # noqa: E402
from govsync.refresh.reader import LANES  # noqa: E402
from govsync.state import empty_snapshot, open_store  # noqa: E402


def populate(db: str, entries: list) -> None:  # type: ignore[type-arg]
    """The server's storage holds every recorded object, as its create answered it."""
    from govsync.server import Store

    store = Store(db)
    try:
        by_kind: dict[str, list[tuple[str, dict[str, object], str | None]]] = {}
        for entry in entries:
            kind = BY_KIND[entry.kind]
            body = {kind.create.id_field: entry.id, **(entry.spec or {}), "createdAt": STAMP,
                    "updatedAt": STAMP}
            key = body.get("connectorId") if entry.kind == "ConnectorAIProvider" else None
            by_kind.setdefault(entry.kind, []).append((entry.id, body, key))  # type: ignore[arg-type]
        for kind, items in by_kind.items():
            store.put_many(kind, items)
    finally:
        store.close()


async def refresh_once(url: str, entries: list) -> tuple[float, int, int]:  # type: ignore[type-arg]
    from govsync import refresh
    from govsync.api.client import AsyncClient
    from govsync.api.transport import open_transport

    by_address = {e.address: e for e in entries}
    way = open_transport(url, connections=LANES, reads=True, insecure_http=True)
    async with AsyncClient(url, KEY, transport=way) as client:
        began = time.perf_counter()
        reading = await refresh.read(client, by_address)
        seconds = time.perf_counter() - began
    assert reading.complete, reading.summary()
    return seconds, reading.calls, len(reading.live)


def plan_seconds(folder: str, url: str, state: str, workspace: str, refresh: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    env.update(GOVSYNC_API_KEY=KEY, GOVSYNC_STATE=state, GOVSYNC_WORKSPACE=workspace,
               GOVSYNC_ENDPOINT=url)
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "govsync", "plan", "manifests",
                           f"--refresh={'true' if refresh else 'false'}", "--insecure-http"],
                          cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode not in (0, 2):
        raise SystemExit(f"plan failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--plan-max", type=int, default=1000,
                        help="the largest size whose no-op plan is timed")
    args = parser.parse_args()
    compile_package()
    print(f"# bench/refresh: latency {args.latency_ms} ms per call; {platform.python_version()}"
          f" on {platform.machine()}, {os.cpu_count()} CPUs")
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            write(size, os.path.join(folder, "manifests"))
            workspace = f"bench-{uuid.uuid4().hex[:8]}"
            entries = applied_entries(os.path.join(folder, "manifests"),
                                      empty_snapshot(workspace), responses=True)
            db = os.path.join(folder, "server.db")
            populate(db, entries)
            state = os.path.join(folder, "state.db")
            with open_store(state) as store:
                store.snapshot(workspace)
                store.put_many(workspace, entries)
            proc, url = start_server(db, latency_ms=args.latency_ms, seed=True)
            try:
                times = []
                for _ in range(args.runs):
                    seconds, calls, read = asyncio.run(refresh_once(url, entries))
                    times.append(seconds)
                seconds = statistics.median(times)
                bound = size * args.latency_ms / 1000 / 10
                print(f"refresh of {size:,} objects: {seconds:.2f} s (median of {len(times)}; "
                      f"{min(times):.2f}-{max(times):.2f}), {calls} calls, {read:,} "
                      f"read; bound N x {args.latency_ms} ms / 10 = {bound:.1f} s: "
                      f"{seconds / bound:.1%} of it (goal: under 10%); load average "
                      f"{os.getloadavg()[0]:.1f}")
                if size <= args.plan_max:
                    # Interleaved, run by run: the machine's load moves both alike.
                    pairs = [(plan_seconds(folder, url, state, workspace, True),
                              plan_seconds(folder, url, state, workspace, False))
                             for _ in range(args.runs)]
                    with_refresh = statistics.median(w for w, _ in pairs)
                    without = statistics.median(o for _, o in pairs)
                    print(f"no-op plan of {size:,} objects (median of {args.runs}): "
                          f"{with_refresh:.2f} s with the "
                          f"refresh, {without:.2f} s with --refresh=false "
                          f"({with_refresh / without:.2f}x; goal: within 1.5x)")
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
