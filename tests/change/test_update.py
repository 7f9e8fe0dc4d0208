"""Update for every kind the API can update (contract section 12): a change to a field
the kind's update covers is an ``update``, sent read-modify-write, against the embedded
reference server, with the state in SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from refreshkit import Gov, copy_examples

from govsync.api.kinds import KINDS, Kind

UPDATABLE = [k for k in KINDS if k.updatable]


def applied(gov: Gov) -> Path:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    return manifests


def find_document(manifests: Path, kind: str) -> tuple[Path, list[dict[str, Any]], int]:
    for path in sorted(manifests.glob("*.yaml")):
        docs = list(yaml.safe_load_all(path.read_text()))
        for i, doc in enumerate(docs):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                return path, docs, i
    raise AssertionError(f"no {kind} in the examples")


def edit(manifests: Path, kind: Kind) -> tuple[str, str, Any]:
    """Change one field the kind's update covers in its first example manifest: (address,
    field, new value)."""
    path, docs, i = find_document(manifests, kind.name)
    spec = docs[i]["spec"]
    field, value = changed_field(kind, spec)
    spec[field] = value
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return f"{kind.name}/{docs[i]['metadata']['name']}", field, value


# Fields whose values the API checks (enums, names that must match a pattern): a value
# that the API takes, for the kinds whose other fields are all such.
CHOSEN: dict[str, tuple[str, Any]] = {
    "ConnectorAIProvider": ("config", None),
    "ResourceAlias": ("alias", "alias-v2"),
    "DataDiscoveryConfiguration": ("schedule", "0 5 * * *"),
    "LogQuery": ("query", None),
    "DataLabel": ("classifierData", "[0-9]{4}-changed"),
    "ScenarioMonitor": ("scenario", "ssh changed@example"),
}


def changed_field(kind: Kind, spec: dict[str, Any]) -> tuple[str, Any]:
    if kind.name in CHOSEN:
        field, value = CHOSEN[kind.name]
        if field == "config":
            value = {k: {**v, "model": "changed-model"} if isinstance(v, dict) else v
                     for k, v in spec["config"].items()}
        elif field == "query":
            value = {**spec["query"], "relativeTime": 3600}
        return field, value
    for field in ("description", "label", "code", "hostname", "terminationProtection"):
        if field in kind.updatable:
            current = spec.get(field)
            if isinstance(current, bool) or field == "terminationProtection":
                return field, not bool(current)
            if field == "code":
                return field, (current or "") + "\n# changed by a pull request\n"
            return field, (current or "x") + "-changed"
    raise AssertionError(f"no field to change for {kind.name}: {sorted(kind.updatable)}")


def live_object(gov: Gov, kind: str, object_id: str) -> dict[str, Any]:
    from govsync.api.kinds import BY_KIND

    id_field = BY_KIND[kind].create.id_field
    return next(o for o in gov.objects(kind) if o.get(id_field, o.get("id")) == object_id)


@pytest.mark.parametrize("kind", UPDATABLE, ids=lambda k: k.name)
def test_update_every_updatable_kind(sqlite_gov: Gov, kind: Kind) -> None:
    # Each kind on SQLite: a kind's update is the same on either backend (the state
    # contract suite and this file's other tests hold both to it).
    gov = sqlite_gov
    manifests = applied(gov)
    address, field, value = edit(manifests, kind)
    plan = gov.ok("plan", str(manifests), "--format", "json").json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert change["address"] == address and change["action"] == "update", change
    assert any(f == field or f.startswith(field + ".") or f.startswith(field + "[")
               for f in change["fields"]), change
    gov.ok("apply", str(manifests), "--auto-approve")
    entry = gov.entries()[address]
    live = live_object(gov, kind.name, entry["id"])
    if isinstance(value, dict):
        assert {k: v for k, v in live[field].items() if k in value} == value or \
            live[field] == value
    else:
        assert live[field] == value
    again = gov.ok("plan", str(manifests), "--detailed-exitcode")
    assert "No changes" in again.out, again


def test_policy_code_change_is_an_update_keeping_its_id(gov: Gov) -> None:
    """The issue's case: a policy's code edited in a pull request is updated in place,
    not blocked and not created again (one policy, same id, version increased)."""
    manifests = applied(gov)
    before = {p["id"]: p for p in gov.objects("Policy")}
    path, docs, i = find_document(manifests, "Policy")
    name = docs[i]["metadata"]["name"]
    docs[i]["spec"]["code"] += "\n# tightened\n"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    text = gov.ok("plan", str(manifests)).out
    assert f"~ Policy/{name}  (update)" in text and "1 to update, 0 blocked" in text
    gov.ok("apply", str(manifests), "--auto-approve")
    after = {p["id"]: p for p in gov.objects("Policy")}
    assert after.keys() == before.keys()
    policy_id = gov.entries()[f"Policy/{name}"]["id"]
    assert after[policy_id]["code"].endswith("# tightened\n")
    assert after[policy_id]["version"] == before[policy_id]["version"] + 1


def test_read_modify_write_keeps_a_field_changed_outside(gov: Gov) -> None:
    """A description changed in the console survives an update of the code: the update
    is laid over the object as read, and the manifest does not name description."""
    manifests = applied(gov)
    path, docs, i = find_document(manifests, "Hook")
    name = docs[i]["metadata"]["name"]
    docs[i]["spec"].pop("description", None)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    gov.ok("apply", str(manifests), "--auto-approve")
    hook = next(o for o in gov.objects("Hook") if o["name"] == name)
    gov.call("UpdateHook", {"hook": {**{k: v for k, v in hook.items()
                                         if k not in ("createdAt", "updatedAt")},
                                     "description": "set in the console"}})
    docs[i]["spec"]["timeoutMs"] = int(docs[i]["spec"].get("timeoutMs", 1000)) + 1
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    gov.ok("apply", str(manifests), "--auto-approve")
    live = next(o for o in gov.objects("Hook") if o["name"] == name)
    assert live["timeoutMs"] == docs[i]["spec"]["timeoutMs"]
    assert live["description"] == "set in the console"


def test_a_field_no_update_covers_is_blocked_naming_replace(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests = applied(gov)
    path, docs, i = find_document(manifests, "Satellite")
    name = docs[i]["metadata"]["name"]
    docs[i]["spec"]["satelliteType"] = ("ai" if docs[i]["spec"]["satelliteType"] != "ai"
                                        else "policy_data_loader")
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    run = gov.run("plan", str(manifests))
    assert "cannot change satelliteType" in run.out, run
    assert f"--replace Satellite/{name}" in run.out, run


def test_a_field_set_back_to_its_default_is_sent(gov: Gov) -> None:
    """Emptying a hook's allowlist (its default) is a change the manifest asks for: sent,
    not mistaken for a field the manifest does not name."""
    manifests = applied(gov)
    path, docs, i = find_document(manifests, "Hook")
    name = docs[i]["metadata"]["name"]
    assert docs[i]["spec"].get("allowlistedNetworkHosts")
    docs[i]["spec"]["allowlistedNetworkHosts"] = []
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    gov.ok("apply", str(manifests), "--auto-approve")
    live = next(o for o in gov.objects("Hook") if o["name"] == name)
    assert live["allowlistedNetworkHosts"] == []
