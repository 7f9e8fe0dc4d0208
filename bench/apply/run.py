"""bench/apply: apply's wall time against a perfect scheduler's bound.

The reference server runs on loopback (`govsync serve --latency-ms 50`, one
uvicorn worker, a --db file); 1,000 generated objects (bench/plan/generate.py,
graph depth 4) are applied at parallelism 16, then sequentially
(parallelism 1), each on a fresh server and state.  The bound of a perfect
scheduler is the longest of depth x latency and ceil(objects / parallelism)
x latency.  The server's own work (one Python process, on the same cores)
keeps any client above it: bench/apply/bare.py, a bare HTTP/1.1 client,
sends as many creates at the same parallelism to a fresh server, and its
time is printed as the floor of the requests phase.  With --postgres URL the
state goes to PostgreSQL (a schema per run), and --state-delay-ms puts
bench/delay.py in front of it, as a database across a network.  Finally a second apply of the same manifests (nothing to do) is
timed as a whole process; it must send no request; and then `govsync drift`
(which must find nothing).  With --h11-lanes, a last apply on a fresh server
runs govsync with its lanes on h11 (bench/apply/h11_lanes.py): how much of
the requests phase is the client's HTTP stack.

    python bench/apply/run.py [--objects 1000] [--latency-ms 50] [--parallelism 16] [--h11-lanes]
        [--no-sequential] [--sweep 4,8,16] [--postgres URL [--state-delay-ms 1]]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "plan"))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, HERE)

import resource  # noqa: E402

from bare import requests_phase  # noqa: E402
from common import KEY, compile_package, cpu_seconds, get, start_server  # noqa: E402
from delay import FORWARDED, start_delay_proxy  # noqa: E402
from generate import write  # noqa: E402


def count_objects(url: str) -> int:
    data = json.loads(get(url, "/_govsync/objects"))
    return sum(len(v) for k, v in data.items() if k not in ("Resource", "Group", "User"))


def state_url(tmp: str, args: argparse.Namespace) -> str:
    """Where a run's state goes: a SQLite file in ``tmp``, or with --postgres a schema
    of its own in that database, reached through bench/delay.py with --state-delay-ms."""
    if not args.postgres:
        return os.path.join(tmp, "state.db")
    import uuid
    from urllib.parse import quote, urlencode

    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    params = {k: str(v) for k, v in conninfo_to_dict(args.postgres).items()}
    host = params.get("host", "")
    if args.state_delay_ms and (not host or host.startswith("/") or "," in host):
        raise SystemExit("--state-delay-ms needs --postgres with one TCP host "
                         f"(not {host or 'the default Unix socket'})")
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    SCHEMAS.append(schema)
    params["options"] = f"{params.get('options', '')} -csearch_path={schema}".strip()
    if args.state_delay_ms:
        params["port"] = str(start_delay_proxy(host, int(params.get("port") or 5432),
                                               args.state_delay_ms))
        params["host"] = "127.0.0.1"
        params.pop("hostaddr", None)
    # govsync takes a postgresql:// URL: the parsed parameters written back as one.
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", "")
    auth = f"{user}{':' + quote(password, safe='') if password else ''}@" if user else ""
    host = params.pop("host", "")
    port = params.pop("port", "")
    where = f"{host}:{port}" if host and port else host
    dbname = quote(params.pop("dbname", ""), safe="")
    return f"postgresql://{auth}{where}/{dbname}?{urlencode(params, quote_via=quote)}"


SCHEMAS: list[str] = []


def drop_schemas(args: argparse.Namespace) -> None:
    if SCHEMAS:
        import psycopg

        with psycopg.connect(args.postgres, autocommit=True) as conn:
            for schema in SCHEMAS:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        SCHEMAS.clear()


def apply(manifests: str, tmp: str, url: str, parallelism: int,
          state: str, program: tuple[str, ...] = ("-m", "govsync")) -> tuple[float, str]:
    env = {**os.environ, "GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY,
           "GOVSYNC_STATE": state}
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *program, "-q", "apply", manifests, "--auto-approve",
         "--parallelism", str(parallelism)],
        env=env, cwd=tmp, capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"apply failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return elapsed, out.stdout.strip().splitlines()[-1]


def drift(manifests: str, tmp: str, url: str, state: str) -> tuple[float, str]:
    """`govsync drift` after the apply: it must find nothing (exit 0)."""
    env = {**os.environ, "GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY,
           "GOVSYNC_STATE": state}
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "govsync", "drift", manifests],
                         env=env, cwd=tmp, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"drift failed ({out.returncode}):\n{out.stdout[-2000:]}\n"
                         f"{out.stderr[-2000:]}")
    return elapsed, (out.stdout.strip().splitlines() or [""])[0]


def depth_of(manifests: str) -> int:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from govsync.graph import depth
    from govsync.manifests.loader import load

    return depth(load([manifests]).objects)


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--no-sequential", action="store_true")
    parser.add_argument("--h11-lanes", action="store_true",
                        help="also apply with the client's lanes on h11 (bench/apply/h11_lanes.py): "
                             "what a lighter HTTP stack would gain")
    parser.add_argument("--sweep", default="",
                        help="comma-separated parallelism values to compare (e.g. 4,8,16,32,64)")
    parser.add_argument("--postgres", default="",
                        help="keep the state in this PostgreSQL database (a schema of its own "
                             "per run, dropped at the end) instead of a SQLite file")
    parser.add_argument("--state-delay-ms", type=float, default=0.0,
                        help="with --postgres: delay every packet to and from it by this many "
                             "ms each way (bench/delay.py), as a database across a network")
    args = parser.parse_args()
    try:
        if args.sweep:
            sweep(args)
        else:
            run(args)
    finally:
        drop_schemas(args)


def run(args: argparse.Namespace) -> None:
    if args.latency_ms <= 0:
        raise SystemExit("--latency-ms must be positive: the bound is a multiple of it")
    lat = args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as root:
        manifests = os.path.join(root, "manifests")
        write(args.objects, manifests)
        depth = depth_of(manifests)
        bound = max(depth * lat, math.ceil(args.objects / args.parallelism) * lat)
        print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"{args.objects} objects, graph depth {depth}, latency {args.latency_ms} ms, "
              f"parallelism {args.parallelism}")
        print(f"perfect-scheduler bound: {bound:.2f} s")
        if args.postgres:
            print(f"state: PostgreSQL, {2 * args.state_delay_ms:g} ms added to each round trip")
        runs = [(args.parallelism, "parallel")]
        if not args.no_sequential and args.parallelism != 1:
            runs.append((1, "sequential"))
        for parallelism, label in runs:
            tmp = tempfile.mkdtemp(dir=root)
            state = state_url(tmp, args)
            server, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms)
            try:
                server_cpu = cpu_seconds(server.pid)
                ru = resource.getrusage(resource.RUSAGE_CHILDREN)
                elapsed, summary = apply(manifests, tmp, url, parallelism, state)
                ru2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                client_cpu = ru2.ru_utime + ru2.ru_stime - ru.ru_utime - ru.ru_stime
                server_cpu = cpu_seconds(server.pid) - server_cpu
                objects = count_objects(url)
                phase = float(summary.rsplit(" in ", 1)[1].split(" s)")[0])
                # CPU of both processes: near 2 x the wall time, two cores are the limit.
                # The bound of this run's parallelism (sequential: every call in turn).
                own = max(depth * lat, math.ceil(args.objects / parallelism) * lat)
                print(f"{label:>10} apply: {elapsed:.2f} s whole process ({elapsed / own:.2f}x "
                      f"its bound {own:.2f} s); requests phase {phase:.2f} s "
                      f"({phase / own:.2f}x); CPU: "
                      f"govsync {client_cpu:.2f} s, server {server_cpu:.2f} s\n"
                      f"{'':>12}[{summary}; {objects} objects on the server]")
                if parallelism == args.parallelism:
                    again, summary2 = apply(manifests, tmp, url, parallelism, state)
                    after = count_objects(url)
                    print(f"second apply: {again:.2f} s whole process [{summary2}; "
                          f"objects on the server {objects} -> {after}]")
                    took, first_line = drift(manifests, tmp, url, state)
                    print(f"drift: {took:.2f} s whole process [{first_line}]")
            finally:
                server.terminate()
                server.wait()
            if parallelism == args.parallelism:
                floor(root, args, bound)
                if args.h11_lanes:
                    what_if(manifests, root, args, bound)
        if args.state_delay_ms:
            print(f"delay proxy: {sum(FORWARDED.values())} connections to PostgreSQL forwarded")


def floor(root: str, args: argparse.Namespace, bound: float) -> None:
    """What the server allows: a bare client's requests phase on a fresh server."""
    tmp = tempfile.mkdtemp(dir=root)
    server, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms)
    try:
        took = requests_phase(url, KEY, args.objects, args.parallelism)
    finally:
        server.terminate()
        server.wait()
    print(f"bare HTTP/1.1 client (bench/apply/bare.py), {args.objects} creates at parallelism "
          f"{args.parallelism} on a fresh server: {took:.2f} s ({took / bound:.2f}x bound), "
          "the floor this server sets for the requests phase")


