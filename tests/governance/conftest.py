"""Fixtures of the governance tests: a repository with staging and prod."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.register_assert_rewrite("govkit")

from govkit import Repo  # noqa: E402

from testkit import drop_pg_workspaces  # noqa: E402

needs_ssh_keygen = pytest.mark.skipif(shutil.which("ssh-keygen") is None,
                                      reason="ssh-keygen is not installed")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def repo(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Repo]:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    if request.param == "postgres":
        url = os.environ.get("GOVSYNC_TEST_POSTGRES", "")
        if not url:
            pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
        state = url
    else:
        state = str(tmp_path / "state" / "state.db")
    made = Repo(tmp_path / "repo", state)
    yield made
    made.close()
    if request.param == "postgres":
        drop_pg_workspaces(state, [made.staging, made.prod, f"dev-{made.suffix}"])


@pytest.fixture
def sqlite_repo(tmp_path: Path) -> Iterator[Repo]:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    made = Repo(tmp_path / "repo", str(tmp_path / "state" / "state.db"))
    yield made
    made.close()
