"""Fixtures of the apply tests (helpers live in ``applykit.py``).

Every test runs the real reference server as a process on loopback and
govsync through its command line, with its state in a SQLite file under
``tmp_path`` or, where GOVSYNC_TEST_POSTGRES is set, in PostgreSQL (each
test in workspaces of its own, removed afterwards).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("applykit")

from applykit import (  # noqa: E402
    BIG_SECRET_VAR,
    EXAMPLE_MANIFESTS,
    EXAMPLE_SECRET_VARS,
    Govsync,
    Server,
    unique_workspace,
)

from testkit import drop_pg_workspaces  # noqa: E402

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"


def postgres_url() -> str:
    url = os.environ.get(POSTGRES_ENV, "")
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)")
    return url


@pytest.fixture
def secrets() -> dict[str, str]:
    """A unique value for every secret variable the manifests read."""
    return {name: f"secret-{uuid.uuid4().hex}" for name in (*EXAMPLE_SECRET_VARS, BIG_SECRET_VAR)}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(*flags, seed=...)``: a started ``govsync serve``, stopped at teardown."""
    started: list[Server] = []

    def start(*flags: str, **kw: Any) -> Server:
        server = Server(tmp_path, f"server-{len(started)}", flags, **kw)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def server(serve: Callable[..., Server]) -> Server:
    """The reference server with the example seed, no latency, no faults."""
    return serve()


@pytest.fixture
def sqlite_state(tmp_path: Path) -> str:
    return str(tmp_path / ".govsync" / "state.db")


@pytest.fixture
def pg_state() -> Iterator[str]:
    url = postgres_url()
    yield url
    drop_pg_workspaces(url, _PG_WORKSPACES)
    _PG_WORKSPACES.clear()


_PG_WORKSPACES: list[str] = []


@pytest.fixture
def made_workspaces(state_url: str) -> Callable[..., None]:
    """Register workspaces a test makes by name (a project's environments), so that
    on PostgreSQL their rows are dropped afterwards."""
    def made(*names: str) -> None:
        if state_url.startswith("postgres"):
            _PG_WORKSPACES.extend(names)
    return made


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def state_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The state backend: SQLite, then PostgreSQL (skipped without GOVSYNC_TEST_POSTGRES)."""
    if request.param == "sqlite":
        return str(tmp_path / ".govsync" / "state.db")
    url: str = request.getfixturevalue("pg_state")
    return url


@pytest.fixture
def make_govsync(tmp_path: Path, secrets: dict[str, str]) -> Iterator[Callable[..., Govsync]]:
    """``make_govsync(state, endpoint, workspace=None)``: the command line, bound."""
    made: list[Govsync] = []

    def make(state: str, endpoint: str | None, workspace: str | None = None) -> Govsync:
        workspace = workspace or unique_workspace()
        if state.startswith("postgres"):
            _PG_WORKSPACES.append(workspace)
        gov = Govsync(tmp_path, state, workspace, endpoint, dict(secrets))
        made.append(gov)
        return gov

    yield make
    for gov in made:  # a test that failed half-way may leave an apply running
        for process in gov.background:
            if process.proc.poll() is None:
                process.kill()


@pytest.fixture
def govsync(make_govsync: Callable[..., Govsync], server: Server, sqlite_state: str) -> Govsync:
    """govsync against ``server`` with SQLite state in tmp_path."""
    return make_govsync(sqlite_state, server.url)


@pytest.fixture
def applied(govsync: Govsync, tmp_path: Path) -> Path:
    """A copy of the example manifests, applied by ``govsync`` to ``server``."""
    manifests = tmp_path / "manifests"
    shutil.copytree(EXAMPLE_MANIFESTS, manifests)
    run = govsync.invoke("apply", str(manifests), "--auto-approve")
    assert run.code == 0, run
    return manifests