def what_if(manifests: str, root: str, args: argparse.Namespace, bound: float) -> None:
    """The same apply, on a fresh server and state, with the lanes on h11."""
    tmp = tempfile.mkdtemp(dir=root)
    server, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms)
    try:
        elapsed, summary = apply(manifests, tmp, url, args.parallelism, state_url(tmp, args),
                                 program=(os.path.join(HERE, "h11_lanes.py"),))
    finally:
        server.terminate()
        server.wait()
    phase = float(summary.rsplit(" in ", 1)[1].split(" s)")[0])
    print(f"what-if, govsync with h11 lanes (bench/apply/h11_lanes.py): {elapsed:.2f} s whole "
          f"process ({elapsed / bound:.2f}x bound); requests phase {phase:.2f} s "
          f"({phase / bound:.2f}x) [{summary}]")


def sweep(args: argparse.Namespace) -> None:
    """Apply time for several parallelism values: the data behind the default."""
    lat = args.latency_ms / 1000
    with tempfile.TemporaryDirectory() as root:
        manifests = os.path.join(root, "manifests")
        write(args.objects, manifests)
        depth = depth_of(manifests)
        print(f"{args.objects} objects, depth {depth}, latency {args.latency_ms} ms")
        print(f"{'parallelism':>11} {'bound s':>8} {'whole s':>8} {'phase s':>8} {'req/s':>7}")
        for p in (int(x) for x in args.sweep.split(",")):
            tmp = tempfile.mkdtemp(dir=root)
            server, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms)
            try:
                elapsed, summary = apply(manifests, tmp, url, p, state_url(tmp, args))
            finally:
                server.terminate()
                server.wait()
            phase = float(summary.rsplit(" in ", 1)[1].split(" s)")[0])
            bound = max(depth * lat, math.ceil(args.objects / p) * lat)
            print(f"{p:>11} {bound:>8.2f} {elapsed:>8.2f} {phase:>8.2f} {args.objects / phase:>7.0f}")


if __name__ == "__main__":
    main()
