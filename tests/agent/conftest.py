"""The agent tests' fixture: the reference server, in a thread of the test process (the
agent is the process these tests start, stop and kill)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agentkit import KEY

from testkit import Served


@pytest.fixture
def server() -> Iterator[str]:
    served = Served(["--api-key", KEY])
    try:
        yield served.url
    finally:
        served.stop()
