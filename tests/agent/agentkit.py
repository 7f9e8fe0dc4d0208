"""Helpers of the agent tests.

``Repo`` is a git repository the test commits to; ``reconcile`` runs one round of the
agent's cycles in the test process (where a cycle's decision is the point); ``Agent``
runs ``python -m govsync agent`` as a process against it (where leadership, kills,
signals or serving are the point) (the reference server as a process,
``testkit.serve``) and reads its JSON API; ``Receiver`` is a local HTTP server
that takes notifications (failing the first N if asked) and keeps them.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from govsync.agent.loop import Agent as Reconciler
from govsync.agent.loop import Options
from govsync.project import SettingValue
from testkit import LOOPBACK_TLS, environ, free_port, until

KEY = "agent-test-key"
TOKEN = "agent-test-token"


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def hooks(names: list[str], description: str = "v1") -> str:
    return "".join(
        f"apiVersion: govsync/v1\nkind: Hook\nmetadata: {{name: {n}}}\nspec:\n"
        f"  description: {description}\n  status: active\n"
        f"  code: \"export default function hook(input) {{ return 1; }}\"\n---\n"
        for n in names)


class Repo:
    """A git repository holding a project; ``commit`` writes files and commits them."""

    def __init__(self, root: Path, project: str) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        git("init", "-q", "-b", "main", cwd=root)
        (root / ".gitignore").write_text(".govsync/\n")
        self.commit({"govsync.yaml": project}, "project")

    def commit(self, files: dict[str, str], message: str = "change") -> str:
        for name, text in files.items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        git("add", "-A", cwd=self.root)
        git("commit", "-q", "--allow-empty", "-m", message, cwd=self.root)
        return git("rev-parse", "HEAD", cwd=self.root).strip()


def workspace() -> str:
    return f"agent-{uuid.uuid4().hex[:10]}"


class Agent:
    """``govsync agent`` as a process (its output in ``log``)."""

    def __init__(self, repo: Repo, directory: Path, *, endpoint: str | None,
                 state: str | None = None,
                 interval: str = "1s", env: dict[str, str] | None = None,
                 args: tuple[str, ...] = (), files: tuple[int, int] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / f"agent-{self.port}.log"
        directory.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "govsync", "agent", "--repo", str(repo.root),
                   "--checkout", str(directory / "checkout"),
                   *(["--endpoint", endpoint] if endpoint else []),
                   "--listen", f"127.0.0.1:{self.port}",
                   "--interval", interval, *args]
        # The agent's state lies outside its checkout (inside, it is refused: a commit
        # could replace it); "" leaves --state out.
        self.state = str(directory / "state.db") if state is None else state
        if self.state:
            command += ["--state", self.state]
        environ = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
        environ.update({"GOVSYNC_API_KEY": KEY, "GOVSYNC_UI_TOKEN": TOKEN,
                        "PYTHONUNBUFFERED": "1", **(env or {})})
        with open(self.log, "ab") as out:
            # files: the process's soft and hard limits of open files.
            limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, files)) if files else None
            self.proc = subprocess.Popen(command, cwd=directory, env=environ, stdout=out,
                                         stderr=subprocess.STDOUT, preexec_fn=limit)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, headers={"authorization": f"Bearer {TOKEN}"},
                         timeout=10, verify=LOOPBACK_TLS)

    def environments(self) -> dict[str, dict[str, Any]]:
        try:
            answer = self.get("/api/v1/environments")
        except httpx.TransportError:
            return {}
        if answer.status_code != 200:
            return {}
        return {e["name"]: e for e in answer.json()["environments"]}

    def wait(self, check: Callable[[dict[str, dict[str, Any]]], bool], timeout: float = 60.0,
             what: str = "") -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        found: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the agent exited with {self.proc.returncode}:\n"
                                     f"{self.log.read_text()[-3000:]}")
            found = self.environments()
            try:
                if found and check(found):
                    return found
            except (KeyError, TypeError):
                pass
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}: {json.dumps(found, indent=1)[:3000]}"
                             f"\n{self.log.read_text()[-3000:]}")

    def cycles(self, name: str, count: int = 2, timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the agent has finished ``count`` more cycles of environment ``name``
        (its last cycle's time has moved on ``count`` times); returns the environment as
        the last one left it.  What a test asserts did not happen, it asserts after it."""
        def last() -> Any:
            return (self.environments().get(name) or {}).get("lastCycle") or {}

        seen = [last().get("at")]

        def moved() -> bool:
            at = last().get("at")
            if at != seen[-1]:
                seen.append(at)
            return len(seen) > count

        until(moved, f"{count} more cycles of {name}", timeout, interval=0.1)
        return dict(self.environments()[name])

    def status(self, name: str) -> str | None:
        return self.environments().get(name, {}).get("status")

    def stop(self, *, kill: bool = False) -> int:
        if self.proc.poll() is None:
            self.proc.kill() if kill else self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def reconcile(repo: Repo, directory: Path, *, endpoint: str | None, state: str | None,
              env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """One round of the agent's cycles, called in the test process (``Agent.run(once=True)``,
    what ``govsync agent --once`` runs, without its process or its signal handlers): each
    environment as the agent's JSON API would show it afterwards.  For tests whose point is
    a cycle's decision (plan, apply or hold back), not the process."""
    options = Options(
        repo=str(repo.root), checkout=str(directory / "checkout"),
        endpoint=SettingValue(endpoint, "option" if endpoint else "default", "--endpoint",
                              "GOVSYNC_ENDPOINT"),
        # None: the project's default.
        state=SettingValue(state, "option" if state else "default", "--state",
                           "GOVSYNC_STATE"))
    agent = Reconciler(options, environ({"GOVSYNC_API_KEY": KEY, **(env or {})}))
    agent.run(once=True)
    return {e["name"]: e for e in agent.environments()}


class Receiver:
    """A notification sink on loopback: keeps every request; fails the first ``fail``
    (answering 500 with ``fail_body``)."""

    def __init__(self, fail: int = 0, fail_body: bytes = b"") -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail = fail
        self.fail_body = fail_body
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self._answer()

            def do_PATCH(self) -> None:  # noqa: N802
                self._answer()

            def do_GET(self) -> None:  # noqa: N802
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                receiver.attempts += 1
                if receiver.fail > 0:
                    receiver.fail -= 1
                    self.send_response(500)
                    self.send_header("content-length", str(len(receiver.fail_body)))
                    self.end_headers()
                    self.wfile.write(receiver.fail_body)
                    return
                receiver.requests.append({"method": self.command, "path": self.path,
                                          "headers": dict(self.headers), "body": body})
                answer = b"[]" if self.command == "GET" else json.dumps(
                    {"number": len(receiver.requests)}).encode()
                self.send_response(201 if self.command == "POST" else 200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def payloads(self) -> list[dict[str, Any]]:
        return [json.loads(r["body"]) for r in self.requests if r["method"] == "POST"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
