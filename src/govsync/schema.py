"""Generated schemas: the manifest JSON Schema and the API's OpenAPI document.

Both come from the request models, the operation catalog and the table of
kinds; ``schemas/`` holds the committed output and a test fails when it is
stale (``govsync schema --check``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from govsync import __version__
from govsync.api.catalog import OPERATIONS
from govsync.api.fields import describe
from govsync.api.kinds import KINDS, Kind
from govsync.api.models import (
    CONNECT_PROTOCOL_VERSION,
    CONNECT_TIMEOUT_PATTERN,
    ConnectErrorBody,
    ErrorBody,
    ListMetadata,
)
from govsync.api.status import SPEC_CODES
from govsync.files import write_generated
from govsync.manifests import policytest
from govsync.manifests.directives import DIRECTIVE_KINDS
from govsync.manifests.documents import API_VERSION, ENV_NAME
from govsync.policycode.stages import RESERVED_INPUT_KEYS, Stage
from govsync.project import VAR_NAME

MANIFEST_SCHEMA = "manifest.schema.json"
# metadata.name as `govsync validate` takes it: no '/', no control characters, not blank.
METADATA_NAME = r"^[^/\u0000-\u001f\u007f]*[^/\s\u0000-\u001f\u007f][^/\u0000-\u001f\u007f]*$"
OPENAPI = "openapi.json"


def _defs(models: list[type[BaseModel]], ref: str) -> tuple[dict[type[BaseModel], Any], dict[str, Any]]:
    keyed, top = models_json_schema(
        [(model, "validation") for model in models], ref_template=ref + "{model}"
    )
    return {model: keyed[(model, "validation")] for model in models}, top.get("$defs", {})


def manifest_schema(*, variables: bool = True) -> dict[str, Any]:
    """One JSON Schema for a manifest document of any kind (``variables``: where a value
    goes, ``{var: NAME}`` may stand for it; the reference docs leave that out)."""
    models = [k.request_model for k in KINDS]
    refs, defs = _defs(models, "#/$defs/")
    defs["SecretFromEnv"] = {
        "type": "object",
        "description": "A secret read from govsync's environment; literal values are refused.",
        "properties": {"fromEnv": {"type": "string", "pattern": ENV_NAME.pattern}},
        "required": ["fromEnv"],
        "additionalProperties": False,
    }
    defs[VARIABLE] = {
        "type": "object",
        "description": "The value of a project variable (govsync.yaml vars, an environment's "
                       "vars, or --var NAME=VALUE): any YAML value, checked once filled in.",
        "properties": {"var": {"type": "string", "pattern": VAR_NAME.pattern}},
        "required": ["var"],
        "additionalProperties": False,
    }
    branches = []
    for kind in KINDS:
        spec = _spec_schema(kind, refs[kind.request_model], defs)
        defs[f"{kind.name}Spec"] = spec
        spec_ref = {"$ref": f"#/$defs/{kind.name}Spec"}
        then: dict[str, Any] = {"properties": {"spec": spec_ref}}
        if spec.get("required") or spec.get("allOf"):
            then["required"] = ["spec"]  # validate: "missing required field spec.X"
        else:
            # No field is required: validate reads a missing or empty spec as {}.
            then["properties"]["spec"] = {"anyOf": [spec_ref, {"type": "null"}]}
        name = _api_name_schema(kind, refs[kind.request_model], defs)
        if name:
            # metadata.name is the API's name: its constraints (length, pattern) apply.
            then["properties"]["metadata"] = {"properties": {"name": name}}
        branches.append({
            "if": {"properties": {"kind": {"const": kind.name}}, "required": ["kind"]},
            "then": then,
        })
    _describe_fields(defs)
    # A Patch's merge, per kind of its target: the spec's fields, each optional and
    # null (which removes it), nested mappings merged the same way (RFC 7386).
    merges = {kind.name: _merge_ref(f"{kind.name}Spec", defs) for kind in KINDS}
    # Once every secret is marked: wherever a value goes, {var: NAME} may stand for it.
    for def_name, model in list(defs.items()):
        if variables and def_name not in ("SecretFromEnv", VARIABLE):
            defs[def_name] = _with_variables(model)
    for directive, spec in _directive_specs(merges).items():
        defs[f"{directive}Spec"] = spec
        branches.append({
            "if": {"properties": {"kind": {"const": directive}}, "required": ["kind"]},
            "then": {"required": ["spec"],
                     "properties": {"spec": {"$ref": f"#/$defs/{directive}Spec"}}},
        })
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://govsync.dev/schemas/manifest.schema.json",
        "title": "govsync manifest",
        "description": "One document of a govsync manifest file (contract section 1).",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"enum": [*(k.name for k in KINDS), *DIRECTIVE_KINDS]},
            "metadata": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "pattern": METADATA_NAME,
                             "description": "The object's address is Kind/name: no '/', no "
                                            "control characters, not blank."},
                    "dependsOn": {
                        "type": "array",
                        "items": {"type": "string", "pattern": _ADDRESS},
                        "description": "Extra ordering edges: addresses Kind/name.",
                    },
                },
            },
            "spec": {"type": ["object", "null"]},
        },
        "allOf": branches,
        "$defs": dict(sorted(defs.items())),
    }


VARIABLE = "Variable"
_ADDRESS = f"^({'|'.join(k.name for k in KINDS)})/[^/]+$"


def _with_variables(schema: Any) -> Any:
    """``schema`` where every property and list item may also be ``{var: NAME}``
    (never a secret: those take only ``{fromEnv: ...}``)."""
    if isinstance(schema, list):
        return [_with_variables(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _with_variables(value) for key, value in schema.items()}
    variable = {"$ref": f"#/$defs/{VARIABLE}"}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {
            name: prop if prop.get("$ref") == "#/$defs/SecretFromEnv"
            else {"anyOf": [prop, variable]}
            for name, prop in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = {"anyOf": [out["items"], variable]}
    return out


def _describe_fields(defs: dict[str, Any]) -> None:
    """Every field's description (api/fields.py: what editors show on hover), in place
    of the title pydantic makes from its name ("Timeoutms")."""
    for model, schema in defs.items():
        for field, prop in schema.get("properties", {}).items():
            prop.pop("title", None)
            text = describe(model, field)
            if text and "description" not in prop:
                prop["description"] = text


def _merge_ref(name: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A reference to the merge-patch form of ``defs[name]``, made once (``NameMerge``)."""
    merged = f"{name}Merge"
    if merged not in defs:
        defs[merged] = {}  # (a model that holds itself)
        schema = {k: v for k, v in defs[name].items()
                  if k not in ("required", "allOf", "title")}
        schema["properties"] = {
            key: {"anyOf": [_mergeable(prop, defs), {"type": "null"}],
                  **({"description": prop["description"]} if "description" in prop else {})}
            for key, prop in defs[name].get("properties", {}).items()}
        defs[merged] = schema
    return {"$ref": f"#/$defs/{merged}"}


