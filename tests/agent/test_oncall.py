"""The agent as an on-call engineer operates it (issue 34, finding 7): what its log
says, what it says when it cannot start, what /readyz and the API say after a
restart, what its pages show first, and a partial apply.  In process (``agent
--once`` through click's CliRunner) where no real process is the point."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from agentkit import Agent, Receiver, Repo, hooks
from click.testing import CliRunner, Result
from test_web import TOKEN, client

from govsync.agent import Agent as AgentInProcess
from govsync.agent import Options
from govsync.agentweb import create_app
from govsync.cli import cli as main
from govsync.project import SettingValue
from testkit import free_port

STAGING = ("apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n{top}"
           "environments:\n  staging:\n    agent: {{autoApply: true}}\n")


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("GOVSYNC_")]:
        monkeypatch.delenv(name)


def once(*extra: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["agent", "--once", *extra], env=env,
                              catch_exceptions=False)


def write(folder: Path, project: str, names: list[str]) -> None:
    (folder / "manifests").mkdir(parents=True, exist_ok=True)
    (folder / "govsync.yaml").write_text(project)
    (folder / "manifests" / "hooks.yaml").write_text(hooks(names))


def test_info_logs_say_each_cycle_status_change_apply_and_notification(tmp_path: Path) -> None:
    sink = Receiver()
    top = ("agent:\n  notify:\n    - {type: webhook, name: ops, url: {fromEnv: ALERT_URL}, "
           "events: [applied, synced]}\n")
    write(tmp_path, STAGING.format(top=top), ["a1", "a2"])
    try:
        done = once("--endpoint", "local", "--state", "state.db", "--allow-sink-host",
                    "127.0.0.1", env={"GOVSYNC_LOG": "info", "ALERT_URL": sink.url + "/h"})
    finally:
        sink.close()
    assert done.exit_code == 0, done.output
    logged = done.stderr
    assert "agent: staging: cycle at" in logged and "Synced" in logged, logged
    assert "agent: staging: status unknown -> Synced" in logged, logged
    assert "agent: staging: apply at -: 2 applied" in logged, logged
    assert "agent: staging: notification applied to ops sent" in logged, logged
    assert "agent: staging: notification synced to ops sent" in logged, logged


def test_sigterm_is_logged(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", STAGING.format(top=""))
    repo.commit({"manifests/hooks.yaml": hooks(["s1"])})
    agent = Agent(repo, tmp_path / "run", endpoint="local", env={"GOVSYNC_LOG": "info"})
    try:
        agent.wait(lambda e: e["staging"]["status"] == "Synced", what="a cycle")
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.proc.wait(timeout=30) == 0
    finally:
        agent.stop()
    logged = agent.log.read_text()
    assert "agent: SIGTERM received: finishing the calls in flight" in logged, logged


def test_a_repository_that_is_not_there_is_said_once_and_exits_1(tmp_path: Path) -> None:
    done = once("--repo", str(tmp_path / "nonexistent"), "--checkout", "co",
                "--endpoint", "local", "--state", "state.db")
    assert done.exit_code == 1
    assert done.stderr.count("does not exist") == 1, done.stderr
    assert "cannot update the checkout of" in done.stderr
    assert "error: the agent did not start (1 problem(s) above)" in done.stderr


def test_a_project_file_with_mistakes_lists_each_at_its_line_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\nenvironments:\n  prod:\n"
        "    agent: {autoApply: maybe}\n  staging:\n    agent: {interval: soon}\n")
    done = once("--endpoint", "local", "--state", "state.db")
    assert done.exit_code == 1
    lines = done.stderr.splitlines()
    assert any(line.startswith("govsync.yaml:5:24: agent.autoApply") for line in lines), lines
    assert any(line.startswith("govsync.yaml:7:") and "interval" in line for line in lines), lines
    assert lines[-1].startswith("error: the agent did not start (2 problem(s) above)"), lines


def test_a_relative_repo_keeps_working_on_the_next_run(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Repo(tmp_path / "repo", STAGING.format(top=""))
    repo.commit({"manifests/hooks.yaml": hooks(["r1"])})
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    args = ("--repo", "../repo", "--checkout", "co", "--endpoint", "local", "--state", "s.db")
    first = once(*args)
    assert first.exit_code == 0, first.output
    second = once(*args)
    assert second.exit_code == 0, second.output
    assert "staging: Synced" in second.output


def readyz(agent: AgentInProcess) -> int:
    web = client(create_app(agent, token=TOKEN, webhook_secret=None))
    answer = web.get("/readyz")
    assert set(answer.json()) == {"status"}  # nothing more
    return answer.status_code


def test_readyz_is_not_ready_while_the_repository_cannot_be_fetched(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", STAGING.format(top=""))
    repo.commit({"manifests/hooks.yaml": hooks(["q1"])})
    options = Options(repo=str(tmp_path / "repo"), checkout=str(tmp_path / "co"),
                      endpoint=SettingValue("local", "option", "--endpoint", ""),
                      state=SettingValue(str(tmp_path / "s.db"), "option", "--state", ""))
    agent = AgentInProcess(options, {})
    assert agent.run(once=True) == 0 and readyz(agent) == 200
    (tmp_path / "repo").rename(tmp_path / "gone")
    agent = AgentInProcess(options, {})
    agent.run(once=True)
    assert readyz(agent) == 503


def test_readyz_is_not_ready_while_no_endpoint_is_reachable(tmp_path: Path) -> None:
    write(tmp_path, STAGING.format(top=""), ["e1"])

    def agent_on(endpoint: str) -> AgentInProcess:
        return AgentInProcess(Options(
            project=str(tmp_path / "govsync.yaml"),
            endpoint=SettingValue(endpoint, "option", "--endpoint", ""),
            state=SettingValue(str(tmp_path / "s.db"), "option", "--state", "")),
            {"GOVSYNC_API_KEY": "k"})

    down = agent_on(f"http://127.0.0.1:{free_port()}")
    down.run(once=True)
    assert readyz(down) == 503
    up = agent_on("local")
    up.run(once=True)
    assert readyz(up) == 200


def test_status_and_last_apply_are_restored_at_start_and_kept_across_cycles(
        tmp_path: Path) -> None:
    write(tmp_path, STAGING.format(top=""), ["h1", "h2"])
    options = Options(project=str(tmp_path / "govsync.yaml"),
                      endpoint=SettingValue("local", "option", "--endpoint", ""),
                      state=SettingValue(str(tmp_path / "s.db"), "option", "--state", ""))
    first = AgentInProcess(options, {})
    assert first.run(once=True) == 0
    applied = first.environment("staging")
    assert applied is not None and applied["lastApply"]["ok"] is True
    assert applied["lastApply"]["summary"] == {"applied": 2}
    # A restart: before its first cycle ends, the status and the apply it recorded.
    again = AgentInProcess(options, {})
    again.recall()
    shown = again.environment("staging")
    assert shown is not None and shown["status"] == "Synced"
    assert shown["lastApply"] == applied["lastApply"]
    # Its own cycle, which applies nothing, keeps the last apply.
    assert again.run(once=True) == 0
    after = again.environment("staging")
    assert after is not None and after["lastApply"] == applied["lastApply"]
    assert after["lastCycle"]["applied"] is None


def satellite(kind: str) -> str:
    return ("apiVersion: govsync/v1\nkind: Satellite\nmetadata: {name: sat-1}\n"
            f"spec:\n  satelliteType: {kind}\n---\n")


CONNECTOR = ("apiVersion: govsync/v1\nkind: Connector\n"
             "metadata: {name: conn-1, dependsOn: [Satellite/sat-1]}\nspec: {}\n---\n")


@pytest.mark.parametrize("partial", [True, False])
def test_a_blocked_change_holds_back_only_what_depends_on_it_when_opted_in(
        tmp_path: Path, partial: bool) -> None:
    flag = ", partialApply: true" if partial else ""
    project = ("apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n"
               "agent:\n  notify:\n    - {type: webhook, name: ops, url: {fromEnv: ALERT_URL}, "
               "events: [blocked]}\n"
               f"environments:\n  staging:\n    agent: {{autoApply: true{flag}}}\n")
    write(tmp_path, project, ["h1"])
    (tmp_path / "manifests" / "spaces.yaml").write_text(satellite("data_discovery"))
    sink = Receiver()
    args = ("--endpoint", "local", "--state", "s.db", "--allow-sink-host", "127.0.0.1")
    env = {"ALERT_URL": sink.url + "/h"}
    try:
        assert once(*args, env=env).exit_code == 0
        # The satellite's type cannot change (blocked); the connector depends on the
        # satellite; the hook h2 needs neither.
        (tmp_path / "manifests" / "spaces.yaml").write_text(satellite("ai") + CONNECTOR)
        (tmp_path / "manifests" / "hooks.yaml").write_text(hooks(["h1", "h2"]))
        done = once(*args, env=env)
    finally:
        sink.close()
    [message] = sink.payloads()
    assert message["status"] == "Blocked"
    assert ("held back 2 change(s): Satellite/sat-1, Connector/conn-1" in message["reason"]) is partial
    assert done.exit_code == 2, done.output
    assert "staging: Blocked" in done.output
    options = Options(project=str(tmp_path / "govsync.yaml"),
                      endpoint=SettingValue("local", "option", "--endpoint", ""),
                      state=SettingValue(str(tmp_path / "s.db"), "option", "--state", ""))
    shown = AgentInProcess(options, {})
    shown.recall()
    found = shown.environment("staging")
    assert found is not None and found["status"] == "Blocked"
    listed = found["lastCycle"]["heldBack"]
    summary = found["lastCycle"]["summary"]
    if partial:
        assert listed == ["Satellite/sat-1", "Connector/conn-1"] == found["heldBack"]
        assert "held back 2 change(s): Satellite/sat-1, Connector/conn-1" in done.output
        assert found["lastApply"]["summary"] == {"applied": 1}  # h2
        assert summary == {"blocked": 1, "create": 1, "no-op": 2}, summary
    else:
        assert listed == [] and "held back" not in done.output
        assert summary.get("create") == 2, summary  # h2 waits too


def test_an_environment_on_an_endpoint_the_operator_did_not_allow_is_sent_nothing(
        tmp_path: Path) -> None:
    """--allow-endpoint: a commit pointing an environment at a host of its choosing
    (with a key variable of its choosing) gets an Error status and not one connection;
    the endpoints allowed, and the embedded server, work as before."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    evil = f"http://127.0.0.1:{listener.getsockname()[1]}"
    write(tmp_path, STAGING.format(top="").replace(
        "  staging:\n", f"  staging:\n    endpoint: {evil}\n"
                        "    apiKey: {fromEnv: SOME_SECRET}\n"), ["e1"])
    try:
        done = once("--state", "state.db", "--allow-endpoint", "https://api.example.com",
                    env={"SOME_SECRET": "not-for-them"})
        assert done.exit_code == 1, done.output
        assert (f"staging: Error (its endpoint {evil} is not one this agent may reach: "
                "nothing was sent to it") in done.output
        with pytest.raises(TimeoutError):
            listener.accept()  # no connection was made
    finally:
        listener.close()
    # The same project with its endpoint allowed (here the embedded server) runs.
    write(tmp_path, STAGING.format(top="").replace("  staging:\n",
                                                   "  staging:\n    endpoint: local\n"),
          ["e1"])
    again = once("--state", "state.db", "--allow-endpoint", "https://api.example.com")
    assert again.exit_code == 0, again.output
    assert "staging: Synced" in again.output
