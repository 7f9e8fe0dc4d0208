"""bench/scale: state backends, plan and the reference server at up to 100,000 objects.

Issue 12, goal 4 (state backends and plan stay linear) and goal 5 (the
reference server stays at >= 1,000 writes/s with 100,000 stored objects).
Three parts, run one after the other, never two at once:

1. **state**: the state backends through their public library API
   (``govsync.state.open_store``).  Per backend (SQLite file; PostgreSQL
   when ``--postgres URL`` or GOVSYNC_TEST_POSTGRES is given) and per size
   (default 1,000 / 10,000 / 100,000 entries, a fresh workspace each):

   * fill: one ``replace_all`` of every entry (what ``state import-all``
     does; the fastest public way: one transaction, one executemany);
   * open: ``open_store(url)`` of the filled state, as a new process would;
   * acquire: the first ``StateStore.acquire`` of that new store.  For SQLite it
     includes the ``<db>.backup`` copy that each store makes before its
     first write;
   * snapshot: ``snapshot(workspace, responses=False)`` (what plan reads),
     the same with the cyclic garbage collector paused (the difference is
     the collector's share), and ``snapshot(workspace)`` (with the API's
     answers: what apply reads); best of ``--snapshot-runs``, with
     microseconds per entry.  The benchmark's own 100,000 entries are frozen
     out of the collector (``gc.freeze``), as the CLI freezes its manifests;
   * put: ``--puts`` single-entry ``put`` calls with the lock held (fenced
     writes, one transaction each, as apply records each answer): first new
     addresses (a create), then existing ones (replacing an entry); median
     and p95 per call.

   The entries are those of the no-op state of part 2 (below): the objects of
   bench/plan/generate.py as an apply records them, each with a response of
   the API's shape (the spec plus id, createdAt, updatedAt).

2. **plan**: for each size (default 1,000 / 10,000 / 100,000) it generates the
   manifests (bench/plan/generate.py, graph depth 4), records every object as
   applied in a fresh SQLite state (``replace_all``, as bench/plan/run.py
   builds its no-op state, plus responses), and times the whole process
   ``python -m govsync plan DIR --format json --state FILE`` offline (no
   GOVSYNC_ENDPOINT), ``--plan-runs`` times.  It checks that the plan is all
   no-op and reports seconds, seconds per 1,000 objects, CPU seconds and
   peak RSS (``os.wait4`` of each run, from a small driver process: Linux
   carries a parent's peak RSS into a forked child across exec).

3. **server**: ``govsync serve --db FILE --seed examples/server-seed.yaml`` on
   loopback (one uvicorn worker), ``--server-objects`` CreateSpace calls with
   distinct names and ``--concurrency`` in flight, one keep-alive connection
   per worker, requests encoded before the clock starts.  The default client
   (``--client raw``) writes prepared HTTP/1.1 requests on asyncio streams:
   httpx (``--client httpx``, as bench/server) costs about 0.8 ms of CPU per
   request, so on two cores it, not the server, sets the pace.  Writes/s
   (wall, and per second of the server's and of the client's CPU) for each
   block of ``--block`` writes; then, with every object stored: ListGroups (the API's
   only read; it lists groups, which only a seed creates: no API operation
   lists a managed kind), the server's ``GET /_govsync/objects`` (every
   object; not part of the API), the server's memory, and the time to
   restart it on the full database.

Run (the default took 110 s on 2 quiet cores; the 100,000-object parts dominate)::

    python -m compileall -q src   # with PYTHONDONTWRITEBYTECODE set, nothing else compiles src/
    python bench/scale/run.py [--postgres postgresql://postgres@127.0.0.1:5432/db]
        [--parts state,plan,server] [--state-sizes 1000,10000,100000]
        [--plan-sizes 1000,10000,100000] [--server-objects 100000] [--block 10000]
        [--puts 500] [--plan-runs 3] [--concurrency 16] [--client raw|httpx] [--keep DIR]

The PostgreSQL database should be one of its own: the script writes the
workspaces ``scale-<size>-<pid>`` into it and deletes them afterwards, but
leaves the tables.  The Markdown tables are printed at the end, with the
machine and the load average before each part.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "plan"))
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import KEY, cpu_seconds, get  # noqa: E402
from common import start_server as serve  # noqa: E402
from generate import STAMP, applied_entries, write  # noqa: E402

# -- machine -----------------------------------------------------------------------

def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine(postgres: str | None) -> list[str]:
    lines = [
        f"- machine: {platform.machine()}, nproc {len(os.sched_getaffinity(0))}, "
        f"{cpu_model()}, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB",
        f"- Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}",
    ]
    if postgres:
        try:
            import psycopg

            with psycopg.connect(postgres) as conn:
                row = conn.execute("SHOW server_version").fetchone()
            lines.append(f"- PostgreSQL {row[0] if row else '?'} (loopback), psycopg "
                         f"{psycopg.__version__}")
        except Exception as exc:  # the figures say what they cover either way
            lines.append(f"- PostgreSQL: {exc}")
    compiled = any(Path(ROOT, "src", "govsync", "__pycache__").glob("*.pyc"))
    lines.append(f"- govsync bytecode in src/: {'compiled' if compiled else 'NOT compiled'}"
                 f"{'' if compiled else ' (run python -m compileall -q src)'}")
    return lines


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f}"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


# -- the entries of a no-op state ----------------------------------------------------

def matching_entries(manifest_dir: str, snapshot: Any) -> list[Any]:
    """Every object of the manifests as apply records it (made-up ids), with a response."""
    return applied_entries(manifest_dir, snapshot, responses=True)


# -- part 1: state backends --------------------------------------------------------------

def spread(entries: list[Any], n: int) -> list[Any]:
    """n of the entries, evenly spaced: the same mix of kinds at every size (the plan's
    order is by address, so the first n would all be of one kind)."""
    return entries[::max(1, len(entries) // n)][:n]


def bench_size(name: str, url: str, ws: str, subset: list[Any], puts: int,
               snapshot_runs: int) -> dict[str, Any]:
    """The figures of one backend at one size (a workspace of its own, which is
    deleted afterwards from a PostgreSQL database, whatever happened)."""
    try:
        return _measure(name, url, ws, subset, puts, snapshot_runs)
    finally:
        if name != "SQLite":
            import psycopg  # leave nothing behind in a shared database

            from govsync.state.postgres import TABLES

            with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
                for table in TABLES:  # the workspaces table names it "name"
                    column = "name" if table == "govsync_workspaces" else "workspace"
                    conn.execute(f"DELETE FROM {table} WHERE {column} = %s",  # noqa: S608
                                 (ws,))


def _measure(name: str, url: str, ws: str, subset: list[Any], puts: int,
             snapshot_runs: int) -> dict[str, Any]:
    from govsync.state import APPLIED, Entry, LockHolder, open_store

    n = len(subset)
    row: dict[str, Any] = {"backend": name, "entries": n, "load": load_average()}
    with open_store(url) as store:
        store.snapshot(ws)  # the workspace exists: the fill is only the entries
        start = time.perf_counter()
        store.replace_all(ws, subset, None, None)
        row["fill"] = time.perf_counter() - start
    gc.collect()
    # A new store, as a new process opens it: open, lock, read, write.
    start = time.perf_counter()
    store = open_store(url)
    row["open"] = time.perf_counter() - start
    try:
        start = time.perf_counter()
        store.acquire(ws, LockHolder.me())
        row["acquire"] = time.perf_counter() - start
        for figure, responses, paused in (("snap", False, False),
                                          ("snap_nogc", False, True),
                                          ("snap_resp", True, False)):
            best = float("inf")
            for _ in range(snapshot_runs):
                if paused:
                    gc.disable()
                start = time.perf_counter()
                snap = store.snapshot(ws, responses=responses)
                best = min(best, time.perf_counter() - start)
                gc.enable()
                assert len(snap.entries) == n, (len(snap.entries), n)
                del snap
                gc.collect()
            row[figure] = best
        new, existing = [], []
        for i in range(puts):
            spec = {"name": f"scale-put-{i}", "description": "written by bench/scale"}
            entry = Entry(f"Space/scale-put-{i}", "Space", f"id-put-{i}", APPLIED, spec,
                          {"id": f"id-put-{i}", **spec, "createdAt": STAMP,
                           "updatedAt": STAMP}, "")
            start = time.perf_counter()
            store.put(ws, entry)
            new.append(time.perf_counter() - start)
        for i in range(puts):
            old = subset[(i * 7919) % n]  # spread over the whole key range
            entry = Entry(old.address, old.kind, old.id, APPLIED, old.spec, old.response, "")
            start = time.perf_counter()
            store.put(ws, entry)
            existing.append(time.perf_counter() - start)
        row["put_new"] = (statistics.median(new), pct(new, 0.95), max(new))
        row["put_old"] = (statistics.median(existing), pct(existing, 0.95), max(existing))
        store.release(ws)
    finally:
        store.close()
    if name == "SQLite":
        row["size_mb"] = os.path.getsize(url) / 2**20
    print(f"  {name} {n:,}: fill {row['fill']:.2f} s, snapshot {row['snap']:.3f} s "
          f"(with responses {row['snap_resp']:.3f} s), put new median "
          f"{ms(row['put_new'][0])} ms", file=sys.stderr, flush=True)
    return row


def state_tables(rows: list[dict[str, Any]], puts: int) -> list[str]:
    out = [
        "### State backends (public API: open_store, replace_all, acquire, snapshot, put)",
        "",
        "| backend | entries | fill (replace_all) s | open s | first acquire s | snapshot s "
        "(responses=False) | µs/entry | µs/entry, GC paused | snapshot s (with responses) "
        "| µs/entry | load avg |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        n = r["entries"]
        out.append(
            f"| {r['backend']} | {n:,} | {r['fill']:.2f} | {r['open']:.3f} | {r['acquire']:.3f} "
            f"| {r['snap']:.3f} | {r['snap'] / n * 1e6:.1f} | {r['snap_nogc'] / n * 1e6:.1f} "
            f"| {r['snap_resp']:.3f} "
            f"| {r['snap_resp'] / n * 1e6:.1f} | {r['load']} |")
    out += [
        "",
        f"Per `put` with the lock held ({puts} calls each; ms per call: median / p95 / max):",
        "",
        "| backend | entries before | put of a new address | put replacing an entry |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        new, old = r["put_new"], r["put_old"]
        out.append(f"| {r['backend']} | {r['entries']:,} | {ms(new[0])} / {ms(new[1])} / "
                   f"{ms(new[2])} | {ms(old[0])} / {ms(old[1])} / {ms(old[2])} |")
    sizes = [f"{r['entries']:,}: {r['size_mb']:.0f} MB" for r in rows if "size_mb" in r]
    if sizes:
        out += ["", "SQLite file size after the run: " + ", ".join(sizes) + "."]
    return out


def part_state(args: argparse.Namespace, tmp: str, entries: list[Any]) -> list[str]:
    rows = []
    for n in args.state_sizes:
        path = os.path.join(tmp, f"state-{n}.db")
        rows.append(bench_size("SQLite", path, "default", spread(entries, n), args.puts,
                               args.snapshot_runs))
        if not args.keep:  # the files are large
            for suffix in ("", "-wal", "-shm", ".backup", ".default.lock"):
                if os.path.exists(path + suffix):
                    os.unlink(path + suffix)
    if args.postgres:
        for n in args.state_sizes:
            rows.append(bench_size("PostgreSQL", args.postgres, f"scale-{n}-{os.getpid()}",
                                   spread(entries, n), args.puts, args.snapshot_runs))
    return state_tables(rows, args.puts)


# -- part 2: plan ----------------------------------------------------------------------

def plan_env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("GOVSYNC_ENDPOINT", "GOVSYNC_STATE", "GOVSYNC_API_KEY", "GOVSYNC_WORKSPACE"):
        env.pop(k, None)
    return env


# Runs one command and reports it.  The plan is started from this small process,
# not from the benchmark's: Linux carries a process's peak RSS across exec, so a
# child forked from the benchmark (which holds 100,000 entries) would report the
# benchmark's peak as its own.
DRIVER = r"""
import json, os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
with open(out, "wb") as stdout, open(out + ".err", "wb") as stderr:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
proc.returncode = os.waitstatus_to_exitcode(status)
print(json.dumps([wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, proc.returncode]))
"""


def run_plan(cmd: list[str], cwd: str, out_path: str) -> tuple[float, float, int, int]:
    """(wall s, CPU s, peak RSS KiB, exit code) of one whole process."""
    report = subprocess.run([sys.executable, "-I", "-c", DRIVER, out_path, *cmd], cwd=cwd,
                            env=plan_env(), capture_output=True, text=True, check=True)
    wall, cpu, rss, code = json.loads(report.stdout)
    return float(wall), float(cpu), int(rss), int(code)


def part_plan(args: argparse.Namespace, tmp: str, entries_by_size: dict[int, list[Any]]
              ) -> list[str]:
    from govsync.state import open_store

    rows = []
    for n in args.plan_sizes:
        work = os.path.join(tmp, f"plan-{n}")
        mdir = os.path.join(work, "manifests")
        state = os.path.join(work, "state.db")
        os.makedirs(work, exist_ok=True)
        if not os.path.isdir(mdir):
            write(n, mdir)
        with open_store(state) as store:
            snap = store.snapshot("default")
            entries = entries_by_size.get(n) or matching_entries(mdir, snap)
            store.replace_all("default", entries, None, None)
        del entries
        gc.collect()
        cmd = [sys.executable, "-m", "govsync", "plan", mdir, "--format", "json", "--state", state]
        load = load_average()
        runs = []
        for _ in range(args.plan_runs):
            output = os.path.join(work, "plan.json")
            wall, cpu, rss, code = run_plan(cmd, work, output)
            if code != 0:
                raise SystemExit(f"plan of {n} objects exited {code}: "
                                 f"{Path(output + '.err').read_text()[-2000:]}")
            with open(output) as fh:
                summary = json.load(fh)["summary"]
            if summary.get("no-op") != n or sum(summary.values()) != n:
                raise SystemExit(f"plan of {n} objects is not all no-op: {summary}")
            runs.append((wall, cpu, rss))
        walls = [r[0] for r in runs]
        rows.append({"n": n, "load": load, "median": statistics.median(walls),
                     "min": min(walls), "max": max(walls),
                     "cpu": statistics.median(r[1] for r in runs),
                     "rss": max(r[2] for r in runs) / 1024,
                     "state_mb": os.path.getsize(state) / 2**20})
        print(f"  plan {n:,}: {statistics.median(walls):.2f} s", file=sys.stderr, flush=True)
        if not args.keep:
            shutil.rmtree(work)
    out = [
        "### No-op plan, whole process, offline (`govsync plan DIR --format json --state FILE`)",
        "",
        f"| objects | wall s, median of {args.plan_runs} (min–max) | s per 1,000 objects "
        "| CPU s (median) | peak RSS MB | state file MB | load avg before |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        out.append(f"| {r['n']:,} | {r['median']:.2f} ({r['min']:.2f}–{r['max']:.2f}) | "
                   f"{r['median'] / r['n'] * 1000:.3f} | {r['cpu']:.2f} | {r['rss']:.0f} | "
                   f"{r['state_mb']:.0f} | {r['load']} |")
    return out


# -- part 3: the reference server -----------------------------------------------------------

def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            found[line.split(":")[0]] = int(line.split()[1]) / 1024
    return found.get("VmRSS", 0.0), found.get("VmHWM", 0.0)


def start_server(db: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """The server, its URL, and seconds from start until it answers."""
    start = time.perf_counter()
    proc, url = serve(db)
    return proc, url, time.perf_counter() - start


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class RawConnection:
    """One keep-alive HTTP/1.1 connection that sends prepared requests and reads the
    answers: about a tenth of httpx's CPU per request, so that on two cores the
    figure is the server's and not the client's."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> RawConnection:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        return cls(*await asyncio.open_connection(host, int(port)))

    async def post(self, request: bytes) -> tuple[int, bytes]:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    async def aclose(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def raw_request(url: str, path: str, body: bytes) -> bytes:
    host = url.removeprefix("http://")
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nX-API-KEY: {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


async def write_blocks(url: str, n: int, block: int, concurrency: int, pid: int,
                       client: str) -> list[tuple[float, float, float]]:
    """n CreateSpace calls; (wall s, server CPU s, client CPU s) of each block of
    ``block`` answers (the client is this process).  One connection per worker."""
    import httpx

    path = "/core.v1.SpaceService/CreateSpace"

    def bodies(names: list[dict[str, Any]]) -> list[bytes]:
        # Encoded before the clock starts: the client's own work is not the server's.
        encoded = [json.dumps(b).encode() for b in names]
        return [raw_request(url, path, b) for b in encoded] if client == "raw" else encoded

    payloads = bodies([{"name": f"scale-space-{i}", "description": f"space {i}",
                        "terminationProtection": i % 2 == 0} for i in range(n)])
    warm = bodies([{"name": f"warm-{i}"} for i in range(concurrency * 4)])
    if client == "raw":
        conns: list[Any] = [await RawConnection.open(url) for _ in range(concurrency)]
    else:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        conns = [httpx.AsyncClient(base_url=url, limits=limits, timeout=60,
                                   headers={"X-API-KEY": KEY,
                                            "Content-Type": "application/json"})
                 for _ in range(concurrency)]
    next_index = done = 0
    marks: list[tuple[float, float, float]] = []

    async def worker(conn: Any, requests: list[bytes], counted: bool) -> None:
        nonlocal next_index, done
        while next_index < len(requests):
            i = next_index
            next_index += 1
            if client == "raw":
                status, text = await conn.post(requests[i])
            else:
                response = await conn.post(path, content=requests[i])
                status, text = response.status_code, response.content
            if status != 200:
                raise SystemExit(f"CreateSpace: {status} {text[:500]!r}")
            if counted:
                done += 1
                if done % block == 0 or done == len(requests):
                    marks.append((time.perf_counter(), cpu_seconds(pid), time.process_time()))

    try:
        await asyncio.gather(*(worker(c, warm, False) for c in conns))
        next_index = 0
        marks.append((time.perf_counter(), cpu_seconds(pid), time.process_time()))
        await asyncio.gather(*(worker(c, payloads, True) for c in conns))
    finally:
        for c in conns:
            await c.aclose()
    return [(b[0] - a[0], b[1] - a[1], b[2] - a[2])
            for a, b in zip(marks, marks[1:], strict=False)]


async def list_groups(url: str, runs: int, limit: int) -> tuple[float, list[float], int]:
    """(first call s, later calls s, groups counted) of ListGroups."""
    import httpx

    body = json.dumps({"limit": limit}).encode()
    async with httpx.AsyncClient(base_url=url, headers={"X-API-KEY": KEY}) as client:
        times, count = [], 0
        for _ in range(runs + 1):
            start = time.perf_counter()
            response = await client.post("/core.v1.GroupService/ListGroups", content=body,
                                         headers={"Content-Type": "application/json"})
            times.append(time.perf_counter() - start)
            response.raise_for_status()
            count = response.json()["listMetadata"]["count"]
    return times[0], times[1:], count


CLIENTS = {
    "raw": "client: prepared HTTP/1.1 requests on asyncio streams, one connection per worker",
    "httpx": "client: one httpx.AsyncClient per worker, as bench/server",
}


def part_server(args: argparse.Namespace, tmp: str) -> list[str]:
    db = os.path.join(tmp, "server.db")
    load = load_average()
    proc, url, started = start_server(db)
    try:
        blocks = asyncio.run(write_blocks(url, args.server_objects, args.block,
                                          args.concurrency, proc.pid, args.client))
        rss, hwm = memory_mb(proc.pid)
        first, later, groups = asyncio.run(list_groups(url, 20, 50))
        first500, later500, _ = asyncio.run(list_groups(url, 20, 500))
        start = time.perf_counter()
        objects = json.loads(get(url, "/_govsync/objects"))
        dump_seconds = time.perf_counter() - start
        stored = len(objects["Space"])
        del objects
    finally:
        stop(proc)
    expected = args.server_objects + args.concurrency * 4
    if stored != expected:
        raise SystemExit(f"the server holds {stored} spaces, expected {expected}")
    db_mb = os.path.getsize(db) / 2**20
    proc, url, restarted = start_server(db)
    try:
        rss2, _ = memory_mb(proc.pid)
    finally:
        stop(proc)
    load_after = load_average()

    out = [
        f"### Reference server: {args.server_objects:,} CreateSpace, {args.concurrency} in flight"
        f" ({CLIENTS[args.client]})",
        "",
        f"Load average before: {load}; after: {load_after}.",
        "",
        "| block | objects stored at its end | wall s | writes/s (wall) "
        "| writes per second of server CPU | writes per second of client CPU |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    total = 0
    for i, (wall, cpu, client) in enumerate(blocks):
        size = args.block if (i + 1) * args.block <= args.server_objects \
            else args.server_objects - i * args.block
        total += size
        per_cpu = f"{size / cpu:,.0f}" if cpu > 0 else "—"
        out.append(f"| {i + 1} | {total:,} | {wall:.2f} | {size / wall:,.0f} | {per_cpu} "
                   f"| {size / client:,.0f} |")
    first_rate = args.block / blocks[0][0]
    last_size = args.server_objects - (len(blocks) - 1) * args.block
    last_rate = last_size / blocks[-1][0]
    wall_all = sum(b[0] for b in blocks)
    # Server CPU per write over the first and the last three blocks: steadier than
    # one block's wall time on a shared machine.
    k = min(3, len(blocks) // 2) or 1
    head_us = sum(b[1] for b in blocks[:k]) / (k * args.block) * 1e6
    tail_us = sum(b[1] for b in blocks[-k:]) / (args.server_objects - (len(blocks) - k)
                                               * args.block) * 1e6
    out += [
        "",
        f"- all {args.server_objects:,}: {wall_all:.1f} s, "
        f"{args.server_objects / wall_all:,.0f} writes/s; last block / first block: "
        f"**{last_rate / first_rate:.2f}** (wall), "
        f"{(last_size / blocks[-1][1]) / (args.block / blocks[0][1]):.2f} (server CPU)",
        f"- server CPU per write: {head_us:.0f} µs over the first {k} blocks, "
        f"{tail_us:.0f} µs over the last {k}",
        f"- ListGroups (the API's only read; it lists the seed's {groups} groups, not the "
        f"stored spaces): first call {ms(first)} ms, then median {ms(statistics.median(later))} ms "
        f"(limit 50); limit 500: first {ms(first500)} ms, median "
        f"{ms(statistics.median(later500))} ms. No API operation lists Space or any other "
        "managed kind.",
        f"- `GET /_govsync/objects` (the server's own dump of every object, not an API "
        f"operation): {dump_seconds:.2f} s for {stored:,} spaces",
        f"- server memory after the writes: RSS {rss:.0f} MB (peak {hwm:.0f} MB); "
        f"database file {db_mb:.0f} MB",
        f"- server start on an empty database: {started:.2f} s; restart on the full one "
        f"(every object is loaded into memory): {restarted:.2f} s, RSS then {rss2:.0f} MB",
    ]
    return out


# -- main ------------------------------------------------------------------------------------

def sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="state,plan,server",
                        help="comma-separated: state, plan, server (default: all three)")
    parser.add_argument("--state-sizes", type=sizes, default=[1000, 10000, 100000])
    parser.add_argument("--plan-sizes", type=sizes, default=[1000, 10000, 100000])
    parser.add_argument("--puts", type=int, default=500, help="puts per size and kind of put")
    parser.add_argument("--snapshot-runs", type=int, default=3)
    parser.add_argument("--plan-runs", type=int, default=3)
    parser.add_argument("--postgres", default=os.environ.get("GOVSYNC_TEST_POSTGRES"),
                        help="PostgreSQL URL (default: GOVSYNC_TEST_POSTGRES; none: SQLite only)")
    parser.add_argument("--server-objects", type=int, default=100000)
    parser.add_argument("--block", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--client", choices=sorted(CLIENTS), default="raw",
                        help="raw: prepared HTTP/1.1 requests on asyncio streams (default); "
                             "httpx: one httpx.AsyncClient per worker, as bench/server does")
    parser.add_argument("--keep", help="work in this directory and keep its files")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if unknown := parts - {"state", "plan", "server"}:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")

    command = " ".join(["python", os.path.relpath(__file__, ROOT), *sys.argv[1:]])
    header = [f"`{command}`", "", *machine(args.postgres),
              f"- load average at the start: {load_average()}", ""]
    sections: list[list[str]] = []
    started = time.perf_counter()
    tmp = args.keep or tempfile.mkdtemp(prefix="govsync-scale-")
    os.makedirs(tmp, exist_ok=True)
    try:
        entries_by_size: dict[int, list[Any]] = {}
        if "state" in parts:
            from govsync.state import empty_snapshot

            largest = max(args.state_sizes)
            mdir = os.path.join(tmp, f"plan-{largest}", "manifests")
            write(largest, mdir)
            start = time.perf_counter()
            entries = matching_entries(mdir, empty_snapshot("default"))
            seconds = time.perf_counter() - start
            print(f"  {largest:,} entries built in {seconds:.1f} s", file=sys.stderr)
            # Out of the collector, as the CLI freezes its manifests: the snapshots
            # measured below are not charged for scanning the benchmark's own data.
            gc.collect()
            gc.freeze()
            sections.append(part_state(args, tmp, entries))
            entries_by_size[largest] = entries  # the no-op state of the plan of that size
            del entries
            gc.collect()
        if "plan" in parts:
            sections.append(part_plan(args, tmp, entries_by_size))
        if "server" in parts:
            sections.append(part_server(args, tmp))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("\n".join(header))
    for section in sections:
        print("\n".join(section))
        print()
    print(f"Whole run: {time.perf_counter() - started:.0f} s; load average at the end: "
          f"{load_average()}.")


if __name__ == "__main__":
    main()
