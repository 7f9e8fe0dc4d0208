"""The repository the agent follows is not trusted (issue 30, findings 2, 3 and 10):
an attacker with commit access commits, the agent (a process) follows the
branch, and the reference server (a process) never holds what the attacker
wanted."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agentkit import KEY, Repo, hooks, reconcile

from testkit import Run, drop_pg_workspaces, environ, govsync

pytestmark = pytest.mark.slow

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
environments:
  prod:
    workspace: {prod}
    agent: {{autoApply: false}}
approvals: {{required: 1, allowedSigners: allowed_signers, environments: [prod]}}
"""

# The attacker's commit: prod renamed (and set to apply by itself, approvals dropped),
# and a new environment on prod's endpoint and state that applies by itself.
ATTACK = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
environments:
  prod:
    workspace: {prod}2
    agent: {{autoApply: true}}
  prod-fast:
    workspace: {prod}-fast
    agent: {{autoApply: true}}
"""
POSTGRES = os.environ.get("GOVSYNC_TEST_POSTGRES", "")


def names(url: str) -> Counter[str]:
    answer = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}, timeout=10)
    return Counter(o["name"] for o in answer.json().get("Hook", []))


def gov(*args: str, cwd: Path, url: str) -> Run:
    return govsync(*args, cwd=cwd, env=environ({"GOVSYNC_API_KEY": KEY,
                                                "GOVSYNC_ENDPOINT": url}))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(the state, prod's workspace): SQLite beside the agent, or the test database."""
    prod = f"prod-{uuid.uuid4().hex[:8]}"
    if request.param == "sqlite":
        yield str(tmp_path / "state.db"), prod
        return
    if not POSTGRES:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    yield POSTGRES, prod
    drop_pg_workspaces(POSTGRES, [prod, f"{prod}2", f"{prod}-fast", f"{prod}-sneak"])


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_a_commit_cannot_move_an_environment_onto_prods_endpoint(
        tmp_path: Path, server: str, state: tuple[str, str]) -> None:
    """Finding 2 (A and B): prod records one approval; a commit renames prod's workspace
    and adds prod-fast, both applying by themselves on prod's endpoint and state.
    The agent plans neither until an operator accepts it, and then waits for prod's
    approvals: no hook is created a second time."""
    key = tmp_path / "ana"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ana", "-f",
                    str(key)], check=True)
    kind, b64 = (tmp_path / "ana.pub").read_text().split()[:2]
    state_url, prod = state
    repo = Repo(tmp_path / "repo", PROJECT.format(prod=prod))
    repo.commit({"manifests/hooks.yaml": hooks(["h1"]),
                 "allowed_signers": f"ana@example.com {kind} {b64}\n"})
    plan = tmp_path / "p.json"
    for step in (("plan", "--env", "prod", "--out", str(plan), "--state", state_url),
                 ("approve", "--yes", str(plan), "--key", str(key)),
                 ("apply", "--env", "prod", str(plan), "--state", state_url)):
        done = gov(*step, cwd=repo.root, url=server)
        assert done.code == 0, done
    assert names(server) == {"h1": 1}
    revision = repo.commit({"govsync.yaml": ATTACK.format(prod=prod),
                            "manifests/hooks.yaml": hooks(["h1", "h2"])}, "attack")
    found = reconcile(repo, tmp_path / "run", endpoint=server, state=state_url)
    for name in ("prod", "prod-fast"):
        assert found[name]["revision"] == revision and found[name]["status"] == "Blocked"
        assert "govsync agent accept" in found[name]["reason"], found[name]
        assert f"workspace {prod!r}" in found[name]["reason"], found[name]
    # An operator accepts prod-fast: planned now. Its workspace records nothing, and
    # h1 exists on prod's endpoint, so its create is blocked (refresh: no duplicate);
    # the apply of what remains would wait for prod's approvals (tests/governance).
    accepted = gov("agent", "accept", "prod-fast", "--reason", "test", "--state",
                   state_url, cwd=repo.root, url=server)
    assert accepted.code == 0, accepted
    for _ in range(2):  # a cycle, and the next
        found = reconcile(repo, tmp_path / "run", endpoint=server, state=state_url)
        assert "agent accept" not in found["prod-fast"]["reason"], found["prod-fast"]
        assert found["prod-fast"]["status"] == "Blocked", found["prod-fast"]
        assert found["prod-fast"]["lastCycle"]["summary"].get("blocked") == 1, found
        assert found["prod"]["status"] == "Blocked"
    assert names(server) == {"h1": 1}  # no new hook, nothing created twice


