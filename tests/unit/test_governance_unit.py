"""A workspace's governance: its record (through a real SQLite state), what changes,
the environment a run may name, and which rules hold at apply."""

from __future__ import annotations

import base64
import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519

from govsync import governance, sshsig
from govsync.approvals import Approvals
from govsync.errors import ApprovalError, GovernanceError, StateDamagedError
from govsync.governance import Governance
from govsync.project import Environment, Project
from govsync.rules import Rule, Severity
from govsync.state.sqlite import SqliteStore


def signer_line(principal: str) -> str:
    blob = sshsig.public_blob(ed25519.Ed25519PrivateKey.generate())
    return f"{principal} ssh-ed25519 {base64.b64encode(blob).decode()}"


ALICE, BOB, CAROL = (signer_line(f"{n}@example.com") for n in ("alice", "bob", "carol"))
SHORT = Rule("short-hooks", "object.spec.timeoutMs <= 5000", "hooks time out within 5 s",
             kinds=("Hook",), environments=("prod",), file="govsync.yaml", line=9, col=17)
NAMED = Rule("named", "object.name != ''", "named", Severity.WARNING)
PROD = Governance("prod", 2, (ALICE, BOB), (SHORT, NAMED))


# -- the record -------------------------------------------------------------------------


def test_as_dict() -> None:
    assert PROD.as_dict() == {
        "format": 1, "environment": "prod",
        "approvals": {"required": 2, "allowedSigners": [ALICE, BOB]},
        "rules": [
            {"name": "short-hooks", "expression": "object.spec.timeoutMs <= 5000",
             "message": "hooks time out within 5 s", "severity": "error", "kinds": ["Hook"],
             "environments": ["prod"]},
            {"name": "named", "expression": "object.name != ''", "message": "named",
             "severity": "warning", "kinds": None, "environments": None},
        ]}


def test_a_record_round_trips_through_the_state(store: SqliteStore) -> None:
    assert governance.recorded(store.snapshot("prod").governance, "prod") is None
    store.set_governance("prod", PROD.as_dict())
    back = governance.recorded(store.snapshot("prod").governance, "prod")
    assert back == PROD and hash(back) == hash(PROD) and back.digest() == PROD.digest()
    assert back is not None
    assert [r.file for r in back.rules] == ["(recorded with workspace prod)"] * 2
    assert back.rules[0].kinds == ("Hook",) and back.rules[1].severity == Severity.WARNING


def test_equality_is_the_record_not_the_place_of_a_rule() -> None:
    moved = Governance("prod", 2, (ALICE, BOB), (replace(SHORT, line=40), NAMED))
    assert moved == PROD
    assert Governance("prod", 2, (BOB, ALICE), PROD.rules) != PROD  # signers in order
    assert Governance("prod", 2, (ALICE, BOB), (SHORT,)) != PROD
    assert Governance("prod", 1, (ALICE, BOB), PROD.rules).digest() != PROD.digest()


