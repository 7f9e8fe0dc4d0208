"""The example organisation validates and plans; its JSON plan is a golden file."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from plan_helpers import EXAMPLES, LOCAL, STATE_DB, Gov, edit, summary

from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

GOLDEN = Path(__file__).parent / "golden" / "examples-empty.json"


def example_objects() -> list[dict[str, Any]]:
    """Every object document of the examples, read with plain YAML (not govsync's loader):
    the policy tests beside them are no objects."""
    return [doc for path in sorted(EXAMPLES.rglob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if doc and doc["kind"] != "PolicyTest"]


def example_addresses() -> set[str]:
    """Every Kind/name in the examples."""
    return {f"{doc['kind']}/{doc['metadata']['name']}" for doc in example_objects()}


def test_the_loader_finds_every_example_object_of_27_kinds() -> None:
    addresses = example_addresses()
    assert addresses == EXAMPLE.addresses and len(addresses) == N
    assert len({a.split("/")[0] for a in addresses}) == 27


def test_validate_examples(gov: Gov) -> None:
    result = gov.run("validate", EXAMPLES)
    assert result.stdout == f"{N} objects in {EXAMPLE.files} files: valid.\n"
    assert result.stderr == ""


def test_plan_examples_against_empty_state(gov: Gov) -> None:
    result = gov.run("plan", EXAMPLES)
    lines = result.stdout.splitlines()
    assert lines[-1] == (f"Plan: {N} to create, 0 to update, 0 blocked, 0 orphaned, "
                         "0 uncertain, 0 unchanged.")
    assert lines[-2] == ("Check groups: skipped (policy owner groups not checked: "
                         "no endpoint configured (offline plan))")
    assert sum(1 for line in lines if line.startswith("+ ")) == N

    plan = gov.plan(EXAMPLES)
    assert plan["summary"] == summary(create=N)
    assert {c["address"] for c in plan["changes"]} == example_addresses()
    assert {c["action"] for c in plan["changes"]} == {"create"}
    assert plan["workspace"] == "default"
    assert plan["serial"] == 0


def test_a_plan_for_a_new_workspace_writes_nothing(gov: Gov) -> None:
    """A state file that exists, and a workspace it has never held: plan (and drift,
    state list) read it as empty and write nothing; only a saved plan makes it."""
    import sqlite3

    gov.apply_local(EXAMPLES)  # the state file now holds workspace "default"
    state = gov.cwd / STATE_DB

    def workspaces() -> list[str]:
        db = sqlite3.connect(state)
        try:
            return [r[0] for r in db.execute("SELECT name FROM workspaces ORDER BY name")]
        finally:
            db.close()

    before = state.read_bytes()
    plan = gov.plan(EXAMPLES, "--workspace", "staging")
    assert plan["summary"] == summary(create=N) and plan["lineage"] == ""
    gov.run("state", "list", "--workspace", "staging")
    assert workspaces() == ["default"]
    assert state.read_bytes() == before
    gov.run("plan", EXAMPLES, "--workspace", "staging", "--out", gov.cwd / "staging.plan")
    assert workspaces() == ["default", "staging"]
    assert before != state.read_bytes()


def test_the_examples_policy_tests_pass_and_plan_shows_them(gov: Gov) -> None:
    """Each example policy has tests beside it (manifests/policy-tests.yaml): they pass, and
    the plan that creates the policy carries its results."""
    cases = sum(len(doc["spec"]["cases"]) for path in sorted(EXAMPLES.rglob("*.yaml"))
                for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
                if doc and doc["kind"] == "PolicyTest")
    assert gov.run("test", EXAMPLES).stdout == f"{cases} passed, 0 failed, 0 errors\n"
    # ... and its impact on the recorded week (examples/recorded-requests.jsonl): every
    # line read, every policy measured, each deciding some request other than allow.
    recorded = EXAMPLES.parent / "recorded-requests.jsonl"
    changes = gov.plan(EXAMPLES, "--impact-from", recorded)["changes"]
    policies = {c["address"]: c for c in changes if c["kind"] == "Policy"}
    assert set(policies) == {a for a in example_addresses() if a.startswith("Policy/")}
    assert sum(c["tests"]["passed"] for c in policies.values()) == cases
    assert all(c["tests"]["failed"] == c["tests"]["errors"] == 0 for c in policies.values())
    lines = len(recorded.read_text(encoding="utf-8").splitlines())
    for address, change in policies.items():
        impact = change["impact"]
        assert impact["known"] and impact["skippedLines"] == [], (address, impact)
        assert impact["evaluated"] == lines and impact["newTotal"] > 0, (address, impact)


def test_plan_examples_detailed_exitcode_is_2(gov: Gov) -> None:
    gov.run("plan", EXAMPLES, "--detailed-exitcode", code=2)


def test_plan_examples_against_the_local_endpoint_checks_groups(gov: Gov) -> None:
    plan = gov.plan(EXAMPLES, *LOCAL)
    assert plan["summary"] == summary(create=N)
    # Before a create, its name is looked up live (no duplicate from a lost state).
    assert plan["checks"] == [
        {"name": "refresh", "status": "passed",
         "detail": "0 recorded object(s) read from the server; 45 create(s) looked up on the "
                   "server; 6 create(s) not checked for a duplicate (nothing finds them on the "
                   "server before they are recorded): PolicyReport, PolicySuspension, "
                   "ResourceAlias, SessionTermination"},
        # The service compiles every created policy's code (contract section 13).
        {"name": "policy code", "status": "passed",
         "detail": "GetPolicyCodeValidity: the service compiles the code of "
                   "Policy/ledger-change-needs-ticket, Policy/llm-prompt-guard, "
                   "Policy/mask-pii-in-results, Policy/risk-based-access, "
                   "Policy/warehouse-business-hours"},
        {"name": "groups", "status": "passed", "detail": "4 policy owner group(s) exist"}]


def test_golden_json_plan_of_examples_against_empty_state(gov: Gov) -> None:
    """``govsync plan examples/manifests --format json``, lineage normalised.

    Compared as JSON (the layout of the output is not part of the contract;
    every key, value and the order of changes are).  Regenerate with
    UPDATE_GOLDEN=1 after a deliberate change, and review the diff.
    """
    out = gov.run("plan", EXAMPLES, "--format", "json").stdout
    plan = json.loads(out)
    # No state yet: plan reads it as empty and creates nothing (its lineage is "").
    assert plan["lineage"] == "", plan["lineage"]
    assert not (gov.cwd / ".govsync").exists()
    plan["lineage"] = "LINEAGE"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(plan, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert plan == golden
    # Key order too: dict equality ignores it, the contract says it is stable.
    assert list(plan) == list(golden)
    assert [list(c) for c in plan["changes"]] == [list(c) for c in golden["changes"]]


def test_plan_refuses_an_owner_group_the_server_lacks(gov: Gov, manifests: Path) -> None:
    edit(manifests / "policies.yaml", "groupName: analysts", "groupName: analytics-team")
    result = gov.run("plan", manifests, *LOCAL, code=1)
    assert result.stdout == ""
    assert result.stderr == (
        "manifests/policies.yaml:108:14: Policy/warehouse-business-hours: spec.groupName names group "
        "'analytics-team', which does not exist on the server (ListGroups); create the group "
        "or fix the name\n"
        "1 error; nothing was sent and the state is untouched.\n")


REF_TARGETS = {"spaceRef": "Space", "connectorRef": "Connector", "policyRef": "Policy",
               "nativeUserRef": "NativeUser", "linkedDbUserRef": "NativeUser"}


def example_dependencies() -> dict[str, set[str]]:
    """Kind/name -> what it references by name or lists in dependsOn (plain YAML)."""
    deps: dict[str, set[str]] = {}
    for doc in example_objects():
        refs = {f"{REF_TARGETS[k]}/{v}" for k, v in (doc.get("spec") or {}).items()
                if k in REF_TARGETS}
        refs |= set(doc["metadata"].get("dependsOn", []))
        if doc["kind"] == "Policy":  # a policy depends on each hook its code reads
            refs |= {f"Hook/{name}" for name in re.findall(
                r"input\.hooks\.([A-Za-z_][A-Za-z0-9_]*)", doc["spec"]["code"])}
        deps[f"{doc['kind']}/{doc['metadata']['name']}"] = refs
    return deps


def test_plan_lists_every_object_after_what_it_depends_on(gov: Gov) -> None:
    gov.run("plan", EXAMPLES, "--out", "p.json")
    saved = json.loads(Path("p.json").read_text(encoding="utf-8"))
    expected = example_dependencies()
    assert sum(len(d) for d in expected.values()) == 18
    assert {c["address"]: set(c["after"]) for c in saved["changes"]} == expected
    position = {c["address"]: i for i, c in enumerate(saved["changes"])}
    for change in saved["changes"]:
        for dep in change["after"]:
            assert position[dep] < position[change["address"]], \
                f"{change['address']} comes before {dep}"
