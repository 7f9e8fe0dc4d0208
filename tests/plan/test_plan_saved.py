"""`govsync plan --out FILE` then `govsync apply FILE`: exactly that plan,
and only onto the state it was made from."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plan_helpers import LOCAL, STATE_DB, Gov, edit, summary

from govsync.state import Entry
from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

APPLIED_LINE = re.compile(r"^(\S+): (create|update) applied \(id [^)]+\) \[[0-9.]+s\]$")
NEW_HOOK = """apiVersion: govsync/v1
kind: Hook
metadata:
  name: audit_trail
spec:
  code: "def handler(event):\\n    return {}\\n"
  timeoutMs: 300
"""


def applied_addresses(stderr: str) -> list[str]:
    return [m.group(1) for line in stderr.splitlines() if (m := APPLIED_LINE.match(line))]


def planned_work(path: str) -> set[str]:
    saved = json.loads(Path(path).read_text(encoding="utf-8"))
    return {c["address"] for c in saved["changes"] if c["action"] in ("create", "update")}


def test_saved_plan_of_examples_applies_every_create(gov: Gov, manifests: Path) -> None:
    gov.run("plan", manifests, "--out", "p.json", *LOCAL)
    work = planned_work("p.json")
    assert len(work) == N

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve")
    assert sorted(applied_addresses(result.stderr)) == sorted(work)
    assert re.search(rf"Apply: {N} applied, 0 failed, 0 skipped, 0 uncertain, 0 forgotten "
                     rf"\({N} requests in \d+\.\d\d s\)\.\n$", result.stdout)
    assert gov.plan(manifests, "--detailed-exitcode")["summary"] == summary(no_op=N)


def test_saved_plan_applies_exactly_its_changes(gov: Gov, applied: Path) -> None:
    edit(applied / "hooks.yaml", "timeoutMs: 1500   # policies fail closed after 1.5 s",
         "timeoutMs: 2500")
    edit(applied / "keys-and-labels.yaml",
         "terminationProtection: true   # revoking this key would void every approval",
         "terminationProtection: false")
    (applied / "audit.yaml").write_text(NEW_HOOK, encoding="utf-8")
    (applied / "incident-response.yaml").unlink()

    plan = gov.plan(applied, "--out", "p.json", "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(create=1, update=2, orphan=2, no_op=55)
    work = planned_work("p.json")
    assert work == {"Hook/audit_trail", "Hook/risk_score", "SigningKey/change-approvals-2024"}

    # Edits after the plan was saved are not part of it.
    edit(applied / "hooks.yaml", "timeoutMs: 800", "timeoutMs: 900")

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve")
    assert sorted(applied_addresses(result.stderr)) == sorted(work)
    assert re.search(r"Apply: 3 applied, 0 failed, 0 skipped, 0 uncertain, 0 forgotten "
                     r"\(3 requests in \d+\.\d\d s\)\.\n$", result.stdout)

    after = gov.plan(applied, code=0)
    assert after["summary"] == summary(update=1, orphan=2, no_op=57)
    changed = {c["address"]: c["action"] for c in after["changes"] if c["action"] != "no-op"}
    assert changed == {"Hook/mask_pii": "update", "BlockedUser/mallory-quinn": "orphan",
                       "SessionTermination/inc-2024-0412-orders-dump": "orphan"}
    entries = gov.snapshot().entries
    assert entries["Hook/risk_score"].spec["timeoutMs"] == 2500
    assert entries["Hook/mask_pii"].spec["timeoutMs"] == 800
    assert entries["SigningKey/change-approvals-2024"].spec["terminationProtection"] is False
    assert entries["Hook/audit_trail"].status == "applied"
    assert "BlockedUser/mallory-quinn" in entries, "orphans stay without --forget-orphans"


STALE = ("Error: the state changed since the plan was made (serial {} -> {}): make a new "
         "plan with `govsync plan --out` and review it\n")


def test_saved_plan_is_refused_after_the_state_changed(gov: Gov, applied: Path) -> None:
    edit(applied / "hooks.yaml", "timeoutMs: 1500   # policies fail closed after 1.5 s",
         "timeoutMs: 2500")
    plan = gov.plan(applied, "--out", "p.json")
    before = gov.snapshot()
    assert plan["serial"] == before.serial

    entry = before.entries["Hook/ticket_check"]
    serial = gov.put(Entry(entry.address, entry.kind, entry.id, "applied",
                           {**(entry.spec or {}), "timeoutMs": 1}))
    assert serial == before.serial + 1

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    assert result.stdout == ""
    assert result.stderr == STALE.format(before.serial, serial)
    after = gov.snapshot()
    assert after.serial == serial
    assert after.entries["Hook/risk_score"].spec["timeoutMs"] == 1500, "nothing was applied"


def test_saved_plan_stays_valid_when_writes_changed_nothing(gov: Gov, applied: Path) -> None:
    # Issue 11: an apply refused before it changed anything bumps the serial;
    # the state's content is what the plan was made against, so it still applies.
    edit(applied / "hooks.yaml", "timeoutMs: 1500   # policies fail closed after 1.5 s",
         "timeoutMs: 2500")
    gov.plan(applied, "--out", "p.json")
    before = gov.snapshot()
    entry = before.entries["Hook/ticket_check"]
    gov.put(Entry(entry.address, entry.kind, entry.id, "applied", entry.spec))
    assert gov.snapshot().serial == before.serial + 1
    gov.run("apply", "p.json", *LOCAL, "--auto-approve")
    assert gov.snapshot().entries["Hook/risk_score"].spec["timeoutMs"] == 2500


def test_saved_plan_is_refused_once_applied(gov: Gov, manifests: Path) -> None:
    gov.run("plan", manifests, "--out", "p.json")
    serial = gov.snapshot().serial
    gov.run("apply", "p.json", *LOCAL, "--auto-approve")
    now = gov.snapshot().serial
    assert now > serial

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    assert result.stderr.startswith("Error: p.json was applied already (at ")
    assert result.stderr.endswith("): a saved plan applies at most once; make a new plan with "
                                  "`govsync plan --out`; nothing was sent\n")
    assert gov.snapshot().serial == now


def test_saved_plan_is_refused_on_another_state(gov: Gov, manifests: Path) -> None:
    gov.run("plan", manifests, "--out", "p.json")
    lineage = json.loads(Path("p.json").read_text())["lineage"]
    other = gov.cwd / "other" / "state.db"

    result = gov.run("apply", "p.json", "--state", other, *LOCAL, "--auto-approve", code=1)
    # The plan records its state (issue 34): another one is refused, naming both.
    assert result.stderr.startswith("Error: p.json was made against state ")
    assert f"and this run names state {other}" in result.stderr
    assert not other.exists()
    # A plan that records none (made before) is refused by its lineage.
    data = json.loads(Path("p.json").read_text())
    del data["state"]
    Path("p.json").write_text(json.dumps(data))
    result = gov.run("apply", "p.json", "--state", other, *LOCAL, "--auto-approve", code=1)
    assert result.stderr.startswith(
        f"Error: the plan was made for another state (lineage {lineage}, this state is ")
    assert result.stderr.endswith("): make a new plan with `govsync plan --out`\n")


def test_saved_plan_is_refused_on_another_workspace(gov: Gov, manifests: Path) -> None:
    gov.run("plan", manifests, "--out", "p.json")
    result = gov.run("apply", "p.json", "--workspace", "prod", *LOCAL, "--auto-approve", code=1)
    assert result.stderr == ("Error: p.json is a plan for workspace 'default', not 'prod': "
                             "pass --workspace default; nothing was sent\n")


def test_saved_plan_is_refused_when_a_secret_changed(
        gov: Gov, manifests: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gov.run("plan", manifests, "--out", "p.json")
    monkeypatch.setenv("GOVSYNC_EXAMPLE_MDM_API_KEY", "another-value")

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    assert result.stderr == (
        "Error: MDMIntegration/laptop-fleet: the value of GOVSYNC_EXAMPLE_MDM_API_KEY "
        "(secret mdmB.apiKey) changed since the plan was made: make a new plan and review it\n")
    assert gov.snapshot().entries == {}


def test_saved_plan_with_a_blocked_change_is_refused(gov: Gov, applied: Path) -> None:
    edit(applied / "satellites.yaml", "satelliteType: data_discovery",
         "satelliteType: ai")
    gov.run("plan", applied, "--out", "p.json", code=1)
    serial = gov.snapshot().serial

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    # Which change, and why, before the refusal (its reason is the saved plan's).
    assert result.stderr.startswith("Error: the plan has 1 blocked change(s):\n"
                                    "  Satellite/discovery-analytics: cannot change "
                                    "satelliteType: UpdateSatelliteV2 can change only ")
    assert result.stderr.endswith("1 change(s) no update can make: revert them in the "
                                  "manifests, or replace the objects with `--replace ADDR`; "
                                  "nothing was applied\n")
    assert gov.snapshot().serial == serial


def test_plan_out_into_a_missing_directory_is_an_error_not_a_crash(
        gov: Gov, manifests: Path) -> None:
    result = gov.run("plan", manifests, "--out", "missing/p.json", code=1)
    assert result.stderr.startswith("Error: ")
    assert "missing/p.json" in result.stderr
    assert not (gov.cwd / ".govsync").exists()  # no state made for a plan not saved


@pytest.mark.parametrize("failing", ["target", "owner group"])
def test_a_plan_out_that_fails_leaves_no_state(gov: Gov, manifests: Path, failing: str) -> None:
    """``plan --out`` makes the workspace (and the state file) only once the plan
    has passed every check, the live ones too: a plan that fails leaves no state."""
    if failing == "target":  # a target that matches nothing
        args: tuple[str, ...] = ("--target", "Hook/nothing-by-this-name")
    else:  # a policy owner group the server lacks (ListGroups)
        edit(manifests / "policies.yaml", "groupName: analysts", "groupName: analytics-team")
        args = LOCAL
    gov.run("plan", manifests, "--out", "p.json", *args, code=1)
    assert not (gov.cwd / STATE_DB).exists()
    assert not (gov.cwd / "p.json").exists()


def local_objects(gov: Gov) -> int:
    """How many objects the embedded server holds (every kind)."""
    import sqlite3

    db = gov.cwd / ".govsync" / "local-api.db"
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return sum(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables
                   if t == "objects")


@pytest.mark.parametrize("tamper", [
    "hook code", "extra create", "duplicated change", "serial", "lineage", "name", "mac"])
def test_an_edited_saved_plan_is_refused_before_anything_is_sent(
        gov: Gov, manifests: Path, tamper: str) -> None:
    # Contract section 7: a saved plan is authenticated; any edit is refused.
    gov.run("plan", manifests, "--out", "p.json", *LOCAL)
    before = local_objects(gov)
    data = json.loads(Path("p.json").read_text(encoding="utf-8"))
    hook = next(c for c in data["changes"] if c["address"] == "Hook/risk_score")
    if tamper == "hook code":
        hook["request"]["code"] = "def handler(event):\n    exfiltrate()\n"
    elif tamper == "extra create":
        data["changes"].append({**hook, "address": "Hook/sneaky",
                                "request": {**hook["request"], "name": "sneaky"}})
    elif tamper == "duplicated change":
        data["changes"].append(dict(hook))
    elif tamper == "serial":
        data["serial"] += 1
    elif tamper == "lineage":
        data["lineage"] = "00000000-0000-0000-0000-000000000000"
    elif tamper == "name":
        hook["request"]["name"] = "renamed"
    else:
        data["mac"] = "hmac-sha256:" + "0" * 64
    Path("p.json").write_text(json.dumps(data), encoding="utf-8")
    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    assert re.search(r"changed after it was made|made for another state|appears twice",
                     result.stderr), result.stderr
    assert "Traceback" not in result.output
    assert local_objects(gov) == before
    assert gov.snapshot().entries == {}


def test_a_plan_file_does_not_choose_the_state_it_is_checked_against(
        gov: Gov, manifests: Path) -> None:
    """The attacker writes a plan against a state of their own (so its key, and the
    plan's authentication code, are theirs), and hands over only the file: an apply
    that names no state must not take the file's word for where the state is."""
    mine = gov.cwd / "attacker" / "state.db"
    gov.run("plan", manifests, "--state", mine, "--out", "p.json")
    assert f'"state":"{mine}"' in Path("p.json").read_text()

    result = gov.run("apply", "p.json", *LOCAL, "--auto-approve", code=1)
    assert result.stderr.startswith("Error: p.json was made against state ")
    assert "nothing was sent" in result.stderr
    assert not (gov.cwd / STATE_DB).exists() or not gov.snapshot().entries
    shown = gov.run("show", "p.json", code=None)
    assert "Authentication: verified" not in shown.output
