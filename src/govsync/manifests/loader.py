"""Loading manifests: find the files, read each document, check it, link them.

``load`` returns a :class:`ManifestSet` or raises ManifestError listing every
problem (syntax, schema, references, duplicates, cycles), each at its place.
Files are read and checked independently (``read_file``), so the command
line may spread a large set over processes (``cli.reading.forked_reader``);
this module itself has no process-wide effect.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from govsync.api.kinds import HOOK_KIND, POLICY_KIND
from govsync.errors import ManifestError, Problem
from govsync.files import manifest_files
from govsync.graph import order_or_cycles
from govsync.manifests import policytest
from govsync.manifests.code import check_code
from govsync.manifests.directives import DIRECTIVE_KINDS, Directive, check_directive, merge_patch
from govsync.manifests.documents import Override, check_document, identity
from govsync.manifests.links import Link, check_links
from govsync.manifests.manifest import Context, Manifest, ManifestSet, document_root
from govsync.manifests.names import skeleton
from govsync.manifests.wording import did_you_mean
from govsync.manifests.yamlio import Builder, RawDocument, iter_documents, locate, read_text
from govsync.paths import Path
from govsync.paths import text as paths_text


@dataclass(slots=True)
class DocumentResult:
    """One document of a file: what it is, and its own problems.  Slotted, its
    problems a list only when there are some: load holds one per document
    until the end (at 100,000 documents, 25 MB less at the peak)."""

    manifest: Manifest | None
    kind: str | None
    name: str | None
    file: str
    line: int
    source: str
    index: int
    problems: list[Problem] | None = None
    # The references of a document that made no manifest (checked all the same).
    links: list[Link] | None = None


@dataclass
class FileResult:
    """What one file contributes; computed on its own, so files can be read in parallel."""

    digest: bytes = b""
    # Problems of the file itself (it cannot be read, or its YAML is broken).
    problems: list[Problem] = field(default_factory=list)
    documents: list[DocumentResult] = field(default_factory=list)
    directives: list[Directive] = field(default_factory=list)
    unreadable: bool = False  # some of it could not be read: it may define anything


def read_file(path: str, display: str, context: Context | None = None) -> FileResult:
    """Read and check one file on its own."""
    text, problem = read_text(path, display)
    if problem is not None:
        return FileResult(problems=[problem], unreadable=True)
    assert text is not None
    return check_text(path, display, text, file_digest(display, text), context)


def file_digest(display: str, text: str) -> bytes:
    """What identifies a file's contribution: its name as shown, and its text."""
    return hashlib.sha256(display.encode() + b"\0" + text.encode()).digest()


def check_text(path: str, display: str, text: str, digest: bytes,
               context: Context | None = None) -> FileResult:
    """Check one file's text (read from ``path``, shown as ``display``)."""
    result = FileResult(digest=digest)
    for item in iter_documents(text, display):
        if isinstance(item, Problem):
            result.problems.append(item)
            result.unreadable = True  # the rest of the file is unread
            continue
        if item.value is None:  # an empty document
            continue
        problems: list[Problem] = []
        if isinstance(item.value, dict) and item.value.get("kind") in DIRECTIVE_KINDS:
            directive = check_directive(item, problems, path)
            if directive is not None:
                result.directives.append(directive)
            result.problems.extend(problems)
            continue
        links: list[Link] = []
        manifest = check_document(item, problems, source=path, context=context, links=links)
        kind, name = identity(item.value)
        result.documents.append(DocumentResult(manifest, kind, name, item.file, item.line, path,
                                               item.index, problems or None, links or None))
    return result


Reader = Callable[[list[tuple[str, str]], Context], list["FileResult"]]


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


def read_files(files: list[tuple[str, str]], context: Context) -> list[FileResult]:
    """Every file in turn, in this process."""
    return [read_file(p, d, context) for p, d in files]


