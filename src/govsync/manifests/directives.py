"""Documents that are not objects: they change how other documents are read
or how state is kept (contract sections 5 and 6).

=========  ==================================================================
Patch      ``spec: {target: Kind/name, merge: {...}}``: an RFC 7386 JSON Merge
           Patch over the target document's spec, applied after every path
           is loaded, in path order then file order
Moved      ``spec: {from: Kind/old, to: Kind/new}``: re-address a state entry
Import     ``spec: {to: Kind/name, id: ID}``: adopt an object that exists
Removed    ``spec: {from: Kind/name, destroy: true|false}``: delete a recorded
           object whose manifest is gone (``destroy: true``), or drop it from
           state and leave it on the server (``false``), after review
PolicyTest ``spec: {policyRef: name, cases: [...]}``: what a Policy's code must
           decide (policytest.py), run by ``govsync test`` and on plans
=========  ==================================================================

None of them has an address in plans or state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from govsync.api.kinds import BY_KIND
from govsync.errors import Problem
from govsync.manifests import policytest, wording
from govsync.manifests.yamlio import TOP_KEYS, RawDocument, locate
from govsync.paths import Path

DIRECTIVE_KINDS = ("Patch", "Moved", "Import", "Removed", policytest.KIND)
_SPEC_KEYS = {"Patch": ("target", "merge"), "Moved": ("from", "to"), "Import": ("to", "id"),
              "Removed": ("from", "destroy"), policytest.KIND: policytest.SPEC_KEYS}


@dataclass(frozen=True)
class Directive:
    """One Patch, Moved, Import, Removed or PolicyTest document, checked."""

    kind: str
    name: str
    spec: dict[str, Any]
    file: str
    line: int
    col: int
    source: str
    index: int
    # Position of each spec field, for errors found later (a missing target...).
    places: dict[str, tuple[int, int]]

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    def where(self, field: str) -> tuple[str, int, int]:
        line, col = self.places.get(field, (self.line, self.col))
        return self.file, line, col


def check_directive(doc: RawDocument, problems: list[Problem], source: str) -> Directive | None:
    """Check a directive's shape; append problems."""
    start = len(problems)

    def problem(path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        problems.append(Problem(doc.file, *locate(doc.root, path, key=key), message))

    value = doc.value
    kind = value["kind"]
    for key in value:
        if key not in TOP_KEYS:
            problem((key,), wording.unknown(f"field {key!r}", str(key), TOP_KEYS), key=True)
    if value.get("apiVersion") != "govsync/v1":
        problem(("apiVersion",) if "apiVersion" in value else (), "apiVersion must be govsync/v1")
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    if not isinstance(name, str) or not name:
        problem(("metadata",) if isinstance(metadata, dict) else (),
                f"a {kind} needs metadata.name (a name for messages; it has no address)")
    elif isinstance(metadata, dict) and set(metadata) - {"name"}:
        extra = sorted(str(k) for k in set(metadata) - {"name"})[0]
        problem(("metadata", extra), f"a {kind}'s metadata holds only name", key=True)
    spec = value.get("spec")
    allowed = _SPEC_KEYS[kind]
    if not isinstance(spec, dict):
        problem(("spec",) if "spec" in value else (),
                f"a {kind} needs spec: {{{', '.join(f'{k}: ...' for k in allowed)}}}")
        return None
    wording.unknown_keys(spec, ("spec",), allowed, problem,
                   otherwise=f"a {kind} holds {' and '.join(allowed)}")
    for key in allowed:
        if key not in spec:
            problem(("spec",), f"missing spec.{key}: add it")
    _CHECKS[kind](spec, problem)
    if len(problems) > start:
        return None
    places = {key: locate(doc.root, ("spec", key)) for key in spec}
    if kind == policytest.KIND:
        places.update(policytest.places(doc.root, spec))
    assert isinstance(name, str)
    return Directive(kind, name, dict(spec), doc.file, doc.line, doc.col, source, doc.index,
                     places)


def _address(spec: dict[str, Any], key: str, problem: Callable[..., None]) -> None:
    value = spec.get(key)
    if key not in spec:
        return
    if (not isinstance(value, str) or value.count("/") != 1
            or value.split("/")[0] not in BY_KIND or not value.split("/")[1]):
        problem(("spec", key), f"spec.{key} must be an address Kind/name with a known kind, "
                f"not {wording.a_value(value)}")


def _check_patch(spec: dict[str, Any], problem: Callable[..., None]) -> None:
    _address(spec, "target", problem)
    if "merge" in spec and not isinstance(spec["merge"], dict):
        problem(("spec", "merge"), "spec.merge must be a mapping (an RFC 7386 merge patch of "
                "the target's spec)")


def _check_moved(spec: dict[str, Any], problem: Callable[..., None]) -> None:
    _address(spec, "from", problem)
    _address(spec, "to", problem)
    old, new = spec.get("from"), spec.get("to")
    if isinstance(old, str) and isinstance(new, str) and "/" in old and "/" in new:
        if old.split("/")[0] != new.split("/")[0]:
            problem(("spec", "to"), f"a move keeps the kind: {old} cannot become {new} "
                    "(an object's kind never changes)")
        elif old == new:
            problem(("spec", "to"), "spec.from and spec.to are the same address")


def _check_import(spec: dict[str, Any], problem: Callable[..., None]) -> None:
    _address(spec, "to", problem)
    if "id" in spec and (not isinstance(spec["id"], str) or not spec["id"].strip()):
        problem(("spec", "id"), f"spec.id must be the object's id on the server (a string), "
                f"not {wording.a_value(spec['id'])}")


def _check_removed(spec: dict[str, Any], problem: Callable[..., None]) -> None:
    _address(spec, "from", problem)
    if "destroy" in spec and not isinstance(spec["destroy"], bool):
        problem(("spec", "destroy"), "spec.destroy must be true (delete the object on the "
                f"server) or false (drop it from state only), not {wording.a_value(spec['destroy'])}")


_CHECKS: dict[str, Callable[[dict[str, Any], Callable[..., None]], None]] = {
    "Patch": _check_patch, "Moved": _check_moved, "Import": _check_import,
    "Removed": _check_removed, policytest.KIND: policytest.check_spec,
}


def merge_patch(target: Any, patch: Any, at: Path = (), set_paths: list[Path] | None = None
                ) -> Any:
    """RFC 7386 JSON Merge Patch of ``patch`` onto ``target`` (a copy); the paths it
    sets or removes are appended to ``set_paths``."""
    if not isinstance(patch, dict):
        if set_paths is not None:
            set_paths.append(at)
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
            if set_paths is not None:
                set_paths.append((*at, key))
        else:
            result[key] = merge_patch(result.get(key), value, (*at, key), set_paths)
    return result
