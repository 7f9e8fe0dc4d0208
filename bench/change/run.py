"""bench/change: apply of N updates and of N deletes against a perfect scheduler's bound.

The reference server runs on loopback (`govsync serve --latency-ms 50`); N objects of
kinds whose update replaces the whole object (hooks, data labels, forms, spaces, in
equal parts: graph depth 1) are created by a first apply (not timed).  Then every
manifest's description (a label's classifier) is changed and the apply of the N
updates is timed as a whole process: refresh, plan, read-modify-write of each object
as the refresh read it, record.  Then the project file says `prune: true` and the
manifests are removed but one: the apply of the N - 1 deletes is timed the same way.
The bound of a perfect scheduler is ceil(N / parallelism) x latency plus the graph's
depth x latency (here 1); the refresh's Lists (pages of 500, kinds at once) come on
top of it and are counted in the time, not the bound.

    python bench/change/run.py [--objects 1000] [--latency-ms 50] [--parallelism 16]
        [--postgres URL]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "bench", "apply"))

from common import KEY, compile_package, start_server  # noqa: E402

KINDS = ("Hook", "DataLabel", "Form", "Space")


def document(kind: str, i: int, version: int) -> str:
    tag = f"v{version}"
    if kind == "Hook":
        spec = (f"  description: hook {i} {tag}\n  code: \"export default function hook() {{ return 1; }}\"\n"
                "  timeoutMs: 1500\n")
    elif kind == "DataLabel":
        spec = f"  classifierType: regex\n  classifierData: \"[0-9]{{{4 + version}}}-{i}\"\n"
    elif kind == "Form":
        spec = (f"  description: form {i} {tag}\n  fields:\n    - name: reason\n"
                "      type: text\n")
    else:
        spec = f"  description: space {i} {tag}\n"
    name = f"{kind.lower()}_{i}" if kind == "Hook" else f"{kind.lower()}-{i}"
    return f"apiVersion: govsync/v1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"


def write(folder: str, n: int, version: int, keep: int | None = None) -> None:
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    docs = [document(KINDS[i % len(KINDS)], i, version) for i in range(n if keep is None
                                                                         else keep)]
    for start in range(0, len(docs), 100):
        with open(os.path.join(folder, f"m{start // 100:04d}.yaml"), "w") as fh:
            fh.write("---\n".join(docs[start:start + 100]))


def apply(root: str, url: str, state: str, parallelism: int) -> tuple[float, str]:
    """The wall-clock seconds of one apply, and its summary line with the CPU seconds
    (user + system) of the govsync process."""
    env = {**os.environ, "GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY,
           "GOVSYNC_STATE": state}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "govsync", "-q", "apply", "--auto-approve",
                          "--parallelism", str(parallelism)],
                         env=env, cwd=root, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if out.returncode != 0:
        raise SystemExit(f"apply failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return elapsed, f"{out.stdout.strip().splitlines()[-1]} CPU {cpu:.2f} s"


def project(root: str, prune: bool) -> None:
    with open(os.path.join(root, "govsync.yaml"), "w") as fh:
        fh.write("apiVersion: govsync/v1\nkind: Project\npaths: [manifests]\n"
                 f"prune: {'true' if prune else 'false'}\n")


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--postgres", default="")
    args = parser.parse_args()
    lat = args.latency_ms / 1000
    n = args.objects
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    print(f"{n} objects ({', '.join(KINDS)}), latency {args.latency_ms} ms, "
          f"parallelism {args.parallelism}")
    with tempfile.TemporaryDirectory() as root:
        manifests = os.path.join(root, "manifests")
        state = args.postgres or os.path.join(root, "state.db")
        server, url = start_server(os.path.join(root, "api.db"), latency_ms=args.latency_ms)
        try:
            project(root, prune=False)
            write(manifests, n, 1)
            created, _ = apply(root, url, state, args.parallelism)
            print(f"create (not the point here): {created:.2f} s")
            write(manifests, n, 2)
            bound = (math.ceil(n / args.parallelism) + 1) * lat
            took, summary = apply(root, url, state, args.parallelism)
            print(f"apply of {n} updates: {took:.2f} s, bound {bound:.2f} s: "
                  f"**{took / bound:.2f}x** ({summary})")
            project(root, prune=True)
            write(manifests, n, 2, keep=1)
            bound = (math.ceil((n - 1) / args.parallelism) + 1) * lat
            took, summary = apply(root, url, state, args.parallelism)
            print(f"apply of {n - 1} deletes: {took:.2f} s, bound {bound:.2f} s: "
                  f"**{took / bound:.2f}x** ({summary})")
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
