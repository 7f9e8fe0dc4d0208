"""Fixtures of the tests of changing and removing objects (updates, deletes, forgets,
replaces): as the refresh tests', whose kit (refreshkit) they share: a folder of
its own, a state backend (SQLite, then PostgreSQL where GOVSYNC_TEST_POSTGRES is set),
govsync against the embedded reference server."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REFRESH_TESTS = str(Path(__file__).resolve().parents[1] / "refresh")
if REFRESH_TESTS not in sys.path:
    sys.path.insert(0, REFRESH_TESTS)

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
