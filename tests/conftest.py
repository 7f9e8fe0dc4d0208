"""Shared fixtures: where the example organisation lives, and its secret variables."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

# examples/README.md, section Secrets.
EXAMPLE_SECRET_VARS = (
    "GOVSYNC_EXAMPLE_LOGSTORE_API_KEY",
    "GOVSYNC_EXAMPLE_BI_API_KEY",
    "GOVSYNC_EXAMPLE_BI_API_SECRET",
    "GOVSYNC_EXAMPLE_MDM_API_KEY",
    "GOVSYNC_EXAMPLE_AI_PROVIDER_API_KEY",
)


@pytest.fixture
def example_secrets(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Set every secret variable the examples read to a dummy value."""
    values = {name: f"dummy-{name.lower()}" for name in EXAMPLE_SECRET_VARS}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
