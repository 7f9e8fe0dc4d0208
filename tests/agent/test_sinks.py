"""The agent's notification sinks as an attacker uses them (issue 30, findings 1 and 7):
a commit that points a sink at another host or hands it govsync's own key, and a
sink that answers without end, or a byte at a time.

Where sinks may send is the operator's word (--allow-sink-host, --github-api, or
their variables); the repository's project file cannot widen it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from agentkit import KEY, Agent, Receiver, Repo, hooks

from govsync.agent.notify import Delivery, Message, Notifier
from govsync.agent.reach import SinkPolicy, proxy_of
from govsync.agentconfig import DEFAULT_EVENTS, Event, Sink, SinkType
from govsync.errors import AgentError
from govsync.values import SecretRef


def project(top: str) -> str:
    return ("apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n" + top
            + "environments:\n  prod: {}\n")


@pytest.mark.slow
def test_a_commit_cannot_send_a_sink_elsewhere_nor_show_what_a_sink_answered(
        tmp_path: Path, server: str) -> None:
    attacker = Receiver()
    ours = Receiver(fail=1, fail_body=b"internal-answer-canary")
    sinks = ("agent:\n  notify:\n"
             f"    - {{type: webhook, name: ssrf, url: '{attacker.url}/latest/meta-data'}}\n"
             "    - {type: github, name: exfil, repository: acme/gov, "
             f"token: {{fromEnv: GH_TOKEN}}, apiUrl: '{attacker.url}'}}\n"
             "    - {type: webhook, name: ops, url: {fromEnv: ALERT_URL}, events: [outOfSync]}\n")
    repo = Repo(tmp_path / "repo", project(sinks))
    repo.commit({"manifests/hooks.yaml": hooks(["s1"])})
    # The operator allows its own receiver only (through the variable, as a
    # container's environment would).
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="0.5s", env={
        "ALERT_URL": ours.url + "/hook", "GH_TOKEN": "gh-token-canary",
        "GOVSYNC_AGENT_SINK_HOSTS": f"localhost, 127.0.0.1:{ours.port}"})
    try:
        agent.wait(lambda e: e["prod"]["notifications"]["ops"]["sent"] == 1, timeout=60,
                   what="the allowed sink, after one failure")
        agent.cycles("prod", 3)  # a few more cycles
        found = agent.environments()
        assert attacker.attempts == 0, attacker.requests
        sinks_found = found["prod"]["notifications"]
        assert (f"host 127.0.0.1:{attacker.port} is not one this agent may send to: its "
                f"operator allows it with --allow-sink-host 127.0.0.1:{attacker.port}"
                ) in sinks_found["ssrf"]["refused"]
        assert "is not the GitHub API this agent was given" in sinks_found["exfil"]["refused"]
        assert "--github-api" in sinks_found["exfil"]["refused"]
        # What the sink answered is never shown: its status only.
        assert sinks_found["ops"]["lastError"] == "webhook sink ops answered 500"
        assert "canary" not in json.dumps(found) and "canary" not in agent.log.read_text()
        assert len(ours.payloads()) == 1
        assert "meta-data" not in json.dumps(found)  # nor the path of a refused URL
    finally:
        agent.stop()
        attacker.close()
        ours.close()


@pytest.mark.slow
def test_a_commit_cannot_give_a_sink_govsyncs_own_key(tmp_path: Path, server: str) -> None:
    github = Receiver()

    def sink(variable: str) -> str:
        return ("agent:\n  notify:\n    - {type: github, name: gh, repository: acme/gov, "
                f"token: {{fromEnv: {variable}}}, apiUrl: '{github.url}'}}\n")

    # The key under a name of the repository's choosing: refused by its value.
    repo = Repo(tmp_path / "repo", project(sink("KEY_COPY")))
    repo.commit({"manifests/hooks.yaml": hooks(["k1"])})
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="0.5s", env={
        "GOVSYNC_AGENT_GITHUB_API": github.url, "KEY_COPY": KEY})

    def sent_the_key() -> list[dict[str, Any]]:
        return [r for r in github.requests if KEY in json.dumps(r["headers"])]

    try:
        found = agent.wait(lambda e: e["prod"]["status"] == "OutOfSync", what="a first cycle")
        agent.cycles("prod", 2)
        assert sent_the_key() == []
        found = agent.environments()
        assert "its token reads KEY_COPY, which holds one of govsync's own credentials" in (
            found["prod"]["notifications"]["gh"]["refused"])
        # govsync's own variable by its name: the project is refused at its line.
        repo.commit({"govsync.yaml": project(sink("GOVSYNC_API_KEY"))})
        found = agent.wait(lambda e: e["prod"]["status"] == "Error", what="the project refused")
        assert "GOVSYNC_API_KEY is one of govsync's own settings" in found["prod"]["reason"]
        agent.cycles("prod", 2)
        assert github.requests == []
        assert KEY not in agent.log.read_text()
    finally:
        agent.stop()
        github.close()


# -- a sink that answers without end, or a byte at a time (in-process) ----------------

class Hostile:
    """A loopback HTTP server that answers every request with ``answer(conn)``; it
    stops by itself (every loop bounded in bytes or time)."""

    def __init__(self, answer: Any) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.answer = answer
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                self.answer(conn, self.done)
            except OSError:
                pass

    def close(self) -> None:
        self.done.set()
        self.sock.close()


def endless(conn: socket.socket, done: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
    for _ in range(1024):  # 64 MiB at most
        if done.is_set():
            return
        conn.sendall(chunk)


def trickle_body(conn: socket.socket, done: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n")
    for _ in range(200):  # 20 s at most
        if done.wait(0.1):
            return
        conn.sendall(b"x")


def trickle_headers(conn: socket.socket, done: threading.Event) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(200):
        if done.wait(0.1):
            return
        conn.sendall(b"x-a: b\r\n")


@pytest.mark.parametrize(("answer", "said"), [
    (endless, "webhook sink w: its answer is larger than 1024 KiB (not read)"),
    (trickle_body, "webhook sink w: no answer within 2 s"),
    (trickle_headers, "webhook sink w: no answer within 2 s")])
def test_a_sink_answer_is_read_within_a_size_and_a_deadline(answer: Any, said: str) -> None:
    hostile = Hostile(answer)
    policy = SinkPolicy.of([f"127.0.0.1:{hostile.port}"], None, {})
    notifier = Notifier({}, lambda *_: None, policy, deadline=2.0)
    sink = Sink(SinkType.WEBHOOK, "w", DEFAULT_EVENTS, f"http://127.0.0.1:{hostile.port}/x")
    message = Message("id", Event.OUT_OF_SYNC, "prod", "prod", None, "OutOfSync", "r", {}, None,
                      "2026-01-01T00:00:00Z")
    try:
        with pytest.raises(AgentError) as caught:
            notifier.deliver(Delivery(sink, message))
        assert str(caught.value) == said
    finally:
        hostile.close()
        notifier.close(1.0)


def test_the_operators_hosts_are_checked_again_before_sending() -> None:
    policy = SinkPolicy.of(["hooks.example.com", "[::1]:8443"], None, {"GOVSYNC_API_KEY": "k"})
    sent: list[str] = []
    notifier = Notifier({"U": "http://127.0.0.1:9/x", "T": "k"}, lambda d, r, e, f: sent.append(r),
                        policy)

    def refusal(**kw: Any) -> str | None:
        return policy.refusal(Sink(SinkType.WEBHOOK, "w", DEFAULT_EVENTS, **kw),
                              {"U": "http://127.0.0.1:9/x", "T": "k"})

    assert refusal(url="https://hooks.example.com/services/x") is None
    assert refusal(url="https://HOOKS.example.com:444/x") is None  # any port of that host
    assert refusal(url="https://[::1]:8443/x") is None
    assert "host [::1]:8444 is not one" in str(refusal(url="https://[::1]:8444/x"))
    assert "host evil.example" in str(refusal(url="https://hooks.example.com@evil.example/"))
    assert "not an http:// or https:// URL" in str(refusal(url="file:///etc/passwd"))
    assert "its secret reads T, which holds one of govsync's own credentials" in str(
        refusal(url="https://hooks.example.com/x", secret=SecretRef("T")))
    # The key of the environment it notifies about, under any name.
    keyed = Sink(SinkType.GITHUB, "g", DEFAULT_EVENTS, token=SecretRef("K2"), repository="a/b")
    assert policy.refusal(keyed, {"K2": "env-key"}) is None
    assert "its token reads K2" in str(policy.refusal(keyed, {"K2": "env-key"},
                                                      keys=["env-key"]))
    # Sent anyway (say, a policy changed under a queued delivery): refused, not tried.
    sink = Sink(SinkType.WEBHOOK, "w", DEFAULT_EVENTS, SecretRef("U"))
    message = Message("id", Event.OUT_OF_SYNC, "prod", "prod", None, "OutOfSync", "r", {}, None,
                      "2026-01-01T00:00:00Z")
    notifier.send(Delivery(sink, message))
    notifier.close(5.0)
    assert sent == ["refused"]
    # And a sink given the key of the environment it notifies about, as it is sent.
    keyed_env = {"E": "env-key"}
    again = Notifier(keyed_env, lambda d, r, e, f: sent.append(r), policy)
    again.send(Delivery(Sink(SinkType.WEBHOOK, "e", DEFAULT_EVENTS,
                             "https://hooks.example.com/x", secret=SecretRef("E")),
                        message, keys=("env-key",)))
    again.close(5.0)
    assert sent == ["refused", "refused"]
    with pytest.raises(ValueError, match="write a host name or address"):
        SinkPolicy.of(["https://hooks.example.com/"], None, {})


def test_a_sink_is_reached_through_the_operators_proxy() -> None:
    proxy = Receiver()  # a proxy on loopback: it gets the request in absolute form
    policy = SinkPolicy.of(["hooks.example.com"], None, {})
    environ = {"HTTP_PROXY": proxy.url, "NO_PROXY": "internal.example"}
    notifier = Notifier(environ, lambda *_: None, policy, deadline=5.0)
    sink = Sink(SinkType.WEBHOOK, "w", DEFAULT_EVENTS, "http://hooks.example.com/services/x")
    message = Message("id", Event.OUT_OF_SYNC, "prod", "prod", None, "OutOfSync", "r", {}, None,
                      "2026-01-01T00:00:00Z")
    try:
        notifier.deliver(Delivery(sink, message))
        assert [r["path"] for r in proxy.requests] == ["http://hooks.example.com/services/x"]
        assert proxy_of("http", "internal.example", environ) is None
        assert proxy_of("http", "127.0.0.1", environ) is None
        assert proxy_of("https", "hooks.example.com", environ) is None  # no HTTPS_PROXY
    finally:
        notifier.close(1.0)
        proxy.close()


def test_agent_once_names_the_sink_that_reads_govsyncs_key(tmp_path: Path) -> None:
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hooks.yaml").write_text(hooks(["o1"]))
    (tmp_path / "govsync.yaml").write_text(project(
        "agent:\n  notify:\n    - {type: webhook, url: {fromEnv: GOVSYNC_STATE}}\n"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    done = subprocess.run([sys.executable, "-m", "govsync", "agent", "--once", "--endpoint",
                           "local"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "govsync.yaml:6:38: a webhook sink's url: GOVSYNC_STATE is one of govsync's own " \
           "settings" in done.stderr, done.stderr
