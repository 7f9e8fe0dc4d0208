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

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentEndEvent,
    DocumentStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from govsync.api.catalog import INT_MAX, INT_MIN
from govsync.errors import Problem
from govsync.files import Unreadable, nesting_refused, read_regular, yaml_loader
from govsync.paths import MAX_DEPTH

# A manifest's keys and its metadata's, in the order fmt and migrate write them
# (the others after them, sorted): the one list of each.
TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
METADATA_KEYS = ("name", "dependsOn")
MAX_FILE_BYTES = 10 * 1024 * 1024
# Nodes one document may expand to through aliases.  A manifest has tens.
MAX_DOCUMENT_NODES = 100_000
# libyaml's composer recurses once per nesting level in C with no limit: a
# document some 30,000 levels deep overflows the C stack (a crash, not an
# exception).  Documents whose nesting cannot exceed this are composed
# directly; others are checked event by event first (_may_nest_deeper_than_safe).
COMPOSE_SAFE_DEPTH = 5_000

_T = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = _T + "str", _T + "int", _T + "float", _T + "bool", _T + "null"
MAP, SEQ, MERGE = _T + "map", _T + "seq", _T + "merge"

_Base: type = yaml_loader()


# YAML 1.2's core schema (spec 1.2.2, section 10.3.2): the only plain
# scalars that are not strings.  YAML 1.1's extras (yes/no/on/off, 1:30 as
# 90, 0755 as octal, 1_000, timestamps) are strings, as every YAML 1.2
# reader (and JSON) would have them.
_CORE = (
    (MERGE, re.compile(r"^<<$")),  # merge keys: YAML 1.1's, kept (every loader has them)
    (NULL, re.compile(r"^(?:~|null|Null|NULL|)$")),
    (BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    (INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")),
    (FLOAT, re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.nan|\.NaN|\.NAN)$")),
)


def core_tag(value: str) -> str:
    """The tag of a plain scalar under YAML 1.2's core schema."""
    for tag, pattern in _CORE:
        if pattern.match(value):
            return tag
    return STR


class _Loader(_Base):  # type: ignore[misc]
    """libyaml's parser with YAML 1.2 core-schema tags, memoised.

    The composer asks Python for each scalar's tag; manifests repeat the same
    keys and values thousands of times, so the answer is cached by value, for
    the first 10,000 values seen (those that repeat come early; beyond, names
    and descriptions would fill it: 5 MB kept alive at 100,000 objects).
    Path resolvers are not used, so descending and ascending is skipped.
    """

    _cache: dict[str, str] = {}

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass

    def ascend_resolver(self) -> None:
        pass

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is ScalarNode:
            if not implicit[0]:
                return STR  # quoted: always a string (no path resolvers here)
            tag = self._cache.get(value)
            if tag is None:
                tag = core_tag(value)
                if len(self._cache) < 10_000:
                    self._cache[value] = tag
            return tag
        return SEQ if kind is SequenceNode else MAP

# A line that starts or ends a document: no document spans one.
_LONG_LINE_CHARS = 1_000
_DOC_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)


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
    # Characters of every scalar built (aliases counted each time): a cheap
    # upper bound of the JSON the document becomes, less its punctuation.
    chars: int = 0


def position(node: Node | None) -> tuple[int, int]:
    if node is None:
        return (1, 1)
    mark = node.start_mark
    return (mark.line + 1, mark.column + 1)


def read_text(path: str, display: str) -> tuple[str | None, Problem | None]:
    """Read a file as UTF-8, refusing large and non-UTF-8 files and anything not regular
    (``files.read_regular``: a FIFO put in the file's place cannot hang the reader)."""
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except Unreadable as exc:
        message = str(exc)
        if message.startswith("it is larger"):
            message = "file is larger than 10 MiB: split it into several manifest files"
        return None, Problem(display, 1, 1, message)
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
    too_deep: tuple[int, Problem] | None = None
    if _may_nest_deeper_than_safe(text):
        too_deep = _find_too_deep(text, display)
    loader = _Loader(text)
    index = 0
    try:
        while True:
            try:
                if not loader.check_node():
                    break
                if too_deep is not None and too_deep[0] == index:
                    yield too_deep[1]
                    return
                node = loader.get_node()
            except yaml.MarkedYAMLError as exc:
                yield _syntax_problem(display, exc, text)
                return
            except yaml.reader.ReaderError as exc:
                yield _reader_problem(display, exc, text)
                return
            except yaml.YAMLError as exc:
                yield Problem(display, 1, 1, "YAML error: " + " ".join(str(exc).split()))
                return
            line, col = position(node)
            builder = Builder()
            try:
                value = builder.build(node)
            except YamlProblem as exc:
                where = position(exc.node) if exc.node is not None else (line, col)
                yield Problem(display, *where, str(exc))
            else:
                yield RawDocument(display, index, line, col, value, node, builder.chars)
            index += 1
    finally:
        loader.dispose()


def _may_nest_deeper_than_safe(text: str) -> bool:
    """False when no document of ``text`` can nest beyond COMPOSE_SAFE_DEPTH.

    Within a document, flow nesting is at most its number of '[' and '{', and
    block nesting at most twice its longest line plus one (each block level
    indents by a column or adds an indicator, except a sequence under a
    mapping key, whose items then indent).  No document spans a ``---`` or
    ``...`` line.  Every test is a C-speed scan of the text.
    """
    if len(text) <= COMPOSE_SAFE_DEPTH:
        return False
    if max(map(len, text.split("\n"))) > _LONG_LINE_CHARS:
        return True
    flow_budget = COMPOSE_SAFE_DEPTH - 2 * _LONG_LINE_CHARS - 2
    if text.count("[") + text.count("{") <= flow_budget:
        return False
    return any(
        chunk.count("[") + chunk.count("{") > flow_budget for chunk in _DOC_MARKER.split(text)
    )


def _find_too_deep(text: str, display: str) -> tuple[int, Problem] | None:
    """(index of the first document nested deeper than MAX_DEPTH, its Problem).

    Reads events only (libyaml's parser keeps its own stack on the heap), so
    it is safe at any depth.  Syntax errors are left to the composing pass,
    which stops at them before reaching a depth this pass did not check.
    """
    loader = _Loader(text)
    index, depth, inside = -1, 0, False
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    mark = event.start_mark
                    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
                    return index, Problem(display, line, col, _too_deep_message())
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            elif isinstance(event, DocumentStartEvent):
                index, inside = index + 1, True
            elif isinstance(event, DocumentEndEvent):
                inside = False
    except yaml.YAMLError as exc:
        if nesting_refused(exc):  # libyaml's own limit, met scanning ahead
            assert isinstance(exc, yaml.MarkedYAMLError)
            mark = exc.problem_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            return (index if inside else index + 1), Problem(display, line, col,
                                                             _too_deep_message())
        return None
    finally:
        loader.dispose()
    return None


def _too_deep_message() -> str:
    return (
        f"document is nested more than {MAX_DEPTH} levels deep: refusing it "
        "(a manifest needs a few levels; flatten it)"
    )


def _syntax_problem(display: str, exc: yaml.MarkedYAMLError, text: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
    if nesting_refused(exc):
        return Problem(display, line, col, _too_deep_message())
    what = exc.problem or "invalid YAML"
    if exc.context:
        what = f"{exc.context}, {what}"
    start = exc.context_mark
    if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
        what = "a tab character cannot indent YAML: indent with spaces"
    elif mark is not None and start is not None and start is not mark and (
        start.line, start.column) < (mark.line, mark.column):
        opened = _char_at(text, start.line, start.column)
        if exc.problem and "end of stream" in exc.problem and opened in ("'", '"'):
            # An unclosed quote: the end of the file is no help, its start is.
            line, col = start.line + 1, start.column + 1
            what = f"the quoted string that starts here is never closed: add the closing {opened}"
        elif start.line < mark.line and opened in ("[", "{") and exc.problem and "expected ','" in exc.problem:
            closer = "]" if opened == "[" else "}"
            what = (
                f"the {opened!r} here is never closed (at line {mark.line + 1}, column "
                f"{mark.column + 1} a ',' or {closer!r} was expected): add the {closer!r}"
            )
            line, col = start.line + 1, start.column + 1
        elif exc.problem in ("did not find expected key", "did not find expected '-' indicator"):
            parent = "mapping" if "key" in exc.problem else "list"
            what = (
                f"this line does not fit the {parent} that starts at line {start.line + 1}, "
                f"column {start.column + 1}: check its indentation"
            )
        else:
            what += f" (the construct starts at line {start.line + 1}, column {start.column + 1})"
    for problem, hint in _HINTS:
        if what.endswith(problem):
            what += hint
            break
    return Problem(display, line, col, f"YAML syntax error: {what}")


# What to do about libyaml's most common complaints.
_HINTS = (
    ("found undefined alias", ": an alias (*name) must come after its anchor (&name) "
                              "in the same document"),
    ("mapping values are not allowed in this context", ": quote the value if it contains ': ', "
                                                       "or check the indentation"),
    ("found character that cannot start any token", ": quote the value"),
)


def _reader_problem(display: str, exc: yaml.reader.ReaderError, text: str) -> Problem:
    # libyaml reads the text as UTF-8: the position counts bytes.
    before = text.encode("utf-8")[: exc.position].decode("utf-8", "replace")
    line = before.count("\n") + 1
    col = len(before) - (before.rfind("\n") + 1) + 1
    char = exc.character if isinstance(exc.character, str) else chr(exc.character)
    return Problem(
        display, line, col,
        f"character U+{ord(char):04X} is not allowed in YAML: remove it "
        "(write control characters as escapes in a double-quoted string)",
    )


def _char_at(text: str, line: int, column: int) -> str:
    start = 0
    for _ in range(line):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    return text[start + column : start + column + 1]


class Builder:
    """Builds plain values from a node tree, with the checks above."""

    __slots__ = ("aliased", "budget", "chars", "seen", "stack")

    def __init__(self) -> None:
        self.budget = MAX_DOCUMENT_NODES
        self.chars = 0
        self.seen: set[int] = set()  # collections built so far: a second visit is an alias
        self.aliased = False
        self.stack: list[Node] = []  # collections being built, outermost first

    def build(self, node: Node) -> Any:
        self.budget -= 1
        if self.budget < 0:
            if self.aliased:
                raise YamlProblem(
                    None,
                    f"document expands to more than {MAX_DOCUMENT_NODES:,} values through "
                    "aliases (*name): refusing it as an alias expansion bomb; write the values out",
                )
            raise YamlProblem(
                None,
                f"document has more than {MAX_DOCUMENT_NODES:,} values: no manifest needs so "
                "many; split it into several objects",
            )
        tag = node.tag
        if isinstance(node, ScalarNode):
            value = node.value
            self.chars += len(value)
            if tag == STR:
                return value
            if tag == INT:
                return _integer(node, value)
            if tag == BOOL:
                if core_tag(value) != BOOL:
                    raise YamlProblem(node, f"{value[:40]!r} is not true or false")
                return value in ("true", "True", "TRUE")
            if tag == NULL:
                if core_tag(value) != NULL:
                    raise YamlProblem(node, f"{value[:40]!r} is not null")
                return None
            if tag == FLOAT:
                if core_tag(value) not in (INT, FLOAT) or value.startswith(("0o", "0x")):
                    raise YamlProblem(node, f"{value[:40]!r} is not a number")
                return _float(value)
            raise YamlProblem(node, _tag_message(tag))
        if isinstance(node, MappingNode):
            if tag != MAP:
                raise YamlProblem(node, _tag_message(tag))
            self._enter(node)
            result: Any = self._mapping(node)
        elif isinstance(node, SequenceNode):
            if tag != SEQ:
                raise YamlProblem(node, _tag_message(tag))
            self._enter(node)
            result = [self.build(item) for item in node.value]
        else:  # pragma: no cover
            raise YamlProblem(node, "unsupported YAML node")
        self.stack.pop()
        return result

    def _enter(self, node: Node) -> None:
        if id(node) in self.seen:
            self.aliased = True
        else:
            self.seen.add(id(node))
        stack = self.stack
        stack.append(node)
        if len(stack) > MAX_DEPTH:
            seen: set[int] = set()
            for outer in stack:
                if id(outer) in seen:
                    raise YamlProblem(
                        outer,
                        "this anchor's value contains an alias to itself (recursive alias): "
                        "refusing it; manifests are finite trees",
                    )
                seen.add(id(outer))
            raise YamlProblem(node, _too_deep_message())

    def _mapping(self, node: MappingNode) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        key_nodes: dict[Any, Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE:
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, MappingNode):
                        raise YamlProblem(source, "a merge key (<<) takes a mapping")
                    self._enter(source)
                    for k, v in self._mapping(source).items():
                        merged.setdefault(k, v)
                    self.stack.pop()
                continue
            key = self.build(key_node)
            if isinstance(key, list | dict):
                raise YamlProblem(key_node, "a mapping key must be a plain value")
            if key in result:
                line, col = position(key_nodes[key])
                raise YamlProblem(
                    key_node,
                    f"duplicate key {_written(key_node, key)!r} (first at line {line}, "
                    f"column {col}): remove one of them",
                )
            key_nodes[key] = key_node
            result[key] = self.build(value_node)
        for k, v in merged.items():
            result.setdefault(k, v)
        return result


def _integer(node: Node, value: str) -> int:
    if core_tag(value) != INT:  # an explicit !!int on something else
        raise YamlProblem(node, f"{value[:40]!r} is not an integer: remove the tag or fix it")
    if len(value) > 40:  # far beyond 64 bits; int() of 4,300+ digits would raise
        raise YamlProblem(node, f"integer of {len(value):,} characters is out of the API's "
                                "64-bit range: quote it if it is a string")
    if value.startswith("0o"):
        number = int(value[2:], 8)
    elif value.startswith("0x"):
        number = int(value[2:], 16)
    else:
        number = int(value)
    if not INT_MIN <= number <= INT_MAX:
        raise YamlProblem(node, f"integer {value} is out of the API's 64-bit range: "
                                "quote it if it is a string")
    return number


def _float(value: str) -> float:
    lowered = value.lower()
    if lowered.endswith(".inf"):
        return float("-inf") if lowered.startswith("-") else float("inf")
    if lowered == ".nan":
        return float("nan")
    return float(value)


def _written(node: Node, key: Any) -> Any:
    return node.value if isinstance(node, ScalarNode) else key


def _tag_message(tag: str) -> str:
    shown = "!!" + tag[len(_T):] if tag.startswith(_T) else tag
    return (
        f"tag {shown} is not allowed: remove it (manifests hold only plain values: "
        "strings, numbers, booleans, null, lists and mappings)"
    )


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
