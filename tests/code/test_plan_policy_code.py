"""A plan that creates or changes a policy (contract section 13), against the real
reference server over loopback: the service's own check (GetPolicyCodeValidity) blocks
code it refuses, with its error; --refresh=false and an endpoint without the operation
say the check was not made; the change carries its tests and the decisions that change,
in JSON and in the pull-request comment; rules see change.tests."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import Served, in_process, policy_head

KEY = "k" * 32
SEED = Path(__file__).resolve().parents[2] / "examples" / "server-seed.yaml"

MANIFESTS = policy_head("hours") + """\
    package formal.v2

    import future.keywords.if

    session := {"action": "block", "reason": "risk"} if {
      input.hooks.risk_score.score > THRESHOLD
    }
---
apiVersion: govsync/v1
kind: Hook
metadata: {name: risk_score}
spec:
  status: active
  timeoutMs: 1000
  code: |
    export default function hook(input, env) {
      return {score: input.user.username === "ana" ? 90 : 3};
    }
---
apiVersion: govsync/v1
kind: PolicyTest
metadata: {name: hours-test}
spec:
  policyRef: hours
  cases:
    - name: ana is blocked
      stage: session
      input: {user: {username: ana}}
      expect: {action: block}
    - name: a score of 82
      stage: session
      input: {user: {username: cy}}
      hooks: {risk_score: {score: 82}}
      expect: {}
"""


@pytest.fixture(params=["all", "spec"])
def server(request: pytest.FixtureRequest) -> Iterator[Served]:
    served = Served(["--api-key", KEY, "--seed", str(SEED), "--operations", request.param])
    try:
        yield served
    finally:
        served.stop()


def run(folder: Path, server: Served, *args: str) -> tuple[int, str, str]:
    ran = in_process([*args, str(folder / "m.yaml"), "--endpoint", server.url,
                      "--state", str(folder / "state.db")],
                     env={"PATH": "/usr/bin:/bin", "GOVSYNC_API_KEY": KEY}, cwd=folder)
    assert "Traceback" not in ran.err, ran.err
    return ran.code, ran.out, ran.err


def write(folder: Path, threshold: str) -> None:
    (folder / "m.yaml").write_text(MANIFESTS.replace("THRESHOLD", threshold))


def test_a_changed_policy_shows_its_tests_and_the_decisions_that_change(
        tmp_path: Path, server: Served) -> None:
    write(tmp_path, "80")
    code, out, err = run(tmp_path, server, "apply", "--auto-approve")
    assert code == 0, out + err
    write(tmp_path, "85")
    code, out, _ = run(tmp_path, server, "plan", "--format", "json")
    # (an endpoint with the spec's operations only cannot update a policy: blocked, and
    # its tests are shown all the same)
    assert code == (0 if server.params["operations"] == "all" else 1)
    plan = json.loads(out)
    change = next(c for c in plan["changes"] if c["address"] == "Policy/hours")
    tests = change["tests"]
    assert {k: tests[k] for k in ("passed", "failed", "errors", "changed")} == {
        "passed": 2, "failed": 0, "errors": 0,
        "changed": [{"test": "PolicyTest/hours-test", "case": "a score of 82",
                     "before": {"action": "block", "reason": "risk"}, "after": None}]}
    checks = {c["name"]: c for c in plan["checks"]}
    if server.params["operations"] == "all":
        assert tests["service"] == "valid" and tests["compiles"] is True
        assert checks["policy code"]["status"] == "passed"
    else:  # the endpoint does not serve it: said, not assumed
        assert tests["service"] == "unknown"
        assert checks["policy code"] == {
            "name": "policy code", "status": "skipped",
            "detail": "this endpoint does not offer GetPolicyCodeValidity: the service's "
                      "check of 1 policies' code was not made (govsync validate compiles "
                      "it offline)"}
    code, out, _ = run(tmp_path, server, "plan", "--format", "markdown")
    assert "#### Policy code and tests" in out
    assert "| `Policy/hours` | yes |" in out
    assert ('| `PolicyTest/hours-test` | a score of 82 | session | '
            '`{"action": "block", "reason": "risk"}` | `no decision` |') in out
    code, out, _ = run(tmp_path, server, "plan", "--refresh=false", "--format", "json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks["policy code"]["status"] == "skipped"
    assert "not asked (--refresh=false)" in checks["policy code"]["detail"]


def test_code_the_service_refuses_is_blocked_with_its_error(tmp_path: Path,
                                                            server: Served) -> None:
    write(tmp_path, "80 +")  # does not compile
    code, out, err = run(tmp_path, server, "plan", "--format", "json")
    if server.params["operations"] == "spec":
        assert code == 0  # not asked: the service checks it when it is sent
        return
    assert code == 1
    change = next(c for c in json.loads(out)["changes"] if c["address"] == "Policy/hours")
    assert change["action"] == "blocked"
    assert change["why"]["why"] == "code-invalid"
    assert change["reason"].startswith("the service says the policy's code does not compile: "
                                       "line ")
    assert change["tests"]["compiles"] is False
    assert change["tests"]["service"] == "invalid"
    code, out, err = run(tmp_path, server, "apply", "--auto-approve")
    assert code == 1 and "blocked" in (out + err)
    assert not (tmp_path / "state.db").exists() or "Policy/hours" not in run(
        tmp_path, server, "state", "list")[1]


def test_a_rule_can_require_a_passing_case(tmp_path: Path, server: Served) -> None:
    if server.params["operations"] == "spec":
        pytest.skip("the rule does not depend on the endpoint")
    write(tmp_path, "85")
    (tmp_path / "govsync.yaml").write_text("""\
