"""Replace (contract section 12): ``--replace ADDR`` creates a new object, moves every
reference to it (updating dependants where their update covers the reference, replacing
them where it does not), then deletes the old one."""

from __future__ import annotations

from refreshkit import Gov, copy_examples


def test_replace_a_space_updates_its_dependants_then_deletes_the_old(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    old = gov.entries()["Space/ml-platform"]["id"]
    plan = gov.ok("plan", manifests, "--replace", "Space/ml-platform", "--format",
                  "json").json()
    actions = {c["address"]: c["action"] for c in plan["changes"] if c["action"] != "no-op"}
    assert actions == {"Space/ml-platform": "replace", "Connector/ml-gateway-us": "update",
                       "Satellite/ai-analytics": "update"}
    space = next(c for c in plan["changes"] if c["address"] == "Space/ml-platform")
    assert "two Spaces are named 'ml-platform'" in space["reason"]
    text = gov.ok("plan", manifests, "--replace", "Space/ml-platform").out
    assert "-/+ Space/ml-platform  (replace)" in text and "1 to replace" in text
    gov.ok("apply", manifests, "--auto-approve", "--replace", "Space/ml-platform")
    new = gov.entries()["Space/ml-platform"]["id"]
    assert new != old
    spaces = {s["id"] for s in gov.objects("Space")}
    assert new in spaces and old not in spaces
    for connector in gov.objects("Connector"):
        assert connector.get("spaceId") != old
    assert "No changes" in gov.ok("plan", manifests).out


def test_replace_chains_to_dependants_whose_reference_cannot_change(gov: Gov) -> None:
    """A BI integration's linkedDbUserId has no update: replacing its native user
    replaces it too, and the plan shows the chain."""
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    entries = gov.entries()
    old_user = entries["NativeUser/warehouse-bi"]["id"]
    old_bi = entries["BIIntegration/exec-dashboards"]["id"]
    plan = gov.ok("plan", manifests, "--replace", "NativeUser/warehouse-bi", "--format",
                  "json").json()
    changes = {c["address"]: c for c in plan["changes"] if c["action"] != "no-op"}
    assert {a: c["action"] for a, c in changes.items()} == {
        "NativeUser/warehouse-bi": "replace", "BIIntegration/exec-dashboards": "replace"}
    assert "refers to a replaced object" in changes["BIIntegration/exec-dashboards"]["reason"]
    gov.ok("apply", manifests, "--auto-approve", "--replace", "NativeUser/warehouse-bi")
    entries = gov.entries()
    assert entries["NativeUser/warehouse-bi"]["id"] != old_user
    assert entries["BIIntegration/exec-dashboards"]["id"] != old_bi
    assert old_bi not in {o["id"] for o in gov.objects("BIIntegration")}
    assert old_user not in {o["id"] for o in gov.objects("NativeUser")}
    assert "No changes" in gov.ok("plan", manifests).out


def test_replace_of_an_unknown_address_is_refused(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = str(copy_examples(gov.folder))
    run = gov.run("plan", manifests, "--replace", "Space/nowhere")
    assert run.code == 1 and "--replace Space/nowhere" in run.err
