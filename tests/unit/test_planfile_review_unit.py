"""What approvers sign (the review digest) and what authenticates a saved plan (the mac):
what each covers and what it leaves out; plans saved for review only."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from govsync import approvals, planfile
from govsync.errors import PlanError
from govsync.plan import Action, Change, Check, CheckStatus, Plan, Reason, Why
from govsync.values import PlannedSecret, Ref

KEY = b"k" * 32
GOVERNANCE: dict[str, Any] = {"from": None, "to": {"format": 1, "environment": "prod",
                                   "approvals": {"required": 2, "allowedSigners": []},
                                   "rules": []}}


def make() -> Plan:
    return Plan(
        workspace="prod", lineage="lin-1", serial=3, digest="manifests-1",
        changes=[
            Change("Hook/h", Action.CREATE, "Hook", operation="CreateHook",
                   request={"name": "h", "spaceId": Ref("Space/s"),
                            "token": PlannedSecret("TOKEN", "fp-1")}),
            Change("Space/s", Action.NOOP, "Space", id="s-1"),
        ],
        id="0123456789abcdef", environment="prod", targets=["Hook/*", "Space/*"],
        governance=GOVERNANCE)


def hook(plan: Plan) -> Change:
    return plan.changes[0]


def request(plan: Plan) -> dict[str, Any]:
    sent = hook(plan).request
    assert sent is not None
    return sent


SAME: dict[str, Callable[[Plan], None]] = {
    "secret fingerprint": lambda p: request(p).update(token=PlannedSecret("TOKEN", "fp-2")),
    "serial": lambda p: setattr(p, "serial", 4),
    "lineage": lambda p: setattr(p, "lineage", "lin-2"),
    "manifests digest": lambda p: setattr(p, "digest", "manifests-2"),
    "state digest": lambda p: setattr(p, "state_digest", "s-2"),
    "git": lambda p: setattr(p, "git", {"commit": "c2", "dirty": True}),
    "checks": lambda p: p.checks.append(Check("lock", CheckStatus.PASSED)),
    "targets' order": lambda p: setattr(p, "targets", ["Space/*", "Hook/*"]),
    "a no-op change": lambda p: p.changes.append(Change("Space/t", Action.NOOP, "Space")),
    "a change's reason": lambda p: setattr(hook(p), "why", Reason(Why.MISSING, id="x")),
    "governance from": lambda p: setattr(p, "governance", {**GOVERNANCE, "from": {"x": 1}}),
    "secrets not read": lambda p: setattr(p, "secrets_read", False),
}
OTHER: dict[str, Callable[[Plan], None]] = {
    "a request value": lambda p: request(p).update(name="h2"),
    "a secret's variable": lambda p: request(p).update(token=PlannedSecret("OTHER", "fp-1")),
    "a reference": lambda p: request(p).update(spaceId=Ref("Space/t")),
    "a reference made a value": lambda p: request(p).update(spaceId="s-1"),
    "the plan id": lambda p: setattr(p, "id", "fedcba9876543210"),
    "the environment": lambda p: setattr(p, "environment", "staging"),
    "no environment": lambda p: setattr(p, "environment", None),
    "the workspace": lambda p: setattr(p, "workspace", "prod-2"),
    "targets": lambda p: setattr(p, "targets", ["Hook/*"]),
    "no governance change": lambda p: setattr(p, "governance", None),
    "the governance to": lambda p: setattr(p, "governance", {
        "from": None, "to": {**GOVERNANCE["to"], "environment": "staging"}}),
    "an action": lambda p: setattr(hook(p), "action", Action.IMPORT),
    "an address": lambda p: setattr(hook(p), "address", "Hook/h2"),
    "an id": lambda p: setattr(hook(p), "id", "h-1"),
    "an operation": lambda p: setattr(hook(p), "operation", "UpdateHook"),
    "a change more": lambda p: p.changes.append(replace(hook(p), address="Hook/h2")),
    "a change less": lambda p: setattr(p, "changes", p.changes[1:]),
}


def test_the_digest_is_a_sha256_that_does_not_change_by_itself() -> None:
    digest = planfile.review_digest(make())
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert planfile.review_digest(make()) == digest
    assert approvals.review_message(digest) == f"govsync-plan-review sha256:{digest}\n".encode()


@pytest.mark.parametrize("name", sorted(SAME))
def test_what_the_digest_leaves_out(name: str) -> None:
    plan = make()
    SAME[name](plan)
    assert planfile.review_digest(plan) == planfile.review_digest(make())


@pytest.mark.parametrize("name", sorted(OTHER))
def test_what_the_digest_covers(name: str) -> None:
    plan = make()
    OTHER[name](plan)
    assert planfile.review_digest(plan) != planfile.review_digest(make())


def test_a_blocked_changes_fields_are_covered() -> None:
    plan = make()
    plan.changes[1] = Change("Space/s", Action.BLOCKED, "Space", id="s-1",
                             fields=("description",))
    other = make()
    other.changes[1] = replace(plan.changes[1], fields=("name",))
    assert planfile.review_digest(plan) != planfile.review_digest(other)


def test_the_mac_is_keyed_and_covers_the_body() -> None:
    body = json.loads(planfile.dumps(make(), None))
    del body["mac"]
    tag = planfile.mac(body, KEY)
    assert re.fullmatch(r"hmac-sha256:[0-9a-f]{64}", tag)
    assert planfile.mac(body, KEY) == tag
    assert planfile.mac(body, b"K" * 32) != tag
    assert planfile.mac({**body, "serial": 4}, KEY) != tag
    assert planfile.mac(dict(reversed(body.items())), KEY) == tag  # canonical: key order


def test_a_saved_plan_has_the_digest_of_its_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    planfile.write(make(), str(path), KEY)
    saved = planfile.read(str(path))
    assert saved.authenticated
    assert saved.review_digest == planfile.review_digest(make())
    assert json.loads(path.read_text())["reviewDigest"] == saved.review_digest
    assert saved.file_digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert saved.verification(KEY) == ("verified: exactly as `govsync plan --out` wrote it "
                                       "for this state")
    assert saved.verification(b"K" * 32).startswith("DOES NOT VERIFY: ")


def test_a_plan_for_review_only_is_refused_with_the_reviewed_hint(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    planfile.write(make(), str(path), None)
    assert json.loads(path.read_text())["mac"] is None
    saved = planfile.read(str(path))
    assert not saved.authenticated
    with pytest.raises(PlanError) as info:
        saved.verify(KEY, "lin-1")
    assert str(info.value) == (
        f"{path} was saved for review only (by credentials that may not read the workspace's "
        "plan key, such as a pull request's read-only role), so it cannot be applied as it is: "
        f"apply it with `govsync apply --reviewed {path}`, which plans again and applies only "
        "if the changes are the same; nothing was sent")
    assert saved.verification(KEY).startswith("saved for review only (no authentication code")


def test_the_digest_written_in_a_file_is_never_trusted(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    planfile.write(make(), str(path), None)
    data = json.loads(path.read_text())
    data["reviewDigest"] = "0" * 64
    path.write_text(json.dumps(data))
    assert planfile.read(str(path)).review_digest == planfile.review_digest(make())


def test_a_malformed_mac_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    planfile.write(make(), str(path), KEY)
    data = json.loads(path.read_text())
    data["mac"] = 5
    path.write_text(json.dumps(data))
    with pytest.raises(PlanError, match="has a malformed authentication code: make a new plan"):
        planfile.read(str(path))