apiVersion: govsync/v1
kind: Project
rules:
  - name: tested-policies
    match: {kinds: [Policy]}
    expression: "!has(change.tests) || (change.tests.passed > 0 && change.tests.failed == 0)"
    message: "a created or changed policy needs passing test cases"
""")
    code, out, err = run(tmp_path, server, "plan")
    assert code == 0, out + err
    assert "Check rule tested-policies: passed" in out
    (tmp_path / "m.yaml").write_text(MANIFESTS.replace("THRESHOLD", "85").replace(
        "expect: {action: block}", "expect: {action: allow}"))
    code, out, err = run(tmp_path, server, "plan")
    assert code == 1
    assert "rule tested-policies: a created or changed policy needs passing test cases" in err


def test_names_and_decisions_from_tests_are_text_in_the_comment(tmp_path: Path) -> None:
    """A case's name and the decision it got (whose reason may come from the input) are
    shown in the pull-request comment as text: no HTML, link, emphasis or mention."""
    hostile = "</details><img src=https://evil.example/t.png> [x](https://evil.example) @org/team _y_"
    manifests = MANIFESTS.replace("THRESHOLD", "80").replace(
        "- name: ana is blocked", f"- name: {json.dumps(hostile)}").replace(
        '"reason": "risk"', '"reason": input.user.username').replace(
        "input: {user: {username: cy}}", 'input: {user: {username: "<b>cy</b>"}}').replace(
        "expect: {action: block}", "expect: {action: mfa}")
    (tmp_path / "m.yaml").write_text(manifests)
    ran = in_process(["plan", "m.yaml", "--format", "markdown", "--state",
                      str(tmp_path / "state.db")], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert ran.code == 0 and "Traceback" not in ran.err, ran.out + ran.err
    # (the manifests' own text is shown in the diff's fenced block, where nothing renders)
    section = "\n".join(line for line in ran.out.split("#### Policy code and tests")[1]
                        .splitlines() if line.startswith("- **failed**"))
    assert "evil" in section and "\\<b\\>cy\\</b\\>" in section, section  # the reason
    assert not re.search(r"(?<!\\)<(/details|img|b>)", section), section
    for raw in ("](https://", "https://evil", "@org", "_y_"):
        assert raw not in section, (raw, section)