def _mergeable(prop: Any, defs: dict[str, Any]) -> Any:
    """A field's schema in a merge patch: a mapping is merged (its fields optional), a
    list or a scalar replaced whole (as written)."""
    if not isinstance(prop, dict):
        return prop
    target = prop.get("$ref", "").rsplit("/", 1)[-1]
    if target in defs and target not in ("SecretFromEnv", VARIABLE) \
            and "properties" in defs[target]:
        return _merge_ref(target, defs)
    for union in ("anyOf", "oneOf"):
        if union in prop:  # (several forms may match once fields are optional)
            rest = {k: v for k, v in prop.items() if k not in ("anyOf", "oneOf", "discriminator")}
            return {**rest, "anyOf": [_mergeable(p, defs) for p in prop[union]]}
    return prop


def _directive_specs(merges: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The specs of the documents that are not objects (contract sections 5 and 6);
    ``merges``: the merge-patch schema of each kind's spec."""
    address = {"type": "string", "pattern": _ADDRESS, "description": "An address Kind/name."}
    return {
        "Patch": {"type": "object", "additionalProperties": False,
                  "required": ["target", "merge"],
                  "description": "An RFC 7386 JSON Merge Patch over another document's spec.",
                  "properties": {"target": address,
                                 "merge": {"type": "object",
                                           "description": "The target's spec fields to set; "
                                                          "null removes a field."}},
                  "allOf": [{"if": {"properties": {"target": {"pattern": f"^{kind}/"}},
                                    "required": ["target"]},
                             "then": {"properties": {"merge": ref}}}
                            for kind, ref in merges.items()]},
        "Moved": {"type": "object", "additionalProperties": False, "required": ["from", "to"],
                  "description": "Re-address a state entry (both addresses of one kind).",
                  "properties": {"from": address, "to": address}},
        "Import": {"type": "object", "additionalProperties": False, "required": ["to", "id"],
                   "description": "Adopt an object that exists on the server.",
                   "properties": {"to": address,
                                  "id": {"type": "string", "pattern": r"\S",
                                         "description": "The object's id on the server."}}},
        "PolicyTest": _policy_test_spec(),
        "Removed": {"type": "object", "additionalProperties": False,
                    "required": ["from", "destroy"],
                    "description": "Delete a recorded object whose manifest is gone "
                                   "(destroy: true), or drop it from state only (false).",
                    "properties": {"from": address, "destroy": {
                        "type": "boolean",
                        "description": "true: delete the object on the server (reviewed like "
                                       "any change); false: drop it from state only, and "
                                       "leave it on the server."}}},
    }


def _policy_test_spec() -> dict[str, Any]:
    """A PolicyTest's spec (manifests/policytest.py; contract section 13)."""
    mapping = {"type": "object"}
    return {
        "type": "object", "additionalProperties": False, "required": ["policyRef", "cases"],
        "description": "Cases that a Policy's code must decide as written: run by "
                       "`govsync test`, and shown on the plans that change the policy. "
                       "Never sent to the API.",
        "properties": {
            "policyRef": {"type": "string", "pattern": r"^[^/]*\S[^/]*$",
                          "description": "The metadata.name of a Policy of the manifests."},
            "cases": {
                "type": "array", "minItems": 1, "maxItems": policytest.MAX_CASES,
                "description": "The cases; each name unique within the test.",
                "items": {
                    "type": "object", "additionalProperties": False,
                    "required": list(policytest.REQUIRED_CASE_KEYS),
                    "properties": {
                        "name": {"type": "string", "pattern": r"\S",
                                 "description": "The case's name, unique within its test."},
                        "stage": {"enum": [s.value for s in Stage],
                                  "description": "The stage rule evaluated."},
                        "input": {**mapping, "not": {"anyOf": [
                                      {"required": [key]}
                                      for key in ("hooks", *RESERVED_INPUT_KEYS)]},
                                  "description": "The decision's input (user, resource, "
                                                 "query, row ...); hooks' results go in "
                                                 "`hooks`, its time in `now`, its loaders' "
                                                 "data in `data`."},
                        "hooks": {**mapping, "description": "Hook name -> the result it "
                                  "gives (input.hooks.<name>); a hook the code reads and this "
                                  "does not name is run (its JavaScript, sandboxed)."},
                        "data": {**mapping, "description": "Data key -> what its loader "
                                 "would load (data.<key>)."},
                        "env": {"type": "object", "additionalProperties": {"type": "string"},
                                "description": "The env the hooks that are run see (else "
                                               "empty)."},
                        "now": {"type": "string", "format": "date-time",
                                "description": "What time.now_ns() reads, RFC 3339 with its "
                                               "offset (default: the clock)."},
                        "expect": {**mapping, "description": "Every field given must equal "
                                   "the decision's; {} only matches no decision (the stage "
                                   "rule undefined)."},
                    },
                },
            },
        },
    }


def _api_name_schema(kind: Kind, ref: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """The constraints of the API's ``name`` of a named kind, beyond a non-empty string."""
    if not kind.named:
        return {}
    model = defs[ref["$ref"].rsplit("/", 1)[-1]]
    name = {k: v for k, v in model["properties"]["name"].items()
            if k not in ("title", "type", "description")}
    return {} if name == {"minLength": 1} else name


def _spec_schema(kind: Kind, ref: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    name = ref["$ref"].rsplit("/", 1)[-1]
    schema: dict[str, Any] = copy.deepcopy(defs[name])
    props: dict[str, Any] = schema.setdefault("properties", {})
    required: list[str] = schema.get("required", [])
    if kind.named:
        props.pop("name", None)
        required = [r for r in required if r != "name"]
    alternatives: list[dict[str, Any]] = []
    for r in kind.references:
        props[r.ref_field] = {
            "type": "string", "minLength": 1,
            "description": f"metadata.name of a {r.target} in the manifests (instead of {r.id_field}).",
        }
        if r.id_field in required:
            required.remove(r.id_field)
            alternatives.append({"oneOf": [{"required": [r.id_field]}, {"required": [r.ref_field]}]})
        else:
            alternatives.append({"not": {"required": [r.id_field, r.ref_field]}})
    for path in kind.secrets:
        _mark_secret(schema, path.split("."), defs)
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    if alternatives:
        schema["allOf"] = alternatives
    schema["title"] = f"{kind.name} spec"
    schema["description"] = kind.summary
    return schema


def _mark_secret(schema: dict[str, Any], keys: list[str], defs: dict[str, Any]) -> None:
    node = schema
    for key in keys[:-1]:
        prop = node["properties"][key]
        target = prop.get("$ref") or next(
            (a["$ref"] for a in prop.get("anyOf", []) if "$ref" in a), None
        )
        assert target, f"cannot follow {key} to a model"
        node = defs[target.rsplit("/", 1)[-1]]
    node["properties"][keys[-1]] = {"$ref": "#/$defs/SecretFromEnv"}


def openapi() -> dict[str, Any]:
    """The API's OpenAPI 3.1 document, from the operation catalog."""
    models: list[type[BaseModel]] = []
    for op in OPERATIONS:
        models += [op.request, op.response]
    models += [ListMetadata, ErrorBody, ConnectErrorBody]
    models = list(dict.fromkeys(models))
    refs, defs = _defs(models, "#/components/schemas/")
    paths: dict[str, Any] = {}
    for op in OPERATIONS:
        result = refs[op.response]
        if op.paged:
            assert op.response_key
            ok = {"type": "object", "properties": {
                op.response_key: {"type": "array", "items": result},
                "listMetadata": refs[ListMetadata]},
                "required": [op.response_key, "listMetadata"]}
        elif op.response_key:
            ok = {"type": "object", "properties": {op.response_key: result},
                  "required": [op.response_key]}
        else:
            ok = result
        error = refs[ConnectErrorBody if op.connect else ErrorBody]
        responses: dict[str, Any] = {"200": {"description": "OK", "content": {
            "application/json": {"schema": ok}}}}
        for status, code in SPEC_CODES.items():
            responses[str(status)] = {"description": str(code),
                                      "content": {"application/json": {"schema": error}}}
        parameters = []
        if op.connect:
            parameters = [
                {"name": "Connect-Protocol-Version", "in": "header", "required": False,
                 "description": "The Connect protocol version.",
                 "schema": {"type": "string", "enum": [CONNECT_PROTOCOL_VERSION]}},
                {"name": "Connect-Timeout-Ms", "in": "header", "required": False,
                 "description": "Deadline in milliseconds: a positive integer of at most "
                                "10 digits.  Past it the answer is 504 deadline_exceeded.",
                 "schema": {"type": "string", "pattern": CONNECT_TIMEOUT_PATTERN}},
            ]
        paths[op.path] = {"post": {
            "operationId": op.name,
            "tags": [op.service],
            "summary": f"{op.name} ({op.verb} {op.kind})",
            "parameters": parameters,
            "requestBody": {"required": True, "content": {"application/json": {"schema": refs[op.request]}}},
            "responses": responses,
        }}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Access-governance control API (govsync reference)",
            "version": __version__,
            "description": "Generated by `govsync schema` from govsync's API models.",
        },
        "servers": [{"url": "http://127.0.0.1:8080"}],
        "security": [{"apiKey": []}],
        "paths": paths,
        "components": {
            "schemas": dict(sorted(defs.items())),
            "securitySchemes": {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-KEY"}},
        },
    }


def rendered() -> dict[str, str]:
    return {
        MANIFEST_SCHEMA: json.dumps(manifest_schema(), indent=2, sort_keys=False) + "\n",
        OPENAPI: json.dumps(openapi(), indent=2, sort_keys=False) + "\n",
    }


def write_schemas(directory: str, *, check: bool = False) -> list[str]:
    """Write (or with ``check``, compare) the schemas; returns the stale file names."""

    return write_generated(directory, rendered(), check=check)
