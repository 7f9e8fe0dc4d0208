"""`govsync test` (contract section 13): PolicyTest cases decided by their policy's code
through the command line, hooks really run (sandboxed), every way a case can go wrong
a clear error at its place, JSON and JUnit (read by junitparser, the parser of GitHub's
test-report action), environments, --require-tests, --target."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from junitparser import Error, Failure, JUnitXml

from govsync.manifests.manifest import Context  # noqa: F401  (the package loads)
from testkit import in_process, policy_head

POLICY = policy_head("hours") + """\
    package formal.v2

    import future.keywords.if

    session := {"action": "block", "reason": "risk"} if {
      input.hooks.risk_score.score > 80
    }

    pre_request := {"action": "block", "reason": "night"} if {
      hour := time.clock([time.now_ns(), "UTC"])[0]
      hour < 6
    }
    default pre_request := {"action": "allow"}
"""

HOOK = """\
---
apiVersion: govsync/v1
kind: Hook
metadata: {name: risk_score}
spec:
  status: {status}
  timeoutMs: 300
  allowlistedEnvironmentVariables: [REGION]
  code: |
{code}
"""

SCORE = """\
    export default function hook(input, env) {
      return {score: input.user.username === "ana" ? 90 : 3, region: env.REGION || ""};
    }"""

TEST = """\
---
apiVersion: govsync/v1
kind: PolicyTest
metadata: {name: hours-test}
spec:
  policyRef: hours
  cases:
"""


def hook(code: str = SCORE, status: str = "active") -> str:
    return HOOK.replace("{status}", status).replace("{code}", code)


def write(folder: Path, cases: str, *, code: str = SCORE, status: str = "active",
          policy: str = POLICY) -> Path:
    (folder / "m.yaml").write_text(policy + hook(code, status) + TEST + cases)
    return folder


def govsync(folder: Path, *args: str) -> tuple[int, str, str]:
    ran = in_process(["test", str(folder), *args], env={"PATH": "/usr/bin:/bin"})
    assert "Traceback" not in ran.err, ran.err
    return ran.code, ran.out, ran.err


def results(folder: Path, *args: str) -> tuple[int, dict]:
    code, out, _ = govsync(folder, "--format", "json", *args)
    return code, json.loads(out)


CASES = """\
    - name: ana is blocked by the real hook
      stage: session
      input: {user: {username: ana}}
      expect: {action: block, reason: risk}
    - name: bob is let through
      stage: session
      input: {user: {username: bob}}
      expect: {}
    - name: a given result is not run
      stage: session
      input: {user: {username: bob}}
      hooks: {risk_score: {score: 99}}
      expect: {action: block}
    - name: at night
      stage: pre_request
      input: {user: {username: bob}}
      now: "2026-11-28T03:00:00Z"
      expect: {action: block, reason: night}
    - name: by day
      stage: pre_request
      input: {user: {username: bob}}
      now: "2026-11-28T10:00:00+00:00"
      expect: {action: allow}
    - name: no post_request rule
      stage: post_request
      input: {user: {username: bob}}
      expect: {}
"""


def test_every_case_passes_and_exit_is_0(tmp_path: Path) -> None:
    code, out, _ = govsync(write(tmp_path, CASES))
    assert code == 0, out
    assert out.splitlines()[-1] == "6 passed, 0 failed, 0 errors"
    code, found = results(tmp_path)
    assert code == 0
    assert found["formatVersion"] == "1.0"
    assert found["summary"] == {"passed": 6, "failed": 0, "errors": 0}
    first = found["tests"][0]
    assert {k: first[k] for k in ("policy", "test", "case", "stage", "status", "decision",
                                  "expected", "message")} == {
        "policy": "Policy/hours", "test": "PolicyTest/hours-test",
        "case": "ana is blocked by the real hook", "stage": "session", "status": "passed",
        "decision": {"action": "block", "reason": "risk"},
        "expected": {"action": "block", "reason": "risk"}, "message": ""}


def test_a_failing_case_is_at_its_line_and_exit_is_1(tmp_path: Path) -> None:
    code, out, _ = govsync(write(tmp_path, CASES + """\
    - name: wrong on purpose
      stage: session
      input: {user: {username: bob}}
      expect: {action: block}
    - name: an empty expect wants no decision
      stage: session
      input: {user: {username: ana}}
      expect: {}
