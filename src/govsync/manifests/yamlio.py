"""Safe, fast YAML reading with positions.

libyaml (PyYAML's C parser) composes each document into nodes; govsync
builds plain Python values from the nodes itself instead of PyYAML's
constructor, because it must

* refuse duplicate keys (YAML loaders silently keep the last one),
* refuse every tag that is not a plain YAML type (no custom tags),
* bound alias expansion ("billion laughs") before it exhausts memory,
* point every error at ``line:col`` of the node concerned.

It is also faster than ``yaml.load_all(..., CSafeLoader)``, whose
constructor is written in Python (see BENCHMARKS.md).  Nodes are dropped
after each document, so memory stays proportional to the values.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from govsync.errors import Problem

MAX_FILE_BYTES = 10 * 1024 * 1024
# Nodes one document may expand to through aliases.  A manifest has tens.
MAX_DOCUMENT_NODES = 100_000

_T = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = _T + "str", _T + "int", _T + "float", _T + "bool", _T + "null"
MAP, SEQ, MERGE, TIMESTAMP = _T + "map", _T + "seq", _T + "merge", _T + "timestamp"

_Loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_constructor = yaml.SafeLoader("")  # for YAML 1.1 ints and floats (0x.., 1_000, .inf)
_PLAIN_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")


class YamlProblem(Exception):
    """An error at a node; turned into a Problem by the caller."""

    def __init__(self, node: Node | None, message: str) -> None:
        self.node = node
        super().__init__(message)


@dataclass(slots=True)
class RawDocument:
    """One YAML document: its value and where it starts."""

    file: str
    index: int
    line: int
    col: int
    value: Any
    root: Node


def position(node: Node | None) -> tuple[int, int]:
    if node is None:
        return (1, 1)
    mark = node.start_mark
    return (mark.line + 1, mark.column + 1)


@contextmanager
def _gc_paused() -> Iterator[None]:
    # Composing allocates many small acyclic objects; the cyclic collector
    # would scan them over and over (3x slower at 10,000 documents).
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_text(path: str, display: str) -> tuple[str | None, Problem | None]:
    """Read a file as UTF-8, refusing large and non-UTF-8 files."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        return None, Problem(display, 1, 1, f"cannot read file: {exc.strerror}")
    if len(data) > MAX_FILE_BYTES:
        return None, Problem(
            display, 1, 1, "file is larger than 10 MiB: split it into several manifest files"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        col = exc.start - (before.rfind(b"\n") + 1) + 1
        return None, Problem(
            display, line, col,
            f"file is not UTF-8 (byte 0x{data[exc.start]:02x}): save it as UTF-8",
        )
    return text, None


def iter_documents(text: str, display: str) -> Iterator[RawDocument | Problem]:
    """Yield each document of a YAML stream, or a Problem where it cannot go on."""
    loader = _Loader(text)
    index = 0
    try:
        with _gc_paused():
            while True:
                try:
                    if not loader.check_node():
                        break
                    node = loader.get_node()
                except yaml.MarkedYAMLError as exc:
                    yield _syntax_problem(display, exc)
                    return
                except yaml.YAMLError as exc:
                    yield Problem(display, 1, 1, f"YAML error: {exc}")
                    return
                line, col = position(node)
                try:
                    value = Builder().build(node)
                except YamlProblem as exc:
                    yield Problem(display, *position(exc.node), str(exc))
                else:
                    yield RawDocument(display, index, line, col, value, node)
                index += 1
    finally:
        loader.dispose()


def _syntax_problem(display: str, exc: yaml.MarkedYAMLError) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    what = exc.problem or "invalid YAML"
    if exc.context:
        what = f"{exc.context}, {what}"
    return Problem(display, line, col, f"YAML syntax error: {what}")


class Builder:
    """Builds plain values from a node tree, with the checks above."""

    __slots__ = ("budget",)

    def __init__(self) -> None:
        self.budget = MAX_DOCUMENT_NODES

    def build(self, node: Node) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise YamlProblem(
                node,
                f"document expands to more than {MAX_DOCUMENT_NODES:,} nodes through aliases: "
                "refusing it (alias expansion bomb?)",
            )
        tag = node.tag
        if isinstance(node, ScalarNode):
            value = node.value
            if tag == STR:
                return value
            if tag == INT:
                if _PLAIN_INT.match(value):
                    return int(value)
                return _constructor.construct_yaml_int(node)
            if tag == BOOL:
                return value.lower() in ("true", "yes", "on")
            if tag == NULL:
                return None
            if tag == FLOAT:
                return _constructor.construct_yaml_float(node)
            if tag == TIMESTAMP:
                return value  # timestamps are strings in the API
            raise YamlProblem(node, f"tag {tag} is not allowed: only plain YAML values are")
        if isinstance(node, MappingNode):
            if tag != MAP:
                raise YamlProblem(node, f"tag {tag} is not allowed: only plain YAML values are")
            return self._mapping(node)
        if isinstance(node, SequenceNode):
            if tag != SEQ:
                raise YamlProblem(node, f"tag {tag} is not allowed: only plain YAML values are")
            return [self.build(item) for item in node.value]
        raise YamlProblem(node, "unsupported YAML node")  # pragma: no cover

    def _mapping(self, node: MappingNode) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, MappingNode):
                        raise YamlProblem(source, "a merge key (<<) takes a mapping")
                    for k, v in self._mapping(source).items():
                        merged.setdefault(k, v)
                continue
            key = self.build(key_node)
            if isinstance(key, list | dict):
                raise YamlProblem(key_node, "a mapping key must be a plain value")
            if key in result:
                first = next(k for k, _ in node.value if k is not key_node and _same_key(k, key))
                line, col = position(first)
                raise YamlProblem(
                    key_node,
                    f"duplicate key {key!r} (first at line {line}, column {col}): "
                    "remove one of them",
                )
            result[key] = self.build(value_node)
        for k, v in merged.items():
            result.setdefault(k, v)
        return result


def _same_key(node: Node, key: Any) -> bool:
    return isinstance(node, ScalarNode) and node.value == str(key)


def locate(root: Node, path: tuple[Any, ...], *, key: bool = False) -> tuple[int, int]:
    """Line and column of the node at ``path`` (of its key when ``key``).

    Stops at the deepest node that exists, so a missing field points at the
    mapping that should hold it.
    """
    node: Node = root
    for i, step in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, MappingNode):
            for k, v in node.value:
                if isinstance(k, ScalarNode) and k.value == str(step):
                    if last and key:
                        return position(k)
                    node = v
                    break
            else:
                return position(node)
        elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
        else:
            return position(node)
    return position(node)
