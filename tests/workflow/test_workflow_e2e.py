"""The pull-request workflow, end to end, as CI runs it.

A real git repository in a temporary folder, the reference server as a
separate process on loopback, and govsync as the installed command line
(``python -m govsync``, a subprocess in the repository):

    govsync init -> commit on main -> branch add-manifests: validate, plan
    --out plan.json, plan --format markdown (the PR comment) -> merge ->
    apply plan.json (the saved plan, no new plan) -> branch tune-hook: one
    update -> merge, apply -> drift in sync -> a group deleted on the server:
    drift -> a second apply while the first holds the lock is refused.

State lives outside the checkout (as CI's shared state does), in SQLite.
"""

from __future__ import annotations

import dataclasses
import getpass
import json
import os
import re
import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from workflowkit import Govsync, Run, Server, applying, git, object_id

pytestmark = pytest.mark.slow

SECRETS = {  # the {fromEnv: ...} variables of the init templates
    "GOVSYNC_LOGSTORE_API_KEY": "wf-logstore-1b9e4d7c0a2f",
    "GOVSYNC_AI_PROVIDER_API_KEY": "wf-ai-provider-5c8a3e6f9d01",
}
# The group `govsync init`'s example policy is owned by (its local-seed.yaml).
INIT_GROUP = ("grp-platform-admins", "platform-admins")
# A group the pull request's new policy is owned by: added to the server's seed.
TEAM_GROUP = {"id": "grp-data-stewards", "name": "data-stewards",
              "description": "Owners of the personal-data rules.",
              "createdAt": "2024-01-01T00:00:00.000000000Z",
              "updatedAt": "2024-01-01T00:00:00.000000000Z"}

TEAM_MANIFESTS = """\
# yaml-language-server: $schema=../schemas/manifest.schema.json
# Masking of personal data, owned by the data stewards.
apiVersion: govsync/v1
kind: Hook
metadata:
  name: pii_mask
spec:
  description: Masks e-mail addresses in results.
  status: active
  timeoutMs: 2000
  code: |
    export default function hook(input, env) {
      return { mask: ["email"] };
    }
---
apiVersion: govsync/v1
kind: Policy
metadata:
  name: mask-pii
  dependsOn: [Hook/pii_mask]
spec:
  description: Mask personal data for everyone but the data stewards.
  groupName: data-stewards
  notification: owners
  status: active
  code: |
    package formal.v2

    import rego.v1

    post_request := {"action": "mask", "type": "nullify", "columns": input.hooks.pii_mask.mask} if {
      input.hooks.pii_mask.mask
    }
"""

# The last pull request: enough hooks that its apply holds the lock for a
# few seconds (creates two at a time, each answered after LATENCY_MS).
BATCH_HOOKS = 16
LATENCY_MS = 400


def batch_manifests(n: int) -> str:
    docs = [{"apiVersion": "govsync/v1", "kind": "Hook", "metadata": {"name": f"batch_{i}"},
             "spec": {"description": f"Batch hook {i}.", "timeoutMs": 1000 + i,
                      "code": f"export default function hook() {{ return {{n: {i}}}; }}\n"}}
            for i in range(n)]
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.fixture
def cleanup() -> Iterator[list[Server | Govsync]]:
    """Servers and command lines to stop at teardown (a failed test may leave an apply)."""
    owned: list[Server | Govsync] = []
    yield owned
    for thing in owned:
        if isinstance(thing, Server):
            thing.stop()
        else:
            for process in thing.background:
                if process.proc.poll() is None:
                    process.kill()


def user() -> str:
    """The user name a lock holder records (as govsync finds it)."""
    try:
        return getpass.getuser()
    except Exception:  # no user name in some containers
        return str(os.getuid())


def ok(run: Run, code: int = 0) -> Run:
    assert run.code == code, run
    return run


def on_server(server: Server, kind: str, name: str) -> dict[str, Any]:
    """The one object of ``kind`` named ``name`` the server holds."""
    found = [o for o in server.objects().get(kind, []) if o.get("name") == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} on the server"
    return found[0]


def state_entries(gov: Govsync) -> dict[str, dict[str, Any]]:
    run = ok(gov.run("state", "list", "--format", "json"))
    return {e["address"]: e for e in json.loads(run.out)["entries"]}


def plan_json(gov: Govsync) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(ok(gov.run("plan", "manifests", "--format", "json")).out)
    return data


def merge(repo: Path, branch: str, number: int) -> None:
    """What the merge button does: a merge commit on main."""
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "--no-ff", "-q", "-m", f"Merge pull request #{number} from {branch}",
        branch)
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert git(repo, "status", "--porcelain") == "", "the merge left changes behind"


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    assert git(repo, "status", "--porcelain") == ""


