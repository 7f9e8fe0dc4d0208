"""bench/peer: govsync against Terraform on the same graph, in one run.

For each size, bench/peer/graph.py generates the objects of bench/plan's
depth-4 mix once and writes them as govsync manifests and as Terraform
configuration (one ``terraform_data`` per object, ``input`` = its spec,
``depends_on`` = its references and dependsOn entries).  Then, N times, with
the two tools interleaved and the one that goes first alternating:

* plan (fresh):  ``govsync plan M --state FRESH.db`` against the reference
  server (``govsync serve --latency-ms 50``: one ListGroups call, 50 ms);
  ``terraform plan`` with no state;
* apply:         ``govsync apply M --auto-approve --parallelism 16`` against a
  fresh server and a fresh SQLite state; ``terraform apply -auto-approve
  -parallelism=16`` with a fresh local state;
* no-op plan:    the plan again over the state the apply left.

Every figure is one whole process, timed from outside (wall clock, and the
CPU it used from the kernel's accounting of the reaped child), with the load
average beside it.  Terraform runs offline: terraform_data is built in, so
``terraform init`` downloads nothing (it runs once per size, untimed).

Above --skip-tf-apply-above objects, Terraform's apply is tried once with a
time limit (--tf-apply-limit, 600 s); if it does not finish, its no-op plan
runs over the state that apply would have left, written by graph.tf_state
(checked against a real apply's state when this run has one, and by
``terraform plan`` reporting no changes before anything is timed).

    python bench/peer/run.py --sizes 1000,10000 --repeat 3 --skip-tf-apply-above 1000
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "bench"))

import graph  # noqa: E402
from common import KEY, compile_package, start_server  # noqa: E402

OPS = ["plan", "apply", "no-op plan"]
# Issue 12, goal 1: govsync's time as a fraction of Terraform's at 1,000 objects.
GOALS = {"plan": 0.25, "apply": 0.15, "no-op plan": 0.25}
GOAL_SIZE = 1000


def loadavg() -> float:
    return os.getloadavg()[0]


def timed(cmd: list[str], cwd: str, env: dict[str, str], log: str,
          limit: float | None = None) -> dict[str, Any]:
    """Run ``cmd`` once as a whole process; wall and CPU seconds, exit code, load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = loadavg()
    with open(log, "w") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
        wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(log) as fh:
        tail = fh.read()[-3000:]
    return {"wall": wall, "cpu": cpu, "rc": rc, "load": load, "tail": tail}


def check(result: dict[str, Any], want: str, what: str) -> None:
    if result["rc"] not in (0,) or want not in result["tail"]:
        raise SystemExit(f"{what}: exit {result['rc']}, expected {want!r} in:\n{result['tail']}")


