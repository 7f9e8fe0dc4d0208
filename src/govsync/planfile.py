"""The saved-plan file (``govsync plan --out``), on its own like Terraform's
``plans/planfile``: writing, reading, and the markers that exist only here.

A saved plan is one JSON object.  Values that are not values yet are written
as single-key markers, and any key of user data that starts with ``$`` gets
one more ``$`` so it can never be read as a marker::

    Ref("Space/analytics")           {"$ref": "Space/analytics"}
    PlannedSecret("VAR", "hmac...")  {"$secret": {"env": "VAR", "fingerprint": "hmac..."}}
    {"$ref": "x"}  (user data)       {"$$ref": "x"}

The file is authenticated: ``mac`` is an HMAC-SHA256 over everything else,
keyed by the workspace's plan key, which the state keeps apart from all
that its readers can read (``StateStore.plan_key``): whoever can only read
the state cannot forge a plan.  Apply recomputes it before anything is sent,
so a plan edited after it was made (a request, an extra or duplicated change,
its workspace, lineage or serial, its targets) is refused.  A plan saved
with credentials that may not read that key (a pull request's read-only
role) has ``"mac": null``: it is evidence for review, which
``govsync apply --reviewed`` compares with a plan of its own, never a plan
anyone can apply as it is.

What approvers sign is the *review digest* (``review_digest``): the SHA-256
of the plan's id, workspace, environment, targets, governance change and
every change with the request it sends (secrets by variable name).  It is
the same for the plan a pull request shows and for the plan made again with
the applying credentials, as long as they would send the same, so approvals
carry across that re-plan.  Reading checks the shape of everything; any
malformed file is a one-line PlanError.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from typing import Any

from govsync.api.kinds import BY_KIND
from govsync.errors import PlanError
from govsync.files import Unreadable, read_regular
from govsync.formats import FORMAT_VERSION, same_major
from govsync.plan import (
    Action,
    Change,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    FieldChange,
    GovernanceChange,
    Plan,
    PolicyTests,
    Reason,
)
from govsync.planning.impact import Impact
from govsync.values import PlannedSecret, Ref

KIND = "govsync-plan"
MAX_BYTES = 64 * 1024 * 1024
_REF, _SECRET = "$ref", "$secret"
_MAC_PREFIX = "hmac-sha256:"


# -- values <-> JSON --------------------------------------------------------------


def encode(value: Any, *, fingerprints: bool = True) -> Any:
    """A request as JSON: typed leaves as markers, user keys starting with ``$`` escaped.
    Without ``fingerprints`` (the review digest) a secret is its variable's name alone."""
    if isinstance(value, Ref):
        return {_REF: value.address}
    if isinstance(value, PlannedSecret):
        if not fingerprints:
            return {_SECRET: {"env": value.variable}}
        return {_SECRET: {"env": value.variable, "fingerprint": value.fingerprint}}
    if isinstance(value, dict):
        return {("$" + k if k.startswith("$") else k): encode(v, fingerprints=fingerprints)
                for k, v in value.items()}
    if isinstance(value, list):
        return [encode(v, fingerprints=fingerprints) for v in value]
    return value


def decode(value: Any) -> Any:
    """The inverse of ``encode``; ValueError for a marker that is malformed."""
    if isinstance(value, dict):
        if _REF in value or _SECRET in value:
            if len(value) != 1:
                raise ValueError("a marker with other keys beside it")
            if _REF in value:
                if not isinstance(value[_REF], str):
                    raise ValueError("a $ref that is not an address")
                return Ref(value[_REF])
            inner = value[_SECRET]
            if (not isinstance(inner, dict) or set(inner) != {"env", "fingerprint"}
                    or not all(isinstance(v, str) for v in inner.values())):
                raise ValueError("a $secret that is not {env, fingerprint}")
            return PlannedSecret(inner["env"], inner["fingerprint"])
        out = {}
        for k, v in value.items():
            if k.startswith("$"):
                if not k.startswith("$$"):
                    raise ValueError(f"unknown marker {k!r}")
                k = k[1:]
            out[k] = decode(v)
        return out
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


# -- plan <-> document --------------------------------------------------------------


