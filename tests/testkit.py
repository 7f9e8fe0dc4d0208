"""What every test package shares: the example organisation, and a served process.

Importable from any test module (pytest puts ``tests/`` on ``sys.path`` for
its conftest).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from govsync import envvars

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
EXAMPLE_MANIFESTS = EXAMPLES / "manifests"
EXAMPLE_SEED = EXAMPLES / "server-seed.yaml"
# examples/README.md, section Secrets.
EXAMPLE_SECRET_VARS = (
    "GOVSYNC_EXAMPLE_LOGSTORE_API_KEY",
    "GOVSYNC_EXAMPLE_BI_API_KEY",
    "GOVSYNC_EXAMPLE_BI_API_SECRET",
    "GOVSYNC_EXAMPLE_MDM_API_KEY",
    "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY",
)


@dataclass(frozen=True)
class Examples:
    """What the example organisation holds, counted from loading it (a test writes
    ``EXAMPLE.objects``, never the number)."""

    objects: int  # objects (addresses)
    files: int  # manifest files
    dependencies: int  # references, uses and dependsOn, each counted once an object
    addresses: frozenset[str]


@functools.cache
def examples() -> Examples:
    """The example manifests, loaded once a process (``govsync.manifests.loader.load``)."""
    from govsync.manifests.loader import load

    found = load([str(EXAMPLE_MANIFESTS)])
    return Examples(len(found.objects), len(found.files),
                    sum(len(m.dependencies) for m in found.objects.values()),
                    frozenset(found.objects))


# Each httpx.get/post builds an SSL context, loading the CA bundle (about 50 ms of
# CPU), even for a plain-HTTP URL; the tests call loopback servers many times, often
# while polling.  They pass this one, built once a process: ``verify=LOOPBACK_TLS``.
LOOPBACK_TLS = ssl.create_default_context()


def policy_head(name: str) -> str:
    """A Policy manifest's lines up to its code, owned by the examples' policy owner: the
    code's lines follow, indented four spaces."""
    return (f"apiVersion: govsync/v1\nkind: Policy\nmetadata: {{name: {name}}}\nspec:\n"
            "  userEmail: carol.nguyen@northwind.example\n  code: |\n")


