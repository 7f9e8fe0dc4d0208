"""Governance bound to the endpoint it protects (issue 30, finding 2).

prod records its approvals at its first apply.  An attacker with commit access
then adds an environment, or renames prod's workspace, onto prod's endpoint
and state, without approvals: the first apply of the new workspace needs prod's
recorded approvals (or is refused, naming prod), on the command line and
through the merge job's ``apply --reviewed``; the server never holds an object
twice."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from govkit import Repo
from test_binding import governed

from testkit import drop_pg_workspaces

FAST = """\
  prod-fast:
    paths: [manifests/, envs/prod/]
    workspace: {workspace}
    state: {state}
    agent: {{autoApply: true}}
"""


@pytest.fixture(autouse=True)
def _cleanup(repo: Repo) -> Iterator[None]:
    """The workspaces these attacks make, dropped from a shared PostgreSQL database."""
    yield
    if repo.state.startswith("postgresql"):
        drop_pg_workspaces(repo.state, [f"prod-fast-{repo.suffix}", f"prod2-{repo.suffix}"])


def add_environment(repo: Repo, name: str, workspace: str) -> None:
    """The attacker's commit: an environment on prod's endpoint and state, outside
    ``approvals.environments``."""
    project = repo.root / "govsync.yaml"
    text = project.read_text()
    entry = FAST.replace("prod-fast", name).format(workspace=workspace,
                                                   state=json.dumps(repo.state))
    project.write_text(text.replace("rules:", entry + "rules:", 1))


def test_a_new_environment_on_a_governed_endpoint_needs_its_approvals(repo: Repo) -> None:
    alice, bob = governed(repo)
    count = repo.count()
    add_environment(repo, "prod-fast", f"prod-fast-{repo.suffix}")
    # With the refresh, prod's objects are found on the server, recorded by prod's
    # workspace: not created again.
    seen = repo.gov("apply", "--env", "prod-fast", "--auto-approve")
    assert seen.code == 1 and "belong(s) to another workspace of this state" in seen.err, seen
    # Without it (or on an endpoint without reads) the governance binding alone stands.
    planned = repo.gov("plan", "--env", "prod-fast", "--refresh=false")
    assert planned.code == 0, planned
    assert f"workspace {repo.prod!r}" in planned.out, planned  # the plan says so
    refused = repo.gov("apply", "--env", "prod-fast", "--auto-approve", "--refresh=false")
    assert refused.code == 1, refused
    assert f"workspace {repo.prod!r}" in refused.err and "nothing was sent" in refused.err
    assert "Traceback" not in refused.err
    assert repo.count() == count  # no hook created a second time
    # prod's own signers sign the new workspace's plan: still no duplicate, the
    # refresh blocks the creates of what prod holds.
    plan = repo.root / "fast.json"
    assert repo.gov("plan", "--env", "prod-fast", "--out", str(plan)).code in (0, 1)
    for key in (alice, bob):
        assert repo.gov("approve", "--yes", str(plan), "--key", str(key)).code == 0
    applied = repo.gov("apply", "--env", "prod-fast", str(plan))
    assert applied.code == 1 and "belong(s) to another workspace of this state" in applied.err, applied
    assert repo.count() == count


def test_renaming_the_workspace_and_dropping_approvals_creates_nothing_twice(
        repo: Repo) -> None:
    governed(repo)
    count = repo.count()
    project = repo.root / "govsync.yaml"
    text = project.read_text()
    renamed = f"prod2-{repo.suffix}"
    project.write_text(text.replace(f"workspace: {repo.prod}", f"workspace: {renamed}")
                       [:text.index("approvals:")])
    seen = repo.gov("apply", "--env", "prod", "--auto-approve")
    assert seen.code == 1 and "belong(s) to another workspace of this state" in seen.err, seen
    # Without the refresh, the governance binding alone refuses.
    direct = repo.gov("apply", "--env", "prod", "--auto-approve", "--refresh=false")
    assert direct.code == 1, direct
    assert f"workspace {repo.prod!r}" in direct.err and "nothing was sent" in direct.err
    # The merge job: the pull request's plan, reviewed, applied with --reviewed.
    review = repo.root / "review.json"
    made = repo.gov("plan", "--env", "prod", "--out", str(review), "--refresh=false")
    assert made.code == 0, made
    merged = repo.gov("apply", "--env", "prod", "--reviewed", str(review), "--auto-approve",
                      "--refresh=false")
    assert merged.code == 1, merged
    assert f"workspace {repo.prod!r}" in merged.err and "nothing was sent" in merged.err
    assert repo.count() == count
    assert len(repo.objects()["Hook"]) == 1
