"""prod's endpoint written another way is prod's endpoint (issue 41, finding 1).

prod records two approvals at its first apply, against its server at
``http://127.0.0.1:P``.  An attacker with commit access adds an environment on
prod's state whose endpoint is that server written another way (``localhost``,
a dot segment, a trailing dot, upper case, the default path ``/``), imports
prod's hook by its id and then deletes it with a ``Removed`` document.  Each
spelling is prod's governed endpoint: the new workspace's first apply needs
prod's approvals, and the hook stays on the server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from govkit import Repo
from test_binding import governed

from govsync.state import open_store
from testkit import drop_pg_workspaces

SNEAK = """\
  sneak:
    paths: [sneak/]
    workspace: {workspace}
    endpoint: {endpoint}
    state: {state}
"""

# prod's hook as prod's patch makes it: importing it asks for no change.
TWIN = """\
apiVersion: govsync/v1
kind: Hook
metadata: {{name: risk}}
spec:
  code: "def handler(e):\\n    return 1\\n"
  timeoutMs: 1500
  status: active
  description: production
---
apiVersion: govsync/v1
kind: Import
metadata: {{name: take-risk}}
spec: {{to: Hook/risk, id: {id}}}
"""

REMOVED = """\
apiVersion: govsync/v1
kind: Removed
metadata: {name: drop-risk}
spec: {from: Hook/risk, destroy: true}
"""


@pytest.fixture(autouse=True)
def _cleanup(repo: Repo) -> Iterator[None]:
    yield
    if repo.state.startswith("postgresql"):
        drop_pg_workspaces(repo.state, [f"sneak-{repo.suffix}"])


def sneak(repo: Repo, endpoint: str) -> dict[str, str]:
    """The attacker's commit: environment ``sneak`` on prod's state, its endpoint prod's
    server written as ``endpoint``, importing prod's hook by its id.  The environment
    its runs see (the project's endpoint, not GOVSYNC_ENDPOINT)."""
    project = repo.root / "govsync.yaml"
    entry = SNEAK.format(workspace=f"sneak-{repo.suffix}", endpoint=json.dumps(endpoint),
                         state=json.dumps(repo.state))
    project.write_text(project.read_text().replace("rules:", entry + "rules:", 1))
    (repo.root / "sneak").mkdir()
    (repo.root / "sneak" / "risk.yaml").write_text(TWIN.format(id=repo.hooks()["risk"]["id"]))
    env = repo.environ()
    del env["GOVSYNC_ENDPOINT"]
    return env


@pytest.mark.parametrize("spelling", [
    "http://localhost:{port}",
    "http://127.0.0.1:{port}/.",
    "HTTP://LocalHost:{port}/api/../",
    "http://127.0.0.1:{port}//?x=1#y",
])
def test_prods_server_written_another_way_is_prods_governed_endpoint(
        repo: Repo, spelling: str) -> None:
    governed(repo)
    hook = repo.hooks()["risk"]
    env = sneak(repo, spelling.format(port=repo.server.port))
    planned = repo.gov("plan", "--env", "sneak", env=env)
    # Two walls: the endpoint is prod's governed one, and the hook is prod's workspace's.
    assert planned.code == 1, planned
    assert f"is governed by workspace {repo.prod!r}" in planned.out, planned
    assert f"is recorded by workspace {repo.prod!r}" in planned.out, planned
    imported = repo.gov("apply", "--env", "sneak", "--auto-approve", env=env)
    assert imported.code == 1, imported
    assert f"is recorded by workspace {repo.prod!r}" in imported.err, imported
    # Nothing else kept it back: prod's approvals do too (the endpoint is prod's).
    (repo.root / "sneak" / "risk.yaml").write_text(TWIN.format(id="x").split("---")[0])
    created = repo.gov("apply", "--env", "sneak", "--auto-approve", "--refresh=false", env=env)
    assert created.code == 1, created
    assert f"workspace {repo.prod!r}" in created.err and "nothing was sent" in created.err
    # The second commit: the hook removed with a Removed document.
    (repo.root / "sneak" / "risk.yaml").write_text(REMOVED)
    deleted = repo.gov("apply", "--env", "sneak", "--auto-approve", env=env)
    assert deleted.code == 1, deleted
    assert "Traceback" not in deleted.err
    assert repo.hooks()["risk"]["id"] == hook["id"]  # prod's hook is where it was


def test_the_recorded_endpoint_written_another_way_is_the_recorded_one(repo: Repo) -> None:
    """The state's endpoint against the configured one (--allow-endpoint-change), in one
    spelling: ``http://127.0.0.1:P/.`` is the recorded ``http://127.0.0.1:P``; a name
    for its address is another endpoint (another name may be another virtual host)."""
    first = repo.gov("apply", "--env", "staging", "--auto-approve")
    assert first.code == 0, first
    repo.set_timeout(2500)
    port = repo.server.port
    for spelling in (f"http://127.0.0.1:{port}/.", f"HTTP://127.0.0.1:{port}/x/../"):
        env = repo.environ(GOVSYNC_ENDPOINT=spelling)
        planned = repo.gov("plan", "--env", "staging", env=env)
        assert planned.code == 0 and "was applied against" not in planned.out, planned
        assert "Check refresh: passed" in planned.out, planned
    applied = repo.gov("apply", "--env", "staging", "--auto-approve",
                       env=repo.environ(GOVSYNC_ENDPOINT=f"http://127.0.0.1:{port}/."))
    assert applied.code == 0, applied
    assert repo.hooks()["risk"]["timeoutMs"] == 2500
    project = repo.root / "govsync.yaml"
    project.write_text(project.read_text().replace("timeout: 2500", "timeout: 3000"))
    moved = repo.gov("apply", "--env", "staging", "--auto-approve",
                     env=repo.environ(GOVSYNC_ENDPOINT=f"http://localhost:{port}"))
    assert moved.code == 1 and "--allow-endpoint-change" in moved.err, moved
    assert repo.hooks()["risk"]["timeoutMs"] == 2500
    with open_store(repo.state) as store:  # recorded once, as first spelled
        assert store.snapshot(repo.staging, create=False).endpoint == repo.url