def without_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset govsync's own settings (envvars.OWN) and NO_COLOR: a developer's shell or
    a CI job may carry them, and a test must not see them."""
    for name in (*envvars.OWN, "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(args: list[str], *, key: str, output: Path | None = None,
          timeout: float = 30.0, port: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m govsync serve --port P ARGS`` and wait for /_govsync/health.

    Returns the process and its base URL; its output goes to ``output`` (or
    nowhere).  Raises RuntimeError, with the output's tail, if it does not come up.
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    sink = open(output, "ab") if output else subprocess.DEVNULL  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "govsync", "serve", "--port", str(port), *args],
            stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    finally:
        if output:
            sink.close()  # type: ignore[union-attr]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = output.read_text()[-2000:] if output else ""
            raise RuntimeError(f"govsync serve exited with {proc.returncode}: {tail}")
        try:
            if httpx.get(f"{url}/_govsync/health", headers={"X-API-KEY": key},
                         timeout=2, verify=LOOPBACK_TLS).is_success:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    stop(proc, kill=True)
    raise RuntimeError(f"govsync serve did not become healthy in {timeout:.0f} s")


class Served:
    """``govsync serve --port P ARGS`` in a thread of this process: its options parsed by
    the command's own parser, its store, app and uvicorn server built by the code the
    command runs (``govsync.server.serve``), without the 0.2 s of CPU a process takes to
    start.  Where the process is the point (it is killed or stopped, its log is read),
    use ``serve``."""

    def __init__(self, args: list[str], *, port: int | None = None) -> None:
        import click

        from govsync.cli import cli
        from govsync.cli.serve import serve as command
        from govsync.server import serve as serving

        # Parsed under the root's context, as `govsync serve` is: click keeps the first
        # context's help options on the command (`govsync docs` would show another).
        root = click.Context(cli, info_name="govsync", **cli.context_settings)
        params = command.make_context("serve", ["--port", str(port or 0), *args],
                                      parent=root).params
        self.params = params
        self.sock = serving.listen(params["host"], params["port"])
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.lines: list[str] = []
        self.error: BaseException | None = None
        self._server: Any = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"serve:{self.port}",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(30) or self.error is not None or not self._server.started:
            self.stop()
            raise RuntimeError(f"govsync serve did not start: {self.error!r} {self.lines}")

    def _run(self) -> None:
        from govsync.server import serve as serving
        from govsync.server.app import Operations

        p = self.params
        store = None
        try:
            # Opened in this thread: the store's SQLite connection belongs to it.
            store = serving.open_store(p["db"], p["seed"])
            self._server = serving.server(
                self.sock, store, host=p["host"], db=p["db"], api_keys=p["api_keys"],
                viewer_keys=p["viewer_keys"], latency_ms=p["latency_ms"],
                fault_rate=p["fault_rate"], verbose=p["verbose"] > 0,
                operations=Operations(p["operations"]), write=self.lines.append,
                log_config=None)
            announce = self._server.on_listening
            self._server.on_listening = lambda: (announce(), self._ready.set())
            self._server.run(sockets=[self.sock])
        except BaseException as exc:  # noqa: BLE001  (reported by the starting thread)
            self.error = exc
        finally:
            self._ready.set()
            if store is not None:
                store.close()

    def stop(self) -> None:
        """Stop at once, as a process ends (requests in flight are dropped)."""
        if self._server is not None:
            self._server.should_exit = self._server.force_exit = True
        self._thread.join(30)
        self.sock.close()


def stop(proc: subprocess.Popen[bytes], *, kill: bool = False) -> None:
    """Stop a served process (SIGKILL with ``kill``), waiting for it to exit."""
    if proc.poll() is None:
        proc.kill() if kill else proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stored_objects(url: str, key: str) -> dict[str, list[dict[str, Any]]]:
    """Everything a served reference server holds, by kind (``/_govsync/objects``)."""
    response = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": key}, timeout=30,
                         verify=LOOPBACK_TLS)
    response.raise_for_status()
    data: dict[str, list[dict[str, Any]]] = response.json()
    return data


def in_flight(url: str, key: str) -> int:
    """The API calls a served reference server has received and not answered yet."""
    answer = httpx.get(f"{url}/_govsync/health", headers={"X-API-KEY": key}, timeout=10,
                       verify=LOOPBACK_TLS)
    answer.raise_for_status()
    return int(answer.json()["inFlight"])


def drop_pg_workspaces(url: str, workspaces: list[str]) -> None:
    """Delete these workspaces' rows from every govsync_ table of a PostgreSQL
    state database (tests share one database, so each cleans up after itself)."""
    if not workspaces:
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        tables = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name LIKE 'govsync%%'"
            " AND column_name IN ('workspace', 'name')").fetchall()
        for table, column in tables:
            if column == "name" and "workspace" not in table:
                continue
            conn.execute(f'DELETE FROM "{table}" WHERE "{column}" = ANY(%s)',  # noqa: S608
                         (workspaces,))


@dataclass(frozen=True)
class ReaderRole:
    """A PostgreSQL schema of a test's own, its owner's URL and a real login role
    that starts with no privileges (``govsync state readonly-role`` grants them)."""

    writer: str
    reader: str
    role: str

    def grant(self, statements: str) -> None:
        """Run, as the owner, the GRANTs ``govsync state readonly-role`` printed."""
        import psycopg

        with psycopg.connect(self.writer, autocommit=True) as conn:
            for statement in statements.strip().splitlines():
                conn.execute(statement)


@contextlib.contextmanager
def reader_role(url: str, prefix: str) -> Iterator[ReaderRole]:
    """Make a schema and a login role on the PostgreSQL server at ``url``; drop both after."""
    import psycopg

    suffix = uuid.uuid4().hex[:10]
    schema, role = f"{prefix}_{suffix}", f"{prefix}_reader_{suffix}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
    options = f"options=-csearch_path%3D{schema}"
    try:
        yield ReaderRole(f"{url}?{options}",
                         f"postgresql://{role}@{url.split('@', 1)[1]}?{options}", role)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')


# -- the command line: one runner ------------------------------------------------------


@dataclass
class Run:
    """What ``govsync ARGS`` did: its exit status and its output."""

    args: list[str]
    code: int
    out: str
    err: str
    crash: str = ""  # in the test process: the traceback of an exception it did not handle

    @property
    def text(self) -> str:
        return self.out + self.err

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data

    def __str__(self) -> str:
        return (f"govsync {' '.join(self.args)} -> exit {self.code}\n"
                f"--- stdout\n{self.out[-6000:]}\n--- stderr\n{self.err[-4000:]}")


def environ(overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment without govsync's own settings (a developer's shell
    or a CI job may carry them), with ``overrides`` (None: unset)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    for k, v in (overrides or {}).items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def govsync(*args: str, env: Mapping[str, str], cwd: Path | None = None, stdin: str = "",
            process: bool = False, timeout: float | None = None) -> Run:
    """``govsync ARGS`` to its end with exactly ``env`` as its environment and ``cwd``
    as its directory: in the test process (click's CliRunner; a crash, an exception the
    command line did not turn into its message, fails the test at once, whatever exit
    status the test expects), or, with ``process`` or a ``timeout`` it must not
    outlast, as ``python -m govsync`` (where the process is the point: its start, its
    exit on a signal, a FIFO that never ends)."""
    if process or timeout is not None:
        done = subprocess.run([sys.executable, "-m", "govsync", *args], cwd=cwd,
                              env=dict(env), capture_output=True, text=True,
                              timeout=timeout or 180, input=stdin)
        return Run(list(args), done.returncode, done.stdout, done.stderr)
    ran = in_process(list(args), env=env, cwd=cwd, stdin=stdin)
    assert not ran.crash, f"govsync {' '.join(args)} crashed:\n{ran.err[-6000:]}"
    return ran


class Background:
    """``python -m govsync ARGS`` as a process that runs on while the test acts: killed
    (``kill``), raced, or waited for (``finish``).  Its stderr lines are collected as
    they come (``wait_for_line``)."""

    def __init__(self, args: list[str], *, env: Mapping[str, str], cwd: Path | None = None,
                 done: Callable[[Run], object] = lambda run: None) -> None:
        self.args = args
        self.proc = subprocess.Popen([sys.executable, "-m", "govsync", *args], cwd=cwd,
                                     env=dict(env), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)
        self.err_lines: list[str] = []
        self.out = ""
        self._done = done
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read_err, daemon=True)
        self._reader.start()
        self._out_reader = threading.Thread(target=self._read_out, daemon=True)
        self._out_reader.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.err_lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()

    def wait_for_line(self, predicate: Callable[[str], bool], timeout: float = 60) -> bool:
        """Wait until a stderr line matches (True), or the process ends (False)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if any(predicate(line) for line in self.err_lines):
                    return True
                if self.proc.poll() is not None and not self._reader.is_alive():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no such line in {timeout}s: {''.join(self.err_lines)}")
                self._changed.wait(min(left, 0.05))

    def count(self, predicate: Callable[[str], bool]) -> int:
        with self._changed:
            return sum(1 for line in self.err_lines if predicate(line))

    def kill(self) -> int:
        """SIGKILL, then the exit status (negative: killed)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGKILL)
        return self.finish()

    def finish(self, timeout: float = 180) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        self._out_reader.join(10)
        self._done(self.result())
        return code

    @property
    def err(self) -> str:
        with self._changed:
            return "".join(self.err_lines)

    def result(self) -> Run:
        return Run(self.args, self.proc.returncode, self.out, self.err)


def until(condition: Callable[[], object], what: str = "", timeout: float = 30,
          interval: float = 0.02) -> None:
    """Wait until ``condition()`` is true (a state entry, a count on the server, a log
    line, a lock's holder); fail the test, saying ``what``, after ``timeout`` seconds.
    The wait that replaces a fixed sleep: as short as the condition allows, and never
    too short on a loaded machine."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout:g} s: {what}"
        time.sleep(interval)


def in_process(args: list[str], *, env: Mapping[str, str], cwd: Path | None = None,
               stdin: str = "") -> Run:
    """``govsync ARGS`` in the test process (click's CliRunner) with exactly ``env`` as
    its environment and ``cwd`` as its directory: what ``python -m govsync`` would do,
    without a process start (about half a second each).  A crash is exit 1 with its
    traceback on stderr, as the process would print it."""
    import gc
    import traceback

    from click.testing import CliRunner

    from govsync.cli import cli

    # CliRunner patches os.environ: drop what the test process has on top.
    unset: dict[str, str | None] = {k: None for k in os.environ if k not in env}
    before, collecting = Path.cwd(), gc.isenabled()
    if cwd is not None:
        os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, args, env={**unset, **env}, input=stdin,
                                    prog_name="govsync")
    finally:
        os.chdir(before)
        # The command line freezes what it loaded and may leave the collector off:
        # right for a process that exits next, not for the test process.
        gc.unfreeze()
        if collecting:
            gc.enable()
    err, crash = result.stderr, ""
    if (result.exception is not None and result.exc_info is not None
            and not isinstance(result.exception, SystemExit)):
        crash = "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(*result.exc_info))
        err += crash
    return Run(list(args), result.exit_code, result.stdout, err, crash)
