"""bench/agent: the agent's costs (issue 25).

* no-op cycle: an agent (a process, ``--repo`` a local git repository) cycling a
  project of N generated objects (bench/plan's generator) whose state records
  them all as applied: CPU seconds and wall seconds per cycle (its
  ``govsync_cycle_seconds`` and /proc), against a no-op ``govsync plan`` of the
  same project (a process: CPU of the child, wall), in one run;
* idle CPU: an agent with nothing to do (interval 5 minutes) over
  --idle-seconds, as a share of one core;
* resident memory over --cycles cycles of a small project (RSS sampled each
  tenth of the way: flat is the goal);
* take-over: two agents on one PostgreSQL state (GOVSYNC_TEST_POSTGRES), the
  acting one SIGKILLed: seconds until the other acts (goal: under one
  interval plus 5 s).  Skipped without PostgreSQL.

Usage: python bench/agent/run.py [--objects 10000] [--cycles 1000]
                                 [--idle-seconds 600] [--interval 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "plan"))

from common import compile_package  # noqa: E402
from generate import applied_entries, write  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
PROJECT = "apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\nenvironments:\n" \
          "  prod: {workspace: WORKSPACE}\n"


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}


def git(*args: str, cwd: str) -> None:
    subprocess.run(["git", "-c", "user.email=b@example.com", "-c", "user.name=b", *args],
                   cwd=cwd, check=True, capture_output=True)


def make_repo(root: str, objects: int, workspace: str, state: str | None) -> None:
    from govsync.state import empty_snapshot, open_store

    manifests = os.path.join(root, "manifests")
    write(objects, manifests)
    with open(os.path.join(root, "govsync.yaml"), "w") as fh:
        fh.write(PROJECT.replace("WORKSPACE", workspace))
    with open(os.path.join(root, ".gitignore"), "w") as fh:
        fh.write(".govsync/\n")
    git("init", "-q", "-b", "main", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "bench", cwd=root)
    entries = applied_entries(manifests, empty_snapshot(workspace))
    with open_store(state or os.path.join(root, ".govsync", "state.db")) as store:
        store.snapshot(workspace)
        store.put_many(workspace, entries)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AgentProcess:
    def __init__(self, repo: str, work: str, interval: str, state: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = [sys.executable, "-m", "govsync", "agent", "--repo", repo, "--checkout",
                   os.path.join(work, f"checkout-{self.port}"), "--listen",
                   f"127.0.0.1:{self.port}", "--interval", interval]
        if state:
            command += ["--state", state]
        self.proc = subprocess.Popen(command, cwd=work, env=env(), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=60) as answer:
            return str(answer.read().decode())

    def cycles(self) -> tuple[int, float]:
        """(cycles run, their seconds) from /metrics."""
        try:
            text = self.get("/metrics")
        except OSError:
            return 0, 0.0
        count = re.search(r'govsync_cycle_seconds_count\{environment="prod"\} (\S+)', text)
        total = re.search(r'govsync_cycle_seconds_sum\{environment="prod"\} (\S+)', text)
        return (int(float(count.group(1))) if count else 0,
                float(total.group(1)) if total else 0.0)

    def acting(self) -> bool:
        try:
            found = json.loads(self.get("/api/v1/environments"))["environments"]
        except OSError:
            return False
        return bool(found and found[0]["acting"])

    def cpu(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def rss_mib(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            kib = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        return kib / 1024

    def wait_cycles(self, n: int, timeout: float = 3600) -> tuple[int, float]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the agent exited with {self.proc.returncode}")
            found = self.cycles()
            if found[0] >= n:
                return found
            time.sleep(0.05)
        raise SystemExit(f"the agent did not run {n} cycles in {timeout:.0f} s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)


def noop_cycle(work: str, objects: int, runs: int) -> None:
    repo = os.path.join(work, "big")
    os.makedirs(repo)
    make_repo(repo, objects, "prod", None)
    # govsync plan, a process: CPU of the child, wall.
    plans = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "govsync", "plan", "--env", "prod",
                               "--detailed-exitcode"], cwd=repo, env=env(),
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"govsync plan is not a no-op: {done.returncode} {done.stderr}")
        plans.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall))
    # The agent, on the same state file.
    agent = AgentProcess(repo, work, "0.01s", os.path.join(repo, ".govsync", "state.db"))
    try:
        first, _ = agent.wait_cycles(1)
        cpu0, (n0, s0) = agent.cpu(), agent.cycles()
        start = time.perf_counter()
        n1, s1 = agent.wait_cycles(n0 + runs)
        wall = time.perf_counter() - start
        cpu = agent.cpu() - cpu0
        n = n1 - n0
        status = json.loads(agent.get("/api/v1/environments"))["environments"][0]["status"]
    finally:
        agent.stop()
    plan_cpu = min(p[0] for p in plans)
    plan_wall = min(p[1] for p in plans)
    print(f"no-op cycle of {objects} objects ({status}): {cpu / n:.2f} s CPU, "
          f"{(s1 - s0) / n:.2f} s wall per cycle ({n} cycles; {wall / n:.2f} s between "
          f"cycles' ends, git fetch included)")
    print(f"no-op govsync plan of the same: {plan_cpu:.2f} s CPU, {plan_wall:.2f} s wall "
          f"(best of {runs} processes)")


def idle(work: str, seconds: float) -> None:
    repo = os.path.join(work, "idle")
    os.makedirs(repo)
    make_repo(repo, 20, "prod", None)
    agent = AgentProcess(repo, os.path.join(work), "5m")
    try:
        agent.wait_cycles(1, 120)
        time.sleep(1)
        cpu0 = agent.cpu()
        time.sleep(seconds)
        cpu = agent.cpu() - cpu0
    finally:
        agent.stop()
    print(f"idle agent: {cpu:.2f} s CPU over {seconds:.0f} s = {100 * cpu / seconds:.3f} % of "
          "one core")


def memory(work: str, cycles: int) -> None:
    repo = os.path.join(work, "memory")
    os.makedirs(repo)
    make_repo(repo, 100, "prod", None)
    agent = AgentProcess(repo, work, "0.001s")
    samples = []
    try:
        for i in range(1, 11):
            agent.wait_cycles(max(1, cycles * i // 10))
            samples.append((agent.cycles()[0], agent.rss_mib()))
    finally:
        agent.stop()
    shown = ", ".join(f"{n}: {rss:.1f}" for n, rss in samples)
    print(f"resident memory (MiB) by cycles of 100 objects: {shown}")
    print(f"memory growth from the first tenth to the end: {samples[-1][1] - samples[0][1]:+.1f} "
          "MiB")


def takeover(work: str, interval: float) -> None:
    postgres = os.environ.get("GOVSYNC_TEST_POSTGRES", "")
    if not postgres:
        print("take-over: skipped (GOVSYNC_TEST_POSTGRES is not set)")
        return
    import psycopg

    workspace = f"bench-{uuid.uuid4().hex[:10]}"
    repo = os.path.join(work, "takeover")
    os.makedirs(repo)
    make_repo(repo, 20, workspace, postgres)
    first = AgentProcess(repo, work, f"{interval}s", postgres)
    second = None
    try:
        deadline = time.monotonic() + 60
        while not first.acting() and time.monotonic() < deadline:
            time.sleep(0.05)
        second = AgentProcess(repo, work, f"{interval}s", postgres)
        second.wait_cycles(0, 5)
        time.sleep(1)
        first.stop(signal.SIGKILL)
        killed = time.monotonic()
        while not second.acting() and time.monotonic() < killed + interval + 30:
            time.sleep(0.05)
        took = time.monotonic() - killed
        print(f"take-over after SIGKILL: {took:.2f} s (interval {interval:.0f} s; goal under "
              f"{interval + 5:.0f} s)")
    finally:
        for agent in (first, second):
            if agent is not None:
                agent.stop(signal.SIGKILL)
        with psycopg.connect(postgres, autocommit=True) as conn:
            for table in ("govsync_objects", "govsync_history", "govsync_locks",
                          "govsync_agent", "govsync_plan_keys", "govsync_applied_plans"):
                conn.execute(f"DELETE FROM {table} WHERE workspace = %s", (workspace,))
            conn.execute("DELETE FROM govsync_workspaces WHERE name = %s", (workspace,))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="no-op cycles and plans measured")
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=600.0)
    parser.add_argument("--interval", type=float, default=10.0, help="take-over's interval")
    args = parser.parse_args()
    compile_package()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}")
    with tempfile.TemporaryDirectory() as work:
        noop_cycle(work, args.objects, args.runs)
        idle(work, args.idle_seconds)
        memory(work, args.cycles)
        takeover(work, args.interval)


if __name__ == "__main__":
    main()
