"""schemas/manifest.schema.json rejects what `govsync validate` rejects, where JSON Schema can say it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from plan_helpers import ROOT, Gov

SCHEMA = json.loads((ROOT / "schemas" / "manifest.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def doc(kind: str, name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "govsync/v1", "kind": kind, "metadata": {"name": name, **metadata},
            "spec": spec}


POLICY = {"code": 'package formal.v2\nsession := {"action": "allow"}\n'}
HOOK_CODE = "export default function hook() { return 1; }"

VALID = [
    doc("Connector", "prod-eu", {}),
    doc("Sidecar", "pg-01", {"technology": "ssh", "hostname": "h"}),
    doc("Hook", "risk_score", {"code": HOOK_CODE}),
    doc("Space", "Analytics & BI", {}),
    doc("Policy", "owned-by-group", {**POLICY, "groupName": "admins"}),
    doc("Policy", "owned-by-user", {**POLICY, "userEmail": "ann@example.com", "groupName": None}),
]

# Issue 23: the documents that are not objects, and variables anywhere a value goes. Valid
# documents for the schema, which sees one document: whether a patch's target exists or a
# variable is defined is for `govsync validate`, which sees them all.
VALID_DOCUMENTS = [
    doc("Patch", "prod-timeouts", {"target": "Hook/risk_score",
                                   "merge": {"timeoutMs": 5000, "description": None}}),
    doc("Moved", "renamed", {"from": "Hook/old", "to": "Hook/new"}),
    doc("Import", "adopted", {"to": "Space/analytics", "id": "space-0a1b"}),
    doc("Hook", "variable", {"code": HOOK_CODE, "timeoutMs": {"var": "hookTimeout"},
                             "allowlistedNetworkHosts": [{"var": "host"}]}),
]

INVALID = {
    "connector-name-uppercase": doc("Connector", "Prod-EU", {}),
    "connector-name-too-short": doc("Connector", "eu", {}),
    "sidecar-name-too-long": doc("Sidecar", "s" * 64, {"technology": "ssh", "hostname": "h"}),
    "hook-name-not-identifier": doc("Hook", "risk-score", {"code": HOOK_CODE}),
    "name-blank": doc("Space", "   ", {}),
    "name-control-character": doc("Space", "a\tb", {}),
    "name-with-slash": doc("Space", "eu/a", {}),
    "policy-two-owners": doc("Policy", "p", {**POLICY, "groupName": "a", "userEmail": "b@c"}),
    "policy-no-owner": doc("Policy", "p", POLICY),
    "policy-null-owner": doc("Policy", "p", {**POLICY, "groupName": None}),
    "depends-on-unknown-kind": doc("Space", "s", {}, dependsOn=["Nope/x"]),
    "variable-in-a-secret": doc("LogIntegration", "siem", {"logStoreB": {
        "site": "s", "accountId": "a", "apiKey": {"var": "key"}}}),
    "patch-without-target": doc("Patch", "p", {"merge": {}}),
}


def _validate(gov: Gov, workdir: Path, document: dict[str, Any]) -> int:
    path = workdir / "m.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return gov.run("validate", path, code=None).exit_code


def test_directives_and_variables_are_valid_documents() -> None:
    for document in VALID_DOCUMENTS:
        assert not list(VALIDATOR.iter_errors(document)), document


@pytest.mark.parametrize("document", VALID, ids=[d["metadata"]["name"] for d in VALID])
def test_valid_for_both(gov: Gov, workdir: Path, document: dict[str, Any]) -> None:
    assert not list(VALIDATOR.iter_errors(document))
    assert _validate(gov, workdir, document) == 0


@pytest.mark.parametrize("document", INVALID.values(), ids=INVALID.keys())
def test_invalid_for_both(gov: Gov, workdir: Path, document: dict[str, Any]) -> None:
    assert list(VALIDATOR.iter_errors(document)), "the JSON Schema accepts it"
    assert _validate(gov, workdir, document) == 1


# Issue 35: documents beside the ones they name (a Patch's target, an Import's address),
# so that `validate` judges the document itself; the schema sees the last one.
SPACE = doc("Space", "analytics", {"description": "d"})
HOOK = doc("Hook", "risk_score", {"code": HOOK_CODE, "description": "d"})
SIEM = doc("LogIntegration", "siem", {"logStoreB": {
    "site": "s", "accountId": "a", "apiKey": {"fromEnv": "SIEM_KEY"}}})
IN_FILES = {
    "space-spec-null": (True, [{**SPACE, "spec": None}]),
    "space-without-spec": (True, [{k: v for k, v in SPACE.items() if k != "spec"}]),
    "patch-removes-and-sets": (True, [HOOK, doc("Patch", "p", {
        "target": "Hook/risk_score", "merge": {"description": None, "timeoutMs": 5000}})]),
    "patch-merges-a-nested-field": (True, [SIEM, doc("Patch", "p", {
        "target": "LogIntegration/siem", "merge": {"logStoreB": {"site": "eu"}}})]),
    "patch-sets-a-variable": (True, [HOOK, doc("Patch", "p", {
        "target": "Hook/risk_score", "merge": {"timeoutMs": {"var": "timeout"}}})]),
    "import-with-an-id": (True, [SPACE, doc("Import", "i", {"to": "Space/analytics",
                                                             "id": "space-1"})]),
    "hook-without-spec": (False, [{k: v for k, v in HOOK.items() if k != "spec"}]),
    "hook-spec-null": (False, [{**HOOK, "spec": None}]),
    "patch-merge-unknown-field": (False, [HOOK, doc("Patch", "p", {
        "target": "Hook/risk_score", "merge": {"timeoutMS": 5000}})]),
    "patch-merge-wrong-type": (False, [HOOK, doc("Patch", "p", {
        "target": "Hook/risk_score", "merge": {"timeoutMs": "soon"}})]),
    "patch-merge-nested-unknown-field": (False, [SIEM, doc("Patch", "p", {
        "target": "LogIntegration/siem", "merge": {"logStoreB": {"sight": "eu"}}})]),
    "patch-target-variable": (False, [HOOK, doc("Patch", "p", {
        "target": {"var": "target"}, "merge": {"timeoutMs": 5000}})]),
    "import-id-empty": (False, [SPACE, doc("Import", "i", {"to": "Space/analytics", "id": ""})]),
    "import-id-blank": (False, [SPACE, doc("Import", "i", {"to": "Space/analytics",
                                                            "id": "  "})]),
}


@pytest.mark.parametrize("valid, documents", IN_FILES.values(), ids=IN_FILES.keys())
def test_schema_and_validate_agree(gov: Gov, workdir: Path, valid: bool,
                                   documents: list[dict[str, Any]]) -> None:
    path = workdir / "m.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    done = gov.run("validate", path, "--var", "timeout=100", "--var", "target=Hook/risk_score",
                   code=None, env={"SIEM_KEY": "k"})
    errors = [e.message for e in VALIDATOR.iter_errors(documents[-1])]
    if valid:
        assert done.exit_code == 0, done.output
        assert not errors
    else:
        assert done.exit_code == 1, done.output
        assert errors, "the JSON Schema accepts it"


def test_every_example_manifest_is_valid() -> None:
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(document, dict) and str(document.get("apiVersion", "")).startswith("govsync/"):
                errors = [e.message for e in VALIDATOR.iter_errors(document)]
                assert not errors, (path, errors)


def _reachable(name: str, seen: set[str]) -> set[str]:
    """``name`` and the definitions it refers to, transitively."""
    if name not in seen:
        seen.add(name)
        for ref in re.findall(r'"#/\$defs/([^"]+)"', json.dumps(SCHEMA["$defs"][name])):
            _reachable(ref, seen)
    return seen


def test_every_field_of_every_kind_says_what_it_means() -> None:
    # Issue 35: the text editors show on hover, from govsync/api/fields.py, in place of
    # the titles pydantic makes of the names ("Timeoutms").
    seen: set[str] = set()
    for name in SCHEMA["$defs"]:
        if name.endswith("Spec"):
            _reachable(name, seen)
    fields = [(name, field, prop) for name in sorted(seen)
              for field, prop in SCHEMA["$defs"][name].get("properties", {}).items()]
    assert len(fields) > 278
    undescribed = [f"{name}.{field}" for name, field, prop in fields
                   if not (prop.get("description") or prop.get("anyOf", [{}])[0].get("description"))]
    assert undescribed == []
    titled = [f"{name}.{field}" for name, field, prop in fields
              if "title" in prop or "title" in prop.get("anyOf", [{}])[0]]
    assert titled == []
