"""Where PostgreSQL should be there (``GOVSYNC_REQUIRE_POSTGRES=1``, as ``.ci/run``
sets it), the PostgreSQL half of the contract suite fails instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from statekit import POSTGRES_ENV, REQUIRE_ENV

ONE_POSTGRES_TEST = (f"{Path(__file__).parent / 'test_contract.py'}"
                     "::test_agent_values_are_recorded_replaced_and_removed[postgres]")


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    given = {k: v for k, v in os.environ.items() if k not in (POSTGRES_ENV, REQUIRE_ENV)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         ONE_POSTGRES_TEST], capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).parents[2], env={**given, **env}, check=False)


def test_unset_it_fails_when_required() -> None:
    failed = run({REQUIRE_ENV: "1"})
    assert failed.returncode == 1, failed.stdout
    assert f"{REQUIRE_ENV}=1 but {POSTGRES_ENV} is not set" in failed.stdout


def test_unreachable_it_fails_when_required() -> None:
    # Port 1: nothing listens there.
    failed = run({REQUIRE_ENV: "1", POSTGRES_ENV: "postgresql://postgres@127.0.0.1:1/test"})
    assert failed.returncode == 1, failed.stdout
    assert "cannot be reached" in failed.stdout
