"""Day two for a team (issue 10): one repository, staging and prod, two reference
servers, one state store with two workspaces (PostgreSQL when available).

Variables and patches differ per environment; a rotated secret blocks one
change and --target applies around it; a saved plan records its targets; a
move and an import are reviewed as manifests."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from applykit import KEY, Govsync, Run, Server, unique_workspace

LOGSTORE = "GOVSYNC_ENV_TEST_LOGSTORE_KEY"
# Let the project file choose state, workspace and endpoint.
FROM_PROJECT: dict[str, str | None] = {"GOVSYNC_STATE": None, "GOVSYNC_WORKSPACE": None,
                                       "GOVSYNC_ENDPOINT": None}


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    staging = Server(tmp_path, "staging").start()
    prod = Server(tmp_path, "prod").start()
    try:
        yield staging, prod
    finally:
        staging.stop()
        prod.stop()


def repository(root: Path, staging: Server, prod: Server, state: str, prefix: str) -> None:
    write(root / "govsync.yaml", f"""
        apiVersion: govsync/v1
        kind: Project
        paths: [manifests/]
        vars: {{timeout: 1000, team: platform}}
        environments:
          staging:
            paths: [manifests/, envs/staging/]
            workspace: {prefix}-staging
            endpoint: {staging.url}
            state: {state}
            vars: {{timeout: 500}}
          prod:
            paths: [manifests/, envs/prod/]
            workspace: {prefix}-prod
            endpoint: {prod.url}
            state: {state}
            vars: {{timeout: 5000}}
        """)
    write(root / "manifests" / "objects.yaml", f"""
        apiVersion: govsync/v1
        kind: Hook
        metadata: {{name: risk_score}}
        spec:
          code: "export default function hook() {{ return 1; }}"
          timeoutMs: {{var: timeout}}
          description: {{var: team}}
        ---
        apiVersion: govsync/v1
        kind: LogIntegration
        metadata: {{name: siem}}
        spec:
          logStoreB: {{site: eu1.example, accountId: acct, apiKey: {{fromEnv: {LOGSTORE}}}}}
        ---
        apiVersion: govsync/v1
        kind: BlockedUser
        metadata: {{name: mallory}}
        spec: {{id: usr-mallory}}
        """)
    write(root / "envs" / "prod" / "hardening.yaml", """
        apiVersion: govsync/v1
        kind: Patch
        metadata: {name: prod-hook}
        spec:
          target: Hook/risk_score
          merge: {allowlistedNetworkHosts: [risk.internal.example], description: null}
        """)
    write(root / "envs" / "staging" / "empty.yaml", "# nothing to patch in staging\n")


def by_kind(server: Server, kind: str) -> list[dict[str, Any]]:
    return server.objects().get(kind, [])


def ok(run: Run, code: int = 0) -> Run:
    assert run.code == code, run
    assert "Traceback" not in run.text, run
    return run


def test_two_environments_day_two(tmp_path: Path, servers: tuple[Server, Server],
                                  state_url: str, made_workspaces: Callable[..., None]) -> None:
    staging, prod = servers
    prefix = unique_workspace()
    made_workspaces(f"{prefix}-staging", f"{prefix}-prod")
    root = tmp_path / "repo"
    repository(root, staging, prod, state_url, prefix)
    gov = Govsync(root, state_url, "unused", None, {LOGSTORE: "first-key"})

    def run(*args: str, env: dict[str, str | None] | None = None) -> Run:
        return gov.run(*args, env={**FROM_PROJECT, **(env or {})})

    # validate without --env checks both environments
    assert "(environment prod): valid" in ok(run("validate")).out
    for env in ("staging", "prod"):
        ok(run("apply", "--env", env, "--auto-approve"))

    # different variables and patches per environment, on their own servers
    (hook_s,) = by_kind(staging, "Hook")
    (hook_p,) = by_kind(prod, "Hook")
    assert (hook_s["timeoutMs"], hook_s["description"]) == (500, "platform")
    assert (hook_p["timeoutMs"], hook_p["description"]) == (5000, "")
    assert hook_p["allowlistedNetworkHosts"] == ["risk.internal.example"]
    # one state store, two workspaces
    for env in ("staging", "prod"):
        listed = json.loads(ok(run("state", "list", "--env", env, "--format", "json")).out)
        entries = listed["entries"] if isinstance(listed, dict) else listed
        assert len(entries) == 3, listed

    # a rotated secret blocks its integration, and names the variable and the way out
    gov.secrets[LOGSTORE] = "rotated-key"
    write(root / "envs" / "prod" / "timeout.yaml", """
        apiVersion: govsync/v1
        kind: Patch
        metadata: {name: prod-timeout}
        spec: {target: Hook/risk_score, merge: {timeoutMs: 6000}}
        """)
    plan = json.loads(ok(run("plan", "--env", "prod", "--format", "json"), code=1).out)
    actions = {c["address"]: c for c in plan["changes"]}
    assert actions["Hook/risk_score"]["action"] == "update"
    siem = actions["LogIntegration/siem"]
    assert siem["action"] == "blocked"
    assert f"the value of {LOGSTORE}" in siem["reason"] and "not the manifest" in siem["reason"]
    assert "--target" in siem["reason"]
    refused = ok(run("apply", "--env", "prod", "--auto-approve"), code=1)
    assert "blocked" in refused.err
    # Nothing in the manifests changed: the advice is to rotate, not to revert.
    assert "rotate each as its reason says" in refused.err
    assert "revert them in the manifests" not in refused.err
    assert by_kind(prod, "Hook")[0]["timeoutMs"] == 5000  # nothing was sent

    # a targeted saved plan goes around the blocked change, and keeps its targets
    ok(run("plan", "--env", "prod", "--target", "Hook/*", "--out", "p.json"))
    saved = json.loads((root / "p.json").read_text())
    assert saved["targets"] == ["Hook/*"] and saved["leftOut"] == 1  # changes, not no-ops
    assert "--target does not apply to a saved plan" in ok(
        run("apply", "p.json", "--env", "prod", "--target", "Space/*"), code=1).err
    shown = ok(run("show", "p.json", "--format", "json"))
    assert json.loads(shown.out)["targets"] == ["Hook/*"]
    assert "Hook/risk_score" in ok(run("show", "p.json")).out
    ok(run("apply", "p.json", "--env", "prod"))
    assert by_kind(prod, "Hook")[0]["timeoutMs"] == 6000
    assert by_kind(staging, "Hook")[0]["timeoutMs"] == 500
    gov.secrets[LOGSTORE] = "first-key"

    # a move, reviewed as a manifest: no call, the state entry is re-addressed
    text = (root / "manifests" / "objects.yaml").read_text()
    (root / "manifests" / "objects.yaml").write_text(
        text.replace("metadata: {name: mallory}", "metadata: {name: mallory-quinn}"))
    write(root / "manifests" / "moves.yaml", """
        apiVersion: govsync/v1
        kind: Moved
        metadata: {name: rename-mallory}
        spec: {from: BlockedUser/mallory, to: BlockedUser/mallory-quinn}
        """)
    plan = json.loads(ok(run("plan", "--env", "staging", "--format", "json")).out)
    moved = {c["address"]: c for c in plan["changes"]}["BlockedUser/mallory-quinn"]
    assert moved["action"] == "move" and moved["movedFrom"] == "BlockedUser/mallory"
    before = by_kind(staging, "BlockedUser")
    ok(run("apply", "--env", "staging", "--auto-approve"))
    assert by_kind(staging, "BlockedUser") == before
    again = json.loads(ok(run("plan", "--env", "staging", "--format", "json")).out)
    assert {c["action"] for c in again["changes"]} == {"no-op"}

    # an import: adopt a hook made by hand on prod; UpdateHook makes it match the manifest
    made = httpx.post(f"{prod.url}/core.v1.HookService/CreateHook", headers={"X-API-KEY": KEY},
                      json={"name": "fraud_score", "code": "export default function hook() { return 0; }",
                            "timeoutMs": 100}, timeout=30).json()
    hook_id = made["hook"]["id"] if "hook" in made else made["id"]
    write(root / "envs" / "prod" / "fraud.yaml", f"""
        apiVersion: govsync/v1
        kind: Hook
        metadata: {{name: fraud_score}}
        spec: {{code: "export default function hook() {{ return 2; }}", timeoutMs: 700}}
        ---
        apiVersion: govsync/v1
        kind: Import
        metadata: {{name: adopt-fraud}}
        spec: {{to: Hook/fraud_score, id: {hook_id}}}
        """)
    plan = json.loads(ok(run("plan", "--env", "prod", "--target", "Hook/fraud_score",
                             "--format", "json")).out)
    (imported,) = plan["changes"]
    assert imported["action"] == "import" and imported["id"] == hook_id
    assert imported["reason"].startswith("adopted by ")
    assert "verified by GetHook" in imported["reason"]  # the API reads a Hook now
    ok(run("apply", "--env", "prod", "--target", "Hook/fraud_score", "--auto-approve"))
    hooks = {h["name"]: h for h in by_kind(prod, "Hook")}
    assert len(hooks) == 2 and hooks["fraud_score"]["timeoutMs"] == 700
    assert hooks["fraud_score"]["id"] == hook_id
    # importing an address already in state under another id is refused
    (root / "envs" / "prod" / "fraud.yaml").write_text(
        (root / "envs" / "prod" / "fraud.yaml").read_text().replace(hook_id, "hook-other"))
    assert "already in state" in ok(run("plan", "--env", "prod"), code=1).err
