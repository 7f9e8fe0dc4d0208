"""`govsync test` at scale: 1,000 PolicyTest cases over 100 policies (10 each, a third
with their own `now`, some with their own data), run by `govsync test` as a user runs
it: once with every hook's result given in the case (mocked), once with the hooks'
JavaScript run on each case (real).

    python bench/policytests/run.py [--policies 100] [--cases 10] [--repeat 5]

Prints the whole command's wall time (median, min-max) for each, and checks that every
case passed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from common import compile_package  # noqa: E402

POLICY = """\
---
apiVersion: govsync/v1
kind: Policy
metadata: {{name: policy-{i}}}
spec:
  userEmail: owner@example.com
  code: |
    package formal.v2

    import future.keywords.if
    import future.keywords.in

    session := {{"action": "block", "reason": "risk {i}"}} if {{
      input.hooks.risk.score > {limit}
    }}

    pre_request := {{"action": "block", "reason": "night"}} if {{
      time.clock([time.now_ns(), "UTC"])[0] < 6
    }} else := {{"action": "block", "reason": "on call"}} if {{
      input.user.username in data.oncall
    }}
    default pre_request := {{"action": "allow"}}
"""

HOOK = """\
---
apiVersion: govsync/v1
kind: Hook
metadata: {name: risk}
spec:
  status: active
  timeoutMs: 1000
  code: |
    export default function hook(input, env) {
      const name = input.user.username;
      let score = 0;
      for (const c of name) score = (score * 31 + c.charCodeAt(0)) % 100;
      return {score};
    }
"""


def case(i: int, j: int, mocked: bool) -> str:
    user = f"user{i}-{j}"
    score = (sum(map(ord, user)) * 7) % 100
    if j % 3 == 0:
        hour = 3 if j % 2 else 11
        expect = '{action: block, reason: night}' if hour < 6 else '{action: allow}'
        return (f"    - name: case {j}\n      stage: pre_request\n"
                f"      input: {{user: {{username: {user}}}}}\n"
                f"      now: \"2026-11-28T{hour:02d}:00:00Z\"\n      expect: {expect}\n")
    if j % 3 == 1:
        return (f"    - name: case {j}\n      stage: pre_request\n"
                f"      input: {{user: {{username: {user}}}}}\n"
                f"      now: \"2026-11-28T12:00:00Z\"\n"
                f"      data: {{oncall: [{user}]}}\n"
                f"      expect: {{action: block, reason: on call}}\n")
    hooks = f"      hooks: {{risk: {{score: {score}}}}}\n" if mocked else ""
    return (f"    - name: case {j}\n      stage: session\n"
            f"      input: {{user: {{username: {user}}}}}\n{hooks}"
            "      expect: {}\n")


def write(folder: Path, policies: int, cases: int, mocked: bool) -> None:
    parts = [HOOK.lstrip("-\n")]
    for i in range(policies):
        parts.append(POLICY.format(i=i, limit=100))  # no score is over 100: no decision
        parts.append(f"---\napiVersion: govsync/v1\nkind: PolicyTest\n"
                     f"metadata: {{name: test-{i}}}\nspec:\n  policyRef: policy-{i}\n"
                     "  cases:\n" + "".join(case(i, j, mocked) for j in range(cases)))
    (folder / "tests.yaml").write_text("".join(parts))


def timed(folder: Path, repeat: int, expected: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        ran = subprocess.run([sys.executable, "-m", "govsync", "test", str(folder),
                              "--format", "json"], capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        summary = json.loads(ran.stdout)["summary"] if ran.stdout else None
        if ran.returncode != 0 or summary != {"passed": expected, "failed": 0, "errors": 0}:
            sys.exit(f"govsync test failed ({ran.returncode}): {summary} {ran.stderr[-2000:]}")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", type=int, default=100)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compile_package()
    total = args.policies * args.cases
    for mocked in (True, False):
        with tempfile.TemporaryDirectory(prefix="govsync-bench-tests-") as tmp:
            write(Path(tmp), args.policies, args.cases, mocked)
            times = timed(Path(tmp), args.repeat, total)
        what = "hooks mocked" if mocked else "hooks run"
        print(f"govsync test, {total} cases ({args.policies} policies), {what}: wall "
              f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})")


if __name__ == "__main__":
    main()
