"""No credential of a command line is recorded (issue 30, finding 5).

An apply run with ``--state postgresql://owner:PASSWORD@...`` and an agent run
with that state and ``--repo https://user:TOKEN@...`` (a real git repository
served over HTTP): neither secret appears in any table the read-only role
reads, in the reader's Markdown plan, nor in the agent's JSON API.  Their
records keep the subcommand and a masked target only.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agentkit import KEY, Agent, Repo, git, hooks

from testkit import ReaderRole, environ, govsync, reader_role
from testkit import serve as serve_process
from testkit import stop as stop_process

pytestmark = [pytest.mark.slow, pytest.mark.postgres]
PASSWORD = f"pw-{uuid.uuid4().hex}"
TOKEN = f"tok-{uuid.uuid4().hex}"


@pytest.fixture
def pg() -> Iterator[ReaderRole]:
    url = os.environ.get("GOVSYNC_TEST_POSTGRES", "")
    if not url:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    with reader_role(url, "cred") as made:
        yield made


def with_password(url: str) -> str:
    """The owner's URL with a password in it (the test server trusts loopback)."""
    scheme, rest = url.split("://", 1)
    user, host = rest.split("@", 1)
    return f"{scheme}://{user.split(':')[0]}:{PASSWORD}@{host}"


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def served(repo: Path) -> tuple[ThreadingHTTPServer, str]:
    """The repository over git's dumb HTTP protocol, behind a URL that carries a token."""
    git("update-server-info", cwd=repo)
    handler = functools.partial(Quiet, directory=str(repo / ".git"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://git:{TOKEN}@127.0.0.1:{server.server_address[1]}/"


def everything_the_reader_reads(reader: str) -> str:
    found: list[Any] = []
    with psycopg.connect(reader) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid ="
            " c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'")]
        for table in tables:
            try:
                found += [list(r) for r in conn.execute(f'SELECT * FROM "{table}"')]
            except psycopg.errors.InsufficientPrivilege:
                conn.rollback()
    assert found
    return json.dumps(found, default=str)


def test_no_password_nor_token_is_recorded_or_shown(tmp_path: Path, pg: ReaderRole) -> None:
    writer = with_password(pg.writer)
    api, endpoint = serve_process(["--api-key", KEY, "--latency-ms", "300"], key=KEY,
                                  output=tmp_path / "server.log")
    repo = Repo(tmp_path / "repo", "apiVersion: govsync/v1\nkind: Project\n"
                "paths: [manifests/]\nenvironments:\n  prod: {agent: {autoApply: true}}\n")
    repo.commit({"manifests/hooks.yaml": hooks([f"h{i}" for i in range(20)])})
    http, repo_url = served(repo.root)
    env = environ({"GOVSYNC_API_KEY": KEY, "GOVSYNC_ENDPOINT": endpoint, "NO_COLOR": "1"})
    apply = None
    agent = None
    try:
        grants = govsync("state", "readonly-role", pg.role, "--state", writer, env=env)
        assert grants.code == 0, grants
        pg.grant(grants.out)
        # An apply, paused while it holds the lock (its holder record is in the table).
        apply = subprocess.Popen(
            [sys.executable, "-m", "govsync", "apply", "--env", "prod", "--auto-approve",
             "--parallelism", "1", "--state", writer], cwd=repo.root, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert apply.stderr is not None
        for line in apply.stderr:
            if line.startswith("Applying "):
                break
        apply.send_signal(signal.SIGSTOP)
        seen = everything_the_reader_reads(pg.reader)
        markdown = govsync("plan", "--env", "prod", "--format", "markdown", "--state",
                           pg.reader, cwd=repo.root, env=env)
        assert "prod" in markdown.text, markdown
        apply.send_signal(signal.SIGCONT)
        apply.wait(timeout=120)
        # The agent, with the repository's URL carrying a token.
        agent = Agent(repo, tmp_path / "run", endpoint=endpoint, state=writer,
                      args=("--repo", repo_url))
        found = agent.wait(lambda e: e["prod"]["status"] == "Synced", what="the agent's cycle")
        api_text = json.dumps(found) + agent.get("/api/v1/environments/prod").text
        pause = govsync("agent", "pause", "prod", "--reason", "test", "--state", writer,
                        cwd=repo.root, env=env)
        assert pause.code == 0, pause
        seen += everything_the_reader_reads(pg.reader)
        shown = (seen + markdown.text + pause.text + grants.text + api_text + agent.log.read_text()
                 + (apply.stdout.read() if apply.stdout else ""))
        # The records are there, and name the subcommand...
        assert "apply" in seen and "agent" in seen, seen[:2000]
        # ...but neither secret, anywhere.
        assert PASSWORD not in shown
        assert TOKEN not in shown
    finally:
        if apply is not None and apply.poll() is None:
            apply.send_signal(signal.SIGCONT)
            apply.kill()
        if agent is not None:
            agent.stop()
        http.shutdown()
        stop_process(api)