def _body(plan: Plan) -> dict[str, Any]:
    return {
        "formatVersion": FORMAT_VERSION,
        "type": KIND,
        "govsyncVersion": plan.version,
        "workspace": plan.workspace,
        "lineage": plan.lineage,
        "serial": plan.serial,
        "manifestsDigest": plan.digest,
        "checks": [c.as_dict() for c in plan.checks],
        "changes": [
            {**c.public(), "operation": c.operation, "after": c.after,
             "request": encode(c.request),
             **({"testRuns": c.tests.saved()} if c.tests is not None else {})}
            for c in plan.changes
        ],
        "summary": plan.summary(),
        "targets": plan.targets,
        "leftOut": plan.left_out,
        "stateDigest": plan.state_digest,
        "git": plan.git,
        "planId": plan.id,
        "environment": plan.environment,
        "state": plan.state,
        "governance": plan.governance,
        "reviewDigest": review_digest(plan),
        "refreshed": plan.refreshed,
        "drift": [d.as_dict() for d in plan.drift],
    }


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def plan_digest(plan: Plan) -> str:
    """SHA-256 of a plan's canonical content (the audit's plan hash of an unsaved plan)."""
    return hashlib.sha256(_canonical(_body(plan))).hexdigest()


def review_digest(plan: Plan) -> str:
    """SHA-256 (hex) of what a reviewer approves: what the plan would do, and to what.

    Not its serial, lineage or secrets' fingerprints: the plan a pull request
    shows and the one ``apply --reviewed`` makes again with the applying
    credentials have the same digest whenever they would send the same."""
    body = {
        "govsyncReview": 1,
        "planId": plan.id,
        "workspace": plan.workspace,
        "environment": plan.environment,
        "targets": sorted(plan.targets),
        "governance": plan.governance["to"] if plan.governance else None,
        "changes": [reviewed_change(c) for c in plan.changes if c.action != Action.NOOP],
    }
    return hashlib.sha256(_canonical(body)).hexdigest()


def reviewed_change(c: Change) -> dict[str, Any]:
    """One change as the review digest sees it (also how two plans' changes compare)."""
    return {"address": c.address, "action": str(c.action), "kind": c.kind, "id": c.id,
            "operation": c.operation, "movedFrom": c.moved_from,
            **({"kept": list(c.kept)} if c.kept else {}),
            "fields": list(c.fields) if c.action == Action.BLOCKED else None,
            "request": encode(c.request, fingerprints=False) if c.request is not None
            else None}


def mac(body: Mapping[str, Any], key: bytes) -> str:
    """The authentication code of a plan's body under the workspace's plan key."""
    derived = hmac.new(key, b"govsync saved plan v2", hashlib.sha256).digest()
    return _MAC_PREFIX + hmac.new(derived, _canonical(body), hashlib.sha256).hexdigest()


