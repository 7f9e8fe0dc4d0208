"""A work function whose module costs 64 MiB to import (tests/unit/test_bounded_unit.py):
what the worker's import of the work costs is not the work's."""

from __future__ import annotations

from typing import Any

BALLAST = bytearray(64 << 20)
BALLAST[::4096] = b"\1" * len(BALLAST[::4096])  # touched: resident, not only reserved


def small(step: Any) -> int:
    step("evaluating")
    return len(BALLAST) >> 20
