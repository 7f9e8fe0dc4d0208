"""Who holds the workspace lock reaches a plan as data (``commands.planning.planned(...).running``), on both
backends: the agent reads it there, not out of the lock check's wording."""

from __future__ import annotations

from pathlib import Path

from contract import Harness

from govsync.commands.planning import planned
from govsync.manifests import load
from govsync.settings import Settings
from govsync.state import LockHolder

HOOK = ("apiVersion: govsync/v1\nkind: Hook\nmetadata:\n  name: h\nspec:\n"
        "  code: 'def handler(event): return 1'\n  timeoutMs: 1000\n")


def test_a_plan_names_the_lock_holder_as_data(backend: Harness, ws: str,
                                              tmp_path: Path) -> None:
    (tmp_path / "hooks.yaml").write_text(HOOK, encoding="utf-8")
    manifests = load([str(tmp_path / "hooks.yaml")])
    settings = Settings(state=backend.url, workspace=ws)
    store = backend.open()
    store.snapshot(ws)
    assert planned(manifests, settings).running is None
    holder = LockHolder.from_dict({"user": "ana", "host": "ci-7", "pid": 4242,
                                   "command": "govsync apply", "since": "2025-01-01T00:00:00Z"})
    store.acquire(ws, holder)
    found = planned(manifests, settings)
    assert found.running == holder
    (lock,) = [c for c in found.plan.checks if c.name == "lock"]
    assert str(holder) in lock.detail
    store.release(ws)
    assert planned(manifests, settings).running is None
