"""The apply flow's face (govsync.commands): an apply's source as a type, the saved
plan of a new workspace written through one open state, the lock's holder as data."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from govsync import planfile
from govsync.commands import applying, planning, saving
from govsync.commands.sources import Reviewed, Saved
from govsync.commands.workspace import Workspace
from govsync.errors import ConfigError
from govsync.manifests import ManifestSet, load
from govsync.settings import Settings
from govsync.state import LockHolder, open_store

SPACES = ("apiVersion: govsync/v1\nkind: Space\nmetadata: {name: a}\n---\n"
          "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: b}\n")


def manifests(tmp_path: Path) -> ManifestSet:
    (tmp_path / "m.yaml").write_text(SPACES)
    return load([str(tmp_path / "m.yaml")])


def saved_plan(tmp_path: Path, settings: Settings) -> planfile.SavedPlan:
    """``plan --out`` of a workspace never written, as the command makes it."""
    found = manifests(tmp_path)
    with Workspace(settings) as workspace:
        made = planning.plan(found, settings, saving=True, workspace=workspace)
        why = saving.write_plan(made, settings, str(tmp_path / "plan.json"), found,
                                  workspace=workspace)
    assert why == ""
    return planfile.read(str(tmp_path / "plan.json"))


def test_a_new_workspaces_saved_plan_is_authenticated_through_one_open_state(
        tmp_path: Path) -> None:
    settings = Settings(state=str(tmp_path / "state.db"), environ={})
    saved = saved_plan(tmp_path, settings)
    assert saved.authenticated
    with open_store(settings.state) as store:
        key = store.plan_key(settings.workspace, create=False)
        snapshot = store.snapshot(settings.workspace, create=False)
    saved.verify(key, snapshot.lineage)  # made with the workspace's key, not another
    assert sorted(c.address for c in saved.plan.work()) == ["Space/a", "Space/b"]


def test_a_saved_plan_takes_no_target_and_a_reviewed_plan_keeps_its_own(
        tmp_path: Path) -> None:
    settings = Settings(state=str(tmp_path / "state.db"), environ={})
    saved = saved_plan(tmp_path, settings)
    targeted = dataclasses.replace(settings, targets=("Space/a",))
    with pytest.raises(ConfigError, match="--target does not apply to a saved plan"):
        applying.apply(Saved(saved), targeted)
    with pytest.raises(ConfigError, match="--target differs from the reviewed plan's"):
        applying.apply(Reviewed(manifests(tmp_path), saved), targeted)
    with open_store(settings.state) as store:  # refused before anything was recorded
        assert store.history(settings.workspace, 10) == []


def test_the_agents_plan_names_the_lock_holder_as_data(tmp_path: Path) -> None:
    settings = Settings(state=str(tmp_path / "state.db"), environ={})
    holder = LockHolder("ops", "build-1", 4242, "govsync apply", "2026-01-01T00:00:00Z")
    with open_store(settings.state) as store:
        store.acquire(settings.workspace, holder)
        try:
            found = planning.planned(manifests(tmp_path), settings)
        finally:
            store.release(settings.workspace)
    assert found.running == holder
    (lock,) = [c for c in found.plan.checks if c.name == "lock"]
    assert f"({holder})" in lock.detail
    assert planning.planned(manifests(tmp_path), settings).running is None


class _Result:
    """A command's result that counts how often it is formatted."""

    shown = 0

    def __repr__(self) -> str:
        _Result.shown += 1
        return "_Result()"


def test_runtime_run_returns_the_result_without_formatting_it() -> None:
    """asyncio.run formats its main task's result at its end (repr, twice); a plan or a
    refresh of thousands of objects took milliseconds to format and discard."""
    from govsync import runtime

    async def made() -> _Result:
        return _Result()

    _Result.shown = 0
    assert isinstance(runtime.run(made()), _Result)
    assert _Result.shown == 0  # with asyncio.run itself, 2 on Python 3.11

    async def fails() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        runtime.run(fails())
