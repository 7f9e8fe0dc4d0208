"""Fixtures of the refresh tests: a folder of its own, a state backend (SQLite, then
PostgreSQL where GOVSYNC_TEST_POSTGRES is set), govsync bound to both (refreshkit)."""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("refreshkit")

from refreshkit import gov, sqlite_gov  # noqa: E402

__all__ = ["gov", "sqlite_gov"]
