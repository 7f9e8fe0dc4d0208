"""The dashboard's plan shows a policy change's impact where the project names a file
of recorded inputs (``impact: {from: FILE}``), replayed as ``plan --impact-from`` does;
it never asks the endpoint for reports (a page view creates nothing on a server)."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from govsync.project import select
from govsync.render.impactview import html_section
from govsync.settings import Settings
from govsync.ui import environments, read_environment
from testkit import policy_head

POLICY = policy_head("contractors") + """\
    package formal.v2

    import future.keywords.if

    session := {"action": "block", "reason": "contractors"} if {
      input.user.type == "contractor"
    }
"""


def line(i: int, now: datetime) -> str:
    kind = "contractor" if i % 3 == 0 else "human"
    return json.dumps({"time": (now - timedelta(minutes=i)).isoformat(), "stage": "session",
                       "input": {"user": {"username": f"u{i}", "type": kind},
                                 "resource": {"name": "dwh"}}})


def project(folder: Path, impact: str) -> None:
    (folder / "manifests").mkdir()
    (folder / "manifests" / "policy.yaml").write_text(POLICY)
    (folder / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n"
        f"state: {folder / 'state.db'}\n{impact}\nenvironments:\n  staging: {{}}\n")
    now = datetime.now(UTC)
    (folder / "rec.jsonl").write_text("".join(line(i, now) + "\n" for i in range(30)))


def view(folder: Path) -> object:
    with contextlib.chdir(folder):
        found = environments(Settings(selection=select(None, None, []), environ={}))
        return read_environment("staging", found["staging"])


def test_the_dashboard_replays_the_projects_file(tmp_path: Path) -> None:
    project(tmp_path, "impact: {window: 7d, from: rec.jsonl}")
    shown = view(tmp_path)
    plan = shown.plan  # type: ignore[attr-defined]
    assert plan is not None, shown
    change = next(c for c in plan.changes if c.address == "Policy/contractors")
    assert change.impact is not None and change.impact.known
    assert change.impact.new == {"session": {"block": 10}} and change.impact.evaluated == 30
    assert sum(b.new for b in change.impact.series) == 10
    section = html_section(plan)  # what the dashboard's plan page shows of it
    assert "Policy/contractors" in section and "<svg" in section, section[:500]


def test_a_window_alone_asks_the_dashboard_for_nothing(tmp_path: Path) -> None:
    project(tmp_path, "impact: {window: 7d}")
    plan = view(tmp_path).plan  # type: ignore[attr-defined]
    change = next(c for c in plan.changes if c.address == "Policy/contractors")
    assert change.impact is None