def test_pull_request_workflow(tmp_path: Path, cleanup: list[Server | Govsync]) -> None:
    started = time.monotonic()
    repo = tmp_path / "repo"
    state = tmp_path / "shared-state" / "state.db"  # outside the checkout, as in CI
    # init's govsync.yaml defines staging and prod: this team works in staging.
    gov = Govsync(repo, str(state), "staging", None, {**SECRETS, "GOVSYNC_ENV": "staging"})
    cleanup.append(gov)

    # -- govsync init --------------------------------------------------------------
    init = ok(dataclasses.replace(gov, cwd=tmp_path).run("init", "repo"))
    assert "Next steps:" in init.out, init
    templates = sorted(p.name for p in (repo / "manifests").glob("*.yaml"))
    assert len(templates) >= 4, templates
    for rel in (".gitignore", ".github/workflows/govsync.yml", "local-seed.yaml",
                "schemas/manifest.schema.json"):
        assert (repo / rel).is_file(), rel
    gitignore = (repo / ".gitignore").read_text().split()
    assert ".govsync/" in gitignore and "plan*.json" in gitignore and "plans/" in gitignore

    # The server knows the groups: init's local seed, plus the team's group.
    seed = yaml.safe_load((repo / "local-seed.yaml").read_text())
    assert [(g["id"], g["name"]) for g in seed["groups"]] == [INIT_GROUP]
    seed["groups"].append(TEAM_GROUP)
    seed_file = tmp_path / "server-seed.yaml"
    seed_file.write_text(yaml.safe_dump(seed, sort_keys=False))
    server = Server(tmp_path, "api", seed=seed_file)
    cleanup.append(server)
    gov.endpoint = server.start().url

    # -- main: the scaffold, committed ---------------------------------------------
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Workflow Test")
    git(repo, "config", "user.email", "workflow-test@example.invalid")
    commit_all(repo, "govsync init")
    tracked = git(repo, "ls-files").split()
    assert ".github/workflows/govsync.yml" in tracked
    assert all(f"manifests/{name}" in tracked for name in templates)

    # -- pull request 1: add-manifests ---------------------------------------------
    git(repo, "checkout", "-q", "-b", "add-manifests")
    (repo / "manifests" / "data-stewards.yaml").write_text(TEAM_MANIFESTS)
    policies = repo / "manifests" / "hooks-and-policies.yaml"
    text = policies.read_text()
    assert "status: dry-run" in text
    policies.write_text(text.replace("status: dry-run", "status: active", 1))
    commit_all(repo, "Add the data stewards' masking; writes-need-ticket goes active")

    validate = ok(gov.run("validate", "manifests"))
    match = re.search(r"(\d+) objects in (\d+) files(?: \(environment \w+\))?: valid\.",
                      validate.text)
    assert match, validate
    total = int(match.group(1))
    assert int(match.group(2)) == len(templates) + 1

    saved = ok(gov.run("plan", "manifests", "--out", "plan.json"))
    assert f"Plan: {total} to create, 0 to update, 0 blocked" in saved.out, saved
    assert "Check groups: passed" in saved.out, saved
    assert (repo / "plan.json").is_file()
    assert git(repo, "status", "--porcelain") == "", "plan.json must be ignored, not committed"

    comment = ok(gov.run("plan", "manifests", "--format", "markdown")).out
    assert len(comment) < 60_000
    table = ("| create | update | blocked | orphan | uncertain | unchanged |\n"
             "|---:|---:|---:|---:|---:|---:|\n"
             f"| {total} | 0 | 0 | 0 | 0 | 0 |")
    assert table in comment, comment[:2000]
    assert "check **groups**: passed" in comment
    assert "Policy/mask-pii (create)" in comment and "Hook/pii_mask (create)" in comment
    plan_file = (repo / "plan.json").read_text()
    for value in SECRETS.values():
        assert value not in comment and value not in plan_file and value not in saved.text
    addresses = [c["address"] for c in json.loads(plan_file)["changes"]]
    assert len(addresses) == total

    # -- merge, then apply the saved plan (no new plan) ------------------------------
    merge(repo, "add-manifests", 1)
    assert (repo / "manifests" / "data-stewards.yaml").is_file()
    applied = ok(gov.run("apply", "plan.json", "--auto-approve"))
    assert f"Apply: {total} applied, 0 failed, 0 skipped, 0 uncertain" in applied.out, applied
    entries = state_entries(gov)
    assert sorted(entries) == sorted(addresses)
    assert all(e["status"] == "applied" and e["id"] for e in entries.values()), entries
    objects = server.objects()
    for address, entry in entries.items():
        kind, name = address.split("/", 1)
        [obj] = [o for o in objects.get(kind, []) if o.get("name") == name]
        assert object_id(kind, obj) == entry["id"], (address, entry, obj)
    owners = on_server(server, "Policy", "mask-pii")["owners"]
    assert [o["group"]["name"] for o in owners] == ["data-stewards"], owners
    hook = on_server(server, "Hook", "ticket_check")
    assert hook["timeoutMs"] == 5000
    hooks_before = len(objects["Hook"])

    # -- pull request 2: tune-hook, one field of one hook ---------------------------
    git(repo, "checkout", "-q", "-b", "tune-hook")
    text = policies.read_text()
    assert text.count("timeoutMs: 5000") == 1
    policies.write_text(text.replace("timeoutMs: 5000", "timeoutMs: 8000"))
    commit_all(repo, "ticket_check: 8 s timeout")

    plan = plan_json(gov)
    assert plan["summary"] == {"create": 0, "update": 1, "no-op": total - 1, "blocked": 0,
                               "orphan": 0, "uncertain": 0, "move": 0, "import": 0, "delete": 0,
        "replace": 0, "forget": 0}, plan["summary"]
    [update] = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert update["address"] == "Hook/ticket_check" and update["action"] == "update"
    assert update["fields"] == ["timeoutMs"], update
    ok(gov.run("plan", "manifests", "--detailed-exitcode"), 2)
    ok(gov.run("plan", "manifests", "--out", "plan.json"))

    merge(repo, "tune-hook", 2)
    applied = ok(gov.run("apply", "plan.json", "--auto-approve"))
    assert "Apply: 1 applied, 0 failed" in applied.out, applied
    tuned = on_server(server, "Hook", "ticket_check")
    assert tuned["timeoutMs"] == 8000
    assert tuned["id"] == hook["id"], "an update, not a new hook"
    assert len(server.objects()["Hook"]) == hooks_before
    ok(gov.run("plan", "manifests", "--detailed-exitcode"), 0)

    # -- the scheduled drift check ---------------------------------------------------
    in_sync = ok(gov.run("drift", "manifests"))
    assert "In sync." in in_sync.out, in_sync

    # Someone deletes the example policy's owner group on the server.
    server.stop()
    with sqlite3.connect(server.db) as db:
        deleted = db.execute("DELETE FROM objects WHERE kind = 'Group' AND id = ?",
                             (INIT_GROUP[0],)).rowcount
    db.close()
    assert deleted == 1
    gov.endpoint = server.start(seed=False).url  # the seed would bring the group back
    assert INIT_GROUP[1] not in {g["name"] for g in server.objects()["Group"]}
    drifted = ok(gov.run("drift", "manifests"), 2)
    assert "Live check groups: failed" in drifted.out, drifted
    assert f"'{INIT_GROUP[1]}'" in drifted.out and "Policy/writes-need-ticket" in drifted.out
    assert "data-stewards" not in drifted.out.split("Live check groups")[1]

    # -- pull request 3: many hooks; two applies at once ----------------------------
    # The group is back (the seed restores it) and the server now answers slowly.
    server.stop()
    server.flags = ["--latency-ms", str(LATENCY_MS)]
    gov.endpoint = server.start().url
    ok(gov.run("drift", "manifests"))

    git(repo, "checkout", "-q", "-b", "more-hooks")
    (repo / "manifests" / "batch-hooks.yaml").write_text(batch_manifests(BATCH_HOOKS))
    commit_all(repo, f"{BATCH_HOOKS} more hooks")
    saved = ok(gov.run("plan", "manifests", "--out", "plan.json"))
    assert f"Plan: {BATCH_HOOKS} to create, 0 to update" in saved.out, saved
    merge(repo, "more-hooks", 3)

    first = gov.popen("apply", "plan.json", "--auto-approve", "--parallelism", "2")
    assert first.wait_for_line(applying), first.result()
    asked = time.monotonic()
    second = gov.run("apply", "plan.json", "--auto-approve")
    took = time.monotonic() - asked
    assert first.proc.poll() is None, "the first apply ended before the second one tried"
    assert second.code == 1, second
    assert took < 10, f"refused after {took:.1f}s, not at once"
    message = second.err
    assert "is locked by" in message, second
    assert f"{user()}@{socket.gethostname()} pid {first.proc.pid}" in message, second
    assert "wait for it to finish" in message and "--lock-timeout" in message, second
    assert "govsync state unlock" in message, second
    assert "Apply:" not in second.out, second

    assert first.finish() == 0, first.result()
    assert f"Apply: {BATCH_HOOKS} applied, 0 failed" in first.out, first.result()
    batch = sorted(h["name"] for h in server.objects()["Hook"] if h["name"].startswith("batch_"))
    assert batch == sorted(f"batch_{i}" for i in range(BATCH_HOOKS))
    # The plan was applied once: running it again is refused (it applies at most once).
    again = ok(gov.run("apply", "plan.json", "--auto-approve"), 1)
    assert "was applied already" in again.err, again
    final = ok(gov.run("drift", "manifests"))
    assert "In sync." in final.out, final

    for value in SECRETS.values():
        assert not any(value in text for text in gov.transcript)
    assert time.monotonic() - started < 120
