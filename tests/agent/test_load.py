"""The agent under load (issue 30, finding 6), as a real process: hundreds of
connections that never finish their headers, against an agent whose limit of open
files is low.  It must neither crash nor flood its log, close such connections
by itself, and recover when they go; every loop here is bounded in count and
time, and on loopback only."""

from __future__ import annotations

import contextlib
import socket
import time
from pathlib import Path

import httpx
import pytest
from agentkit import Agent, Repo, hooks

pytestmark = pytest.mark.slow

PROJECT = "apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\nenvironments:\n  prod: {}\n"


def half_open(port: int, count: int) -> list[socket.socket]:
    """Up to ``count`` connections that send the start of a request and no more."""
    opened = []
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.sendall(b"GET /api/v1/environments HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        except OSError:
            break
        opened.append(sock)
    return opened


def test_connections_that_never_finish_neither_crash_nor_flood_the_agent(
        tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", PROJECT)
    repo.commit({"manifests/hooks.yaml": hooks(["l1"])})
    # 96 files at most, and no raising it: the idle clients can use them all up.
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="0.5s", files=(96, 96))
    socks: list[socket.socket] = []
    try:
        agent.wait(lambda e: e["prod"]["status"] == "OutOfSync", what="a first cycle")
        socks = half_open(agent.port, 400)
        assert len(socks) > 150, len(socks)
        # The point: 3 s of cycles with every file taken (the agent cannot be asked:
        # no file is left for an answer); it must live through them.
        for _ in range(15):
            assert agent.proc.poll() is None, agent.log.read_text()[-3000:]
            time.sleep(0.2)
        for sock in socks:
            sock.close()
        socks = []
        found = agent.wait(lambda e: e["prod"]["status"] == "OutOfSync", what="recovery")
        history = agent.get("/api/v1/environments/prod/history").json()["records"]
        assert any("ran short of a system resource: Too many open files" in r.get("reason", "")
                   for r in history), [r.get("reason") for r in history]
        assert found["prod"]["pendingChanges"] == 1
        log = agent.log.read_text()
        assert len(log.splitlines()) < 300, log[-3000:]
        assert "Traceback" not in log or log.count("Traceback") <= 10, log[-3000:]
        # Connections that never finish their request are closed by the agent itself.
        idle = half_open(agent.port, 3)
        for sock in idle:
            with contextlib.closing(sock), contextlib.suppress(ConnectionResetError):
                sock.settimeout(30)  # a TimeoutError: still open
                assert sock.recv(1024) == b""  # closed (a reset is closed, too)
        assert agent.get("/healthz").status_code == 200
    finally:
        for sock in socks:
            sock.close()
        agent.stop()


def test_the_agent_raises_its_soft_limit_of_open_files(tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", PROJECT)
    agent = Agent(repo, tmp_path / "run", endpoint=server, files=(256, 4096))
    try:
        agent.wait(lambda e: e["prod"]["status"] is not None, what="a first cycle")
        limits = Path(f"/proc/{agent.proc.pid}/limits").read_text()
        line = next(li for li in limits.splitlines() if li.startswith("Max open files"))
        assert line.split()[3:5] == ["4096", "4096"], line
    finally:
        agent.stop()


def idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections that send nothing at all (fewer if the system refuses)."""
    opened = []
    for _ in range(count):
        try:
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    return opened


def healthy_within(agent: Agent, seconds: float) -> bool:
    """Whether /healthz answers 200 within ``seconds`` (asked again as it fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.TransportError):
            if agent.get("/healthz").status_code == 200:
                return True
        time.sleep(0.05)
    return False


def test_idle_connections_never_keep_the_probes_out(tmp_path: Path, server: str) -> None:
    """Issue 41, finding 13: 1,100 connections that send nothing (or part of a request),
    renewed as they are closed: /healthz answers at once all the while (the idlest connection makes way
    for a new one at the cap), so a liveness probe never fails for them."""
    repo = Repo(tmp_path / "repo", PROJECT)
    repo.commit({"manifests/hooks.yaml": hooks(["l1"])})
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="1h")
    socks: list[socket.socket] = []
    try:
        agent.wait(lambda e: e["prod"]["status"] == "OutOfSync", what="a first cycle")
        # The attacker renews them; the second time each sends the start of a request.
        for opening in (idle, half_open, idle):
            socks += opening(agent.port, 1100)
            assert len(socks) >= 1000, len(socks)
            # Well within the 10 s a connection has to send its request.
            assert healthy_within(agent, 3.0), agent.log.read_text()[-3000:]
            for sock in socks:
                sock.close()
            socks = []
        assert agent.proc.poll() is None, agent.log.read_text()[-3000:]
        assert agent.environments()["prod"]["status"] == "OutOfSync"
    finally:
        for sock in socks:
            sock.close()
        agent.stop()
