"""Helpers for plan tests: govsync through its command line (click's
CliRunner), and the state through the library (SqliteStore)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from govsync.cli import cli
from govsync.state import Entry, Snapshot
from govsync.state.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
SEED = ROOT / "examples" / "server-seed.yaml"
LOCAL = ("--endpoint", "local", "--local-seed", str(SEED))
STATE_DB = Path(".govsync") / "state.db"



class Gov:
    """``govsync`` in-process, with exit codes checked."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd

    def run(self, *args: str, code: int | None = 0, env: dict[str, str | None] | None = None,
            ) -> Result:
        result = CliRunner().invoke(cli, [str(a) for a in args], env=env)
        # Exit 1 must be govsync's own answer, never a crash.
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"govsync {' '.join(map(str, args))} crashed: "
                                 f"{result.exception!r}\n{result.output}") from result.exception
        if code is not None:
            assert result.exit_code == code, (
                f"govsync {' '.join(map(str, args))}: exit {result.exit_code}, expected {code}\n"
                f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")
        return result

    def plan(self, *args: str, code: int | None = 0) -> dict[str, Any]:
        """``plan ARGS --format json``, parsed."""
        result = self.run("plan", *args, "--format", "json", code=code)
        return json.loads(result.stdout)

    def apply_local(self, *args: str, code: int = 0) -> Result:
        return self.run("apply", *args, *LOCAL, "--auto-approve", code=code)

    def snapshot(self, workspace: str = "default") -> Snapshot:
        with SqliteStore(str(self.cwd / STATE_DB)) as store:
            return store.snapshot(workspace)

    def put(self, entry: Entry, workspace: str = "default") -> int:
        with SqliteStore(str(self.cwd / STATE_DB)) as store:
            return store.put(workspace, entry)


def by_address(plan: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["address"]: c for c in plan["changes"]}


def summary(**counts: int) -> dict[str, int]:
    """A plan summary: every action, zero unless given (no_op= for no-op)."""
    base = dict.fromkeys(("create", "update", "no-op", "blocked", "orphan", "uncertain", "move",
                          "import", "delete", "replace", "forget"), 0)
    for action, n in counts.items():
        key = action.replace("_", "-")
        assert key in base, action
        base[key] = n
    return base


def edit(path: Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in a manifest file."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
    path.write_text(text.replace(old, new), encoding="utf-8")

