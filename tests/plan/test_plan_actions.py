"""One action per address (contract section 2), against prepared states.

The state is prepared either by applying the examples to the embedded
reference server (``applied``) or by writing entries with SqliteStore.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from plan_helpers import LOCAL, Gov, by_address, edit, summary

from govsync.api.kinds import BY_KIND
from govsync.state import Entry, LockHolder
from govsync.state.sqlite import SqliteStore
from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

RISK_TIMEOUT = "timeoutMs: 1500   # policies fail closed after 1.5 s"
ANALYTICS_DESCRIPTION = "description: Orders database, analytics warehouse and clickstream events."
KEY_PROTECTION = "terminationProtection: true   # revoking this key would void every approval"
KEY_PUBLIC = "MCowBQYDK2VwAyEASj9r19cTM8X2+EPAY97fZXAVHTzvVbdT6AghnF3FebQ="
OTHER_PUBLIC = "MCowBQYDK2VwAyEA7Qm2w1xQk0f9Yh3pV5bN8cR4tL6sJ2aZ1uE0gD9iW3o="
PUBLIC_PEM = ("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n")


def only_changes(plan: dict, action: str = "no-op") -> dict[str, dict]:
    """The changes whose action is not ``action``."""
    return {a: c for a, c in by_address(plan).items() if c["action"] != action}


# -- no-op ------------------------------------------------------------------------


def test_everything_is_no_op_after_apply(gov: Gov, applied: Path) -> None:
    snapshot = gov.snapshot()
    assert len(snapshot.entries) == N
    assert {e.status for e in snapshot.entries.values()} == {"applied"}

    result = gov.run("plan", applied, "--detailed-exitcode", *LOCAL, code=0)
    assert result.stdout == ("Check refresh: passed (55 recorded object(s) read from the server; not read (the API "
                             "has no read for these kinds), compared with the recorded state "
                             "only: ResourceAlias, SessionTermination)\n"
                             "Check groups: passed (4 policy owner group(s) exist)\n"
                             "No changes. The manifests match the recorded state.\n"
                             "Plan: 0 to create, 0 to update, 0 blocked, 0 orphaned, "
                             f"0 uncertain, {N} unchanged.\n")
    plan = gov.plan(applied, "--detailed-exitcode", *LOCAL)
    assert plan["summary"] == summary(no_op=N)
    assert plan["serial"] == snapshot.serial
    assert plan["lineage"] == snapshot.lineage
    assert [c["name"] for c in plan["checks"]] == ["refresh", "groups"]
    assert plan["checks"][1] == {"name": "groups", "status": "passed",
                                 "detail": "4 policy owner group(s) exist"}
    assert plan["refreshed"] is True and plan["drift"] == []
    for change in plan["changes"]:
        assert change["id"] == snapshot.entries[change["address"]].id
        assert (change["fields"], change["diff"], change["reason"]) == ([], [], "")


def test_apply_again_changes_nothing(gov: Gov, applied: Path) -> None:
    serial = gov.snapshot().serial
    result = gov.apply_local(applied)
    assert result.stdout.endswith("No changes. Nothing to apply.\n")
    assert gov.snapshot().serial == serial


# -- update -----------------------------------------------------------------------

# What an update planned without reading its object says (render/reasons.py, Why.UNREAD).
UNREAD_UPDATE = ("not read from the server ({why}): {op} is sent the manifest's whole spec, "
                 "so a field changed outside govsync that the manifest leaves at its default "
                 "is set back")


def test_hook_timeout_change_is_an_update(gov: Gov, applied: Path) -> None:
    edit(applied / "hooks.yaml", RISK_TIMEOUT, "timeoutMs: 2500")
    hook_id = gov.snapshot().entries["Hook/risk_score"].id

    plan = gov.plan(applied, "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(update=1, no_op=N - 1)
    assert only_changes(plan) == {"Hook/risk_score": {
        "address": "Hook/risk_score", "action": "update", "kind": "Hook", "id": hook_id,
        "fields": ["timeoutMs"],
        # Planned offline: the plan says what an update it could not read sends.
        "reason": UNREAD_UPDATE.format(why="no endpoint", op="UpdateHook"),
        "diff": [{"field": "timeoutMs", "before": 1500, "after": 2500}],
        "why": {"why": "unread", "detail": "no endpoint"},
    }}

    text = gov.run("plan", applied, "--out", "p.json", *LOCAL).stdout
    assert text == ("~ Hook/risk_score  (update)\n"
                    "      timeoutMs: 1500 -> 2500\n"
                    "Check refresh: passed (55 recorded object(s) read from the server; not "
                    "read (the API has no read for these kinds), compared with the recorded "
                    "state only: ResourceAlias, SessionTermination)\n"
                    "Check groups: passed (4 policy owner group(s) exist)\n"
                    "Plan: 0 to create, 1 to update, 0 blocked, 0 orphaned, 0 uncertain, "
                    f"{N - 1} unchanged.\n")
    saved = json.loads(Path("p.json").read_text())
    updates = [c for c in saved["changes"] if c["action"] == "update"]
    assert len(updates) == 1
    assert updates[0]["address"] == "Hook/risk_score"
    assert updates[0]["operation"] == "UpdateHook"
    assert updates[0]["id"] == hook_id
    assert updates[0]["request"]["timeoutMs"] == 2500
    assert updates[0]["request"]["name"] == "risk_score"

    result = gov.apply_local(applied)
    assert f"Hook/risk_score: update applied (id {hook_id})" in result.stderr
    assert "Apply: 1 applied, 0 failed" in result.stdout
    assert gov.snapshot().entries["Hook/risk_score"].spec["timeoutMs"] == 2500
    assert gov.plan(applied, "--detailed-exitcode")["summary"] == summary(no_op=N)


def test_hook_code_change_is_an_update(gov: Gov, applied: Path) -> None:
    old = 'return {approved: ticket.state === "approved", ticket: found[1]'
    new = 'return {approved: ticket.state === "done", ticket: found[1]'
    before = gov.snapshot().entries["Hook/ticket_check"].spec["code"]
    edit(applied / "hooks.yaml", old, new)

    plan = gov.plan(applied, "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(update=1, no_op=N - 1)
    change = only_changes(plan)["Hook/ticket_check"]
    assert change["action"] == "update"
    assert change["fields"] == ["code"]
    assert change["diff"] == [{"field": "code", "before": before,
                               "after": before.replace(old, new)}]
    assert change["reason"] == UNREAD_UPDATE.format(why="no endpoint", op="UpdateHook")


def test_signing_key_protection_change_is_an_update(gov: Gov, applied: Path) -> None:
    edit(applied / "keys-and-labels.yaml", KEY_PROTECTION, "terminationProtection: false")
    key_id = gov.snapshot().entries["SigningKey/change-approvals-2024"].id

    plan = gov.plan(applied, "--detailed-exitcode", "--out", "p.json", code=2)
    assert plan["summary"] == summary(update=1, no_op=N - 1)
    assert only_changes(plan) == {"SigningKey/change-approvals-2024": {
        "address": "SigningKey/change-approvals-2024", "action": "update", "kind": "SigningKey",
        "id": key_id, "fields": ["terminationProtection"], "reason": "",
        "diff": [{"field": "terminationProtection", "before": True, "after": False}],
    }}
    saved = by_address(json.loads(Path("p.json").read_text()))
    assert saved["SigningKey/change-approvals-2024"]["operation"] == "UpdateSigningKey"

    gov.apply_local(applied)
    assert gov.plan(applied, "--detailed-exitcode")["summary"] == summary(no_op=N)


UPDATES = [
    pytest.param("connectors.yaml",
                 "cll-prod-eu-5432   # seeded: listener prod-eu-postgres, port 5432\n"
                 "  terminationProtection: true",
                 "cll-prod-eu-5432\n  terminationProtection: false",
                 "ConnectorListenerLink/prod-eu-postgres", "terminationProtection", True, False,
                 "UpdateConnectorListenerLink", id="ConnectorListenerLink"),
    pytest.param("sidecars.yaml",
                 "srl-orders-db   # seeded: legacy-orders-pg -> orders-db:5432\n"
                 "  terminationProtection: true",
                 "srl-orders-db\n  terminationProtection: false",
                 "SidecarResourceLink/orders-db", "terminationProtection", True, False,
                 "UpdateSidecarResourceLink", id="SidecarResourceLink"),
    pytest.param("connectors.yaml", "maxTokens: 2048", "maxTokens: 4096",
                 "ConnectorAIProvider/prod-eu-assistant", "config.providerB.maxTokens",
                 2048, 4096, "UpdateConnectorAiProviderV2", id="ConnectorAIProvider"),
    pytest.param("hooks.yaml", "timeoutMs: 1500   # policies fail closed after 1.5 s",
                 "timeoutMs: 1800", "Hook/risk_score", "timeoutMs", 1500, 1800,
                 "UpdateHook", id="Hook"),
]


@pytest.mark.parametrize(("file", "old", "new", "address", "field", "before", "after", "op"),
                         UPDATES)
def test_changes_the_api_can_make_are_updates(
        gov: Gov, applied: Path, file: str, old: str, new: str, address: str, field: str,
        before: object, after: object, op: str) -> None:
    edit(applied / file, old, new)
    entry_id = gov.snapshot().entries[address].id

    plan = gov.plan(applied, "--detailed-exitcode", "--out", "p.json", code=2)
    assert plan["summary"] == summary(update=1, no_op=N - 1)
    unread = BY_KIND[address.split("/")[0]].replace_all
    assert only_changes(plan) == {address: {
        "address": address, "action": "update", "kind": address.split("/")[0], "id": entry_id,
        "fields": [field],
        # Offline: a whole-object update says it is sent without a read.
        "reason": UNREAD_UPDATE.format(why="no endpoint", op=op) if unread else "",
        "diff": [{"field": field, "before": before, "after": after}],
        **({"why": {"why": "unread", "detail": "no endpoint"}} if unread else {}),
    }}
    assert by_address(json.loads(Path("p.json").read_text()))[address]["operation"] == op

    result = gov.apply_local(applied)
    assert f"{address}: update applied" in result.stderr
    assert gov.plan(applied, "--detailed-exitcode")["summary"] == summary(no_op=N)


BLOCKED = [
    pytest.param("connectors.yaml", "id: cll-prod-eu-5432 ", "id: cll-prod-eu-6543 ",
                 "ConnectorListenerLink/prod-eu-postgres", "id",
                 "UpdateConnectorListenerLink can change only terminationProtection",
                 id="ConnectorListenerLink"),
    # api-spec.md's UpdateHook carries no status: a change of it is not an update.
    pytest.param("hooks.yaml", "status: draft   # promoted to active after the PCI review",
                 "status: active", "Hook/vault_credentials", "status",
                 "UpdateHook can change only allowlistedEnvironmentVariables, "
                 "allowlistedNetworkHosts, code, description, name, timeoutMs", id="Hook"),
]


@pytest.mark.parametrize(("file", "old", "new", "address", "field", "why"), BLOCKED)
def test_changes_the_api_cannot_make_are_blocked(
        gov: Gov, applied: Path, file: str, old: str, new: str, address: str, field: str,
        why: str) -> None:
    edit(applied / file, old, new)
    kind = address.split("/")[0]

    plan = gov.plan(applied, "--detailed-exitcode", code=1)
    assert plan["summary"] == summary(blocked=1, no_op=N - 1)
    change = only_changes(plan)[address]
    assert (change["action"], change["fields"]) == ("blocked", [field])
    assert change["reason"] == (
        f"cannot change {field}: {why}. Revert the change in the manifest, or replace the "
        f"object: `--replace {address}` creates a new one and deletes the old one")
    assert kind in address


# -- blocked ----------------------------------------------------------------------


def test_satellite_type_change_is_blocked(gov: Gov, applied: Path) -> None:
    edit(applied / "satellites.yaml", "satelliteType: data_discovery   # runs",
         "satelliteType: data_classifier   # runs")
    snapshot = gov.snapshot()

    for flags in ((), ("--detailed-exitcode",)):
        result = gov.run("plan", applied, "--format", "json", *flags, code=1)
        assert result.stderr == ("1 blocked change(s), so apply will refuse this plan: 1 "
                                 "change(s) no update can make: revert them in the "
                                 "manifests, or replace the objects with `--replace ADDR`; "
                                 "then plan again.\n")
        plan = json.loads(result.stdout)
        assert plan["summary"] == summary(blocked=1, no_op=N - 1)
        assert only_changes(plan) == {"Satellite/discovery-analytics": {
            "address": "Satellite/discovery-analytics", "action": "blocked",
            "kind": "Satellite",
            "id": snapshot.entries["Satellite/discovery-analytics"].id,
            "fields": ["satelliteType"],
            "diff": [{"field": "satelliteType", "before": "data_discovery",
                      "after": "data_classifier"}],
            "reason": ("cannot change satelliteType: UpdateSatelliteV2 can change only name, "
                       "spaceId, terminationProtection. Revert the change in the manifest, or "
                       "replace the object: `--replace Satellite/discovery-analytics` creates "
                       "a new one and deletes the old one"),
            "why": {"why": "cannot-update", "operation": "UpdateSatelliteV2",
                    "fields": ["satelliteType"]},
        }}

    # Saved: one message, which does not also invite applying it.
    saved = applied.parent / "blocked-plan.json"
    result = gov.run("plan", applied, "--out", saved, code=1)
    assert result.stderr == (f"Saved the plan to {saved}, but it cannot be applied: 1 blocked "
                             "change(s), so apply will refuse this plan: 1 change(s) no update "
                             "can make: revert them in the manifests, or replace the objects "
                             "with `--replace ADDR`; then plan again.\n")
    assert "govsync apply" not in result.stderr

    markdown = gov.run("plan", applied, "--format", "markdown", code=1).stdout
    assert ("> **1 blocked change(s)**: `govsync apply` will refuse this plan: 1 change(s) "
            "no update can make: revert them in the manifests, or replace the objects with "
            "`--replace ADDR`.") in markdown.splitlines()

    result = gov.apply_local(applied, code=1)
    assert result.stderr.endswith(
        "Error: the plan has 1 blocked change(s):\n"
        "  Satellite/discovery-analytics: cannot change satelliteType: UpdateSatelliteV2 can "
        "change only name, spaceId, terminationProtection. Revert the change in the manifest, "
        "or replace the object: `--replace Satellite/discovery-analytics` creates a new one "
        "and deletes the old one\n"
        "1 change(s) no update can make: revert them in the manifests, or replace the objects "
        "with `--replace ADDR`; nothing was applied\n")
    assert gov.snapshot().serial == snapshot.serial


def test_signing_key_public_key_change_is_blocked(gov: Gov, applied: Path) -> None:
    edit(applied / "keys-and-labels.yaml", KEY_PUBLIC, OTHER_PUBLIC)

    plan = gov.plan(applied, "--detailed-exitcode", code=1)
    assert plan["summary"] == summary(blocked=1, no_op=N - 1)
    change = only_changes(plan)["SigningKey/change-approvals-2024"]
    assert change["action"] == "blocked"
    assert change["fields"] == ["publicKey"]
    assert change["diff"] == [{"field": "publicKey", "before": PUBLIC_PEM.format(KEY_PUBLIC),
                               "after": PUBLIC_PEM.format(OTHER_PUBLIC)}]
    assert change["reason"] == (
        "cannot change publicKey: UpdateSigningKey can change only terminationProtection. "
        "Revert the change in the manifest, or replace the object: `--replace "
        "SigningKey/change-approvals-2024` creates a new one and deletes the old one")


def test_signing_key_both_changes_are_blocked_naming_only_the_fixed_field(
        gov: Gov, applied: Path) -> None:
    path = applied / "keys-and-labels.yaml"
    edit(path, KEY_PUBLIC, OTHER_PUBLIC)
    edit(path, KEY_PROTECTION, "terminationProtection: false")

    plan = gov.plan(applied, code=1)
    change = only_changes(plan)["SigningKey/change-approvals-2024"]
    assert change["action"] == "blocked"
    assert change["fields"] == ["publicKey", "terminationProtection"]
    assert change["reason"].startswith(
        "cannot change publicKey: UpdateSigningKey can change only terminationProtection.")


# -- references -------------------------------------------------------------------


def test_literal_id_equal_to_the_applied_reference_is_no_op(gov: Gov, applied: Path) -> None:
    space_id = gov.snapshot().entries["Space/analytics"].id
    assert space_id
    edit(applied / "connectors.yaml", "  spaceRef: analytics\n", f"  spaceId: {space_id}\n")

    plan = gov.plan(applied, "--detailed-exitcode", code=0)
    assert plan["summary"] == summary(no_op=N)


def test_literal_id_of_another_space_is_an_update(gov: Gov, applied: Path) -> None:
    space_id = gov.snapshot().entries["Space/analytics"].id
    edit(applied / "connectors.yaml", "  spaceRef: analytics\n", "  spaceId: space-elsewhere\n")

    plan = gov.plan(applied)
    assert plan["summary"] == summary(update=1, no_op=N - 1)
    change = only_changes(plan)["Connector/prod-eu"]
    assert (change["action"], change["fields"]) == ("update", ["spaceId"])
    assert change["diff"] == [{"field": "spaceId", "before": space_id, "after": "space-elsewhere"}]


def test_a_referenced_object_with_a_new_id_updates_its_referrers(gov: Gov, applied: Path
                                                                   ) -> None:
    """The Space was re-recorded under another id: what refers to it by
    spaceRef is sent the new spaceId (their updates cover it)."""
    old = gov.snapshot().entries["Space/analytics"]
    gov.put(Entry(old.address, old.kind, "space-recreated", "applied", old.spec, old.response))

    plan = gov.plan(applied)
    assert plan["summary"] == summary(update=2, no_op=57)
    changes = only_changes(plan)
    assert set(changes) == {"Connector/prod-eu", "Satellite/discovery-analytics"}
    for change in changes.values():
        assert change["action"] == "update"
        assert change["fields"] == ["spaceId"]
        assert change["diff"] == [{"field": "spaceId", "before": old.id,
                                   "after": "space-recreated"}]


def test_a_referenced_object_created_again_updates_its_referrers(gov: Gov, applied: Path
                                                                   ) -> None:
    """The Space is gone from state (a create): its referrers are updated once its id is
    known."""
    space_id = gov.snapshot().entries["Space/payments"].id
    with SqliteStore(".govsync/state.db") as store:
        store.remove("default", "Space/payments")

    plan = gov.plan(applied)
    assert plan["summary"] == summary(create=1, update=2, no_op=56)
    changes = only_changes(plan)
    assert changes["Space/payments"]["action"] == "create"
    for address in ("Connector/payments-eu", "Satellite/classifier-payments"):
        assert changes[address]["action"] == "update"
        assert changes[address]["diff"] == [{"field": "spaceId", "before": space_id,
                                             "after": "(known after apply)"}]


def test_adding_depends_on_changes_no_spec(gov: Gov, applied: Path) -> None:
    edit(applied / "keys-and-labels.yaml", "  name: release-pipeline\n",
         "  name: release-pipeline\n  dependsOn: [Hook/risk_score]\n")
    assert gov.plan(applied, "--detailed-exitcode")["summary"] == summary(no_op=N)


def test_renaming_creates_the_new_name_and_orphans_the_old(gov: Gov, applied: Path) -> None:
    old_id = gov.snapshot().entries["SigningKey/release-pipeline"].id
    edit(applied / "keys-and-labels.yaml", "  name: release-pipeline\n",
         "  name: release-pipeline-2025\n")

    plan = gov.plan(applied, "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(create=1, orphan=1, no_op=N - 1)
    changes = only_changes(plan)
    assert changes["SigningKey/release-pipeline-2025"]["action"] == "create"
    assert changes["SigningKey/release-pipeline-2025"]["fields"] == [
        "algorithm", "name", "publicKey", "terminationProtection"]
    assert changes["SigningKey/release-pipeline"]["action"] == "orphan"
    assert changes["SigningKey/release-pipeline"]["id"] == old_id


# -- orphan -----------------------------------------------------------------------


def test_removed_manifests_become_orphans(gov: Gov, applied: Path) -> None:
    entries = gov.snapshot().entries
    (applied / "incident-response.yaml").unlink()

    plan = gov.plan(applied, "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(orphan=2, no_op=57)
    # A Removed document can delete a blocked user (DeleteBlockedUser); no operation
    # deletes a session termination, so its advice offers only forgetting it.
    reasons = {
        "BlockedUser/mallory-quinn": (
            "no longer in the manifests: nothing deletes it, so it stays on the server; a "
            "Removed document deletes it (destroy: true) or forgets it (false) after review; "
            "`govsync apply --forget-orphans` drops it from state"),
        "SessionTermination/inc-2024-0412-orders-dump": (
            "no longer in the manifests: the API has no operation that deletes a "
            "SessionTermination, so it stays on the server; a Removed document with "
            "destroy: false forgets it after review, as `govsync apply --forget-orphans` does"),
    }
    assert only_changes(plan) == {
        address: {"address": address, "action": "orphan", "kind": address.split("/")[0],
                  "id": entries[address].id, "fields": [], "reason": reason, "diff": [],
                  "why": {"why": "orphan"}}
        for address, reason in reasons.items()
    }
    # Orphans come last, after every address still in the manifests.
    assert [c["action"] for c in plan["changes"][-2:]] == ["orphan", "orphan"]

    # Without --forget-orphans apply leaves them in state.
    gov.apply_local(applied)
    assert gov.plan(applied)["summary"] == summary(orphan=2, no_op=57)
    result = gov.apply_local(applied, "--forget-orphans")
    assert "Apply: 0 applied, 0 failed, 0 skipped, 0 uncertain, 2 forgotten" in result.stdout
    assert gov.plan(applied, "--detailed-exitcode")["summary"] == summary(no_op=57)


# -- uncertain --------------------------------------------------------------------


@pytest.mark.parametrize("status", ["pending", "uncertain"])
def test_unsettled_create_is_uncertain(gov: Gov, manifests: Path, status: str) -> None:
    gov.put(Entry("Hook/risk_score", "Hook", None, status, {"name": "risk_score"}))

    plan = gov.plan(manifests, "--detailed-exitcode", code=2)
    assert plan["summary"] == summary(create=N - 1, uncertain=1)
    assert by_address(plan)["Hook/risk_score"] == {
        "address": "Hook/risk_score", "action": "uncertain", "kind": "Hook", "id": None,
        "fields": [], "diff": [],
        "reason": ("a create was sent but its outcome is unknown; run `govsync state resolve "
                   "Hook/risk_score --id ID` if it exists on the server, or `--absent` if not"),
        "why": {"why": "unsettled"},
    }


def test_unsettled_create_without_manifest_is_uncertain(gov: Gov, manifests: Path) -> None:
    gov.put(Entry("Hook/gone", "Hook", None, "uncertain", {"name": "gone"}))

    plan = gov.plan(manifests, code=0)
    assert plan["summary"] == summary(create=N, uncertain=1)
    assert by_address(plan)["Hook/gone"] == {
        "address": "Hook/gone", "action": "uncertain", "kind": "Hook", "id": None,
        "fields": [], "diff": [],
        "reason": ("a create was sent but its outcome is unknown, and the manifest is gone; "
                   "run `govsync state resolve Hook/gone --id ID` or `--absent`"),
        "why": {"why": "uncertain-gone"},
    }


def test_apply_never_repeats_an_uncertain_create(gov: Gov, manifests: Path) -> None:
    gov.put(Entry("Hook/risk_score", "Hook", None, "uncertain", {"name": "risk_score"}))

    # Without reading the server, nothing can settle it: it waits, and so does what
    # depends on it.
    result = gov.apply_local(manifests, "--refresh=false", code=1)
    assert not [line for line in result.stderr.splitlines()
                if line.startswith("Hook/risk_score:")]
    # Policy/risk-based-access lists the hook in metadata.dependsOn: it waits too.
    assert "Apply: 57 applied, 0 failed, 1 skipped, 0 uncertain, 0 forgotten (57 requests in " \
        in result.stdout
    entry = gov.snapshot().entries["Hook/risk_score"]
    assert (entry.status, entry.id) == ("uncertain", None)
    assert gov.plan(manifests)["summary"] == summary(create=1, uncertain=1, no_op=57)


def test_an_uncertain_create_is_settled_by_a_read(gov: Gov, manifests: Path) -> None:
    # Contract 12, amended: a List by name settles it.  Found absent, it is created
    # once; found, it is recorded and never created again.
    gov.put(Entry("Hook/risk_score", "Hook", None, "uncertain", {"name": "risk_score"}))
    gov.apply_local(manifests)
    entry = gov.snapshot().entries["Hook/risk_score"]
    assert entry.status == "applied" and entry.id
    gov.put(Entry("Hook/risk_score", "Hook", None, "pending", {"name": "risk_score"}))
    plan = gov.run("plan", manifests, *LOCAL, "--format", "json").stdout
    (change,) = [c for c in json.loads(plan)["changes"] if c["address"] == "Hook/risk_score"]
    assert (change["action"], change["id"]) == ("import", entry.id), change
    assert change["why"] == {"why": "settled-exists", "id": entry.id,
                             "operation": "ListHooks"}
    gov.apply_local(manifests)
    again = gov.snapshot().entries["Hook/risk_score"]
    assert (again.status, again.id) == ("applied", entry.id)


# -- state scope --------------------------------------------------------------------


def test_each_workspace_is_planned_against_its_own_state(gov: Gov, applied: Path) -> None:
    assert gov.plan(applied, "--workspace", "staging")["summary"] == summary(create=N)
    plan = gov.plan(applied, "--workspace", "staging")
    assert plan["workspace"] == "staging"
    assert plan["lineage"] != gov.snapshot().lineage
    assert gov.plan(applied)["summary"] == summary(no_op=N)


def test_plan_reads_state_while_another_process_holds_the_lock(gov: Gov, applied: Path) -> None:
    edit(applied / "hooks.yaml", RISK_TIMEOUT, "timeoutMs: 2500")
    with SqliteStore(".govsync/state.db") as holder:
        holder.acquire("default", LockHolder("alice", "ci-runner", 4242, "govsync apply", "now"))
        plan = gov.plan(applied, "--detailed-exitcode", code=2)
        assert plan["summary"] == summary(update=1, no_op=N - 1)
        result = gov.apply_local(applied, code=1)
        assert "Error: workspace 'default' is locked by alice@ci-runner pid 4242" in result.stderr
    assert gov.snapshot().entries["Hook/risk_score"].spec["timeoutMs"] == 1500
