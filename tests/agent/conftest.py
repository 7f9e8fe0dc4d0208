"""The agent tests' fixture: the reference server as a process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from agentkit import KEY

from testkit import serve as serve_process
from testkit import stop as stop_process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    proc, url = serve_process(["--api-key", KEY], key=KEY, output=tmp_path / "server.log")
    try:
        yield url
    finally:
        stop_process(proc)
