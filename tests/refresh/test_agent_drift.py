"""The agent's cycle (the same plan as the command line) reads the server: an outside
change makes the environment ``Drifted`` within one cycle, with its notification event
and its count in /metrics."""

from __future__ import annotations

from refreshkit import LOCAL_DB, Gov, console_edit, copy_examples, write

from govsync import project
from govsync.agent.cycle import Target, run
from govsync.agent.metrics import Metrics
from govsync.agentconfig import AgentSettings, Event
from govsync.project import Selection
from govsync.settings import Settings
from govsync.statuses import Status


def cycle_of(gov: Gov) -> Target:
    loaded = project.load(str(gov.folder / "govsync.yaml"))
    settings = Settings(endpoint="local", state=gov.state, workspace=gov.workspace,
                        local_db=str(gov.folder / LOCAL_DB),
                        environ=gov.env, selection=Selection(loaded, None))
    return Target("default", settings, AgentSettings())


def test_an_outside_change_makes_the_environment_drifted(gov: Gov) -> None:
    copy_examples(gov.folder)
    write(gov.folder, "govsync.yaml", """\
        apiVersion: govsync/v1
        kind: Project
        paths: [manifests/]
        """)
    gov.ok("apply", "--auto-approve")
    target = cycle_of(gov)
    synced = run(target, revision="r1", paused=None, frozen=None)
    assert synced.status == Status.SYNCED, synced.reason
    hook = next(e for e in gov.entries().values() if e["address"] == "Hook/risk_score")
    console_edit(gov, "Hook", hook["id"])
    drifted = run(target, revision="r1", paused=None, frozen=None)
    assert drifted.status == Status.DRIFTED, drifted.reason
    assert drifted.reason == "1 object(s) changed outside govsync, 0 missing on the server"
    assert drifted.events() == [Event.DRIFTED]
    assert drifted.as_dict()["driftedObjects"] == 1
    metrics = Metrics()
    metrics.observe(drifted, ran=True)
    text = metrics.text().decode()
    assert 'govsync_drifted_objects{environment="default"} 1.0' in text
    assert 'govsync_environment_status{environment="default",status="Drifted"} 1.0' in text
