"""The agent measures impact where the environment's ``impact:`` asks for it (contract
section 13): with the cycle's plan, before its automatic apply, into its status (the JSON
API's cycle, the history record) and its notifications.  A cycle called directly, against
the reference server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from govsync import project
from govsync.agent.cycle import Cycle, Target, run
from govsync.agent.notifications import message_of
from govsync.agentconfig import Event
from govsync.project import Selection
from govsync.settings import Settings
from govsync.statuses import Status
from testkit import EXAMPLE_SEED, Served, policy_head

KEY = "k" * 32

POLICY = policy_head("analysts") + """\
    package formal.v2

    import future.keywords.if
    import future.keywords.in

    session := {"action": "block"} if {
      "analysts" in input.user.groups
    }
"""


@pytest.fixture
def server() -> Iterator[Served]:
    served = Served(["--api-key", KEY, "--seed", str(EXAMPLE_SEED)])
    try:
        yield served
    finally:
        served.stop()


def target(folder: Path, url: str, environment: str) -> Target:
    loaded = project.load(str(folder / "govsync.yaml"))
    selection = Selection(loaded, loaded.environment(environment))
    settings = Settings(endpoint=url, api_key=KEY, state=str(folder / "state.db"),
                        workspace=environment, environ={"PATH": "/usr/bin:/bin"},
                        selection=selection)
    return Target(environment, settings, loaded.agent(selection.environment))


def test_the_agent_measures_impact_before_its_automatic_apply(
        tmp_path: Path, server: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "policy.yaml").write_text(POLICY)
    lines = [{"time": "2026-11-20T09:00:00Z", "stage": "session",
              "input": {"user": {"username": f"u{i}", "groups": ["analysts"] if i < 3 else []},
                        "resource": {"name": "dwh"}}} for i in range(10)]
    (tmp_path / "rec.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\nagent: {autoApply: true}\n"
        "environments:\n  staging:\n    impact: {from: rec.jsonl}\n"
        "  prod: {agent: {autoApply: false}, impact: {from: rec.jsonl}}\n")
    # an environment that does not apply automatically: its plan creates the policy,
    # nothing is measured (its pull request's plan measures it)
    other = run(target(tmp_path, server.url, "prod"), revision="r1", paused=None,
                frozen=None)
    assert other.status == Status.OUT_OF_SYNC, other.reason
    assert other.impact == [] and "impact" not in other.record()
    assert "impact" not in message_of(other, "hook", Event.OUT_OF_SYNC, None).payload()
    cycle = run(target(tmp_path, server.url, "staging"), revision="r1", paused=None,
                frozen=None)
    assert cycle.applied is not None and cycle.applied.ok, cycle.reason
    assert cycle.impact == [{"address": "Policy/analysts", "known": True, "why": "",
                             "window": "all recorded", "source": "file", "newTotal": 3,
                             "recordedTotal": None, "evaluated": 10}]
    assert cycle.as_dict()["impact"] == cycle.impact
    record = cycle.record()
    assert record["impact"] == cycle.impact
    assert Cycle.from_record(record, "staging", "staging").impact == cycle.impact  # type: ignore[union-attr]
    message = message_of(cycle, "hook", Event.APPLIED, None)
    assert message.payload()["impact"] == cycle.impact
    assert "Policy/analysts decides 3 (new) of 10 logged requests other than allow" \
        in message.text()


def reports(url: str) -> int:
    answer = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}, timeout=10)
    return len(answer.json().get("PolicyReport", []))


def test_a_change_held_back_is_reported_on_once_not_every_cycle(
        tmp_path: Path, server: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy change the agent holds back (here a freeze window) is measured by the
    endpoint's reports once; later cycles reuse it, until its code changes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "policy.yaml").write_text(POLICY)
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\nagent: {autoApply: true}\n"
        "environments:\n  staging:\n    impact: {window: 7d}\n")
    held = target(tmp_path, server.url, "staging")
    for _ in range(3):
        cycle = run(held, revision="r1", paused=None, frozen="release")
        assert cycle.applied is None and cycle.impact[0]["known"] is True, cycle.reason
        assert cycle.impact[0]["source"] == "report"
    assert reports(server.url) == 1
    (tmp_path / "manifests" / "policy.yaml").write_text(POLICY.replace("analysts\" in",
                                                                       "contractors\" in"))
    cycle = run(held, revision="r2", paused=None, frozen="release")
    assert cycle.impact[0]["known"] is True and reports(server.url) == 2