class ReadCache:
    """A reader that keeps what it checked, by content, for a process that loads the
    same manifests again and again (the agent: every cycle of every environment).

    Each file is read every time, and checked again only when its text, its name
    or the context (the environment's variables) differ from the last load: a
    cycle over 10,000 unchanged objects skips their parsing.  What it keeps is
    what ``read_file`` would return, and nothing downstream changes it (a patch
    makes new documents; a manifest's positions are read from the same text).  It
    keeps the files of its last load only, so one cache serves one selection (an
    environment) and holds at most one load's worth."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str], FileResult] = {}
        self._context: Context | None = None

    def __call__(self, files: list[tuple[str, str]], context: Context) -> list[FileResult]:
        if context != self._context:
            self._kept, self._context = {}, context
        kept: dict[tuple[str, str], FileResult] = {}
        out = []
        for path, display in files:
            text, problem = read_text(path, display)
            if problem is not None:
                out.append(FileResult(problems=[problem], unreadable=True))
                continue
            assert text is not None
            digest = file_digest(display, text)
            found = self._kept.get((path, display))
            if found is None or found.digest != digest:
                found = check_text(path, display, text, digest, context)
            kept[(path, display)] = found
            out.append(found)
        self._kept = kept
        return out


def load(paths: Sequence[str], *, read: Reader = read_files,
         context: Context | None = None, code: bool = False) -> ManifestSet:
    """Load and check every manifest under ``paths``; raise ManifestError
    listing every problem (syntax, schema, references, duplicates, cycles).

    ``code`` (validate): every Policy's, Permission's and Hook's code checked too
    (compiled, parsed, in the bounded worker), its errors among the others and its
    warnings in the set's (or the error's) ``warnings``."""
    context = context or Context()
    files, problems = manifest_files(paths)
    if not files and not problems:
        # An empty folder would plan every recorded object as an orphan.
        raise ManifestError([Problem(p, 1, 1, "no manifest files (*.yaml, *.yml) here: check "
                                     "the path") for p in paths])
    results = read(files, context)
    digest = hashlib.sha256()
    for result in results:
        digest.update(result.digest)
        problems.extend(result.problems)
    documents = [d for r in results for d in r.documents]
    coded = [d.manifest.kind.code for d in documents
             if code and d.manifest is not None and d.manifest.kind.code]
    if coded:  # the engines' workers start while the references and the graph are checked
        from govsync.policycode import sandbox  # the worker's module: code only

        sandbox.warm({r for r in coded if r is not None}, len(coded))
    directives = [d for r in results for d in r.directives]
    patches = _in_path_order([d for d in directives if d.kind == "Patch"], paths)
    if patches:
        documents = _patched(documents, patches, context, problems)
    objects: dict[str, Manifest] = {}
    # The document that first defined each address, valid or not (duplicates).
    defined: dict[str, DocumentResult] = {}
    # What documents that could not be checked might define: references that
    # match are not reported as dangling, since they may be fine once those
    # documents are fixed.  (kind, name); None matches any.
    unknown: set[tuple[str | None, str | None]] = set()
    if any(r.unreadable for r in results):
        unknown.add((None, None))
    for doc in documents:
        if doc.problems:
            problems.extend(doc.problems)
        if doc.manifest is None:
            unknown.add((doc.kind, doc.name))
        if doc.kind is not None and doc.name is not None:
            address = f"{doc.kind}/{doc.name}"
            first = defined.get(address)
            if first is not None:
                root = document_root(doc.source, doc.file, doc.index)
                where = (locate(root, ("metadata", "name")) if root is not None
                         else (doc.line, 1))
                problems.append(Problem(
                    doc.file, *where,
                    f"duplicate address {address}: also defined at {first.file}:{first.line}; "
                    "names must be unique per kind: rename one of them",
                ))
                continue
            defined[address] = doc
            if doc.manifest is not None:
                objects[address] = doc.manifest
    problems.extend(_lookalikes(objects))
    pending = [link for d in documents if d.manifest is None and d.links for link in d.links]
    problems.extend(check_links(objects.values(), objects.keys(), unknown, pending))
    # The cycle check runs on the valid part of the graph even when other
    # documents have errors (edges to them are left out): every error at once.

    order, cycles = order_or_cycles(objects)
    problems.extend(cycles)
    tests = [d for d in directives if d.kind == policytest.KIND]
    problems.extend(_test_references(tests, objects, unknown))
    problems.extend(_directive_targets(directives, objects, unknown))
    warnings: list[Problem] = []
    if code:
        errors, warnings = check_code(objects)
        problems.extend(errors)
    if problems:
        raise ManifestError(problems, warnings=warnings)
    others = [d for d in directives if d.kind not in ("Patch", policytest.KIND)]
    return ManifestSet(objects, [d for _, d in files], digest.hexdigest(), order, others,
                       tests=tests, warnings=warnings)


def _test_references(tests: list[Directive], objects: dict[str, Manifest],
                     unknown: set[tuple[str | None, str | None]]) -> list[Problem]:
    """A PolicyTest's policyRef names a Policy, and each hook result a case gives names a
    Hook, of the manifests (or of a document that could not be checked)."""
    problems = []
    for test in tests:
        address = f"{POLICY_KIND}/{test.spec['policyRef']}"
        if address not in objects and not _may_define(unknown, address):
            problems.append(Problem(*test.where("policyRef"), (
                f"{test.label}: spec.policyRef names {address}, which no manifest defines"
                f"{did_you_mean(address, objects)}")))
        for case in policytest.cases(test.spec):
            for hook in case.hooks:
                named = f"{HOOK_KIND}/{hook}"
                if named not in objects and not _may_define(unknown, named):
                    problems.append(Problem(*test.where(f"cases[{case.at}].hooks.{hook}"), (
                        f"{test.label}: case {case.name!r} gives the result of {named}, which "
                        f"no manifest defines{did_you_mean(named, objects)}")))
    return problems


def _directive_targets(directives: list[Directive], objects: dict[str, Manifest],
                       unknown: set[tuple[str | None, str | None]]) -> list[Problem]:
    """A Moved or Import document's ``to`` names an object the manifests define (or a
    document that could not be checked): ``validate`` and ``plan`` both load through here."""
    problems = []
    for d in directives:
        if d.kind not in ("Moved", "Import"):
            continue
        address = d.spec["to"]
        if address not in objects and not _may_define(unknown, address):
            hint = did_you_mean(address, objects)
            add = ("the object's manifest under its new address" if d.kind == "Moved"
                   else "the manifest of the object it adopts")
            problems.append(Problem(*d.where("to"), (
                f"{d.label}: no manifest defines {address}"
                + (f" ({hint[2:]})" if hint.startswith(": did you") else "")
                + f": add {add} (or remove "
                f"the {d.kind} document once it is applied)")))
    return problems


def _may_define(unknown: set[tuple[str | None, str | None]], address: str) -> bool:
    kind, name = address.split("/", 1)
    return bool(unknown & {(None, None), (kind, name), (kind, None), (None, name)})


def _in_path_order(directives: list[Directive], paths: Sequence[str]) -> list[Directive]:
    """Path order (as given), then file order, then document order."""
    roots = [os.path.normpath(p) for p in paths]

    def rank(d: Directive) -> tuple[int, str, int]:
        shown = os.path.normpath(d.file)
        for i, root in enumerate(roots):
            if shown == root or shown.startswith(root.rstrip(os.sep) + os.sep):
                return (i, d.file, d.index)
        return (len(roots), d.file, d.index)

    return sorted(directives, key=rank)


def _patched(documents: list[DocumentResult], patches: list[Directive], context: Context,
             problems: list[Problem]) -> list[DocumentResult]:
    """The documents with every patch applied; a patched document is checked again."""
    by_address = {f"{d.kind}/{d.name}": i for i, d in enumerate(documents)
                  if d.kind is not None and d.name is not None}
    targeted: dict[int, list[Directive]] = {}
    for patch in patches:
        target = patch.spec["target"]
        if target not in by_address:
            problems.append(Problem(*patch.where("target"),
                                    f"{patch.label}: no document defines {target}, the patch's "
                                    "target: fix spec.target or remove the patch"))
            continue
        targeted.setdefault(by_address[target], []).append(patch)
    out = list(documents)
    for i, its_patches in targeted.items():
        doc = documents[i]
        root = document_root(doc.source, doc.file, doc.index)
        if root is None:
            continue
        value = Builder().build(root)
        spec = value.get("spec") if isinstance(value.get("spec"), dict) else {}
        overrides: list[Override] = []
        patched: dict[str, str] = {}
        for patch in its_patches:
            set_paths: list[Path] = []
            spec = merge_patch(spec, patch.spec["merge"], (), set_paths)
            patch_root = document_root(patch.source, patch.file, patch.index)
            label = f"{patch.label} ({patch.file}:{patch.line})"
            for path in set_paths:
                patched[paths_text(path)] = label
                if patch_root is not None:
                    overrides.append(Override(("spec", *path), patch.file, patch_root,
                                              ("spec", "merge", *path)))
        raw = RawDocument(doc.file, doc.index, doc.line, 1, {**value, "spec": spec}, root)
        again: list[Problem] = []
        links: list[Link] = []
        manifest = check_document(raw, again, source=doc.source, context=context,
                                  overrides=overrides, links=links)
        if manifest is not None:
            manifest.patched = patched
        out[i] = DocumentResult(manifest, doc.kind, doc.name, doc.file, doc.line, doc.source,
                                doc.index, again or None, links or None)
    return out
