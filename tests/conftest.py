"""Shared fixtures: where the example organisation lives, and its secret variables;
how many workers ``-n auto`` starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testkit import EXAMPLE_SECRET_VARS

# Bytecode caches on, for this process and every process it starts: where the
# environment sets PYTHONDONTWRITEBYTECODE (CI images often do), each worker would
# otherwise compile every test module again (with pytest's assertion rewriting), and
# each `python -m govsync` every module of the package.  __pycache__ is ignored by git.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture
def example_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Set every secret variable the examples read to a dummy value."""
    values = {name: f"dummy-{name.lower()}" for name in EXAMPLE_SECRET_VARS}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (pyproject's addopts): three workers a core.  More than half of the
    workers' time is waiting (injected latencies, paused and killed processes, servers
    starting), so on two cores six workers finish sooner than four (282 s against
    320-336 s for the same suite); each worker collects the whole suite (2 s of CPU).
    PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return 3 * (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                else os.cpu_count() or 1)


# The longest tests (each builds a virtual environment or runs a whole workflow), started
# first so that no worker begins one while the others are finishing: the suite's wall
# time is then its work shared out, not its work plus the last long test.
FIRST = ("tests/workflow/test_packaging.py", "tests/workflow/test_deploy.py",
         "tests/workflow/test_ci_steps.py", "tests/apply/test_crashes.py",
         "tests/agent/test_stale_agent.py", "tests/workflow/test_benches.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        if path in FIRST:
            return 0
        return 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)  # stable: the order within each rank is the files' own


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before ``-n``'s workers start (xdist starts them last): on a fresh checkout, the
    test modules rewritten for pytest's assertions and cached, by two collections of
    half the files each.  Otherwise every worker collects the whole suite at the same
    moment, and each rewrites every module itself: six times 6 s of CPU on two cores,
    against twice 5 s here (measured from a fresh clone).  A warm cache skips this."""
    config = session.config
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    tag = f"{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc"
    tests = Path(__file__).parent
    cold = [f for f in sorted(tests.rglob("test_*.py")) if "node_modules" not in f.parts
            and not (f.parent / "__pycache__" / f"{f.stem}.{tag}").exists()]
    if len(cold) < 50:
        return
    collecting = [subprocess.Popen(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p",
         "no:cacheprovider", *map(str, half)], cwd=tests.parent,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for half in (cold[::2], cold[1::2])]
    for proc in collecting:  # a collection that hangs is the workers' to report
        try:
            proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
