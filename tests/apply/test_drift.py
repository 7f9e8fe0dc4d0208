"""``govsync drift``: 0 in sync, 2 drift, 1 when it cannot look; text, JSON, Markdown."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from applykit import Govsync, Server, closed_url, edit_spec

from govsync.manifests.loader import load
from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

SUMMARY_KEYS = {"create", "update", "no-op", "blocked", "orphan", "uncertain"}


def drift_json(gov: Govsync, manifests: Path, code: int) -> dict[str, Any]:
    run = gov.invoke("drift", str(manifests), "--format", "json")
    assert run.code == code, run
    report: dict[str, Any] = json.loads(run.out)
    assert report["inSync"] is (code == 0)
    assert set(report["summary"]) >= SUMMARY_KEYS
    for change in report["changes"]:
        assert {"address", "action", "fields", "reason"} <= set(change)
    return report


def drifted(report: dict[str, Any]) -> dict[str, str]:
    return {c["address"]: c["action"] for c in report["changes"]}


def test_in_sync(govsync: Govsync, applied: Path) -> None:
    text = govsync.run("drift", str(applied))
    assert text.code == 0, text
    assert "In sync." in text.out
    assert "Live check groups: passed" in text.out
    report = drift_json(govsync, applied, 0)
    assert report["changes"] == []
    assert report["summary"]["no-op"] == N
    assert sum(v for k, v in report["summary"].items() if k != "no-op") == 0
    markdown = govsync.invoke("drift", str(applied), "--format", "markdown")
    assert markdown.code == 0, markdown
    assert "### govsync drift" in markdown.out and "**In sync.**" in markdown.out


def test_unapplied_change(govsync: Govsync, applied: Path) -> None:
    edit_spec(applied / "hooks.yaml", "Hook", "risk_score", timeoutMs=900)
    edit_spec(applied / "spaces.yaml", "Space", "payments", description="changed")
    report = drift_json(govsync, applied, 2)
    assert drifted(report) == {"Hook/risk_score": "update", "Space/payments": "update"}
    assert report["summary"]["update"] == 2 and report["summary"]["blocked"] == 0
    (hook,) = [c for c in report["changes"] if c["address"] == "Hook/risk_score"]
    assert hook["fields"] == ["timeoutMs"]
    text = govsync.run("drift", str(applied))
    assert text.code == 2, text
    assert "~ Hook/risk_score  (update)" in text.out and "timeoutMs: 1500 -> 900" in text.out
    assert "Drift: 2 change(s)" in text.out
    markdown = govsync.invoke("drift", str(applied), "--format", "markdown")
    assert markdown.code == 2
    assert "~ Hook/risk_score (update)" in markdown.out and "**Drift detected.**" in markdown.out


def test_orphan(govsync: Govsync, applied: Path) -> None:
    (applied / "incident-response.yaml").unlink()
    report = drift_json(govsync, applied, 2)
    assert drifted(report) == {"SessionTermination/inc-2024-0412-orders-dump": "orphan",
                               "BlockedUser/mallory-quinn": "orphan"}
    assert report["summary"]["orphan"] == 2
    text = govsync.run("drift", str(applied))
    assert text.code == 2 and "- BlockedUser/mallory-quinn  (orphan)" in text.out


def test_uncertain_entry(govsync: Govsync, applied: Path, tmp_path: Path) -> None:
    # An entry left uncertain (as an ambiguous create leaves it), moved in by import-all.
    export = govsync.export()
    for entry in export["entries"]:
        if entry["address"] == "Hook/mask_pii":
            entry.update(status="uncertain", id=None, response=None)
    backup = tmp_path / "edited.json"
    backup.write_text(json.dumps(export))
    assert govsync.invoke("state", "import-all", str(backup)).code == 0
    # A List by name settles it (contract 12, amended): the hook exists, so drift says
    # the next apply records it, and never that it is created again.
    report = drift_json(govsync, applied, 2)
    assert drifted(report) == {"Hook/mask_pii": "import"}
    (change,) = report["changes"]
    assert change["why"]["why"] == "settled-exists" and change["id"], change
    assert "ListHooks finds it as" in change["reason"]
    # Where the server is not read, nothing settles it: it is uncertain.
    offline = govsync.invoke("drift", str(applied), "--format", "markdown", "--refresh=false")
    assert offline.code == 2 and "? Hook/mask_pii (uncertain)" in offline.out
    assert "govsync state resolve Hook/mask_pii" in offline.out


def test_group_deleted_on_the_server(govsync: Govsync, server: Server, applied: Path) -> None:
    server.stop()
    with sqlite3.connect(server.db) as db:
        deleted = db.execute("DELETE FROM objects WHERE kind = 'Group' AND id = ?",
                             ("grp-data-platform",)).rowcount
    db.close()
    assert deleted == 1
    server.start(seed=False)  # the seed would bring the group back
    assert "data-platform" not in {g["name"] for g in server.objects()["Group"]}
    govsync.endpoint = server.url

    report = drift_json(govsync, applied, 2)
    assert report["changes"] == []  # the manifests and state still agree
    (groups,) = report["live"]
    assert groups["name"] == "groups" and groups["status"] == "failed"
    owned = {a for a, m in load([str(applied)]).objects.items()
             if m.template.get("groupName") == "data-platform"}
    assert "Policy/mask-pii-in-results" in owned
    assert {p["address"] for p in groups["problems"]} == owned
    assert all(p["group"] == "data-platform" for p in groups["problems"])
    text = govsync.run("drift", str(applied))
    assert text.code == 2, text
    assert "Live check groups: failed" in text.out and "'data-platform'" in text.out
    markdown = govsync.invoke("drift", str(applied), "--format", "markdown")
    assert markdown.code == 2 and "**groups**: failed" in markdown.out


def test_unreachable_endpoint_is_an_error(govsync: Govsync, applied: Path) -> None:
    for fmt in ("text", "json", "markdown"):
        run = govsync.run("drift", str(applied), "--format", fmt,
                          env={"GOVSYNC_ENDPOINT": closed_url()})
        assert run.code == 1, run
        # The state records another endpoint: this one is sent nothing, and drift
        # cannot say "in sync".
        assert "Error: cannot run the live checks" in run.err
        assert "nothing is sent to an endpoint the workspace's state does not record" \
            in run.err
        assert "In sync" not in run.out


def test_a_rejected_key_names_the_key_for_plan_and_drift(govsync: Govsync,
                                                          applied: Path) -> None:
    """The live checks' read refused for the key (401): an error that names the
    variable to fix, from plan and drift alike, and the state is left as it was."""
    state = Path(govsync.state)
    before = state.read_bytes()
    for command in ("plan", "drift"):
        run = govsync.invoke(command, str(applied), env={"GOVSYNC_API_KEY": "not-the-key"})
        assert run.code == 1, run
        assert "the API rejected the key (401): " in run.err, run
        assert "refused the key read from GOVSYNC_API_KEY: check that variable" in run.err, run
    assert state.read_bytes() == before
