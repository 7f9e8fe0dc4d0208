"""Fixtures of the tests of changing and removing objects (updates, deletes, forgets,
replaces): the refresh tests', from their kit (refreshkit): a folder of its own, a
state backend (SQLite, then PostgreSQL where GOVSYNC_TEST_POSTGRES is set), govsync
against the embedded reference server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REFRESH_TESTS = str(Path(__file__).resolve().parents[1] / "refresh")
if REFRESH_TESTS not in sys.path:
    sys.path.insert(0, REFRESH_TESTS)

pytest.register_assert_rewrite("refreshkit")

from refreshkit import gov, sqlite_gov  # noqa: E402

__all__ = ["gov", "sqlite_gov"]
