"""The duplicate lookup before a create covers every kind the server can be searched
for, as the kinds table says (``Kind.identity``: a name, a scope and a label, a policy
and an identity, ...); the plan names the kinds it could not check."""

from __future__ import annotations

from typing import Any

from refreshkit import Gov, copy_examples, not_ours
from refreshkit import lost as lost_state

from govsync.api.kinds import BY_KIND, KINDS
from govsync.api.resource import findable as searchable

# Kinds whose create could make a second object (a retry-safe "create" sets the one
# object of its key) and that nothing finds before they are recorded.
UNCHECKED = sorted(k.name for k in KINDS if not k.create.retry_safe and not searchable(k))


def refresh_check(plan: dict[str, Any]) -> str:
    (check,) = [c for c in plan["checks"] if c["name"] == "refresh"]
    return str(check["detail"])


def test_the_table_says_how_each_kind_is_found() -> None:
    assert BY_KIND["DataDiscoveryConfiguration"].identity == (
        "resourceId", "nativeUserId", "database", "path")
    assert BY_KIND["NativeUser"].identity == ("resourceId", "label")
    assert BY_KIND["Hook"].identity == ("name",)
    assert BY_KIND["ConnectorAIProvider"].identity == ("connectorId",)
    # A policy's suspensions: one identity may hold several (other conditions, expiries).
    assert UNCHECKED == ["PolicyReport", "PolicySuspension", "ResourceAlias",
                         "SessionTermination"]


def test_a_lost_state_blocks_every_create_the_server_can_find(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    lost = lost_state(gov)
    plan = lost.run("plan", manifests, "--format", "json")
    assert plan.code == 1, plan
    changes = plan.json()["changes"]
    kinds_seen = {c["kind"] for c in changes}
    # The kinds found by more than a name are in the examples, and all blocked.
    assert {"NativeUser", "DataDiscoveryConfiguration"} <= kinds_seen
    for change in changes:
        kind = BY_KIND[change["kind"]]
        if searchable(kind) and not kind.create.retry_safe:
            assert change["action"] == "blocked", change
            assert not_ours(change["reason"]), change
        elif change["kind"] in UNCHECKED:
            assert change["action"] == "create", change
    detail = refresh_check(plan.json())
    unchecked = sorted({c["kind"] for c in changes} & set(UNCHECKED))
    assert unchecked, "the examples create kinds nothing can find"
    assert ("not checked for a duplicate (nothing finds them on the server before they "
            "are recorded): " + ", ".join(unchecked)) in detail


def test_a_new_object_of_a_found_kind_is_created(gov: Gov) -> None:
    # The lookup finds only the object it names: a fresh server blocks nothing.
    manifests = str(copy_examples(gov.folder))
    plan = gov.run("plan", manifests, "--format", "json")
    assert plan.code in (0, 2), plan
    assert not [c for c in plan.json()["changes"] if c["action"] == "blocked"]
    assert "create(s) looked up on the server" in refresh_check(plan.json())


def test_a_create_without_its_identifying_fields_is_said_unchecked(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = copy_examples(gov.folder)
    resources = manifests / "resources.yaml"
    resources.write_text(resources.read_text().replace("  label: BI dashboards\n", ""))
    plan = gov.run("plan", str(manifests), "--format", "json")
    assert plan.code in (0, 2), plan
    detail = refresh_check(plan.json())
    # The native user without a label cannot be found before it is recorded.
    assert "7 create(s) not checked for a duplicate" in detail, detail
    assert "NativeUser" in detail.split("recorded): ", 1)[1]


def test_a_second_suspension_for_the_same_identity_is_not_a_duplicate(gov: Gov) -> None:
    # One identity may hold several suspensions of a policy (other conditions): a
    # suspension made in the console for usr-erin must not block the manifest's.
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    policy = gov.entries()["Policy/warehouse-business-hours"]["id"]
    gov.call("CreatePolicySuspension", {
        "policyId": policy, "identityId": "usr-erin", "expirationMinutes": 60,
        "oneoff": True, "reason": "break glass",
        "inputCondition": 'input.resource.id == "res-orders"'})
    operations = manifests / "policy-operations.yaml"
    operations.write_text(operations.read_text() + (
        "---\napiVersion: govsync/v1\nkind: PolicySuspension\nmetadata:\n"
        "  name: erin-ledger\nspec:\n  policyRef: warehouse-business-hours\n"
        "  identityId: usr-erin\n  expirationMinutes: 60\n  oneoff: true\n"
        "  reason: ledger\n  inputCondition: input.resource.id == \"res-ledger\"\n"))
    plan = gov.run("plan", str(manifests), "--format", "json")
    assert plan.code == 0, plan
    (change,) = [c for c in plan.json()["changes"]
                 if c["address"] == "PolicySuspension/erin-ledger"]
    assert change["action"] == "create", change
