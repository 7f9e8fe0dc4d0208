"""Fixtures of the refresh tests: a folder of its own, a state backend (SQLite, then
PostgreSQL where GOVSYNC_TEST_POSTGRES is set), govsync bound to both."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.register_assert_rewrite("refreshkit")

from refreshkit import Gov, make_gov  # noqa: E402

from testkit import drop_pg_workspaces, without_settings  # noqa: E402

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def gov(request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Gov]:
    url = os.environ.get(POSTGRES_ENV, "")
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        yield make_gov(tmp_path, str(tmp_path / ".govsync" / "state.db"))
        return
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    made = make_gov(tmp_path, url)
    yield made
    drop_pg_workspaces(url, [made.workspace])


@pytest.fixture
def sqlite_gov(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gov:
    """SQLite only: for what does not depend on the state backend."""
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return make_gov(tmp_path, str(tmp_path / ".govsync" / "state.db"))