def dumps(plan: Plan, key: bytes | None) -> str:
    """The file's text; ``key`` None: a plan for review only (``"mac": null``)."""
    body = _body(plan)
    return json.dumps({**body, "mac": mac(body, key) if key is not None else None},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def write(plan: Plan, path: str, key: bytes | None) -> None:
    """Save a plan for ``govsync apply FILE`` (atomic: never a half-written file)."""
    data = dumps(plan, key)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise PlanError(f"cannot write the plan to {path}: {exc.strerror}") from exc


class SavedPlan:
    """A plan read from a file, not yet authenticated (``verify``)."""

    def __init__(self, path: str, plan: Plan, body: dict[str, Any], tag: str | None,
                 raw: bytes = b"") -> None:
        self.path = path
        self.plan = plan
        self._body = body
        self._tag = tag
        # The file's bytes as read.
        self.raw = raw

    @property
    def file_digest(self) -> str:
        """SHA-256 of the file's bytes (the audit's record of the file applied)."""
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def review_digest(self) -> str:
        """What approvers sign, computed from the plan itself (never read from the file)."""
        return review_digest(self.plan)

    @property
    def authenticated(self) -> bool:
        """Whether it carries an authentication code (False: saved for review only)."""
        return self._tag is not None

    def verify(self, key: bytes, lineage: str) -> None:
        """PlanError unless the file is exactly as ``plan --out`` wrote it for this state."""
        if self._tag is None:
            raise PlanError(
                f"{self.path} was saved for review only (by credentials that may not read the "
                "workspace's plan key, such as a pull request's read-only role), so it cannot "
                f"be applied as it is: apply it with `govsync apply --reviewed {self.path}`, "
                "which plans again and applies only if the changes are the same; nothing was "
                "sent")
        if hmac.compare_digest(mac(self._body, key), self._tag):
            return
        if self.plan.lineage != lineage:
            raise PlanError(
                f"the plan was made for another state (lineage {self.plan.lineage or 'none'}, "
                f"this state is {lineage}): make a new plan with `govsync plan --out`")
        raise PlanError(
            f"{self.path} was changed after it was made (its authentication code does not "
            "match): nothing was sent; make a new plan with `govsync plan --out` and review it")

    def verification(self, key: bytes) -> str:
        """How ``show`` words the check: verified, review only, or edited."""
        if self._tag is None:
            return ("saved for review only (no authentication code: made without access to "
                    "the plan key); `govsync apply --reviewed` compares it with a new plan")
        if hmac.compare_digest(mac(self._body, key), self._tag):
            return "verified: exactly as `govsync plan --out` wrote it for this state"
        return ("DOES NOT VERIFY: the file was changed after it was made, or made for another "
                "state; apply will refuse it")


def read(path: str) -> SavedPlan:
    """Read and check the shape of a saved plan; PlanError (one line) when malformed."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except Unreadable as exc:
        raise PlanError(f"cannot read saved plan {path}: {exc}") from exc
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise PlanError(f"{path} is not a govsync plan file: not JSON ({_first_line(exc)})") from exc
    if not isinstance(data, dict) or data.get("type") != KIND:
        raise PlanError(f"{path} is not a govsync plan file (made by `govsync plan --out`)")
    if not same_major(data.get("formatVersion", "")):
        raise PlanError(f"{path} has plan format {data.get('formatVersion')!r}; this govsync "
                        f"reads {FORMAT_VERSION}: make the plan again with this version")
    if "mac" not in data:
        raise PlanError(f"{path} has no authentication code: it was not made by "
                        "`govsync plan --out`, or was edited; make a new plan")
    tag = data.pop("mac")
    if tag is not None and not isinstance(tag, str):
        raise PlanError(f"{path} has a malformed authentication code: make a new plan")
    try:
        plan = _plan(data)
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise PlanError(f"{path} is not a valid govsync plan file: {_first_line(exc)}") from exc
    return SavedPlan(path, plan, data, tag, raw)


def _first_line(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string")
    return value


def _strs(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"{what} must be a list of strings")
    return list(value)


def _plan(data: Mapping[str, Any]) -> Plan:
    serial = data["serial"]
    if not isinstance(serial, int) or isinstance(serial, bool) or serial < 0:
        raise TypeError("serial must be a whole number")
    changes_data = data["changes"]
    if not isinstance(changes_data, list):
        raise TypeError("changes must be a list")
    changes = [_change(c) for c in changes_data]
    seen: set[str] = set()
    for c in changes:
        if c.address in seen:
            raise ValueError(f"{c.address} appears twice")
        seen.add(c.address)
    checks_data = data.get("checks", [])
    if not isinstance(checks_data, list):
        raise TypeError("checks must be a list")
    checks = [Check(_str(c["name"], "a check's name"), CheckStatus(c["status"]),
                    _str(c.get("detail", ""), "a check's detail")) for c in checks_data]
    left_out = data.get("leftOut", 0)
    if not isinstance(left_out, int) or isinstance(left_out, bool) or left_out < 0:
        raise TypeError("leftOut must be a whole number")
    return Plan(
        workspace=_str(data["workspace"], "workspace"), lineage=_str(data["lineage"], "lineage"),
        serial=serial, digest=_str(data["manifestsDigest"], "manifestsDigest"),
        changes=changes, checks=checks, version=_str(data.get("govsyncVersion", ""), "version"),
        targets=_strs(data.get("targets", []), "targets"), left_out=left_out,
        state_digest=_str(data.get("stateDigest", ""), "stateDigest"),
        git=_git(data.get("git")),
        id=_plan_id(data.get("planId")),
        environment=_optional_str(data.get("environment"), "environment"),
        state=_str(data.get("state", ""), "state"),
        governance=_governance(data.get("governance")),
        refreshed=data.get("refreshed") is True,
        drift=_drift(data.get("drift", [])),
    )


def _drift(value: Any) -> list[Drifted]:
    """The refresh's findings a saved plan shows (information: nothing is sent for them)."""
    if not isinstance(value, list):
        raise TypeError("drift must be a list")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise TypeError("a drift entry must be an object")
        diff = item.get("diff", [])
        if not isinstance(diff, list) or not all(isinstance(d, dict) for d in diff):
            raise TypeError("a drift entry's diff must be a list of objects")
        out.append(Drifted(_str(item.get("address"), "a drift entry's address"),
                           DriftKind(str(item.get("kind"))),
                           tuple(FieldChange(_str(d.get("field"), "a field"), d.get("before"),
                                             d.get("after")) for d in diff),
                           _optional_str(item.get("id"), "a drift entry's id")))
    return out


def _plan_id(value: Any) -> str:
    if not isinstance(value, str) or not 16 <= len(value) <= 64 or not value.isalnum():
        raise TypeError("planId must be the plan's id (letters and digits)")
    return value


def _optional_str(value: Any, what: str) -> str | None:
    return None if value is None else _str(value, what)


def _governance(value: Any) -> GovernanceChange | None:
    if value is None:
        return None
    if (not isinstance(value, dict) or set(value) != {"from", "to"}
            or not isinstance(value["to"], dict)
            or not (value["from"] is None or isinstance(value["from"], dict))):
        raise TypeError("governance must be {from, to}")
    return {"from": value["from"], "to": value["to"]}


def _git(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if (not isinstance(value, dict) or not isinstance(value.get("commit"), str)
            or not isinstance(value.get("dirty"), bool)):
        raise TypeError("git must be {commit, dirty}")
    return {"commit": value["commit"], "dirty": value["dirty"]}


def _change(c: Any) -> Change:
    if not isinstance(c, dict):
        raise TypeError("a change must be an object")
    address = _str(c["address"], "address")
    action = Action(c["action"])
    kind = _str(c["kind"], f"{address}: kind")
    if kind not in BY_KIND or not address.startswith(kind + "/"):
        raise ValueError(f"{address}: unknown kind {kind!r}")
    request = c.get("request")
    operation = c.get("operation")
    moved_from = c.get("movedFrom")
    if action in (Action.CREATE, Action.UPDATE, Action.IMPORT, Action.REPLACE) or (
            action == Action.MOVE and operation is not None):
        if not isinstance(request, dict):
            raise TypeError(f"{address}: a {action} needs its request")
        expected = (BY_KIND[kind].create_op if action in (Action.CREATE, Action.REPLACE)
                    else BY_KIND[kind].update_op)
        if operation is not None and operation != expected:
            raise ValueError(f"{address}: a {action} of a {kind} is sent with {expected}, "
                             f"not {operation}")
        if operation is None and action in (Action.CREATE, Action.UPDATE, Action.REPLACE):
            raise ValueError(f"{address}: a {action} needs its operation")
    elif request is not None and action not in (Action.UNCERTAIN, Action.NOOP):
        # (an uncertain create carries what a read that settles it would look for; a
        # no-op, what apply records of an object the manifest now matches: Plan.caught_up)
        raise TypeError(f"{address}: a {action} has no request")
    elif action == Action.DELETE and operation != BY_KIND[kind].delete_op:
        raise ValueError(f"{address}: a delete of a {kind} is sent with "
                         f"{BY_KIND[kind].delete_op}, not {operation}")
    if action == Action.MOVE and not (isinstance(moved_from, str)
                                      and moved_from.startswith(kind + "/")):
        raise ValueError(f"{address}: a move needs movedFrom, an address of the same kind")
    object_id = c.get("id")
    if object_id is not None and not isinstance(object_id, str):
        raise TypeError(f"{address}: id must be a string")
    diff = c.get("diff", [])
    if not isinstance(diff, list):
        raise TypeError(f"{address}: diff must be a list")
    return Change(
        address=address, action=action, kind=kind, id=object_id,
        fields=tuple(_strs(c.get("fields", []), f"{address}: fields")),
        why=_why(c.get("why"), address),
        diff=tuple(FieldChange(_str(d["field"], "a diff's field"), d["before"], d["after"])
                   for d in diff),
        request=decode(request) if request is not None else None,
        operation=operation, after=tuple(_strs(c.get("after", []), f"{address}: after")),
        patched=_patches(c.get("patchedBy", {}), address),
        moved_from=moved_from if action in (Action.MOVE, Action.BLOCKED) else None,
        kept=tuple(_strs(c.get("kept", []), f"{address}: kept")),
        tests=PolicyTests.from_saved(c["testRuns"]) if "testRuns" in c else None,
        impact=Impact.from_dict(c["impact"]) if "impact" in c else None,
    )


def _why(value: Any, address: str) -> Reason | None:
    if value is None:
        return None
    try:
        return Reason.from_dict(value)
    except ValueError as exc:
        raise ValueError(f"{address}: why: {exc}") from None


def _patches(value: Any, address: str) -> dict[str, str] | None:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TypeError(f"{address}: patchedBy must map fields to patches")
    return dict(value) or None


def is_plan_file(paths: list[str]) -> bool:
    """``govsync apply FILE``: one file that is not a YAML manifest."""
    return (len(paths) == 1 and os.path.isfile(paths[0])
            and not paths[0].endswith((".yaml", ".yml")))
