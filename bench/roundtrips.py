"""Round trips to a PostgreSQL state: what each command pays for a database far away.

A team's state database is across a network, where every round trip costs
its latency.  This times the commands that read the state (`plan`, `drift`
offline, `state list`) and an apply with nothing to do (it locks the
workspace and reads it), as whole processes, with the state in a schema of
its own: straight to the server, then behind bench/delay.py adding
``--one-way-ms`` each way.  The extra time divided by the added round-trip
time is the number of round trips the command makes (connecting included).
The workspace holds the examples, applied first to the embedded server.

    python bench/roundtrips.py --postgres URL [--one-way-ms 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from urllib.parse import quote

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import SEED, compile_package  # noqa: E402
from delay import start_delay_proxy  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples", "manifests")
SECRETS = ("GOVSYNC_EXAMPLE_LOGSTORE_API_KEY", "GOVSYNC_EXAMPLE_BI_API_KEY",
           "GOVSYNC_EXAMPLE_BI_API_SECRET", "GOVSYNC_EXAMPLE_MDM_API_KEY",
           "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY")
COMMANDS = {"plan": ["plan", EXAMPLES], "drift (offline)": ["drift", EXAMPLES],
            "state list": ["state", "list"],
            # Nothing to send, so no endpoint: the lock taken and given back.
            "apply (nothing to do)": ["apply", EXAMPLES, "--auto-approve"]}


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", default=os.environ.get("GOVSYNC_TEST_POSTGRES"),
                        help="a postgresql:// URL with one TCP host (default: "
                             "GOVSYNC_TEST_POSTGRES)")
    parser.add_argument("--one-way-ms", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("give --postgres URL (or set GOVSYNC_TEST_POSTGRES)")
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(args.postgres)
    host, port = str(params.get("host") or ""), int(params.get("port") or 5432)
    if not host or host.startswith("/"):
        raise SystemExit("--postgres needs one TCP host, to put the delay proxy in front of it")
    schema = f"bench_rtt_{uuid.uuid4().hex[:10]}"
    user = quote(str(params.get("user") or ""), safe="")
    password = str(params.get("password") or "")
    auth = f"{user}{':' + quote(password, safe='') if password else ''}@" if user else ""
    dbname = quote(str(params.get("dbname") or ""), safe="")

    def url(to_port: int, to_host: str) -> str:
        return (f"postgresql://{auth}{to_host}:{to_port}/{dbname}"
                f"?options={quote(f'-csearch_path={schema}', safe='')}")

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")},
           **{k: "bench" for k in SECRETS}}
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            direct = url(port, host)
            subprocess.run([sys.executable, "-m", "govsync", "apply", EXAMPLES, "--endpoint",
                            "local", "--local-seed", SEED, "--auto-approve", "--state", direct],
                           env=env, cwd=tmp, check=True, capture_output=True)
            delayed = url(start_delay_proxy(host, port, args.one_way_ms), "127.0.0.1")
            added = 2 * args.one_way_ms / 1000
            print(f"state: PostgreSQL, {2 * args.one_way_ms:g} ms added to each round trip "
                  f"(bench/delay.py); whole processes, median of {args.runs} runs")
            for name, command in COMMANDS.items():
                near = [timed(command, direct, env, tmp) for _ in range(args.runs)]
                far = [timed(command, delayed, env, tmp) for _ in range(args.runs)]
                a, b = statistics.median(near), statistics.median(far)
                print(f"{name}: {a:.3f} s direct, {b:.3f} s delayed: "
                      f"{(b - a) / added:.1f} round trips")
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def timed(command: list[str], state: str, env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "govsync", *command, "--state", state],
                         env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"govsync {' '.join(command)}: exit {out.returncode}\n{out.stderr}")
    return took


if __name__ == "__main__":
    main()