class Govsync:
    name = "govsync"

    def __init__(self, manifests: str, root: str, latency_ms: int, parallelism: int):
        self.manifests, self.root = manifests, root
        self.latency_ms, self.parallelism = latency_ms, parallelism
        self.server: subprocess.Popen[bytes] | None = None

    def fresh(self, tag: str) -> None:
        """A new server (its own --db) and a new, empty state file."""
        self.stop()
        self.dir = os.path.join(self.root, f"govsync-{tag}")
        os.makedirs(self.dir)
        self.server, url = start_server(os.path.join(self.dir, "api.db"),
                                        latency_ms=self.latency_ms)
        self.env = {**os.environ, "GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY}
        self.env.pop("GOVSYNC_STATE", None)
        self.state = os.path.join(self.dir, "state.db")

    def stop(self) -> None:
        if self.server is not None:
            self.server.terminate()
            self.server.wait()
            self.server = None

    def run(self, op: str, n: int, step: str) -> dict[str, Any]:
        base = [sys.executable, "-m", "govsync"]
        log = os.path.join(self.dir, f"{step}.log")
        if op == "apply":
            cmd = base + ["apply", self.manifests, "--state", self.state, "--auto-approve",
                          "--parallelism", str(self.parallelism)]
            want = f"Apply: {n} applied, 0 failed"
        else:
            cmd = base + ["plan", self.manifests, "--state", self.state]
            want = (f"Plan: {n} to create" if op == "plan"
                    else f"Plan: 0 to create, 0 to update, 0 blocked, 0 orphaned, 0 uncertain, {n} unchanged")
        result = timed(cmd, self.dir, self.env, log)
        check(result, want, f"govsync {op}")
        return result


class Terraform:
    name = "terraform"

    def __init__(self, tf: str, root: str, parallelism: int):
        self.tf, self.root, self.parallelism = tf, root, parallelism
        rc = os.path.join(root, "terraformrc")  # an empty CLI configuration: no mirrors, no cache
        open(rc, "w").close()
        self.env = {**os.environ, "TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1",
                    "TF_CLI_CONFIG_FILE": rc}
        for var in ("TF_PLUGIN_CACHE_DIR", "TF_CLI_ARGS", "TF_CLI_ARGS_plan", "TF_CLI_ARGS_apply"):
            self.env.pop(var, None)
        self.logs = os.path.join(root, "terraform-logs")
        os.makedirs(self.logs, exist_ok=True)
        out = subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=tf,
                             env=self.env, capture_output=True, text=True)
        if out.returncode != 0 or "built in to Terraform" not in out.stdout:
            raise SystemExit(f"terraform init failed:\n{out.stdout}\n{out.stderr}")
        self.state = os.path.join(tf, "terraform.tfstate")

    def fresh(self, tag: str) -> None:
        for name in ("terraform.tfstate", "terraform.tfstate.backup", ".terraform.tfstate.lock.info"):
            path = os.path.join(self.tf, name)
            if os.path.exists(path):
                os.remove(path)

    def stop(self) -> None:
        pass

    def run(self, op: str, n: int, step: str, limit: float | None = None) -> dict[str, Any]:
        log = os.path.join(self.logs, f"{step}.log")
        if op == "apply":
            cmd = ["terraform", "apply", "-input=false", "-no-color", "-auto-approve",
                   f"-parallelism={self.parallelism}"]
            want = f"Apply complete! Resources: {n} added"
        else:
            cmd = ["terraform", "plan", "-input=false", "-no-color"]
            want = f"Plan: {n} to add, 0 to change" if op == "plan" else "No changes."
        result = timed(cmd, self.tf, self.env, log, limit)
        if result["rc"] is None:
            return result
        check(result, want, f"terraform {op}")
        return result

    def synthetic_state(self, nodes: list[Any], n: int) -> None:
        """The state apply would leave, for the no-op plan; refused unless plan finds no change."""
        self.fresh("synthetic")
        saved = os.path.join(self.logs, f"{n}-synthetic.tfstate")
        if os.path.exists(saved):
            shutil.copyfile(saved, self.state)
            return
        with open(self.state, "w") as fh:
            json.dump(graph.tf_state(nodes), fh, indent=2)
        result = self.run("no-op plan", n, f"{n}-synthetic-check")
        check(result, "No changes.", "terraform plan over the synthesised state")
        shutil.copyfile(self.state, saved)


