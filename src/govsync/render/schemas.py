"""The JSON Schema of every JSON document govsync prints or writes for scripts.

One place for the shapes of contract section 3: ``govsync docs`` writes them
to ``docs/json/*.schema.json`` and the tests validate real outputs against
them.  Enumerations (actions, outcomes, check and entry statuses) are read
from the enums themselves, so a new action is documented the moment it exists.

Objects are open (no ``additionalProperties: false``): a reader must ignore
keys it does not know, since additions keep ``formatVersion``'s major number
and only a change that breaks a reader bumps it.  The tests close every object
before they validate real outputs, so that every key govsync prints is
described here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from govsync.api.kinds import KINDS
from govsync.apply import ChangeStatus
from govsync.formats import FORMAT_VERSION
from govsync.plan import Action, CheckStatus, DriftKind, Why
from govsync.state import EntryStatus

DRAFT = "https://json-schema.org/draft/2020-12/schema"

Schema = dict[str, Any]


def _values(enum: type[StrEnum]) -> list[str]:
    return [str(member) for member in enum]


def _object(properties: Schema, *, required: list[str] | None = None,
            description: str = "") -> Schema:
    schema: Schema = {"type": "object", "properties": properties,
                      "required": list(properties) if required is None else required}
    if description:
        schema["description"] = description
    return schema


def _counts(names: list[str], description: str) -> Schema:
    return _object({n: {"type": "integer", "minimum": 0} for n in names},
                   description=description)


_STR = {"type": "string"}
_STR_OR_NULL = {"type": ["string", "null"]}
_STRS = {"type": "array", "items": _STR}
_COUNT = {"type": "integer", "minimum": 0}
_SECONDS = {"type": "number", "minimum": 0}
_VERSION: Schema = {
    "type": "string", "pattern": rf"^{FORMAT_VERSION.split('.')[0]}\.[0-9]+$",
    "description": "The document format's version, major.minor: additions keep the "
                   "major, a change that breaks a reader bumps it.",
}
_ADDRESS: Schema = {"type": "string", "pattern": r"^[A-Za-z]+/.+$",
                    "description": "Kind/name"}


def _document(title: str, description: str, properties: Schema,
              required: list[str] | None = None) -> Schema:
    body = _object({"formatVersion": _VERSION, **properties}, required=required)
    return {"$schema": DRAFT, "title": title, "description": description, **body}


def _field_changes(description: str) -> Schema:
    return {"type": "array", "description": description, "items": _object({
        "field": _STR,
        "before": {"description": "Any JSON value; secrets are \"(sensitive)\"."},
        "after": {"description": "Any JSON value; secrets are \"(sensitive)\", ids not "
                  "known yet \"(known after apply)\"."},
    })}


def _drifted() -> Schema:
    return _object({
        "address": _ADDRESS,
        "kind": {"enum": _values(DriftKind), "description": "changed: its live fields differ "
                 "from what govsync last applied; missing: the server no longer has it "
                 "(planned as a create)."},
        "fields": {**_STRS, "description": "The field paths changed outside govsync."},
        "id": {**_STR_OR_NULL, "description": "The id state records."},
        "diff": _field_changes("Field by field: before is what govsync applied, after what "
                               "the server holds."),
    }, required=["address", "kind", "fields"])


def _change() -> Schema:
    return _object({
        "address": _ADDRESS,
        "action": {"enum": _values(Action)},
        "kind": _STR,
        "id": {**_STR_OR_NULL, "description": "The object's id on the server; null "
               "before it is created."},
        "fields": {**_STRS, "description": "Changed field paths."},
        "reason": {**_STR, "description": "Why (blocked, orphan, uncertain...), in words; "
                   "may be empty."},
        "why": {**_object({
            "why": {"enum": _values(Why)},
            "by": {**_STR, "description": "The document or setting that asks (a Removed "
                   "document, `prune: true`, `--replace`)."},
            "id": {**_STR, "description": "The object the reason is about (found live, "
                   "recorded, deposed)."},
            "operation": {**_STR, "description": "The operation involved (the update that "
                          "cannot make the change, the read that found the object ...)."},
            "fields": {**_STRS, "description": "The fields the reason is about."},
            "names": {**_STRS, "description": "The referrers, secrets, or workspace and "
                      "address the reason names."},
            "detail": {**_STR, "description": "What else the words need."},
        }, required=["why"]), "description": "Why, typed: the code `reason` words (absent "
            "for a plain create, update or no-op); scripts read this, not the words."},
        "diff": {"type": "array", "items": _object({
            "field": _STR,
            "before": {"description": "Any JSON value; secrets are \"(sensitive)\"."},
            "after": {"description": "Any JSON value; secrets are \"(sensitive)\", ids not "
                      "known yet \"(known after apply)\"."},
        })},
        "patchedBy": {"type": "object", "additionalProperties": _STR,
                      "description": "Field path -> the Patch that set it (only when one did)."},
        "outside": _field_changes("The fields changed outside govsync since it last applied "
                                  "them, read by the refresh (only when some were): not "
                                  "what the manifests ask for, which is `diff`."),
        "impact": _impact(),
    }, required=["address", "action", "kind", "id", "fields", "reason", "diff"])


def _impact() -> Schema:
    counts = {"type": ["object", "null"], "additionalProperties": {
        "type": "object", "additionalProperties": _COUNT},
        "description": "stage -> action -> how many logged requests that code decides so "
                       "(never allow); null: not measured (a created policy's recorded)."}
    return _object({
        "known": {"type": "boolean", "description": "false: it could not be measured "
                  "(`why` says why); never a block by itself."},
        "why": _STR,
        "window": {**_STR, "description": "The window measured (`7d`), or `all recorded` "
                   "for a whole file."},
        "source": {"enum": ["report", "file"]},
        "new": counts, "recorded": counts,
        "newTotal": _COUNT, "recordedTotal": _COUNT,
        "evaluated": {"type": ["integer", "null"], "minimum": 0},
        "examples": {"type": "array", "items": _object({
            "time": _STR, "stage": _STR, "decision": _STR, "user": _STR_OR_NULL,
            "resource": _STR_OR_NULL})},
        "skippedLines": {"type": "array", "items": _COUNT},
        "series": {"type": "array", "description": "The triggers over the window (the plan "
                   "page's chart): each bucket's start, the new code's and the recorded "
                   "code's counts (null for a created policy); empty where not measured "
                   "over a window.",
                   "items": _object({"start": _STR, "new": _COUNT,
                                     "recorded": {"type": ["integer", "null"],
                                                  "minimum": 0}})},
    }, required=["known", "why", "window", "source", "new", "recorded"],
        description="A created or code-changed policy's impact over logged traffic (plan "
                    "--impact, --impact-from; only where measured).")


def _check() -> Schema:
    return _object({"name": _STR, "status": {"enum": _values(CheckStatus)}, "detail": _STR})


def _plan_properties() -> Schema:
    return {
        "workspace": _STR,
        "lineage": {**_STR, "description": "The state's identity; a saved plan is for one."},
        "serial": {**_COUNT, "description": "The state's serial the plan was made against."},
        "changes": {"type": "array", "items": _change(),
                    "description": "One per address, in the plan's order."},
        "checks": {"type": "array", "items": _check(),
                   "description": "Live checks (policy owner groups), endpoint warnings, "
                                  "rule warnings."},
        "summary": _counts(_values(Action), "How many changes of each action."),
        "targets": {**_STRS, "description": "The --target patterns the plan was narrowed "
                    "to ([]: none, every address)."},
        "leftOut": {**_COUNT, "description": "Changes left out by --target (0 without)."},
        "refreshed": {"type": "boolean", "description": "Whether the recorded objects were "
                      "read from the server before planning (false: --refresh=false, no "
                      "endpoint, or nothing recorded)."},
        "drift": {"type": "array", "items": _drifted(),
                  "description": "Recorded objects changed outside govsync or missing on the "
                                 "server, as the refresh found them."},
        "environment": {**_STR_OR_NULL, "description": "The project's environment the plan "
                        "is for (null: none)."},
        "governance": {"type": ["array", "null"], "items": _STR,
                       "description": "How the plan changes the workspace's recorded "
                       "governance (environment, approvals, rules), one line each; null: "
                       "it does not."},
    }


# Keys every plan document has carried since format 1.0; the later ones may be absent
# from a plan saved by an older govsync (`govsync show`).
_PLAN_REQUIRED = ["workspace", "lineage", "serial", "changes", "checks", "summary"]


def plan_schema() -> Schema:
    return _document(
        "govsync plan", "`govsync plan --format json` and `govsync show FILE --format json` "
        "(a saved plan as written; requests are not shown).", _plan_properties(),
        required=_PLAN_REQUIRED)


def drift_schema() -> Schema:
    # A missing object is named under its kind's name (a policy's owner "group").
    named = {ref.word: _STR for kind in KINDS for ref in kind.live_refs}
    problem = _object({"address": _ADDRESS, "field": _STR, **named, "message": _STR},
                      required=["message"])
    live = _object({"name": _STR, "status": {"enum": _values(CheckStatus)}, "detail": _STR,
                    "problems": {"type": "array", "items": problem}})
    properties = copy.deepcopy(_plan_properties())
    properties["changes"]["description"] = "The plan's changes other than no-op."
    compared = _object({
        "state": {**_COUNT, "description": "Addresses compared with the recorded state."},
        "live": {**_STRS, "description": "The live checks that ran."},
        "notLive": {**_STRS, "description": "Kinds the API cannot read."},
    }, description="What was compared, and what could not be.")
    return _document(
        "govsync drift", "`govsync drift --format json`: exit 0 in sync, 2 drift.",
        {"inSync": {"type": "boolean"},
         "headline": {**_STR, "description": "The verdict with what was compared and what "
                      "could not be (the first line of the text report)."},
         "compared": compared, **properties,
         "live": {"type": "array", "items": live,
                  "description": "Checks against the live API where it has a read operation."},
         "unobservable": {**_STRS, "description": "Kinds the API cannot read: compared "
                          "with the recorded state only."}})


def error_schema() -> Schema:
    return _document(
        "govsync error", "What a `--format json` command (plan, drift, show, environments, "
        "state list, state history, audit export) prints on stdout when it fails, exit 1; "
        "its message "
        "goes to stderr as well. (`validate` prints its own document with `valid: false`, "
        "`apply` its summary line with `stopped`.)",
        {"error": {**_STR, "description": "What went wrong, in one sentence."},
         "errors": {"type": "array", "minItems": 1, "items": _placed(),
                    "description": "Each error with its place (a manifest's)."}})


def _placed() -> Schema:
    return _object({
        "file": {**_STR, "description": "Empty when the error has no place in a file."},
        "line": {"type": "integer", "minimum": 0},
        "column": {"type": "integer", "minimum": 0},
        "message": _STR,
    })


def validate_schema() -> Schema:
    return _document(
        "govsync validate", "`govsync validate --format json`: exit 0 valid, 1 invalid.",
        {"valid": {"type": "boolean"}, "errors": {"type": "array", "items": _placed()},
         "warnings": {"type": "array", "items": _placed(),
                      "description": "What is not an error but is worth a look (a "
                      "policy's data.<key> that no loader loads, a rule of severity "
                      "warning...), each with its place."}})


def apply_change_line() -> Schema:
    return _object({
        "formatVersion": _VERSION,
        "type": {"const": "change"},
        "address": _ADDRESS,
        "action": {"enum": _values(Action)},
        "outcome": {"enum": _values(ChangeStatus)},
        "id": {**_STR_OR_NULL, "description": "The object's id, when known."},
        "seconds": {**_SECONDS, "description": "The call's duration with its state writes, waiting for a slot excluded."},
        "error": {**_STR, "description": "Why it did not apply (absent when it did)."},
        "code": {**_STR, "description": "The API's error code, when it gave one."},
    }, required=["formatVersion", "type", "address", "action", "outcome", "id", "seconds"],
        description="One change, printed as soon as it finished.")


def apply_summary_line() -> Schema:
    return _object({
        "formatVersion": _VERSION,
        "type": {"const": "summary"},
        "counts": _counts(_values(ChangeStatus), "How many changes ended each way."),
        "requests": {**_COUNT, "description": "API write requests sent (retries excluded)."},
        "seconds": {**_SECONDS, "description": "From the first request to the last answer."},
        "ok": {"type": "boolean", "description": "Every change applied (or forgotten) and "
               "nothing stopped the apply: exit 0."},
        "stopped": {**_STR_OR_NULL, "description": "Why apply stopped before its end (a "
                    "rejected key, a lost lock, an error before anything was sent); null "
                    "when it did not."},
    }, description="The last line.")


def apply_schema() -> Schema:
    return {
        "$schema": DRAFT, "title": "govsync apply line",
        "description": "`govsync apply --format json` prints JSON lines, each one document: "
                       "a `change` line per finished change, then one `summary` line. "
                       "Nothing else is printed on stdout.",
        "oneOf": [apply_change_line(), apply_summary_line()],
    }


def _entry() -> Schema:
    return _object({
        "address": _ADDRESS, "kind": _STR, "id": _STR_OR_NULL,
        "status": {"enum": _values(EntryStatus)},
        "spec": {"type": ["object", "null"], "description": "The spec last applied; secrets "
                 "as fingerprints (hmac-sha256:...), never values."},
        "response": {"type": ["object", "null"], "description": "The API's answer, secrets "
                     "as \"(sensitive)\"."},
        "updatedAt": _STR,
    })


def state_export_schema() -> Schema:
    return _document(
        "govsync state export", "`govsync state export`, read back by `govsync state "
        "import-all`.",
        {"govsyncState": {"const": 1}, "workspace": _STR, "lineage": _STR, "serial": _COUNT,
         "fingerprintKey": {**_STR, "description": "Base64 key of the secrets' fingerprints "
                            "(keeps them comparable after a move)."},
         "entries": {"type": "array", "items": _entry()}})


def state_list_schema() -> Schema:
    entry = _object({"address": _ADDRESS, "kind": _STR, "id": _STR_OR_NULL,
                     "status": {"enum": _values(EntryStatus)}})
    return _document(
        "govsync state list", "`govsync state list --format json`.",
        {"workspace": _STR, "lineage": _STR, "serial": _COUNT,
         "entries": {"type": "array", "items": entry}})


def state_history_schema() -> Schema:
    change = _object({"address": _ADDRESS, "action": _STR, "status": {"enum": _values(ChangeStatus)},
                      "id": _STR_OR_NULL, "code": _STR, "error": _STR},
                     required=["address", "action", "status"])
    record = _object({
        "at": _STR, "user": _STR, "host": _STR, "command": _STR,
        "savedPlan": {"type": "boolean"}, "serialBefore": _COUNT,
        "summary": _counts(_values(ChangeStatus), "How many changes ended each way."),
        "ok": {"type": "boolean"}, "changes": {"type": "array", "items": change},
        "environment": {**_STR_OR_NULL, "description": "The project's environment (null: "
                        "none)."},
        "actor": {**_STR_OR_NULL, "description": "Who ran it in CI (the CI's user variable; "
                  "null outside CI)."},
        "approvers": {"type": "array", "description": "The approvals that counted.",
                      "items": _object({"principal": _STR,
                                        "key": {**_STR, "description": "The key's SHA-256 "
                                                "fingerprint."},
                                        "keyType": _STR})},
        "git": {"anyOf": [_object({"commit": _STR, "dirty": {"type": "boolean"}}),
                          {"type": "null"}],
                "description": "The manifests' git commit and whether the work tree had "
                               "changes (a saved plan's own); null outside git."},
        "planId": {**_STR, "description": "The plan's id."},
        "reviewDigest": {**_STR, "description": "sha256:... of what approvers sign."},
        "planHash": {**_STR, "description": "sha256:... of the saved plan file (a saved "
                     "plan only)."},
        "planFile": {**_STR, "description": "The saved plan's file name (a saved plan only)."},
    }, required=["at", "user", "host", "summary", "ok", "changes"])
    return _document(
        "govsync state history", "`govsync state history --format json`: past applies, "
        "newest first.", {"workspace": _STR, "history": {"type": "array", "items": record}})


# File name in docs/json/ -> schema.  `govsync show --format json` prints a plan.
SCHEMAS: dict[str, Callable[[], Schema]] = {
    "plan.schema.json": plan_schema,
    "drift.schema.json": drift_schema,
    "validate.schema.json": validate_schema,
    "error.schema.json": error_schema,
    "apply.schema.json": apply_schema,
    "state-export.schema.json": state_export_schema,
    "state-list.schema.json": state_list_schema,
    "state-history.schema.json": state_history_schema,
}


def schemas() -> dict[str, Schema]:
    """File name -> schema, in a fixed order."""
    return {name: make() for name, make in SCHEMAS.items()}
