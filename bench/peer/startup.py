"""bench/peer/startup.py: `govsync validate` and offline `govsync plan` against the YAML floor.

Issue 12, goal 2 (measurement only).  For examples/manifests (59 objects) and
1,000 generated objects (bench/plan/generate.py), it times whole processes,
interleaved and in rotating order, N times each:

* ``python -c 'import yaml'``: the interpreter plus PyYAML;
* ``python -c 'import yaml, click'``: the least any command line built on
  click and PyYAML can cost, before it reads a file (the stack's floor);
* floor: one script that imports yaml and loads every file of the set with
  ``yaml.load_all(..., Loader=yaml.CSafeLoader)``;
* ``govsync validate DIR``;
* ``govsync plan DIR --state FRESH.db`` with no endpoint (offline; a state
  file that does not exist yet, new for every run);

and prints the ratio of each to the floor (median of the run-by-run ratios).
Then it runs ``python -X importtime -m govsync validate|plan
examples/manifests`` (``--importtime-runs`` times, keeping each module's
smallest figure) and lists the most expensive imports.

    python bench/peer/startup.py [--repeat 10] [--importtime-runs 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "plan"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import compile_package  # noqa: E402
from generate import write  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples", "manifests")
# The examples' $secret variables (tests/testkit.py EXAMPLE_SECRET_VARS): plan resolves them.
SECRETS = ("GOVSYNC_EXAMPLE_LOGSTORE_API_KEY", "GOVSYNC_EXAMPLE_BI_API_KEY",
           "GOVSYNC_EXAMPLE_BI_API_SECRET", "GOVSYNC_EXAMPLE_MDM_API_KEY",
           "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY")
FLOOR = """
import glob, os, sys, yaml
for f in sorted(glob.glob(os.path.join(sys.argv[1], '**', '*.y*ml'), recursive=True)):
    with open(f) as fh:
        list(yaml.load_all(fh, Loader=yaml.CSafeLoader))
"""


def env() -> dict[str, str]:
    e = {**os.environ, **{k: "x" for k in SECRETS}}
    for k in ("GOVSYNC_ENDPOINT", "GOVSYNC_STATE", "GOVSYNC_API_KEY"):
        e.pop(k, None)
    return e


def run_once(cmd: list[str], cwd: str) -> float:
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env(), stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return wall


def measure(directory: str, tmp: str, repeat: int) -> dict[str, list[float]]:
    py = sys.executable
    names = ["import yaml", "import yaml, click", "floor", "validate", "plan"]
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            if name.startswith("import "):
                cmd = [py, "-c", name]
            elif name == "floor":
                cmd = [py, "-c", FLOOR, directory]
            elif name == "validate":
                cmd = [py, "-m", "govsync", "validate", directory]
            else:
                cmd = [py, "-m", "govsync", "plan", directory, "--state",
                       os.path.join(tmp, f"fresh-{r}.db")]
            times[name].append(run_once(cmd, tmp))
    return times


def importtime(command: str, runs: int, tmp: str) -> list[tuple[str, int, int, int]]:
    """(module, self us, cumulative us, nesting level), smallest of ``runs`` per module."""
    best: dict[str, tuple[int, int, int]] = {}
    for r in range(runs):
        extra = ["--state", os.path.join(tmp, f"it-{command}-{r}.db")] if command == "plan" else []
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "govsync", command,
                              EXAMPLES, *extra], cwd=tmp, env=env(), capture_output=True, text=True)
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "[us]" in line:
                continue
            self_us, cum_us, name = line[len("import time:"):].split("|")
            level = (len(name) - len(name.lstrip(" "))) // 2
            mod = name.strip()
            cur = (int(self_us), int(cum_us), level)
            if mod not in best or cur[1] < best[mod][1]:
                best[mod] = cur
    return [(m, s, c, lv) for m, (s, c, lv) in best.items()]


Mod = tuple[str, int, int, int]


def top(mods: list[Mod], n: int = 10) -> tuple[list[Mod], list[Mod]]:
    """The ``n`` packages (top-level names other than govsync and the interpreter's
    own start-up) whose whole import tree costs most, and the ``n`` modules that
    cost most by themselves (their own body, imports they make excluded)."""
    skip = {"govsync", "site", "encodings", "__main__", "runpy"}
    packages = [m for m in mods if "." not in m[0] and m[0] not in skip]
    return sorted(packages, key=lambda m: -m[2])[:n], sorted(mods, key=lambda m: -m[1])[:n]


def spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


def ratio(xs: list[float], floor: list[float]) -> str:
    rs = [a / b for a, b in zip(xs, floor, strict=True)]
    return f"**{statistics.median(rs):.2f}** ({min(rs):.2f}–{max(rs):.2f})"


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--importtime-runs", type=int, default=5)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--out", help="append the Markdown section to this file")
    args = parser.parse_args()
    load = os.getloadavg()
    lines = [f"Load average at start: {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}; "
             f"whole processes, {args.repeat} runs each, interleaved; median (min–max) s; "
             "ratio = run-by-run to the floor run next to it, median (min–max).", "",
             "| set | `import yaml` s | `import yaml, click` s | its ratio to the floor | floor s "
             "| validate s | validate / floor | plan s | plan / floor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        generated = os.path.join(tmp, "m1k")
        write(args.objects, generated)
        for label, directory in (("examples/manifests (59 objects)", EXAMPLES),
                                 (f"{args.objects:,} generated objects", generated)):
            t = measure(directory, tmp, args.repeat)

            lines.append(f"| {label} | {spread(t['import yaml'])} | "
                         f"{spread(t['import yaml, click'])} | "
                         f"{ratio(t['import yaml, click'], t['floor'])} | {spread(t['floor'])} | "
                         f"{spread(t['validate'])} | {ratio(t['validate'], t['floor'])} | "
                         f"{spread(t['plan'])} | {ratio(t['plan'], t['floor'])} |")
            print(lines[-1], flush=True)
        end = os.getloadavg()
        lines += ["", f"Load average at the end: {end[0]:.2f} / {end[1]:.2f} / {end[2]:.2f}."]
        for command in ("validate", "plan"):
            mods = importtime(command, args.importtime_runs, tmp)
            total = max(m[2] for m in mods)
            by_cum, by_self = top(mods)
            lines += ["", f"`python -X importtime -m govsync {command} examples/manifests`"
                      f"{' --state FRESH.db' if command == 'plan' else ''} (smallest of "
                      f"{args.importtime_runs} runs per module; all imports together "
                      f"{sum(m[1] for m in mods) / 1000:.0f} ms of self time, the largest tree "
                      f"{total / 1000:.0f} ms):", "",
                      "| # | package | its whole import, ms | | module | its own body, ms |",
                      "|---:|---|---:|---|---|---:|"]
            for i in range(10):
                c = by_cum[i] if i < len(by_cum) else ("", 0, 0, 0)
                s = by_self[i] if i < len(by_self) else ("", 0, 0, 0)
                lines.append(f"| {i + 1} | `{c[0]}` | {c[2] / 1000:.1f} | | `{s[0]}` | {s[1] / 1000:.1f} |")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        with open(args.out, "a") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
