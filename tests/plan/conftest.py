"""Fixtures for plan tests: every test runs in its own directory (so
``.govsync/`` lands in tmp), with the examples' secret variables set."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from plan_helpers import EXAMPLES, Gov

from testkit import examples, without_settings

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            example_secrets: dict[str, str]) -> Iterator[Path]:
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.fixture
def gov(workdir: Path) -> Gov:
    return Gov(workdir)


@pytest.fixture
def manifests(workdir: Path) -> Path:
    """A copy of examples/manifests that a test may edit."""
    return Path(shutil.copytree(EXAMPLES, workdir / "manifests"))


@pytest.fixture
def applied(gov: Gov, manifests: Path) -> Path:
    """The examples, applied to the embedded server; returns the manifests' copy."""
    result = gov.apply_local(manifests)
    assert f"Apply: {N} applied, 0 failed, 0 skipped, 0 uncertain, 0 forgotten ({N} requests in " \
        in result.stdout, result.output
    return manifests
