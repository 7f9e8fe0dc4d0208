"""bench/plan: whole-process `govsync plan` against the C-loader floor.

For 100, 1,000 and 10,000 generated objects (bench/plan/generate.py, graph
depth 4) it measures, as separate processes, best of N runs:

* floor:  python that only loads the files with PyYAML's C loader
          (yaml.load_all(..., Loader=yaml.CSafeLoader));
* create: `govsync plan DIR --format json` against empty state (all create);
* no-op:  the same against a state that already matches (all no-op);

plus peak memory (max RSS) of the no-op plan, and `govsync plan
examples/manifests`.  Usage: python bench/plan/run.py [--runs 5] [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import compile_package  # noqa: E402
from generate import applied_entries, write  # noqa: E402

FLOOR = """
import glob, sys, yaml
for f in sorted(glob.glob(sys.argv[1] + '/*.yaml')):
    with open(f) as fh:
        list(yaml.load_all(fh, Loader=yaml.CSafeLoader))
"""
EXAMPLE_ENV = {
    "GOVSYNC_EXAMPLE_LOGSTORE_API_KEY": "x", "GOVSYNC_EXAMPLE_BI_API_KEY": "x",
    "GOVSYNC_EXAMPLE_BI_API_SECRET": "x", "GOVSYNC_EXAMPLE_MDM_API_KEY": "x",
    "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY": "x",
}


def timed(cmd: list[str], cwd: str, runs: int) -> tuple[float, int]:
    """Best wall time of ``runs`` and the max RSS (KiB) of the children."""
    best = float("inf")
    env = {**os.environ, **EXAMPLE_ENV}
    env.pop("GOVSYNC_ENDPOINT", None)
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss


def matching_state(manifest_dir: str, workdir: str) -> None:
    """Record every object as applied with made-up ids (what an apply would leave)."""
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from govsync.state.sqlite import SqliteStore

    store = SqliteStore(os.path.join(workdir, ".govsync", "state.db"))
    entries = applied_entries(manifest_dir, store.snapshot("default"))
    store.replace_all("default", entries, None, None)
    store.close()


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="100,1000,10000")
    args = parser.parse_args()
    py = sys.executable
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
    print(f"{'objects':>8} {'floor s':>8} {'create s':>9} {'no-op s':>8} {'ratio':>6} {'peak MB':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            mdir = os.path.join(tmp, "manifests")
            write(n, mdir)
            empty = os.path.join(tmp, "empty")
            full = os.path.join(tmp, "full")
            os.makedirs(empty)
            os.makedirs(full)
            matching_state(mdir, full)
            floor, _ = timed([py, "-c", FLOOR, mdir], tmp, args.runs)
            plan = [py, "-m", "govsync", "plan", mdir, "--format", "json"]
            create, _ = timed(plan, empty, args.runs)
            # RUSAGE_CHILDREN is the max over all children so far: measure no-op last.
            noop, rss = timed(plan, full, args.runs)
            ratio = max(create, noop) / floor
            print(f"{n:>8} {floor:>8.3f} {create:>9.3f} {noop:>8.3f} {ratio:>6.2f} {rss / 1024:>8.0f}")
    with tempfile.TemporaryDirectory() as tmp:
        ex, _ = timed([py, "-m", "govsync", "plan", os.path.join(ROOT, "examples", "manifests")],
                      tmp, args.runs)
    print(f"govsync plan examples/manifests (59 objects): {ex:.3f} s")


if __name__ == "__main__":
    main()
