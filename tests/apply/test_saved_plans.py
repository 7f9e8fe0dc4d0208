"""Saved plans: applied exactly, and only onto the state and secrets they were made from."""

from __future__ import annotations

from pathlib import Path

import yaml
from applykit import BIG_SECRET_VAR, Govsync, Server, doc, write_docs


def hooks(n: int, timeout: int = 1000) -> list[dict[str, object]]:
    return [doc("Hook", f"plan_hook_{i}", {"code": f"def handler(e):\n    return {i}\n",
                                           "timeoutMs": timeout, "status": "active"})
            for i in range(n)]


def logs(name: str) -> dict[str, object]:
    return doc("LogIntegration", name, {"logStoreB": {
        "site": "eu1.example", "apiKey": {"fromEnv": BIG_SECRET_VAR}}})


def test_saved_plan_runs_exactly_its_changes(govsync: Govsync, server: Server,
                                             tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    write_docs(manifests / "hooks.yaml", hooks(3))
    assert govsync.run("apply", str(manifests), "--auto-approve").code == 0

    # The plan: one update, two creates.
    write_docs(manifests / "hooks.yaml", [*hooks(1, timeout=2000), *hooks(5)[1:]])
    plan_file = tmp_path / "plan.json"
    made = govsync.run("plan", str(manifests), "--out", str(plan_file))
    assert made.code == 0, made
    assert "1 to update" in made.out and "2 to create" in made.out
    assert "Saved the plan" in made.err

    # The manifests change again after the plan was made: the plan still rules.
    write_docs(manifests / "hooks.yaml", [*hooks(1, timeout=3000), *hooks(9)[1:]])
    before = server.objects()["Hook"]
    elsewhere = govsync.run("apply", str(plan_file), env={"GOVSYNC_WORKSPACE": "other"})
    assert elsewhere.code == 1, elsewhere
    assert f"is a plan for workspace {govsync.workspace!r}" in elsewhere.err
    run = govsync.run("apply", str(plan_file))
    assert run.code == 0, run
    assert "Apply: 3 applied, 0 failed" in run.out and "(3 requests in " in run.out
    after = {h["name"]: h for h in server.objects()["Hook"]}
    assert sorted(after) == [f"plan_hook_{i}" for i in range(5)]
    assert after["plan_hook_0"]["timeoutMs"] == 2000
    assert {h["id"] for h in before} <= {h["id"] for h in after.values()}
    assert sorted(
        a for a, e in govsync.entries().items() if e["status"] == "applied"
    ) == [f"Hook/plan_hook_{i}" for i in range(5)]
    # Applied once: a saved plan applies at most once, so the same plan is refused now.
    again = govsync.run("apply", str(plan_file))
    assert again.code == 1, again
    assert "was applied already" in again.err and "at most once" in again.err


def test_saved_plan_refused_when_state_changed(govsync: Govsync, server: Server,
                                              tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    write_docs(manifests / "hooks.yaml", hooks(2))
    assert govsync.run("apply", str(manifests), "--auto-approve").code == 0
    write_docs(manifests / "hooks.yaml", hooks(4))
    plan_file = tmp_path / "plan.json"
    assert govsync.run("plan", str(manifests), "--out", str(plan_file)).code == 0

    # Someone else applies part of it first.
    write_docs(tmp_path / "other" / "hooks.yaml", hooks(3))
    assert govsync.run("apply", str(tmp_path / "other"), "--auto-approve").code == 0
    before = server.objects()
    run = govsync.run("apply", str(plan_file))
    assert run.code == 1, run
    assert "the state changed since the plan was made" in run.err
    assert server.objects() == before
    assert "plan_hook_3" not in {h["name"] for h in before["Hook"]}


def test_saved_plan_refused_when_a_secret_changed(govsync: Govsync, server: Server,
                                                 tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    write_docs(manifests / "logs.yaml", [logs("siem")])
    plan_file = tmp_path / "plan.json"
    assert govsync.run("plan", str(manifests), "--out", str(plan_file)).code == 0
    assert govsync.secrets[BIG_SECRET_VAR] not in plan_file.read_text()
    assert yaml.safe_load(plan_file.read_text())["changes"][0]["action"] == "create"

    run = govsync.run("apply", str(plan_file), env={BIG_SECRET_VAR: "a-new-value"})
    assert run.code == 1, run
    assert f"the value of {BIG_SECRET_VAR}" in run.err and "changed" in run.err
    assert "a-new-value" not in run.text
    assert server.objects()["LogIntegration"] == []
    unset = govsync.run("apply", str(plan_file), env={BIG_SECRET_VAR: None})
    assert unset.code == 1, unset
    assert f"{BIG_SECRET_VAR}" in unset.err and "not set" in unset.err

    # With the value it was made with, the plan applies.
    run = govsync.run("apply", str(plan_file))
    assert run.code == 0, run
    assert [i["name"] for i in server.objects()["LogIntegration"]] == ["siem"]