"""))
    assert code == 1
    lines = out.splitlines()
    line = next(i for i, t in enumerate((tmp_path / "m.yaml").read_text().splitlines(), 1)
                if "wrong on purpose" in t)
    assert lines[0] == (f"{tmp_path}/m.yaml:{line}:7: FAIL PolicyTest/hours-test 'wrong on "
                        "purpose' (Policy/hours, session): expected {\"action\": \"block\"}, "
                        "got no decision (session is undefined for this input)")
    assert "expected no decision, got {\"action\": \"block\", \"reason\": \"risk\"}" in lines[1]
    assert lines[-1] == "6 passed, 2 failed, 0 errors"


def test_draft_hooks_are_not_run_nor_passed_and_env_is_the_cases(tmp_path: Path) -> None:
    cases = """\
    - name: a draft hook is absent
      stage: session
      input: {user: {username: ana}}
      expect: {}
"""
    code, found = results(write(tmp_path, cases, status="draft"))
    assert code == 0, found
    policy = POLICY.replace("input.hooks.risk_score.score > 80",
                            'input.hooks.risk_score.region == "eu"')
    cases = """\
    - name: env reaches the hook
      stage: session
      input: {user: {username: bob}}
      env: {REGION: eu}
      expect: {action: block}
    - name: no env, empty
      stage: session
      input: {user: {username: bob}}
      expect: {}
"""
    code, found = results(write(tmp_path, cases, policy=policy))
    assert code == 0, found["tests"]


def test_none_passes_unless_tests_are_required(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(POLICY + hook())
    code, found = results(tmp_path)
    assert (code, found["tests"], found["summary"]) == (
        0, [], {"passed": 0, "failed": 0, "errors": 0})
    code, _, err = govsync(tmp_path, "--require-tests")
    assert code == 1 and "no test cases" in err


@pytest.mark.parametrize(("hook", "said"), [
    ("export default async function hook(input, env) {\n  await null;\n  while (true) {}\n}",
     "the hook risk_score did not return within its timeoutMs (300 ms)"),
    ("export default function hook(input, env) {\n  while (true) {}\n}",
     "the hook did not return within its timeoutMs (300 ms)"),
    ("export default async function hook(input, env) {\n"
     "  const r = await fetch('https://risk.example.internal/');\n  return r.json();\n}",
     "the hook threw: ReferenceError: fetch is not defined (a hook runs here without "
     "network, modules or process)"),
    ("export default function hook(input, env) {\n  const fs = require('fs');\n"
     "  return fs.readFileSync('/etc/passwd');\n}",
     "the hook threw: ReferenceError: require is not defined"),
    ("export default function hook(input, env) {\n  const a = [];\n"
     "  while (true) { a.push(new Array(1e6).fill(1)); }\n}", "the hook"),
    # deeper than Python's JSON reader goes (a traceback), and than data may nest
    ("export default function hook(input, env) {\n  let o = {};\n"
     "  for (let i = 0; i < 1000; i++) o = {o};\n  return o;\n}",
     "the hook returned data nested more than 100 levels deep"),
])
def test_a_hook_that_hangs_reaches_out_or_eats_memory_is_that_cases_error(
        tmp_path: Path, hook: str, said: str) -> None:
    code_lines = "\n".join("    " + line for line in hook.splitlines())
    cases = CASES.split("    - name: a given result")[0] + """\
    - name: given, so never run
      stage: session
      input: {user: {username: bob}}
      hooks: {risk_score: {score: 1}}
      expect: {}
