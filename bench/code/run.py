"""validate's code checks at scale: 1,000 policies (each its own Rego, reading a hook and
a loader's data), a hook and a loader, validated by `govsync validate` as a user runs it.

    python bench/code/run.py [--policies 1000] [--repeat 5]

Prints the whole command's wall and CPU time (median, min-max), the same count of
Spaces (what validate costs without code), the examples, and the engines' share:
``policycode.check`` of the sources in a process of its own, whose CPU includes its
workers' (``govsync validate`` leaves without reaping them, so its CPU figure is the
command's own only).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import ROOT, compile_package  # noqa: E402

POLICY = """\
apiVersion: govsync/v1
kind: Policy
metadata:
  name: policy-{i}
spec:
  description: Policy {i}.
  userEmail: owner@example.com
  status: active
  code: |
    package formal.v2

    import future.keywords.if
    import future.keywords.in

    default session := {{"action": "allow"}}

    session := {{"action": "block", "reason": "risk {i}"}} if {{
      input.hooks.risk.score > {score}
      not data.roster[input.user.email]
    }}

    pre_request := {{"action": "block", "type": "block_with_formal_message"}} if {{
      input.resource.id == "res-{i}"
      not input.query.statement_type in {{"SELECT", "SHOW"}}
      not "group-{i}" in input.user.groups
    }}
"""

REST = """\
apiVersion: govsync/v1
kind: Hook
metadata:
  name: risk
spec:
  status: active
  timeoutMs: 1000
  code: |
    export default function hook(input, env) {
      return {score: (input.user?.groups ?? []).length * 10};
    }
---
apiVersion: govsync/v1
kind: PolicyDataLoader
metadata:
  name: roster
spec:
  key: roster
  workerRuntime: python3.11
  workerSchedule: "0 */6 * * *"
  workerCode: "def main(): return {}"
"""

SPACE = "apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: space-{i}\nspec:\n" \
        "  description: Space {i}.\n"


def write(folder: Path, count: int, template: str) -> None:
    folder.mkdir(parents=True)
    docs = [template.format(i=i, score=50 + i % 50) for i in range(count)]
    (folder / "objects.yaml").write_text("---\n".join(docs), encoding="utf-8")
    (folder / "rest.yaml").write_text(REST, encoding="utf-8")


def timed(argv: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """Wall times, and CPU times (user + system of the process and of the worker it
    waited for, by os.wait4)."""
    walls, cpus = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
        walls.append(time.perf_counter() - started)
        cpus.append(usage.ru_utime + usage.ru_stime)
        assert process.stderr is not None
        error = process.stderr.read()
        process.stderr.close()
        assert os.waitstatus_to_exitcode(status) == 0, error
    return walls, cpus


def shown(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({min(values):.3f}-{max(values):.3f})"


def both(values: tuple[list[float], list[float]]) -> str:
    return f"wall {shown(values[0])}, CPU {shown(values[1])}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--policies", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        policies, spaces = Path(tmp) / "policies", Path(tmp) / "spaces"
        write(policies, args.policies, POLICY)
        write(spaces, args.policies, SPACE)
        command = [sys.executable, "-m", "govsync", "validate"]
        with_code = timed([*command, str(policies)], args.repeat)
        without = timed([*command, str(spaces)], args.repeat)
        print(f"validate, {args.policies} policies with their code checks: {both(with_code)}")
        print(f"validate, {args.policies} spaces (no code):               {both(without)}")
        examples = timed([*command, os.path.join(ROOT, "examples", "manifests")], args.repeat)
        print(f"validate, the examples (5 policies, 2 permissions, 4 hooks): {both(examples)}")

        # The engines' own share, in a process that reaps its workers as it exits (the
        # command line leaves without waiting for them: their CPU is not in its own).
        engines = timed([sys.executable, "-c", CHECK, str(policies)], args.repeat)
        print(f"policycode.check of the {args.policies + 1} sources in a process of its own "
              f"(loading them, starting its workers): {both(engines)}, "
              f"{statistics.median(engines[1]) / (args.policies + 1) * 1000:.2f} ms of CPU "
              "a source")


CHECK = """
import sys
from govsync import policycode
from govsync.policycode import sandbox
from govsync.manifests import load
manifests = load([sys.argv[1]])
sources = [policycode.Source(m.kind.code, m.template["code"])
           for m in manifests.objects.values() if m.kind.code]
assert not any(c.errors for c in sandbox.check(sources))
"""


if __name__ == "__main__":
    main()
