"""The saved-plan file: markers only here (with an escape), authenticated, strict."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from govsync import planfile
from govsync.apply import run_order
from govsync.errors import PlanError
from govsync.manifests import ManifestSet
from govsync.plan import Action, Plan, make_plan
from govsync.state import Snapshot
from govsync.values import PlannedSecret, Ref

KEY = b"k" * 32

OBJECTS = """
apiVersion: govsync/v1
kind: Connector
metadata: {name: conn-one}
spec: {terminationProtection: false}
---
apiVersion: govsync/v1
kind: ConnectorAIProvider
metadata: {name: conn-one-ai}
spec:
  connectorRef: conn-one
  config:
    providerB: {"$ref": "Connector/conn-one", "$secret": "x", "$$already": 1, plain: 2}
---
apiVersion: govsync/v1
kind: Hook
metadata: {name: hook_one}
spec: {code: "def handler(e):\\n  return 1\\n", timeoutMs: 100}
"""


def test_encode_decode_round_trip_with_escapes() -> None:
    value = {"a": Ref("Space/x"), "b": [PlannedSecret("V", "fp")],
             "user": {"$ref": "x", "$$y": 1, "$secret": {"env": "E", "fingerprint": "f"}}}
    encoded = planfile.encode(value)
    assert encoded["a"] == {"$ref": "Space/x"}
    assert encoded["user"] == {"$$ref": "x", "$$$y": 1,
                               "$$secret": {"env": "E", "fingerprint": "f"}}
    assert planfile.decode(json.loads(json.dumps(encoded))) == value


@pytest.mark.parametrize("bad", [
    {"$ref": 1}, {"$ref": "a", "b": 1}, {"$secret": "VAR"}, {"$secret": {"env": "E"}},
    {"$unknown": 1},
])
def test_decode_refuses_malformed_markers(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        planfile.decode(bad)


@pytest.fixture
def saved(tmp_path: Path, manifests: Callable[[str], ManifestSet],
          snapshot: Snapshot) -> tuple[Path, Plan]:
    plan = make_plan(manifests(OBJECTS), snapshot, environ={})
    path = tmp_path / "plan.json"
    planfile.write(plan, str(path), KEY)
    return path, plan


def test_a_saved_plan_reads_back_exactly(saved: tuple[Path, Plan]) -> None:
    path, plan = saved
    read = planfile.read(str(path))
    read.verify(KEY, plan.lineage)
    assert read.plan == plan
    ai = next(c for c in read.plan.changes if c.address == "ConnectorAIProvider/conn-one-ai")
    assert ai.request is not None
    assert ai.request["connectorId"] == Ref("Connector/conn-one")
    # user data that looks like a marker comes back as the user wrote it
    assert ai.request["config"]["providerB"] == {"$ref": "Connector/conn-one", "$secret": "x",
                                                 "$$already": 1, "plain": 2}


def edited(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _hook(data: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in data["changes"] if c["address"] == "Hook/hook_one")


EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "hook code": lambda d: _hook(d)["request"].update(code="evil()"),
    "extra create": lambda d: d["changes"].append({**_hook(d), "address": "Hook/hook_two"}),
    "duplicated change": lambda d: d["changes"].append(dict(_hook(d))),
    "changed name": lambda d: _hook(d).update(address="Hook/other"),
    "serial": lambda d: d.update(serial=d["serial"] + 1),
    "workspace": lambda d: d.update(workspace="prod"),
    "dropped change": lambda d: d["changes"].pop(),
}


@pytest.mark.parametrize("name", sorted(EDITS))
def test_any_edit_is_refused(saved: tuple[Path, Plan], name: str) -> None:
    path, plan = saved
    edited(path, EDITS[name])
    with pytest.raises(PlanError, match="changed after it was made|not a valid|appears twice"):
        planfile.read(str(path)).verify(KEY, plan.lineage)


def test_another_states_key_or_lineage_is_refused(saved: tuple[Path, Plan]) -> None:
    path, plan = saved
    with pytest.raises(PlanError, match="another state"):
        planfile.read(str(path)).verify(b"x" * 32, "other-lineage")
    with pytest.raises(PlanError, match="changed after it was made"):
        planfile.read(str(path)).verify(b"x" * 32, plan.lineage)


MALFORMED: dict[str, Callable[[dict[str, Any]], None]] = {
    "request null": lambda d: _hook(d).update(request=None),
    "request a string": lambda d: _hook(d).update(request="x"),
    "unknown kind": lambda d: _hook(d).update(kind="Nope", address="Nope/h1"),
    "unknown action": lambda d: _hook(d).update(action="delete"),
    "update of a create-only kind": lambda d: next(
        c for c in d["changes"] if c["kind"] == "Connector").update(action="update"),
    "serial a string": lambda d: d.update(serial="12"),
    "changes not a list": lambda d: d.update(changes={}),
    "no mac": lambda d: d.pop("mac"),
    "bad marker": lambda d: _hook(d)["request"].update(code={"$secret": 1}),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_files_are_one_line_errors(saved: tuple[Path, Plan], name: str) -> None:
    path, _plan = saved
    edited(path, MALFORMED[name])
    with pytest.raises(PlanError) as info:
        planfile.read(str(path))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["", "{", "[]", '{"type": "govsync-plan"}', "null", "1" * 5000,
                                  "[" * 100000])
def test_not_a_plan(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(PlanError) as info:
        planfile.read(str(path))
    assert "\n" not in str(info.value)


def test_changes_that_wait_on_each_other_are_refused(saved: tuple[Path, Plan]) -> None:
    _path, plan = saved
    sends = [c for c in plan.changes if c.action == Action.CREATE]
    sends[0].after += (sends[-1].address,)
    sends[-1].after += (sends[0].address,)
    with pytest.raises(PlanError, match="wait on each other"):
        run_order(sends)
    sends[0].after = (sends[0].address,)
    with pytest.raises(PlanError, match="wait on each other"):
        run_order(sends)
