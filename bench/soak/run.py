"""bench/soak: apply through injected faults and kills, then count what was lost
or duplicated.

The reference server runs on loopback with ``--fault-rate P`` (half of the
faulty writes fail cleanly with 500, half store the object and drop the
connection) and ``--latency-ms``.  Each round starts ``govsync apply`` on the
generated manifests and SIGKILLs it after a random delay, ``--kills`` times;
then uncertain entries are settled the way an operator would (``state
resolve --id`` when the object is on the server, ``--absent`` when not) and
apply is re-run until it exits 0.  Finally the server's objects are compared
with the manifests:

    duplicates  objects of one address created more than once (must be 0)
    losses      addresses applied in state but absent on the server (must be 0)
    reruns      applies needed after the kills to settle everything

With ``--attacks``, each round also tries one of the attacks of issue 21
between the kills, as someone with the state's read access and the applying
credentials would: a saved plan applied again after ``state forget``; a
saved plan edited (a hook's timeout set to the FORGED value) with its
authentication code recomputed from everything ``state export`` shows; the
same forged plan as a reviewed plan (``apply --reviewed``); and, on SQLite,
the state file truncated and restored from its backup as the error advises.
With ``ssh-keygen`` on the machine, the commit attacks of issue 30 join them
(``commits.py``: an environment added onto a governed endpoint, a governed
workspace renamed, a state committed where the agent keeps it).
Two more counts must then be 0:

    accepted    attacks that govsync let through (exit 0)
    forged      objects on the server with the forged value

With ``--changes``, once every create has settled, a second phase changes every
hook's timeout (updates) and removes a quarter of the hooks with ``Removed``
documents (deletes), and goes through the same faults and kills; apply is
re-run until it exits 0 (an update or a delete whose answer was lost is settled
by a read: no ``state resolve`` is needed).  Two more counts must then be 0:

    unchanged   hooks the manifests keep whose timeout is not the new one
    undeleted   removed hooks still on the server (or still in state)

    python bench/soak/run.py [--objects 200] [--fault-rate 0.2] [--kills 5]
                             [--state sqlite|postgresql://...] [--seed 1] [--attacks]
                             [--changes]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from common import KEY, get, start_server  # noqa: E402

sys.path.insert(0, HERE)
from commits import KINDS as COMMIT_KINDS  # noqa: E402
from commits import Commits  # noqa: E402


def hooks(directory: str, n: int, prefix: str, timeout: int = 100,
          removed: frozenset[str] = frozenset()) -> list[str]:
    names = [f"{prefix}_{i}" for i in range(n)]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "hooks.yaml"), "w", encoding="utf-8") as fh:
        for name in names:
            if name in removed:
                fh.write(f"---\napiVersion: govsync/v1\nkind: Removed\n"
                         f"metadata: {{name: rm-{name}}}\n"
                         f"spec: {{from: Hook/{name}, destroy: true}}\n")
                continue
            fh.write(f"---\napiVersion: govsync/v1\nkind: Hook\nmetadata: {{name: {name}}}\n"
                     f"spec: {{code: \"export default function hook() {{ return 1; }}\\n\", "
                     f"timeoutMs: {timeout}}}\n")
    return names


def objects(url: str) -> dict[str, list[dict[str, Any]]]:
    data: dict[str, list[dict[str, Any]]] = json.loads(get(url, "/_govsync/objects"))
    return data


def govsync(args: list[str], env: dict[str, str], *, kill_after: float | None = None,
            timeout: float = 600) -> int:
    proc = subprocess.Popen([sys.executable, "-m", "govsync", *args], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    if kill_after is not None:
        try:
            return proc.wait(kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return -9
    return proc.wait(timeout)


def state_entries(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "govsync", "state", "list", "--format", "json"],
                         env=env, capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    rows = data["entries"] if isinstance(data, dict) else data
    return {e["address"]: e for e in rows}


FORGED = 99_999


def forge(plan: str, out: str, key_material: bytes) -> int:
    """``plan`` with every hook's timeout set to FORGED, its MAC recomputed with
    ``key_material`` (what a reader found) as a plan key; how many requests changed."""
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from govsync import planfile

    with open(plan, encoding="utf-8") as fh:
        data = json.load(fh)
    data.pop("mac", None)
    edited = 0
    for change in data["changes"]:
        if change.get("request") and "timeoutMs" in change["request"]:
            change["request"]["timeoutMs"] = FORGED
            edited += 1
    data["mac"] = planfile.mac(data, key_material)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
    return edited


def changes(plan: str) -> int:
    with open(plan, encoding="utf-8") as fh:
        summary = json.load(fh)["summary"]
    return int(summary["create"] + summary["update"])


def attack(kind: str, tmp: str, env: dict[str, str], manifests: str) -> bool:
    """One attack; whether govsync let it through (it must not)."""
    plan, forged = os.path.join(tmp, "saved.json"), os.path.join(tmp, "forged.json")
    if kind == "truncate-and-restore":
        state = env["GOVSYNC_STATE"]
        backup = state + ".backup"
        if not os.path.exists(backup):
            return False
        with open(state, "r+b") as fh:
            fh.truncate(os.path.getsize(state) // 2)
        with open(backup, "rb") as src, open(state, "wb") as dst:
            dst.write(src.read())
        for leftover in (state + "-wal", state + "-shm"):
            if os.path.exists(leftover):
                os.unlink(leftover)
        return False  # the count of duplicates at the end is the verdict
    if govsync(["plan", manifests, "--out", plan], env) != 0:
        return False
    if kind == "replay":
        if not changes(plan) or govsync(["apply", plan, "--parallelism", "16"], env) != 0:
            return False  # nothing to replay
        entries = [(a, e["id"]) for a, e in state_entries(env).items()
                   if e["status"] == "applied"]
        if not entries:
            return False
        address, object_id = entries[0]
        govsync(["state", "forget", address], env)
        through = govsync(["apply", plan], env) == 0
        # The object is still on the server: put its entry back, as an operator would.
        govsync(["state", "import", address, object_id, manifests], env)
        return through
    export = subprocess.run([sys.executable, "-m", "govsync", "state", "export"], env=env,
                            capture_output=True, text=True, check=False).stdout
    key = json.loads(export)["fingerprintKey"].encode() if export else b""
    if not forge(plan, forged, key):
        return False  # nothing left to forge: the forged plan would be the genuine one
    if kind == "forge":
        return govsync(["apply", forged], env) == 0
    return govsync(["apply", manifests, "--reviewed", forged, "--auto-approve"], env) == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--state", default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--attacks", action="store_true",
                        help="Mix the attacks of issue 21 with the faults and kills.")
    parser.add_argument("--changes", action="store_true",
                        help="Then update every hook and delete a quarter of them, through "
                             "the same faults and kills.")
    args = parser.parse_args()
    accepted = 0
    kinds = ["replay", "forge", "reviewed"] + (["truncate-and-restore"]
                                               if args.state == "sqlite" else [])
    if args.attacks and shutil.which("ssh-keygen"):
        kinds += COMMIT_KINDS
    commits: Commits | None = None
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms,
                                   extra=["--fault-rate", str(args.fault_rate)])
        try:
            names = hooks(os.path.join(tmp, "m"), args.objects, f"soak{args.seed}")
            state = os.path.join(tmp, "state.db") if args.state == "sqlite" else args.state
            env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
            env.update(GOVSYNC_ENDPOINT=url, GOVSYNC_API_KEY=KEY, GOVSYNC_STATE=state,
                       GOVSYNC_WORKSPACE=f"soak-{os.getpid()}-{args.seed}", NO_COLOR="1")
            apply_args = ["apply", os.path.join(tmp, "m"), "--auto-approve", "--parallelism", "16"]
            started = time.monotonic()
            for _ in range(args.kills):
                govsync(apply_args, env, kill_after=rng.uniform(0.3, 2.0))
                if args.attacks:
                    kind = rng.choice(kinds)
                    if kind in COMMIT_KINDS:
                        commits = commits or Commits(tmp, env, os.path.join(tmp, "m"))
                        accepted += commits.attack(kind, tmp)
                    else:
                        accepted += attack(kind, tmp, env, os.path.join(tmp, "m"))
            reruns = 0
            while True:
                reruns += 1
                on_server = {h["name"] for h in objects(url).get("Hook", [])}
                for address, entry in state_entries(env).items():
                    if entry["status"] == "applied":
                        continue
                    name = address.split("/", 1)[1]
                    ids = [h["id"] for h in objects(url)["Hook"] if h["name"] == name]
                    settle = ["--id", ids[0]] if name in on_server else ["--absent"]
                    govsync(["state", "resolve", address, *settle], env)
                if govsync(apply_args, env) == 0:
                    settled = True
                    break
                if reruns >= 50:
                    settled = False
                    break
            changed: dict[str, int] = {}
            if args.changes and settled:
                gone = frozenset(names[::4])
                hooks(os.path.join(tmp, "m"), args.objects, f"soak{args.seed}", timeout=250,
                      removed=gone)
                for _ in range(args.kills):
                    govsync(apply_args, env, kill_after=rng.uniform(0.3, 2.0))
                for _ in range(50):
                    reruns += 1
                    if govsync(apply_args, env) == 0:
                        break
                else:
                    settled = False
                live = objects(url).get("Hook", [])
                kept = [h for h in live if h["name"] in names and h["name"] not in gone]
                changed = {
                    "unchanged": sum(1 for h in kept if h.get("timeoutMs") != 250),
                    "undeleted": sum(1 for h in live if h["name"] in gone)
                    + sum(1 for a in state_entries(env) if a.split("/", 1)[1] in gone),
                }
                names = [n for n in names if n not in gone]
            seconds = time.monotonic() - started
            counts = Counter(h["name"] for h in objects(url).get("Hook", []))
            entries = state_entries(env)
            duplicates = sum(n - 1 for name, n in counts.items() if name in names and n > 1)
            losses = sum(1 for a, e in entries.items()
                         if e["status"] == "applied" and counts[a.split("/", 1)[1]] == 0)
            missing = sum(1 for name in names if counts[name] == 0)
            forged = sum(1 for h in objects(url).get("Hook", []) if h.get("timeoutMs") == FORGED)
            print(json.dumps({
                "objects": args.objects, "faultRate": args.fault_rate, "kills": args.kills,
                "latencyMs": args.latency_ms, "state": "sqlite" if args.state == "sqlite"
                else "postgresql", "duplicates": duplicates, "losses": losses,
                "missingAfterSettle": missing, "rerunsToSettle": reruns,
                "seconds": round(seconds, 1),
                **({"attacksAccepted": accepted, "forgedOnServer": forged}
                   if args.attacks else {}),
                **changed,
            }))
        finally:
            server.kill()
            server.wait()
    # Exit 1 when the soak found what it looks for, or never settled.
    if (duplicates or losses or missing or not settled or accepted or forged
            or any(changed.values())):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