def damaged(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(PROD.as_dict())
    change(data)
    return data


MALFORMED: dict[str, Any] = {
    "no format": damaged(lambda d: d.pop("format")),
    "format 2": damaged(lambda d: d.update(format=2)),
    "environment a number": damaged(lambda d: d.update(environment=5)),
    "no environment": damaged(lambda d: d.pop("environment")),
    "no approvals": damaged(lambda d: d.pop("approvals")),
    "approvals a list": damaged(lambda d: d.update(approvals=[])),
    "required a bool": damaged(lambda d: d["approvals"].update(required=True)),
    "required negative": damaged(lambda d: d["approvals"].update(required=-1)),
    "required a string": damaged(lambda d: d["approvals"].update(required="2")),
    "signers a string": damaged(lambda d: d["approvals"].update(allowedSigners=ALICE)),
    "a signer a number": damaged(lambda d: d["approvals"].update(allowedSigners=[ALICE, 1])),
    "rules a number": damaged(lambda d: d.update(rules=5)),
    "a rule a string": damaged(lambda d: d.update(rules=["short-hooks"])),
    "a rule without a name": damaged(lambda d: d["rules"][0].pop("name")),
    "a rule's name a number": damaged(lambda d: d["rules"][0].update(name=5)),
    "a rule's severity": damaged(lambda d: d["rules"][0].update(severity="fatal")),
    "a rule's kinds a number": damaged(lambda d: d["rules"][0].update(kinds=5)),
    "not a mapping": [],
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_record_is_a_damaged_state(name: str) -> None:
    with pytest.raises(StateDamagedError) as info:
        Governance.from_dict(MALFORMED[name], "prod")
    text = str(info.value)
    assert text.startswith("the governance recorded with workspace 'prod' is malformed ("), text
    assert text.endswith("): restore the state from a backup; nothing was changed"), text
    assert "\n" not in text


@pytest.mark.parametrize("key", ["kinds", "environments"])
def test_a_rules_match_that_is_a_string_is_damaged(key: str) -> None:
    data = damaged(lambda d: d["rules"][0].update({key: "Hook" if key == "kinds" else "prod"}))
    with pytest.raises(StateDamagedError):
        Governance.from_dict(data, "prod")


def test_the_recorded_signers_parse_as_allowed_signers() -> None:
    found = PROD.allowed("prod")
    assert [(s.principals, s.where) for s in found] == [
        ("alice@example.com", "the allowed signers recorded with workspace 'prod':1"),
        ("bob@example.com", "the allowed signers recorded with workspace 'prod':2")]
    with pytest.raises(ApprovalError, match="^the allowed signers recorded with workspace "
                                            "'prod':2: too few fields"):
        Governance("prod", 1, (ALICE, "mallory@example.com")).allowed("prod")


# -- differences and changes -----------------------------------------------------------------


def test_differences_one_line_each() -> None:
    changed = Rule(SHORT.name, "object.spec.timeoutMs <= 9000", SHORT.message,
                   kinds=SHORT.kinds, environments=SHORT.environments)
    added = Rule("spaces", "true", "m")
    after = Governance("staging", 1, (BOB, CAROL), (changed, added))
    assert after.differences(PROD) == [
        "environment prod -> staging",
        "approvals required 2 -> 1",
        "allowed signer removed: alice@example.com (ssh-ed25519)",
        "allowed signer added: carol@example.com (ssh-ed25519)",
        "rule removed: named",
        "rule added: spaces",
        "rule changed: short-hooks",
    ]
    assert PROD.differences(PROD) == []
    assert PROD.differences(None) == [
        "recorded for the first time: environment prod, 2 approval(s) by 2 allowed signer(s), "
        "2 rule(s)"]
    assert Governance(None).differences(None) == [
        "recorded for the first time: no environment, no approvals, 0 rule(s)"]


def test_change_is_none_for_a_first_record_or_the_same() -> None:
    proposed = Governance("prod", 1, (ALICE,), (NAMED,))
    assert governance.change(None, proposed) is None
    recorded = Governance.from_dict(PROD.as_dict(), "prod")  # rules from another file
    assert governance.change(recorded, PROD) is None
    assert governance.change(PROD, proposed) == {"from": PROD.as_dict(),
                                                 "to": proposed.as_dict()}


# -- the environment a run may name ------------------------------------------------------


def project(**environments: Environment) -> Project:
    return Project("govsync.yaml", Environment(""), environments)


def accepted(record: Governance | None, name: str | None, workspace: str,
             proj: Project | None) -> bool:
    try:
        governance.check_environment(record, name, workspace, proj)
    except GovernanceError:
        return False
    return True


def test_a_run_names_the_recorded_environment() -> None:
    assert accepted(Governance("prod"), "prod", "prod", None)
    assert not accepted(Governance("prod"), "staging", "prod", None)
    assert accepted(Governance(None), None, "scratch", project())
    assert not accepted(Governance(None), "scratch", "scratch", project())
    # Nothing recorded yet: the first apply records the environment it names.
    assert accepted(None, "staging", "prod", None)
    assert accepted(None, None, "scratch", None)


def refusal(record: Governance | None, name: str | None, workspace: str,
            proj: Project | None) -> str:
    with pytest.raises(GovernanceError) as info:
        governance.check_environment(record, name, workspace, proj)
    return str(info.value)


def test_another_environment_is_refused() -> None:
    assert refusal(Governance("prod"), "staging", "prod", None) == (
        "workspace 'prod' belongs to environment prod (recorded at its first apply), and this "
        "run names environment staging: pass --env prod (check GOVSYNC_ENV and "
        "GOVSYNC_WORKSPACE); nothing was sent")
    assert refusal(Governance("prod"), None, "prod", None) == (
        "workspace 'prod' belongs to environment prod (recorded at its first apply), and this "
        "run names no environment (no --env): pass --env prod (check GOVSYNC_ENV and "
        "GOVSYNC_WORKSPACE); nothing was sent")
    assert refusal(Governance(None), "prod", "scratch", None) == (
        "workspace 'scratch' belongs to no environment (recorded at its first apply), and this "
        "run names environment prod: leave out --env and GOVSYNC_ENV, or use another "
        "workspace; nothing was sent")


def test_a_project_environments_workspace_needs_its_env() -> None:
    proj = project(production=Environment("production", workspace="prod"),
                   staging=Environment("staging"))
    assert refusal(None, None, "prod", proj) == (
        "workspace 'prod' is environment production's in govsync.yaml, and this run names no "
        "environment: pass --env production; nothing was sent")
    assert "pass --env staging" in refusal(None, None, "staging", proj)
    governance.check_environment(None, None, "scratch", proj)


# -- the project's governance, and the rules that hold --------------------------------------


def test_of_project(tmp_path: Path) -> None:
    path = tmp_path / "allowed_signers"
    path.write_text(f"# reviewers\n{ALICE} alice@laptop\n{BOB}\n")
    staging_only = Rule("staging-only", "true", "m", environments=("staging",))
    proj = Project("govsync.yaml", Environment(""),
                   {"prod": Environment("prod"), "staging": Environment("staging")},
                   (SHORT, NAMED, staging_only),
                   Approvals(2, str(path), ("prod",), "govsync.yaml", 20, 3))
    prod = governance.of_project(proj, proj.environments["prod"])
    assert prod == PROD
    assert governance.of_project(proj, proj.environments["staging"]) == Governance(
        "staging", 0, (), (NAMED, staging_only))
    assert governance.of_project(proj, None) == Governance(None, 0, (), (NAMED,))
    assert governance.of_project(None, Environment("prod")) == Governance("prod")
    path.unlink()
    with pytest.raises(ApprovalError, match="^govsync.yaml:20:3: the allowed-signers file"):
        governance.of_project(proj, proj.environments["prod"])


def test_rules_to_check_keep_what_the_project_dropped_or_changed() -> None:
    changed = Rule(SHORT.name, "object.spec.timeoutMs <= 60000", SHORT.message,
                   kinds=SHORT.kinds, environments=SHORT.environments)
    added = Rule("spaces", "true", "m")
    recorded = Governance.from_dict(
        Governance("prod", 0, (), (SHORT, NAMED, Rule("dropped", "false", "x"))).as_dict(),
        "prod")
    proposed = Governance("prod", 0, (), (changed, NAMED, added))
    found = governance.rules_to_check(recorded, proposed)
    assert [(r.name, r.expression) for r in found] == [
        ("short-hooks", "object.spec.timeoutMs <= 60000"),
        ("named", "object.name != ''"),
        ("spaces", "true"),
        ("short-hooks.recorded", "object.spec.timeoutMs <= 5000"),
        ("dropped", "false"),
    ]
    kept = found[3]
    assert (kept.message, kept.kinds, kept.environments, kept.file) == (
        SHORT.message, ("Hook",), ("prod",), "(recorded with workspace prod)")
    assert governance.rules_to_check(None, proposed) == proposed.rules
    assert governance.rules_to_check(recorded, recorded) == recorded.rules
