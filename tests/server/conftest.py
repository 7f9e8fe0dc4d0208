"""Fixtures of the reference server tests (helpers live in ``serverkit.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from serverkit import InProcess, Served, World, make_app

from govsync.server import Store


@pytest.fixture
def app_store() -> tuple[Any, Store]:
    return make_app()


@pytest.fixture
def client(app_store: tuple[Any, Store]) -> Iterator[InProcess]:
    with InProcess(app_store[0]) as c:
        yield c


@pytest.fixture
def world(client: InProcess) -> World:
    return World(client)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(*args: str) -> Served:
        server = Served(list(args), tmp_path / f"serve-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
