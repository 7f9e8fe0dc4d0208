"""Links between manifests: every reference, ``dependsOn`` and hook a policy's code reads
(``input.hooks.<name>``) names a manifest."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import NamedTuple

from govsync.errors import Problem
from govsync.manifests.code import hook_problems
from govsync.manifests.manifest import Manifest
from govsync.manifests.wording import did_you_mean


class Link(NamedTuple):
    """A reference of a document that has problems of its own (so it made no manifest),
    where it is written: checked like a manifest's, every error at once."""

    file: str
    line: int
    col: int
    label: str    # "spec.spaceRef refers to", "metadata.dependsOn names"
    address: str


def check_links(
    manifests: Iterable[Manifest],
    objects: Collection[str],
    unknown: Collection[tuple[str | None, str | None]] = (),
    links: Iterable[Link] = (),
) -> list[Problem]:
    """References and dependsOn entries must name objects in the manifests.

    An address that a document with errors may define (``unknown``) is not
    reported: that document's own errors are.  ``links`` are the references of
    documents with errors, reported where they are written.
    """
    problems: list[Problem] = []
    everything = (None, None) in unknown

    def missing(address: str) -> bool:
        if address in objects or everything:
            return False
        kind, name = address.split("/", 1)
        return not ({(kind, name), (kind, None), (None, name)} & set(unknown))

    for m in manifests:
        for ref_field, address in m.refs:
            if missing(address):
                problems.append(Problem(
                    *m.where(f"spec.{ref_field}"),
                    f"spec.{ref_field} refers to {address}, which no manifest defines"
                    f"{did_you_mean(address, objects)}",
                ))
        for address in m.uses:
            if missing(address):
                problems.extend(hook_problems(
                    m, address, f"names {address}, which no manifest defines"
                                f"{did_you_mean(address, objects)}"))
        for i, address in enumerate(m.depends_on):
            if missing(address):
                problems.append(Problem(
                    *m.where(f"metadata.dependsOn.{i}"),
                    f"metadata.dependsOn names {address}, which no manifest defines"
                    f"{did_you_mean(address, objects)}",
                ))
    for link in links:
        if missing(link.address):
            problems.append(Problem(
                link.file, link.line, link.col,
                f"{link.label} {link.address}, which no manifest defines"
                f"{did_you_mean(link.address, objects)}",
            ))
    return problems


