"""`plan --impact-from FILE` at scale: a file of recorded inputs replayed through a changed
policy's new code and its recorded code (contract section 13, "Impact").

    python bench/impact/replay.py [--inputs 100000] [--sizes 10000,30000,100000]
                                  [--rules 1,10,100] [--repeat 3]

Prints:
* the whole command as a user runs it: `govsync apply` of the policy against the
  embedded endpoint (`--endpoint local`), its code changed, then `govsync plan
  --impact-from FILE` of --inputs records (new and recorded code), wall time;
* how the replay's time grows with the number of inputs (the policy at its smallest)
  and with the policy's size (its rules, at the smallest number of inputs), measured in
  this process through impactreplay.evaluate (both codes), with the workers it uses
  (one a core) and with one worker, so that the share of the second core shows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import SEED, compile_package  # noqa: E402

from govsync import bounded, impactfile, impactreplay  # noqa: E402

GROUPS = [f"g{i}" for i in range(7)]


def code(rules: int, group: str) -> str:
    """A policy of ``rules`` rules deciding the session, and a rewrite of DELETEs."""
    out = ["package formal.v2", "", "import future.keywords.if",
           "import future.keywords.in", "import future.keywords.contains", ""]
    for j in range(rules):
        out += [f'blocked contains "r{j}" if {{',
                f'  input.resource.name == "res{j % 50}"',
                f'  "{GROUPS[j % 7] if j else group}" in input.user.groups', "}", ""]
    out += ['session := {"action": "block", "reason": concat(",", blocked)} if {',
            "  count(blocked) > 0", "}", "",
            'pre_request := {"action": "rewrite", "rewritten_query": "SELECT 1"} if {',
            '  input.query.statement_type == "DELETE"', "}", ""]
    return "\n".join(out)


def manifest(rules: int, group: str) -> str:
    body = "\n".join("    " + line if line else "" for line in code(rules, group).split("\n"))
    return ("apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: measured}\nspec:\n"
            "  userEmail: carol.nguyen@northwind.example\n  code: |\n" + body + "\n")


def records(path: Path, count: int) -> None:
    rng = random.Random(7)
    with path.open("w") as out:
        for i in range(count):
            stage = "session" if i % 2 else "pre_request"
            item = {"user": {"username": f"user{i % 5000}", "type": "human",
                             "groups": rng.sample(GROUPS, 2)},
                    "resource": {"name": f"res{rng.randrange(50)}", "technology": "postgres"},
                    "query": {"statement_type": rng.choice(["SELECT", "SELECT", "DELETE"])}}
            out.write(json.dumps({"time": f"2026-11-2{i % 7}T10:{i % 60:02d}:00Z",
                                  "stage": stage, "input": item}) + "\n")


def govsync(folder: Path, *args: str) -> float:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")},
           "GOVSYNC_API_KEY": "bench", "GOVSYNC_LOCAL_SEED": SEED}
    started = time.perf_counter()
    ran = subprocess.run([sys.executable, "-m", "govsync", *args], cwd=folder, env=env,
                         capture_output=True, text=True)
    took = time.perf_counter() - started
    if ran.returncode != 0:
        raise SystemExit(f"govsync {' '.join(args)} failed:\n{ran.stdout[-2000:]}"
                         f"\n{ran.stderr[-2000:]}")
    return took


def whole_command(folder: Path, inputs: int, repeat: int) -> None:
    (folder / "m.yaml").write_text(manifest(10, "g0"))
    common = ["--endpoint", "local", "--state", "state.db"]
    govsync(folder, "apply", "m.yaml", "--auto-approve", *common)
    (folder / "m.yaml").write_text(manifest(10, "g1"))
    records(folder / "rec.jsonl", inputs)
    times = [govsync(folder, "plan", "m.yaml", "--impact-from", "rec.jsonl", *common)
             for _ in range(repeat)]
    ran = subprocess.run([sys.executable, "-m", "govsync", "plan", "m.yaml", "--impact-from",
                          "rec.jsonl", "--format", "json", *common], cwd=folder,
                         capture_output=True, text=True,
                         env={**os.environ, "GOVSYNC_API_KEY": "bench",
                              "GOVSYNC_LOCAL_SEED": SEED})
    impact = json.loads(ran.stdout)["changes"][0]["impact"]
    assert impact["known"] and impact["recorded"] is not None, impact
    print(f"plan --impact-from, {inputs:,} recorded inputs, new and recorded code "
          f"(10 rules): wall {statistics.median(times):.2f} s (median of {repeat}, "
          f"{min(times):.2f}-{max(times):.2f}); evaluated {impact['evaluated']:,}, new "
          f"{impact['newTotal']:,} vs recorded {impact['recordedTotal']:,}")


def replay_time(path: Path, rules: int, workers: int, repeat: int) -> tuple[float, int]:
    recorded = impactfile.read(str(path))
    bounded.cores = lambda: workers  # type: ignore[method-assign]
    impactreplay.warm()
    took = []
    for n in range(repeat):
        # a comment makes each code new to the workers: nothing kept from the run before
        codes = [code(rules, "g0") + f"# {n}\n", code(rules, "g1") + f"# {n}\n"]
        started = time.perf_counter()
        found = impactreplay.evaluate(codes, recorded.records)
        took.append(time.perf_counter() - started)
        assert all(o.error is None for o in found.values()), found
    return statistics.median(took), len(recorded.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--sizes", default="10000,30000,100000")
    parser.add_argument("--rules", default="1,10,100")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    compile_package()
    cores = bounded.cores()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        whole_command(folder, args.inputs, args.repeat)
        sizes = [int(s) for s in args.sizes.split(",")]
        rules = [int(r) for r in args.rules.split(",")]
        print(f"replay (impactreplay.evaluate, 2 codes), by inputs, 1 rule; {cores} "
              "worker(s) vs 1:")
        for size in sizes:
            path = folder / f"rec-{size}.jsonl"
            records(path, size)
            both, count = replay_time(path, 1, cores, args.repeat)
            one, _ = replay_time(path, 1, 1, args.repeat)
            print(f"  {count:>9,} inputs: {both:6.2f} s ({both / count / 2 * 1e6:5.1f} us an "
                  f"evaluation); one worker {one:6.2f} s (x{one / both:.2f})")
        path = folder / f"rec-{sizes[0]}.jsonl"
        print(f"replay by policy size, {sizes[0]:,} inputs, {cores} worker(s):")
        for count in rules:
            took, n = replay_time(path, count, cores, args.repeat)
            print(f"  {count:>4} rule(s): {took:6.2f} s ({took / n / 2 * 1e6:5.1f} us an "
                  "evaluation)")


if __name__ == "__main__":
    main()
