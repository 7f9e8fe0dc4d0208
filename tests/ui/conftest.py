"""The dashboard's fixtures: one repository with two environments, applied for real,
and ``govsync ui`` serving it (both once per module: an apply takes seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from uikit import Dashboard, build, start

from testkit import stop


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def dashboard(repo: Path) -> Iterator[Dashboard]:
    served = start(repo, log=repo / "ui.log")
    try:
        yield served
    finally:
        stop(served.process)