def stats(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def fmt3(values: list[float], digits: int = 2) -> str:
    lo, med, hi = stats(values)
    return f"{med:.{digits}f} ({lo:.{digits}f}–{hi:.{digits}f})"


def machine() -> dict[str, str]:
    model = "?"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    tf = subprocess.run(["terraform", "version"], capture_output=True, text=True,
                        env={**os.environ, "CHECKPOINT_DISABLE": "1"}).stdout.splitlines()[0]
    from importlib.metadata import version

    return {"nproc": str(os.cpu_count()), "cpu": model, "python": platform.python_version(),
            "terraform": tf, "govsync": version("govsync"),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-tf-apply-above", type=int, default=1000,
                        help="above this many objects Terraform's apply is tried once, "
                             "with --tf-apply-limit (0: not at all)")
    parser.add_argument("--tf-apply-limit", type=float, default=600.0)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--parallelism", type=int, default=16)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--keep", help="keep the generated files and logs in this directory")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    info = machine()
    started_load = os.getloadavg()
    print(f"machine: {info['nproc']} x {info['cpu']}, Python {info['python']}, {info['terraform']}, "
          f"govsync {info['govsync']}; load {started_load[0]:.2f} {started_load[1]:.2f} {started_load[2]:.2f}")
    root = args.keep or tempfile.mkdtemp(prefix="bench-peer-")
    os.makedirs(root, exist_ok=True)
    results: dict[int, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    notes: list[str] = []
    shapes: dict[int, dict[str, int]] = {}
    real_states: dict[int, str] = {}
    try:
        for n in sizes:
            work = os.path.join(root, str(n))
            shutil.rmtree(work, ignore_errors=True)
            shapes[n] = graph.generate(n, work)
            nodes = graph.graph(os.path.join(work, "manifests"))
            print(f"\n{n} objects: {shapes[n]['edges']} edges, depth {shapes[n]['depth']}; "
                  f"govsync at {args.latency_ms} ms per call, parallelism {args.parallelism}")
            g = Govsync(os.path.join(work, "manifests"), work, args.latency_ms, args.parallelism)
            t = Terraform(os.path.join(work, "tf"), work, args.parallelism)
            res: dict[str, dict[str, list[dict[str, Any]]]] = {op: {"govsync": [], "terraform": []} for op in OPS}
            results[n] = res
            tf_apply = not (args.skip_tf_apply_above and n > args.skip_tf_apply_above)
            tf_apply_tried = False
            for r in range(args.repeat):
                tools = [g, t] if r % 2 == 0 else [t, g]
                for tool in tools:
                    tool.fresh(f"{r}")
                for op in OPS:
                    for tool in tools:
                        step = f"{n}-{r}-{op.replace(' ', '-')}"
                        if tool is t and op == "apply" and not tf_apply:
                            if not tf_apply_tried and args.tf_apply_limit > 0:
                                tf_apply_tried = True
                                print(f"  terraform apply at {n}: one try, limit {args.tf_apply_limit:.0f} s")
                                one = t.run("apply", n, step, limit=args.tf_apply_limit)
                                if one["rc"] is None:
                                    with open(os.path.join(t.logs, f"{step}.log")) as fh:
                                        done = fh.read().count("Creation complete")
                                    notes.append(
                                        f"Terraform's apply of {n:,} objects was stopped after "
                                        f"{one['wall']:.0f} s (limit {args.tf_apply_limit:.0f} s, load "
                                        f"{one['load']:.2f}, {one['cpu']:.0f} s CPU) with {done:,} of "
                                        f"{n:,} resources created: not timed further.")
                                else:
                                    notes.append(f"Terraform's apply of {n:,} objects: one run, "
                                                 f"{one['wall']:.1f} s.")
                                    res["apply"]["terraform"].append(one)
                                print(f"    {notes[-1]}")
                            t.synthetic_state(nodes, n)
                            continue
                        one = tool.run(op, n, step)
                        res[op][tool.name].append(one)
                        print(f"  run {r + 1}/{args.repeat} {op:>10} {tool.name:>9}: "
                              f"{one['wall']:7.2f} s wall {one['cpu']:7.2f} s CPU  load {one['load']:.2f}",
                              flush=True)
                        if tool is t and op == "apply":
                            with open(t.state) as fh:
                                real_states[n] = fh.read()
                g.stop()
            if not tf_apply:
                notes.append(
                    f"Terraform's no-op plan at {n:,} objects ran over the state its apply would "
                    "have left, written by bench/peer/graph.py tf_state (terraform plan: no changes)"
                    + ("; at " + ", ".join(f"{k:,}" for k in real_states)
                       + " objects that state equals the real apply's, ids aside." if real_states else "."))
            if real_states:
                check_synthetic(real_states, root)
    finally:
        for obj in list(locals().values()):
            if isinstance(obj, Govsync):
                obj.stop()
    table = report(results, shapes, args, info, started_load, notes)
    print("\n" + table)
    # The file holds the current figures (earlier runs: its history in git).
    with open(args.out, "w") as fh:
        fh.write(table)
    print(f"\nwritten to: {args.out}; files: {root}")


def check_synthetic(real_states: dict[int, str], root: str) -> None:
    """graph.tf_state must equal what terraform apply really wrote, ids, lineage and
    serial aside (the serial counts Terraform's writes of the state during the apply,
    which follow the machine's timing: a busy machine saw one more)."""
    for n, text in real_states.items():
        real = json.loads(text)
        mine = graph.tf_state(graph.graph(os.path.join(root, str(n), "manifests")))
        for s in (real, mine):
            s["lineage"] = s["serial"] = None
            for res in s["resources"]:
                for inst in res["instances"]:
                    inst["attributes"]["id"] = None
        if real != mine:
            raise SystemExit(f"graph.tf_state differs from the state of a real apply at {n}: "
                             + first_difference(real, mine))


def first_difference(real: Any, mine: Any, at: str = "") -> str:
    """Where two JSON values first differ, for the message."""
    if isinstance(real, dict) and isinstance(mine, dict):
        for key in sorted(set(real) | set(mine), key=str):
            if real.get(key) != mine.get(key):
                return first_difference(real.get(key), mine.get(key), f"{at}.{key}")
    if isinstance(real, list) and isinstance(mine, list) and len(real) == len(mine):
        for i, (a, b) in enumerate(zip(real, mine, strict=True)):
            if a != b:
                return first_difference(a, b, f"{at}[{i}]")
    return f"{at or '(the whole state)'}: Terraform wrote {json.dumps(real)[:200]}, graph.tf_state " \
           f"{json.dumps(mine)[:200]}"


def report(results: dict[int, Any], shapes: dict[int, Any], args: argparse.Namespace,
           info: dict[str, str], started_load: tuple[float, float, float], notes: list[str]) -> str:
    cmd = (f"python bench/peer/run.py --sizes {args.sizes} --repeat {args.repeat} "
           f"--skip-tf-apply-above {args.skip_tf_apply_above}")
    lines = [
        "# bench/peer results",
        "",
        f"Machine: {info['nproc']} × {info['cpu']} (nproc {info['nproc']}), Python {info['python']}, "
        f"{info['terraform']}, govsync {info['govsync']}; {info['date']}; load average at start "
        f"{started_load[0]:.2f} / {started_load[1]:.2f} / {started_load[2]:.2f} (1/5/15 min). "
        "The machine is shared: the load column is the 1-minute load when each run started.",
        "",
        f"Command: `{cmd}`",
        "",
        f"govsync pays {args.latency_ms} ms per API call (reference server on loopback, "
        f"`--latency-ms {args.latency_ms}`); Terraform's terraform_data makes no call. "
        f"Parallelism {args.parallelism} for both applies. Whole processes, wall seconds: "
        "median (min–max) of the runs; ratio = govsync / Terraform, run by run "
        "(the two ran back to back), median (min–max).",
        "",
        "| objects | operation | govsync s | Terraform s | ratio | goal | met? | load |",
        "|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for n, res in results.items():
        for op in OPS:
            gv = [x["wall"] for x in res[op]["govsync"]]
            tv = [x["wall"] for x in res[op]["terraform"]]
            loads = [x["load"] for x in res[op]["govsync"] + res[op]["terraform"]]
            if tv:
                if len(tv) < len(gv):  # one Terraform run against every govsync run
                    ratios = [a / tv[0] for a in gv]
                else:
                    ratios = [a / b for a, b in zip(gv, tv, strict=True)]
                ratio = fmt3(ratios, 3)
            else:
                ratios, ratio = [], "—"
            goal = GOALS[op] if n == GOAL_SIZE else None
            if goal is None:
                met = "—"
            elif not ratios:
                met = "not measured"
            else:
                lo, med, hi = stats(ratios)
                met = "**yes**" if hi <= goal else ("**yes (median)**" if med <= goal else "**no**")
            tcol = fmt3(tv) if tv else "not finished" if op == "apply" else "—"
            lines.append(f"| {n:,} | {op} | {fmt3(gv)} | {tcol} | {ratio} | "
                         f"{f'≤ {goal:.2f}' if goal else '—'} | {met} | "
                         f"{min(loads):.1f}–{max(loads):.1f} |")
    lines += ["", "CPU seconds (user + system) of the same runs, median:", "",
              "| objects | operation | govsync CPU s | Terraform CPU s |", "|---:|---|---:|---:|"]
    for n, res in results.items():
        for op in OPS:
            gc = [x["cpu"] for x in res[op]["govsync"]]
            tc = [x["cpu"] for x in res[op]["terraform"]]
            lines.append(f"| {n:,} | {op} | {statistics.median(gc):.2f} | "
                         f"{f'{statistics.median(tc):.2f}' if tc else 'not timed'} |")
    lines += ["", "Graphs: " + "; ".join(
        f"{n:,} objects, {s['edges']:,} edges, depth {s['depth']}" for n, s in shapes.items()) + "."]
    if notes:
        lines += [""] + [f"- {note}" for note in notes]
    lines += ["", "Every run (wall s, load):", ""]
    for n, res in results.items():
        for op in OPS:
            for tool in ("govsync", "terraform"):
                runs = ", ".join(f"{x['wall']:.2f} ({x['load']:.1f})" for x in res[op][tool])
                lines.append(f"- {n:,} {op}, {tool}: {runs or '—'}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
