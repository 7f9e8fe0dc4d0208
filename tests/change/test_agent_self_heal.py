"""The agent's cycle with ``selfHeal: true`` (contract section 12): an outside change is
put back by the cycle's apply, under the same freeze windows and pause as any apply;
without ``selfHeal`` it is reported (``Drifted``), never reverted."""

from __future__ import annotations

import logging

import pytest
from refreshkit import LOCAL_DB, Gov, console_adds_a_host, copy_examples, hosts, write

from govsync import project
from govsync.agent import journal
from govsync.agent.cycle import Target, run
from govsync.agent.metrics import Metrics
from govsync.agentconfig import AgentSettings
from govsync.project import Selection
from govsync.settings import Settings
from govsync.statuses import Status


def target_of(gov: Gov, heal: bool) -> Target:
    write(gov.folder, "govsync.yaml", f"""\
        apiVersion: govsync/v1
        kind: Project
        paths: [manifests/]
        selfHeal: {str(heal).lower()}
        """)
    loaded = project.load(str(gov.folder / "govsync.yaml"))
    settings = Settings(endpoint="local", state=gov.state, workspace=gov.workspace,
                        local_db=str(gov.folder / LOCAL_DB),
                        environ=gov.env, selection=Selection(loaded, None))
    return Target("default", settings, AgentSettings(auto_apply=True))


def test_the_agent_puts_back_an_outside_change_only_with_self_heal(
        gov: Gov, caplog: pytest.LogCaptureFixture) -> None:
    copy_examples(gov.folder)
    target = target_of(gov, heal=False)
    gov.ok("apply", "--auto-approve")
    console_adds_a_host(gov)
    reported = run(target, revision="r1", paused=None, frozen=None)
    assert reported.status == Status.DRIFTED and "exfil.example.net" in hosts(gov)

    target = target_of(gov, heal=True)
    frozen = run(target, revision="r1", paused=None, frozen="* * * * *")
    assert "freeze window" in frozen.reason and "exfil.example.net" in hosts(gov)
    paused = run(target, revision="r1", paused={"by": "alice", "reason": "incident"},
                 frozen=None)
    assert paused.status == Status.PAUSED and "exfil.example.net" in hosts(gov)
    healed = run(target, revision="r1", paused=None, frozen=None)
    assert healed.applied, healed.reason
    assert "exfil.example.net" not in hosts(gov)
    # A self-heal leaves a trace (issue 43, finding 8): counted as the Drifted cycle it
    # was in the metrics, said in the journal, and kept in the cycle's record.
    metrics = Metrics()
    with caplog.at_level(logging.INFO, logger="govsync.agent.journal"):
        journal.cycle_ended(reported, healed, ran=True)
    metrics.observe(healed, ran=True)
    text = metrics.text().decode()
    assert 'govsync_cycles_total{environment="default",status="Drifted"} 1.0' in text, text
    assert 'govsync_healed_objects_total{environment="default"} 1.0' in text, text
    assert 'govsync_environment_status{environment="default",status="Synced"} 1.0' in text
    assert ("agent: default: self-heal at r1: put back 1 object(s) changed outside govsync"
            in caplog.text), caplog.text
    assert healed.record()["healed"] == 1
    again = run(target, revision="r1", paused=None, frozen=None)
    assert again.status == Status.SYNCED, again.reason


def test_an_apply_for_a_git_change_puts_back_outside_changes_too(gov: Gov) -> None:
    """As Argo CD's automated sync: without selfHeal the agent is OutOfSync for a git
    change, and its apply puts back what changed outside govsync with it."""
    manifests = copy_examples(gov.folder)
    target = target_of(gov, heal=False)
    gov.ok("apply", "--auto-approve")
    console_adds_a_host(gov)
    hooks = manifests / "hooks.yaml"
    hooks.write_text(hooks.read_text().replace("timeoutMs: 5000", "timeoutMs: 4000", 1))
    applied = run(target, revision="r2", paused=None, frozen=None)
    assert applied.applied, applied.reason
    assert "exfil.example.net" not in hosts(gov)
    again = run(target, revision="r2", paused=None, frozen=None)
    assert again.status == Status.SYNCED, again.reason


def test_a_console_value_copied_into_git_is_recorded_by_the_agent(gov: Gov) -> None:
    """Issue 43, finding 8: git now says what the console set; without selfHeal the
    agent records it (nothing is sent) and the environment is Synced, not Drifted."""
    manifests = copy_examples(gov.folder)
    target = target_of(gov, heal=False)
    gov.ok("apply", "--auto-approve")
    console_adds_a_host(gov)
    hooks = manifests / "hooks.yaml"
    host = "    - risk.northwind.internal\n"
    hooks.write_text(hooks.read_text().replace(host, host + "    - exfil.example.net\n", 1))
    assert "exfil.example.net" in hooks.read_text()
    recorded = run(target, revision="r3", paused=None, frozen=None)
    assert recorded.found == Status.DRIFTED and recorded.healed == 0, recorded.reason
    assert recorded.status == Status.SYNCED, recorded.reason
    assert "exfil.example.net" in hosts(gov)