def test_a_committed_state_never_replaces_the_agents(tmp_path: Path, server: str) -> None:
    """Finding 3: the agent refuses a state inside its checkout (a commit of
    .govsync/state.db would replace it), naming the path and the fix."""
    repo = Repo(tmp_path / "repo", "apiVersion: govsync/v1\nkind: Project\n"
                "paths: [manifests/]\nenvironments:\n  staging:\n    agent: {autoApply: true}\n")
    repo.commit({"manifests/hooks.yaml": hooks(["s1"])})
    found = reconcile(repo, tmp_path / "run", endpoint=server, state=None)  # the default
    assert found["staging"]["status"] == "Error", found
    reason = found["staging"]["reason"]
    assert "inside the agent's checkout" in reason and "--state" in reason, reason
    assert os.path.join(".govsync", "state.db") in reason
    assert names(server) == Counter()
    assert not (tmp_path / "run" / "checkout" / ".govsync" / "state.db").exists()



SPELLED = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
environments:
  prod:
    workspace: {prod}
    endpoint: {url}
    agent: {{autoApply: false}}
{sneak}approvals: {{required: 1, allowedSigners: allowed_signers, environments: [prod]}}
"""
SNEAK = """\
  sneak:
    paths: [sneak/]
    workspace: {prod}-sneak
    endpoint: {endpoint}
    agent: {{autoApply: true}}
"""


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen is not installed")
def test_prods_endpoint_written_another_way_is_not_a_way_around_its_approvals(
        tmp_path: Path, server: str, state: tuple[str, str]) -> None:
    """Issue 41, finding 1, through the agent: two commits add an environment on prod's
    server written ``http://localhost:P``, importing prod's hook by its id, then delete
    it with a Removed document.  The agent shows it Blocked (an operator must accept
    it, and its first apply then needs prod's approvals): the hook stays."""
    key = tmp_path / "ana"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ana", "-f",
                    str(key)], check=True)
    kind, b64 = (tmp_path / "ana.pub").read_text().split()[:2]
    state_url, prod = state
    repo = Repo(tmp_path / "repo", SPELLED.format(prod=prod, url=server, sneak=""))
    repo.commit({"manifests/hooks.yaml": hooks(["h1"]),
                 "allowed_signers": f"ana@example.com {kind} {b64}\n"})
    plan = tmp_path / "p.json"
    for step in (("plan", "--env", "prod", "--out", str(plan), "--state", state_url),
                 ("approve", "--yes", str(plan), "--key", str(key)),
                 ("apply", "--env", "prod", str(plan), "--state", state_url)):
        done = gov(*step, cwd=repo.root, url=server)
        assert done.code == 0, done
    hook = httpx.get(f"{server}/_govsync/objects", headers={"X-API-KEY": KEY},
                     timeout=10).json()["Hook"][0]
    port = server.rsplit(":", 1)[1]
    project = SPELLED.format(prod=prod, url=server, sneak=SNEAK.format(
        prod=prod, endpoint=f"http://localhost:{port}"))
    first = repo.commit({"govsync.yaml": project, "sneak/h1.yaml": hooks(["h1"]) + (
        "apiVersion: govsync/v1\nkind: Import\nmetadata: {name: take}\n"
        f"spec: {{to: Hook/h1, id: {hook['id']}}}\n")}, "import prod's hook")
    found = reconcile(repo, tmp_path / "run", endpoint=None, state=state_url)["sneak"]
    assert found["revision"] == first and found["status"] == "Blocked", found
    assert "govsync agent accept" in found["reason"], found
    assert f"workspace {prod!r}" in found["reason"], found
    second = repo.commit({"sneak/h1.yaml": (
        "apiVersion: govsync/v1\nkind: Removed\nmetadata: {name: drop}\n"
        "spec: {from: Hook/h1, destroy: true}\n")}, "delete it")
    found = reconcile(repo, tmp_path / "run", endpoint=None, state=state_url)["sneak"]
    assert found["revision"] == second and found["status"] == "Blocked", found
    assert names(server) == {"h1": 1}  # prod's hook was neither deleted nor made again
