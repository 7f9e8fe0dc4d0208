"""validate's code checks at scale: 1,000 policies (each its own Rego, reading a hook and
a loader's data), a hook and a loader, validated by `govsync validate` as a user runs it.

    python bench/code/run.py [--policies 1000] [--repeat 5]

Prints the whole command's wall time (median, min-max), the same set without its code
checks (the policies as Spaces of the same count: what validate costs without them),
and the engines' own share: ``policycode.check`` of the 1,000 sources in a warm worker,
per policy, and a cold worker's start.
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

        from govsync import policycode
        from govsync.manifests import load

        manifests = load([str(policies)])
        sources = [policycode.Source(m.kind.code, m.template["code"])
                   for m in manifests.objects.values() if m.kind.code]
        started = time.perf_counter()
        policycode.warm()
        policycode.check(sources[:1])
        cold = time.perf_counter() - started
        runs = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            found = policycode.check(sources)
            runs.append(time.perf_counter() - started)
            assert not any(c.errors for c in found)
        per = statistics.median(runs) / len(sources) * 1000
        print(f"policycode.check of {len(sources)} sources, warm worker: {shown(runs)}, "
              f"{per:.2f} ms a source")
        print(f"a cold worker's start and first check: {cold:.3f} s")


if __name__ == "__main__":
    main()
