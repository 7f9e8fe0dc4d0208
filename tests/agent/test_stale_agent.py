"""An agent paused while it loses its lock and its leadership sends nothing stale
(issue 30, finding 4, the agent's path: it applies through the same code as
``govsync apply``).

Agent A follows a repository that sets every hook's description to ``stale``
and is stopped (SIGSTOP) in the middle of its apply; its lock sessions are
ended, as an administrator would; agent B, following a repository that says
``fresh``, takes over and applies.  A wakes up (SIGCONT): the server still
holds B's values, every one.  Before fencing every request, 48 of 48 of A's
stale updates reached the API.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
from agentkit import KEY, Agent, Repo, hooks, workspace

from govsync.commands.sources import ApplyOptions
from testkit import drop_pg_workspaces, environ, govsync, in_flight, until
from testkit import serve as serve_process
from testkit import stop as stop_process

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
POSTGRES = os.environ.get("GOVSYNC_TEST_POSTGRES", "")
LANES = ApplyOptions().parallelism  # the calls an agent's apply has in flight at most


def descriptions(url: str, names: list[str]) -> Counter[str]:
    answer = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}, timeout=10)
    return Counter(h.get("description") for h in answer.json().get("Hook", [])
                   if h["name"] in names)


def local_ports(pid: int) -> list[int]:
    """The local ports of the TCP sockets process ``pid`` holds (Linux's /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if fields[9] in inodes:
                    ports.append(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def end_lock_sessions(agent_pid: int) -> int:
    """pg_terminate_backend of the paused agent's sessions, as an administrator ends a
    stuck lock's (only its own: tests on other workers use the same database)."""
    with psycopg.connect(POSTGRES, autocommit=True) as admin:
        pids = [r[0] for r in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'govsync' AND pid <> pg_backend_pid()"
            " AND client_port = ANY(%s)", (local_ports(agent_pid),))]
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    return len(pids)


def test_a_paused_agent_that_lost_its_lock_sends_no_stale_request(tmp_path: Path) -> None:
    if not POSTGRES:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    proc, url = serve_process(["--api-key", KEY, "--latency-ms", "1000"], key=KEY,
                              output=tmp_path / "server.log")
    ws = workspace()
    names = [f"s{i:03d}" for i in range(120)]
    environment = (f"apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n"
                   f"environments:\n  prod:\n    workspace: {ws}\n"
                   "    agent: {autoApply: true}\n")
    stale, fresh = Repo(tmp_path / "stale", environment), Repo(tmp_path / "fresh", environment)
    stale.commit({"manifests/hooks.yaml": hooks(names, "base")})
    env = environ({"GOVSYNC_API_KEY": KEY, "GOVSYNC_ENDPOINT": url, "GOVSYNC_STATE": POSTGRES})
    first = second = None
    try:
        made = govsync("apply", "--env", "prod", "--auto-approve", "--parallelism", "120",
                       cwd=stale.root, env=env)
        assert made.code == 0, made
        stale.commit({"manifests/hooks.yaml": hooks(names, "stale")})
        fresh.commit({"manifests/hooks.yaml": hooks(names, "fresh")})
        first = Agent(stale, tmp_path / "one", endpoint=url, state=POSTGRES, interval="1s")
        until(lambda: descriptions(url, names)["stale"] > 0, "the first answers back", 60,
              interval=0.05)
        # The first answers are back: A now records them and sends its next requests,
        # each right after its fence check.  A request whose check passed before the
        # pause goes out after it (the store's documented window: the one request each
        # lane was about to send), so pause A once every one of its lanes waits for an
        # answer (the server holds as many calls as A has lanes), not in that burst:
        # on a loaded machine the burst can outlast any fixed wait.
        until(lambda: in_flight(url, KEY) >= LANES, "every lane waiting for an answer", 60,
              interval=0.01)
        assert 0 < descriptions(url, names)["stale"] < len(names), "not caught mid-apply"
        os.kill(first.proc.pid, signal.SIGSTOP)
        try:
            # What it sent whole before it stopped is answered within the server's latency
            # (1 s); a request the pause cut in half stays in flight until it goes on, so
            # no count marks the moment: the point here is time passing.
            time.sleep(1.5)
            assert end_lock_sessions(first.proc.pid) >= 2  # its lock and lead sessions
            second = Agent(fresh, tmp_path / "two", endpoint=url, state=POSTGRES,
                           interval="1s")
            second.wait(lambda e: e["prod"]["status"] == "Synced" and e["prod"]["acting"],
                        timeout=120, what="the second agent's apply")
            assert descriptions(url, names) == Counter({"fresh": len(names)})
        finally:
            os.kill(first.proc.pid, signal.SIGCONT)
        # The first goes on from where it stopped, and finds out: it resigns once its
        # apply has ended, and what it sent on its way has been answered.
        until(lambda: first.environments().get("prod", {}).get("acting") is False,
              "the first agent resigned", 60, interval=0.1)
        until(lambda: in_flight(url, KEY) == 0, "its last requests answered")
        assert descriptions(url, names) == Counter({"fresh": len(names)})
        assert second.status("prod") == "Synced"
    finally:
        for agent in (first, second):
            if agent is not None:
                agent.stop(kill=True)
        stop_process(proc)
        drop_pg_workspaces(POSTGRES, [ws])
