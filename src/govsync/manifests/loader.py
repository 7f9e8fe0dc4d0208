"""Loading manifests: find the files, read each document, check it, link them.

``load`` returns a :class:`ManifestSet` or raises ManifestError listing every
problem (syntax, schema, references, duplicates, cycles), each at its place.
Files are read and checked independently (``read_file``), so the command
line may spread a large set over processes (``parallel.forked_reader``);
this module itself has no process-wide effect.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from govsync.errors import ManifestError, Problem
from govsync.files import manifest_files
from govsync.manifests.documents import check_document, identity
from govsync.manifests.links import check_links
from govsync.manifests.model import Manifest, ManifestSet, document_root
from govsync.manifests.names import skeleton
from govsync.manifests.yamlio import iter_documents, locate, read_text


@dataclass
class FileResult:
    """What one file contributes; computed on its own, so files can be read in parallel."""

    digest: bytes = b""
    problems: list[Problem] = field(default_factory=list)
    unknown: set[tuple[str | None, str | None]] = field(default_factory=set)
    # (manifest or None, kind, name, file, line, source, index) per document
    documents: list[tuple[Manifest | None, str | None, str | None, str, int, str, int]] = field(
        default_factory=list)


def read_file(path: str, display: str) -> FileResult:
    """Read and check one file on its own."""
    result = FileResult()
    text, problem = read_text(path, display)
    if problem is not None:
        result.problems.append(problem)
        result.unknown.add((None, None))
        return result
    assert text is not None
    result.digest = hashlib.sha256(display.encode() + b"\0" + text.encode()).digest()
    for item in iter_documents(text, display):
        if isinstance(item, Problem):
            result.problems.append(item)
            result.unknown.add((None, None))  # the rest of the file is unread
            continue
        if item.value is None:  # an empty document
            continue
        manifest = check_document(item, result.problems, source=path)
        kind, name = identity(item.value)
        if manifest is None:
            result.unknown.add((kind, name))
        result.documents.append((manifest, kind, name, item.file, item.line, path, item.index))
    return result


Reader = Callable[[list[tuple[str, str]]], list["FileResult"]]


def _lookalikes(objects: dict[str, Manifest]) -> list[Problem]:
    """Names of one kind that a reviewer could not tell apart."""
    seen: dict[tuple[str, str], Manifest] = {}
    problems = []
    for address in sorted(objects):
        manifest = objects[address]
        name = manifest.name
        key = (manifest.kind.name, name if name.isascii() else skeleton(name))
        first = seen.setdefault(key, manifest)
        if first is not manifest:
            later, earlier = (manifest, first) if manifest.name > first.name else (first, manifest)
            problems.append(Problem(
                *later.where("metadata.name"),
                f"metadata.name {later.name!r} looks like {earlier.address} "
                f"({earlier.file}:{earlier.line}) but is another name: rename one of them "
                "so that reviewers can tell them apart"))
    return problems


def read_files(files: list[tuple[str, str]]) -> list[FileResult]:
    """Every file in turn, in this process."""
    return [read_file(p, d) for p, d in files]


def load(paths: Sequence[str], *, read: Reader = read_files) -> ManifestSet:
    """Load and check every manifest under ``paths``; raise ManifestError
    listing every problem (syntax, schema, references, duplicates, cycles)."""
    files, problems = manifest_files(paths)
    objects: dict[str, Manifest] = {}
    # Where each address was first defined, valid or not (duplicates).
    defined: dict[str, tuple[str, int]] = {}
    # What documents that could not be checked might define: references that
    # match are not reported as dangling, since they may be fine once those
    # documents are fixed.  (kind, name); None matches any.
    unknown: set[tuple[str | None, str | None]] = set()
    digest = hashlib.sha256()
    for result in read(files):
        digest.update(result.digest)
        problems.extend(result.problems)
        unknown |= result.unknown
        for manifest, kind, name, file, line, source, index in result.documents:
            if kind is not None and name is not None:
                address = f"{kind}/{name}"
                first = defined.get(address)
                if first is not None:
                    root = document_root(source, file, index)
                    where = locate(root, ("metadata", "name")) if root is not None else (line, 1)
                    problems.append(Problem(
                        file, *where,
                        f"duplicate address {address}: also defined at {first[0]}:{first[1]}; "
                        "names must be unique per kind: rename one of them",
                    ))
                    continue
                defined[address] = (file, line)
            if manifest is not None:
                objects[manifest.address] = manifest
    problems.extend(_lookalikes(objects))
    problems.extend(check_links(objects.values(), objects.keys(), unknown))
    # The cycle check runs on the valid part of the graph even when other
    # documents have errors (edges to them are left out): every error at once.
    from govsync.graph import order_or_cycles

    order, cycles = order_or_cycles(objects)
    problems.extend(cycles)
    if problems:
        raise ManifestError(problems)
    return ManifestSet(objects, [d for _, d in files], digest.hexdigest(), order)