"""
    code, found = results(write(tmp_path, cases, code=code_lines))
    assert code == 1
    by_case = {t["case"]: t for t in found["tests"]}
    for name in ("ana is blocked by the real hook", "bob is let through"):
        assert by_case[name]["status"] == "error"
        assert said in by_case[name]["message"], by_case[name]["message"]
        assert by_case[name]["message"].startswith("Hook/risk_score (")
    assert by_case["given, so never run"]["status"] == "passed"


def test_a_hook_that_throws_is_an_error_at_the_line_it_threw(tmp_path: Path) -> None:
    hook = ("    export default function hook(input, env) {\n"
            "      const x = 1;\n      throw new Error('no score for ' + input.user.username);\n"
            "    }")
    code, out, _ = govsync(write(tmp_path, CASES, code=hook))
    assert code == 1
    rows = (tmp_path / "m.yaml").read_text().splitlines()
    thrown = next(i for i, t in enumerate(rows, 1) if "throw new Error" in t)
    assert (f"ERROR PolicyTest/hours-test 'ana is blocked by the real hook' (Policy/hours, "
            f"session): Hook/risk_score ({tmp_path}/m.yaml:{thrown}:13): the hook threw: "
            "Error: no score for ana") in out


# An engine crash, code over the API's limit and a file over the reader's: errors, not
# crashes.  Three tests, so that the workers share them.


def test_an_engine_crash_is_an_error_not_a_crash(tmp_path: Path) -> None:
    deep = POLICY.replace('session := {"action": "block", "reason": "risk"} if {',
                          "session := " + "[" * 100_000 + "]" * 100_000 + "\n    x := 1 if {")
    two = CASES[:CASES.index("    - name: a given result")]  # each case crashes it again
    code, found = results(write(tmp_path, two, policy=deep))
    assert code == 1
    assert [t["status"] for t in found["tests"]] == ["error", "error"]
    assert "Rego" in found["tests"][0]["message"]


def test_code_over_the_api_limit_is_an_error_not_a_crash(tmp_path: Path) -> None:
    huge = "    " + "// padding\n    " * 120_000 + "export default function hook() {}"
    code, out, err = govsync(write(tmp_path, CASES, code=huge))
    assert (code, out) == (1, "")
    assert err.splitlines()[0].endswith("this object's request would be 1,440,191 bytes, over "
                                        "the API's 1 MiB limit: split it or shorten its "
                                        "largest fields")


def test_a_file_over_the_readers_limit_is_an_error_not_a_crash(tmp_path: Path) -> None:
    with (tmp_path / "m.yaml").open("w") as fh:  # 11 MiB of code: over the 10 MiB limit
        fh.write(POLICY + hook() + "    // " + "x" * (11 << 20) + "\n")
    code, out, err = govsync(tmp_path)
    assert (code, out) == (1, "")
    assert err.startswith(f"{tmp_path}/m.yaml:1:1: ") and "MiB" in err.splitlines()[0], err


def test_bad_tests_are_errors_at_their_place_and_nothing_runs(tmp_path: Path) -> None:
    cases = """\
    - name: not an object
      stage: session
      input: [ana]
      expect: {}
    - name: not an object
      stage: sesion
      expect: {action: mask}
    - stage: session
      input: {user: {}, __now: 1}
