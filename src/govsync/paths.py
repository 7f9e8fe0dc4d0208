"""Dotted paths into JSON-like data: the one place that reads and writes them.

A path is a tuple of keys (``str``) and list indexes (``int``); its text form
is ``logStoreB.apiKey`` or ``rules[0].name``.  Writes copy each container on
the way down, so the data they start from is never changed: templates are
shared between plans, and a plan must not alter the manifests it was made
from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Path = tuple[str | int, ...]


def split(text: str) -> Path:
    """``"a.b.0"`` -> ``("a", "b", 0)``: a digit-only step is a list index."""
    return tuple(int(p) if p.isdigit() else p for p in text.split(".")) if text else ()


def parse(text: str) -> Path:
    """``"a[0].b"`` (the text form) -> ``("a", 0, "b")``."""
    out: list[str | int] = []
    for part in text.split(".") if text else ():
        name, _, rest = part.partition("[")
        if name:
            out.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            out.append(int(index))
            rest = rest[1:] if rest.startswith("[") else rest
    return tuple(out)


def text(path: Path) -> str:
    """``("a", 0, "b")`` -> ``"a[0].b"``, as messages and diffs show it."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def get(data: Any, path: Path, default: Any = None) -> Any:
    """The value at ``path``, or ``default`` where the path does not lead."""
    for step in path:
        if isinstance(step, int):
            if not isinstance(data, list) or not -len(data) <= step < len(data):
                return default
        elif not isinstance(data, Mapping) or step not in data:
            return default
        data = data[step]
    return data


def has(data: Any, path: Path) -> bool:
    marker = object()
    return get(data, path, marker) is not marker


def replace(data: Any, path: Path, value: Any) -> Any:
    """A copy of ``data`` with ``value`` at ``path`` (containers on the way copied)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, list):
        copy: Any = list(data)
    else:
        copy = dict(data)
    copy[head] = replace(copy[head], rest, value)
    return copy


def put(data: Any, path: Path, value: Any) -> Any:
    """A copy of ``data`` with ``value`` at ``path``, the mappings on the way made where
    missing; ``DELETE`` as the value removes the key.  KeyError where a list index or a
    non-mapping is in the way."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        if not isinstance(data, list) or not -len(data) <= head < len(data):
            raise KeyError(head)
        copy: Any = list(data)
    elif isinstance(data, Mapping):
        copy = dict(data)
    elif data is None:
        copy = {}
    else:
        raise KeyError(head)
    if not rest and value is DELETE:
        if isinstance(copy, dict):
            copy.pop(head, None)
        return copy
    copy[head] = put(copy.get(head) if isinstance(copy, dict) else copy[head], rest, value)
    return copy


DELETE: Any = object()


def under(path: Path, prefix: Path) -> bool:
    """Whether ``path`` is ``prefix`` or below it."""
    return path[: len(prefix)] == prefix


# Nesting levels of one document, and of JSON data govsync is handed (a hook's result,
# a recorded request).  A manifest has under ten; the limit keeps the recursive builders
# (and whatever walks, pickles or hands the values to an engine later) off Python's
# recursion limit.
MAX_DEPTH = 100


def nested_over(value: object, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON data ``value`` nests deeper than ``limit`` levels (walked without
    recursion)."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                                   else item))
    return False
