"""Shared fixtures: where the example organisation lives, and its secret variables;
how many workers ``-n auto`` starts."""

from __future__ import annotations

import os

import pytest

from testkit import EXAMPLE_SECRET_VARS


@pytest.fixture
def example_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Set every secret variable the examples read to a dummy value."""
    values = {name: f"dummy-{name.lower()}" for name in EXAMPLE_SECRET_VARS}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts): two workers a core.  About half of the suite's
    time is waiting (injected latencies, paused and killed processes, servers starting),
    so on two cores four workers finish sooner than two.  PYTEST_XDIST_AUTO_NUM_WORKERS
    still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 2 * (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)
