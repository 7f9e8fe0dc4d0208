"""Shared fixtures: where the example organisation lives, and its secret variables."""

from __future__ import annotations

import pytest

from testkit import EXAMPLE_SECRET_VARS


@pytest.fixture
def example_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Set every secret variable the examples read to a dummy value."""
    values = {name: f"dummy-{name.lower()}" for name in EXAMPLE_SECRET_VARS}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
