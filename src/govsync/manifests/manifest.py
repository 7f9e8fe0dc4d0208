"""What loading manifests produces: a ``Manifest`` per valid document and the
``ManifestSet`` of them all."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync import paths
from govsync.api.kinds import Kind
from govsync.errors import Problem
from govsync.manifests.directives import Directive
from govsync.manifests.yamlio import RawDocument, iter_documents, locate, read_text
from govsync.paths import Path

Position = tuple[int, int]


@dataclass(frozen=True)
class Context:
    """What reading a manifest depends on beyond its file: the variables of the
    environment selected (its name for messages)."""

    variables: Mapping[str, Any] = field(default_factory=dict)
    environment: str | None = None

    @property
    def where(self) -> str:
        return f"environment {self.environment}" if self.environment else "the project"


@dataclass(slots=True)
class Manifest:
    """One valid manifest document."""

    kind: Kind
    name: str
    file: str
    line: int
    col: int
    # The create request with defaults; references and secrets as typed
    # leaves (govsync.values), at the paths listed in ``holes``.
    template: dict[str, Any]
    holes: tuple[Path, ...] = ()
    # (field, target address) for every reference written by name.
    # (Tuples, and a dict only once a position is asked for: at 100,000
    # manifests each empty list or dict would cost 6 MB.)
    refs: tuple[tuple[str, str], ...] = ()
    depends_on: tuple[str, ...] = ()
    # Addresses its code names (a policy's input.hooks.<name>: Hook/<name>): edges too.
    uses: tuple[str, ...] = ()
    # Where the document is on disk, to find a node's line and column when an
    # error needs it (positions are not kept: 10,000 documents' worth would
    # cost a sixth of planning them).
    source: str = ""
    index: int = 0
    positions: dict[str, Position] | None = None
    # Spec fields (dotted) a Patch set or removed -> the patch, e.g. "Patch/prod (f.yaml:3)".
    patched: dict[str, str] | None = None

    @property
    def address(self) -> str:
        return f"{self.kind.name}/{self.name}"

    @property
    def dependencies(self) -> tuple[str, ...]:
        """Addresses this object waits for: its references, the hooks its code uses and
        dependsOn, sorted."""
        return tuple(sorted({a for _, a in self.refs} | set(self.uses) | set(self.depends_on)))

    def where(self, what: str = "") -> tuple[str, int, int]:
        """(file, line, col) of a dotted path such as ``spec.logStoreB.apiKey``."""
        if not what:
            return self.file, self.line, self.col
        if self.positions is None:
            self.positions = {}
        if what not in self.positions:
            root = document_root(self.source, self.file, self.index)
            self.positions[what] = (locate(root, paths.split(what)) if root is not None
                                    else (self.line, self.col))
        line, col = self.positions[what]
        return self.file, line, col


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def document_root(source: str, display: str, index: int) -> Any:
    """The node tree of one document, read again from disk (errors only)."""
    return _document_root(os.path.abspath(source), _stamp(source), display, index)


@functools.lru_cache(maxsize=16)
def _document_root(source: str, stamp: tuple[int, int], display: str, index: int) -> Any:
    # Keyed by absolute path and modification stamp, so a changed file is read anew.
    text, _problem = read_text(source, display)
    if text is None:
        return None
    for item in iter_documents(text, display):
        if isinstance(item, RawDocument) and item.index == index:
            return item.root
    return None


@dataclass
class ManifestSet:
    """Every manifest found under the given paths, by address."""

    objects: dict[str, Manifest]
    files: list[str]
    digest: str
    # Addresses in dependency order (ties by address): the order of plans.
    order: list[str] = field(default_factory=list)
    # Moved, Import and Removed documents (patches are applied by then).
    directives: list[Directive] = field(default_factory=list)
    # PolicyTest documents (manifests/policytest.py): what govsync test and plans run.
    tests: list[Directive] = field(default_factory=list)
    # What was found that is not an error (validate's code checks: data.<key> that no
    # loader loads...), each at its place.
    warnings: list[Problem] = field(default_factory=list)

    @property
    def removals(self) -> list[Directive]:
        """The Removed documents."""
        return [d for d in self.directives if d.kind == "Removed"]
