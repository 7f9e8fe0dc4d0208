"""The fast unit layer: library objects built directly, no subprocess.

Manifests are written to a temporary folder and loaded with ``load``; state
is a real SQLite store there; the API is the real reference server
in-process (``httpx.ASGITransport``)."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from govsync.manifests import ManifestSet, load
from govsync.state import Snapshot
from govsync.state.sqlite import SqliteStore

# tools/: the repository's development tools (checkgen), not shipped in the package.
TOOLS = Path(__file__).resolve().parents[2] / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))


@pytest.fixture
def manifests(tmp_path: Path) -> Callable[[str], ManifestSet]:
    """Load the YAML given (dedented) as one manifest file."""

    def make(text: str) -> ManifestSet:
        folder = tmp_path / "manifests"
        folder.mkdir(exist_ok=True)
        (folder / "objects.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
        return load([str(folder)])

    return make


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(str(tmp_path / "state.db")) as s:
        yield s


@pytest.fixture
def snapshot(store: SqliteStore) -> Snapshot:
    return store.snapshot("default")
