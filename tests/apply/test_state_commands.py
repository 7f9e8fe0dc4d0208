"""``govsync state``: list, show, forget, import, resolve, export, import-all, unlock, history.

Every command that changes the state bumps the workspace serial, so a plan
saved before it is refused afterwards.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from applykit import (
    KEY,
    Govsync,
    Server,
    doc,
    write_docs,
    write_hooks,
)

from govsync.api.catalog import unwrap
from govsync.api.client import AsyncClient
from testkit import examples, until

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects


def saved_plan(gov: Govsync, manifests: Path, path: Path) -> Path:
    run = gov.invoke("plan", str(manifests), "--out", str(path), "--refresh=false")
    assert run.code == 0, run
    return path


def refused(gov: Govsync, plan: Path) -> None:
    """The saved plan is refused: the state moved on since it was made."""
    run = gov.invoke("apply", str(plan))
    assert run.code == 1, run
    assert "the state changed since the plan was made" in run.err


def detailed(gov: Govsync, manifests: Path) -> int:
    return gov.invoke("plan", str(manifests), "--detailed-exitcode").code


def actions(gov: Govsync, manifests: Path, *flags: str) -> dict[str, str]:
    return {c["address"]: c["action"] for c in gov.plan_json(str(manifests), *flags)["changes"]
            if c["action"] != "no-op"}


def test_list_show_and_history(govsync: Govsync, applied: Path) -> None:
    listed = govsync.run("state", "list")
    assert listed.code == 0, listed
    lines = listed.out.splitlines()
    assert len(lines) == N
    assert all(len(line.split("\t")) == 3 and line.endswith("\tapplied") for line in lines)
    assert f"{N} object(s) in workspace {govsync.workspace!r}" in listed.err
    entries = govsync.entries()
    assert len(entries) == N and {e["status"] for e in entries.values()} == {"applied"}

    shown = govsync.run("state", "show", "BIIntegration/exec-dashboards")
    assert shown.code == 0, shown
    entry = json.loads(shown.out)
    assert entry["id"] == entries["BIIntegration/exec-dashboards"]["id"]
    assert entry["spec"]["biA"]["biAApiKey"].startswith("hmac-sha256:")
    assert entry["spec"]["biA"]["biAApiSecret"].startswith("hmac-sha256:")
    assert entry["response"]["biA"]["apiKey"] == "(sensitive)"
    assert entry["spec"]["linkedDbUserId"] == entries["NativeUser/warehouse-bi"]["id"]
    missing = govsync.run("state", "show", "Hook/nope")
    assert missing.code == 1 and "Hook/nope is not in the state" in missing.err

    # History: who, when, what, outcome; newest first.
    assert govsync.run("apply", str(applied), "--auto-approve").code == 0  # nothing to do
    (applies,) = json.loads(govsync.run("state", "history", "--format", "json").out)["history"]
    assert applies["ok"] is True and applies["summary"]["applied"] == N
    assert applies["host"] == socket.gethostname() and applies["user"]
    assert applies["at"].endswith("Z") and len(applies["changes"]) == N
    text = govsync.run("state", "history")
    assert text.code == 0
    assert f"{applies['user']}@{applies['host']}  ok  {N} applied" in text.out


def test_forget_then_import(govsync: Govsync, server: Server, applied: Path,
                            tmp_path: Path) -> None:
    serial = govsync.serial()
    plan = saved_plan(govsync, applied, tmp_path / "before-forget.json")
    hook_id = govsync.entries()["Hook/mask_pii"]["id"]
    forgot = govsync.run("state", "forget", "Hook/mask_pii")
    assert forgot.code == 0, forgot
    assert f"Forgot Hook/mask_pii (id {hook_id}); it stays on the server." in forgot.out
    assert "Hook/mask_pii" not in govsync.entries()
    assert hook_id in {h["id"] for h in server.objects()["Hook"]}
    assert govsync.serial() == serial + 1
    refused(govsync, plan)
    # It exists on the server unrecorded: blocked, never created a second time.
    run = govsync.invoke("plan", str(applied), "--format", "json")
    assert run.code == 1, run
    (change,) = [c for c in json.loads(run.out)["changes"] if c["action"] != "no-op"]
    assert (change["address"], change["action"]) == ("Hook/mask_pii", "blocked")
    assert change["reason"].startswith(f"exists on the server as {hook_id}")

    # Import adopts it again under the id the server has: no change left.
    plan = tmp_path / "before-import.json"
    govsync.invoke("plan", str(applied), "--out", str(plan))
    imported = govsync.run("state", "import", "Hook/mask_pii", hook_id, str(applied))
    assert imported.code == 0, imported
    assert f"Recorded Hook/mask_pii as {hook_id}, verified by GetHook." in imported.out
    assert govsync.serial() == serial + 2
    refused(govsync, plan)
    assert detailed(govsync, applied) == 0
    again = govsync.run("state", "import", "Hook/mask_pii", hook_id, str(applied))
    assert again.code == 1 and "already in state" in again.err


def test_import_an_object_made_outside_govsync(govsync: Govsync, server: Server,
                                               applied: Path, tmp_path: Path) -> None:
    space_id = govsync.entries()["Space/analytics"]["id"]

    async def create() -> dict[str, Any]:
        async with AsyncClient(server.url, KEY) as client:
            return await client.call("CreateConnector",
                {"name": "made-by-hand", "spaceId": space_id, "terminationProtection": True})

    obj, connector_id = unwrap("CreateConnector", asyncio.run(create()))
    assert connector_id and obj["spaceId"] == space_id
    write_docs(applied / "adopted.yaml", [doc("Connector", "made-by-hand", {
        "spaceRef": "analytics", "terminationProtection": True})])
    run = govsync.invoke("plan", str(applied), "--format", "json")
    assert run.code == 1, run  # found live by its name: blocked, not created twice
    (change,) = [c for c in json.loads(run.out)["changes"] if c["action"] != "no-op"]
    assert (change["action"], change["id"]) == ("blocked", connector_id)

    plan = tmp_path / "plan.json"
    govsync.invoke("plan", str(applied), "--out", str(plan))
    before = govsync.serial()
    imported = govsync.run("state", "import", "Connector/made-by-hand", connector_id,
                           str(applied))
    assert imported.code == 0, imported
    assert govsync.serial() == before + 1
    refused(govsync, plan)
    plan_run = govsync.run("plan", str(applied), "--detailed-exitcode")
    assert plan_run.code == 0, plan_run
    entry = govsync.entries()["Connector/made-by-hand"]
    assert entry["id"] == connector_id and entry["status"] == "applied"
    assert [c["name"] for c in server.objects()["Connector"]].count("made-by-hand") == 1


def two_uncertain_hooks(gov: Govsync, tmp_path: Path) -> Path:
    """Apply two hooks through a server that fails every write until both are uncertain.

    A dropped connection (half the faults) makes a create uncertain at once;
    a 500 is retried, and after five of them the create fails cleanly and the
    next apply sends it again.  Without reading the server (a read would settle them).
    """
    manifests = tmp_path / "uncertain"
    write_hooks(manifests, ("h_a", "h_b"))
    for _ in range(10):
        run = gov.run("apply", str(manifests), "--auto-approve", "--refresh=false")
        assert run.code == 1, run
        if {e["status"] for e in gov.entries().values()} == {"uncertain"} and \
                len(gov.entries()) == 2:
            return manifests
    pytest.fail("the hooks did not both become uncertain")


def test_resolve(serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
                 sqlite_state: str, tmp_path: Path) -> None:
    faulty = serve("--fault-rate", "1.0")
    gov = make_govsync(sqlite_state, faulty.url)
    manifests = two_uncertain_hooks(gov, tmp_path)
    assert actions(gov, manifests, "--refresh=false") == {"Hook/h_a": "uncertain",
                                                          "Hook/h_b": "uncertain"}
    listed = gov.run("state", "list")
    assert "Hook/h_a\t-\tuncertain" in listed.out
    # Each dropped connection stored its hook: find h_a's.
    (found,) = [h for h in faulty.objects()["Hook"] if h["name"] == "h_a"]

    serial = gov.serial()
    plan = saved_plan(gov, manifests, tmp_path / "plan-1.json")
    run = gov.run("state", "resolve", "Hook/h_a", "--id", found["id"])
    assert run.code == 0, run
    assert f"Resolved Hook/h_a: exists as {found['id']}." in run.out
    assert gov.entries()["Hook/h_a"] == {"address": "Hook/h_a", "id": found["id"],
                                         "status": "applied", "kind": "Hook"}
    assert gov.serial() == serial + 1
    refused(gov, plan)

    plan = saved_plan(gov, manifests, tmp_path / "plan-2.json")
    run = gov.run("state", "resolve", "Hook/h_b", "--absent")
    assert run.code == 0, run
    assert "Resolved Hook/h_b: absent; the next apply creates it." in run.out
    assert "Hook/h_b" not in gov.entries()
    assert gov.serial() == serial + 2
    refused(gov, plan)
    # A dropped answer may have stored h_b after all: then it is found live and
    # blocked, never created a second time.
    stored = [h for h in faulty.objects()["Hook"] if h["name"] == "h_b"]
    run = gov.invoke("plan", str(manifests), "--format", "json")
    (change,) = [c for c in json.loads(run.out)["changes"] if c["action"] != "no-op"]
    assert (change["address"], change["action"]) == (
        "Hook/h_b", "blocked" if stored else "create")

    # Only uncertain entries can be resolved, with exactly one of --id and --absent.
    assert gov.run("state", "resolve", "Hook/h_a", "--absent").code == 1
    assert gov.run("state", "resolve", "Hook/h_b", "--id", "x").code == 1
    both = gov.run("state", "resolve", "Hook/h_a", "--id", "x", "--absent")
    assert both.code == 2 and "exactly one of --id ID and --absent" in both.err
    # History has the failed applies.
    records = json.loads(gov.run("state", "history", "--format", "json").out)["history"]
    assert records and all(r["ok"] is False for r in records)
    assert "FAILED" in gov.run("state", "history").out


def export_to(gov: Govsync, target: Govsync, tmp_path: Path) -> dict[str, Any]:
    export = gov.run("state", "export")
    assert export.code == 0, export
    data: dict[str, Any] = json.loads(export.out)
    backup = tmp_path / f"export-{target.workspace}.json"
    backup.write_text(export.out)
    run = target.run("state", "import-all", str(backup))
    assert run.code == 0, run
    assert f"Imported {len(data['entries'])} entries" in run.out
    return data


def test_export_then_import_all_into_another_workspace(
        govsync: Govsync, applied: Path, make_govsync: Callable[..., Govsync],
        sqlite_state: str, tmp_path: Path) -> None:
    other = make_govsync(sqlite_state, govsync.endpoint)
    # Empty, against a server that holds the objects: their creates are blocked.
    assert detailed(other, applied) == 1
    data = export_to(govsync, other, tmp_path)
    assert data["workspace"] == govsync.workspace and len(data["entries"]) == N
    run = other.run("plan", str(applied), "--detailed-exitcode")
    assert run.code == 0, run
    assert other.entries() == govsync.entries()

    # import-all that changes what is recorded: saved plans made before are refused.
    (applied / "incident-response.yaml").unlink()
    plan = saved_plan(govsync, applied, tmp_path / "plan.json")
    serial = govsync.serial()
    backup = tmp_path / f"export-{other.workspace}.json"
    exported = json.loads(backup.read_text())
    exported["entries"] = exported["entries"][1:]
    backup.write_text(json.dumps(exported))
    assert govsync.run("state", "import-all", str(backup)).code == 0
    assert govsync.serial() > serial
    refused(govsync, plan)


def test_export_from_sqlite_import_all_into_postgres(
        govsync: Govsync, applied: Path, make_govsync: Callable[..., Govsync],
        pg_state: str, sqlite_state: str, tmp_path: Path) -> None:
    shared = make_govsync(pg_state, govsync.endpoint)
    export_to(govsync, shared, tmp_path)
    run = shared.run("plan", str(applied), "--detailed-exitcode")
    assert run.code == 0, run
    assert shared.entries() == govsync.entries()
    # And back again, into a fresh SQLite workspace.
    back = make_govsync(sqlite_state, govsync.endpoint)
    export_to(shared, back, tmp_path)
    assert back.run("plan", str(applied), "--detailed-exitcode").code == 0
    # An apply on the PostgreSQL workspace has nothing to send.
    assert "No changes" in shared.run("apply", str(applied), "--auto-approve").out


def test_unlock(serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
                state_url: str, tmp_path: Path) -> None:
    server = serve("--latency-ms", "500")
    gov = make_govsync(state_url, server.url)
    none = gov.run("state", "unlock")
    assert none.code == 0 and "The workspace was not locked." in none.out
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"lock_{i}" for i in range(4)))
    doomed = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "1")
    assert doomed.wait_for_line(lambda line: line.startswith("Applying "))
    until(lambda: server.in_flight() > 0, "a create sent under the lock")
    assert doomed.kill() == -signal.SIGKILL
    unlocked = gov.run("state", "unlock")
    assert unlocked.code == 0, unlocked
    assert f"Unlocked (was held by {_user_host()} pid {doomed.proc.pid}" in unlocked.out
    assert "The workspace was not locked." in gov.run("state", "unlock").out


def _user_host() -> str:
    import getpass

    return f"{getpass.getuser()}@{socket.gethostname()}"


def test_unlock_refuses_while_the_holder_runs(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        state_url: str, tmp_path: Path) -> None:
    """The lock belongs to the holding process: clearing its record does not free it."""
    server = serve("--latency-ms", "500")
    gov = make_govsync(state_url, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"busy_{i}" for i in range(4)))
    running = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "1")
    try:
        assert running.wait_for_line(lambda line: line.startswith("Applying "))
        refused = gov.run("state", "unlock")
        assert refused.code == 1, refused
        assert "still locked by a running process" in refused.err
        assert f"pid {running.proc.pid}" in refused.err
    finally:
        running.kill()
