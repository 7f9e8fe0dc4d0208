"""The agent checks the code it would send and runs an environment's policy tests before an automatic apply (contract
section 13) and stays ``Blocked`` while a case fails: nothing is sent.  A commit that
mends the test lets the next cycle apply.  A real agent process against the reference
server and a git repository the test commits to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import KEY, Agent, Repo, hooks

from testkit import ROOT, Served, policy_head

pytestmark = pytest.mark.slow

POLICY = policy_head("hours") + """\
    package formal.v2

    import future.keywords.if

    session := {"action": "block", "reason": "contractors"} if {
      input.user.type == "contractor"
    }
---
apiVersion: govsync/v1
kind: PolicyTest
metadata: {name: hours-test}
spec:
  policyRef: hours
  cases:
    - name: a contractor is blocked
      stage: session
      input: {user: {username: cy, type: contractor}}
      expect: {action: EXPECTED}
"""


def objects(url: str, kind: str = "Hook") -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}, timeout=10)
    return list(answer.json().get(kind, []))


def policies(url: str) -> list[dict[str, Any]]:
    return objects(url, "Policy")


def test_a_failing_policy_test_blocks_the_automatic_apply_until_it_passes(
        tmp_path: Path) -> None:
    served = Served(["--api-key", KEY, "--seed", str(ROOT / "examples/server-seed.yaml")])
    server = served.url
    repo = Repo(tmp_path / "repo", "apiVersion: govsync/v1\nkind: Project\n"
                "paths: [manifests/]\nenvironments:\n  staging:\n"
                "    agent: {autoApply: true}\n")
    repo.commit({"manifests/policy.yaml": POLICY.replace("EXPECTED", "allow")})
    agent = Agent(repo, tmp_path / "run", endpoint=server)
    try:
        found = agent.wait(lambda e: e["staging"]["status"] == "Blocked",
                           what="the failing case to block the apply")
        reason = found["staging"]["reason"]
        assert "1 policy test case(s) fail" in reason, reason
        assert "manifests/policy.yaml:" in reason and "'a contractor is blocked'" in reason
        assert policies(server) == []  # nothing sent while a case fails
        revision = repo.commit({"manifests/policy.yaml": POLICY.replace("EXPECTED", "block")})
        agent.wait(lambda e: e["staging"]["revision"] == revision
                   and e["staging"]["status"] == "Synced", what="the mended test")
        assert [p["name"] for p in policies(server)] == ["hours"]
    finally:
        assert agent.stop() == 0
        served.stop()


def test_code_that_does_not_compile_is_not_taken_live(tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", "apiVersion: govsync/v1\nkind: Project\n"
                "paths: [manifests/]\nenvironments:\n  staging:\n"
                "    agent: {autoApply: true}\n")
    broken = hooks(["h1"]).replace("return 1;", "return (1;")
    repo.commit({"manifests/hooks.yaml": broken})
    agent = Agent(repo, tmp_path / "run", endpoint=server)
    try:
        found = agent.wait(lambda e: e["staging"]["status"] == "Blocked",
                           what="the code error to block the apply")
        reason = found["staging"]["reason"]
        assert "1 error(s) in policy or hook code" in reason, reason
        assert "manifests/hooks.yaml:7:" in reason and "JavaScript" in reason, reason
        assert objects(server) == []
        revision = repo.commit({"manifests/hooks.yaml": hooks(["h1"])})
        agent.wait(lambda e: e["staging"]["revision"] == revision
                   and e["staging"]["status"] == "Synced", what="the mended code")
        assert [h["name"] for h in objects(server)] == ["h1"]
    finally:
        assert agent.stop() == 0