"""
    (tmp_path / "m.yaml").write_text(POLICY + hook() + TEST.replace("policyRef: hours",
                                                                    "policyRef: hour") + cases)
    code, out, err = govsync(tmp_path)
    assert code == 1 and out == ""
    rows = (tmp_path / "m.yaml").read_text().splitlines()

    def at(text: str, nth: int = 0) -> int:
        return [i for i, t in enumerate(rows, 1) if text in t][nth]

    assert err.splitlines() == [
        f"{tmp_path}/m.yaml:{at('input: [ana]')}:14: spec.cases[0].input must be a mapping "
        "(the decision's input (input.user, input.resource ...)), not a list",
        f"{tmp_path}/m.yaml:{at('name: not an object', 1)}:13: spec.cases[1].name 'not an "
        "object' is also the name of spec.cases[0]: a case's name is unique within its test",
        f"{tmp_path}/m.yaml:{at('stage: sesion')}:14: unknown spec.cases[1].stage: did you "
        "mean 'session'?",
        f"{tmp_path}/m.yaml:{at('stage: session', 1)}:7: spec.cases[2] has no expect: every "
        "case has a name, a stage and an expect",
        f"{tmp_path}/m.yaml:{at('stage: session', 1)}:7: spec.cases[2] has no name: every "
        "case has a name, a stage and an expect",
        f"{tmp_path}/m.yaml:{at('__now: 1')}:25: spec.cases[2].input.__now is govsync's own "
        "key (the case's time is spec.cases[2].now, its loaders' data spec.cases[2].data)",
        "6 errors; nothing was sent and the state is untouched."]
    (tmp_path / "m.yaml").write_text(POLICY + hook() + TEST.replace("policyRef: hours",
                                                                    "policyRef: hour") + CASES)
    code, out, err = govsync(tmp_path)
    assert code == 1
    assert err.splitlines()[0] == (
        f"{tmp_path}/m.yaml:{len((POLICY + hook()).splitlines()) + 6}:14: "
        "PolicyTest/hours-test: "
        "spec.policyRef names Policy/hour, which no manifest defines: did you mean "
        "Policy/hours?")
    validated = in_process(["validate", str(tmp_path)], env={"PATH": "/usr/bin:/bin"})
    assert validated.code == 1 and "spec.policyRef names Policy/hour" in validated.err


def test_junit_is_one_suite_per_policy_as_a_ci_parser_reads_it(tmp_path: Path) -> None:
    write(tmp_path, CASES + """\
    - name: "wrong on purpose \\e[31m"
      stage: session
      input: {user: {username: bob}}
      expect: {action: block}
""", code="    export default function hook(input, env) {\n"
          "      if (input.user.username === 'ana') throw new Error('x');\n"
          "      return {score: 1};\n    }")
    report = tmp_path / "report.xml"
    code, _, _ = govsync(tmp_path, "--junit", str(report))
    assert code == 1
    xml = JUnitXml.fromfile(str(report))
    suites = list(xml)
    assert [s.name for s in suites] == ["Policy/hours"]
    suite = suites[0]
    assert (suite.tests, suite.failures, suite.errors) == (7, 1, 1)
    by_name = {c.name: c for c in suite}
    # a control character in a name (ESC) is written as its escape: the XML stays XML
    wrong = by_name["wrong on purpose \\x1b[31m (session)"]
    assert wrong.classname == "PolicyTest/hours-test"
    assert isinstance(wrong.result[0], Failure)
    assert isinstance(by_name["ana is blocked by the real hook (session)"].result[0], Error)
    assert by_name["by day (pre_request)"].is_passed


def test_environments_each_named_and_target(tmp_path: Path) -> None:
    write(tmp_path, CASES)
    other = tmp_path / "other.yaml"
    other.write_text(POLICY.replace("name: hours", "name: other") + TEST.replace(
        "hours", "other") + CASES.split("    - name: a given result")[0]
        + "      hooks: {risk_score: {score: 1}}\n".replace("      hooks", "#"))
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\npaths: [m.yaml, other.yaml]\n"
        "environments:\n  prod: {}\n  staging: {}\n")
    ran = in_process(["test", "--format", "json"], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert ran.code == 0, ran.out + ran.err
    found = json.loads(ran.out)
    assert {t["environment"] for t in found["tests"]} == {"prod", "staging"}
    assert found["summary"]["passed"] == 2 * (6 + 2)
    ran = in_process(["test", "--env", "prod", "--target", "Policy/other", "--format", "json"],
                     env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    found = json.loads(ran.out)
    assert {(t["policy"], t["environment"]) for t in found["tests"]} == {("Policy/other", "prod")}
    ran = in_process(["test", "--env", "prod", "--target", "Policy/nothing*"],
                     env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert ran.code == 1 and "--target 'Policy/nothing*' matches no address" in ran.err
