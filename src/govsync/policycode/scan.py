"""What can be seen in Rego without running it, from its tokens: the package, the
uses of ``input.hooks.<name>`` and ``data.<key>``, the stage rules' heads and the
literal ``action`` of their decisions.

A few dozen lines of tokenizer, not a parser: comments and strings are skipped so
that a word inside them is never taken for code, and the rest is read where its
shape is unambiguous.  The loader reads a policy's hook uses here for every
command (they are edges of the dependency graph), so it must stay cheap: no
engine, a regular expression over the text.  Whether the code compiles is the
engine's to say (rego.py); what this module reads of code that does not is never
reported.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import NamedTuple

from govsync.policycode.stages import NOW_KEY, Stage

_TOKEN = r"""
    [ \t\r\f]*(?:\#[^\n]*)?    # white space, then a comment (to the line's end): skipped
    (?:
        (?P<newline>\n)
      | (?P<string>"(?:[^"\\\n]|\\.)*"?)
      | (?P<raw>`[^`]*`?)
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
      | (?P<number>[0-9][0-9.eE+\-]*)
      | (?P<op>:=|==|!=|<=|>=|[{}\[\]().,;:=|&<>+\-*/%])
      | (?P<other>.)
    )"""
_IMPORTS_HOOKS = r"^[ \t]*import[ \t]+input[ \t]*\.[ \t]*hooks"
# The package clause, after blank and comment lines: read without the tokenizer.
_PACKAGE = (r"\A(?:[ \t\r\f]*(?:\#[^\n]*)?\n)*([ \t\r\f]*)package[ \t]+"
            r"([A-Za-z_][A-Za-z0-9_]*(?:[ \t]*\.[ \t]*[A-Za-z_][A-Za-z0-9_]*)*)")


@functools.cache
def _pattern(source: str, flags: int = 0) -> re.Pattern[str]:
    """An expression of this module, compiled when first needed (a millisecond each, at
    every command's start otherwise; most manifests hold no code that needs them)."""
    return re.compile(source, flags)


def _token() -> re.Pattern[str]:
    return _pattern(_TOKEN, re.VERBOSE)


class Token(NamedTuple):
    kind: str   # name, string, raw, number, op, other
    text: str
    line: int   # 1-based, in the code
    col: int    # 1-based, in characters
    first: bool  # the first token of its line


class Use(NamedTuple):
    """``input.hooks.<name>`` or ``data.<key>``: the name, where it is written."""

    name: str
    line: int
    col: int


class Head(NamedTuple):
    """A stage rule's head (``session := {...} if``, ``default pre_request := ...``),
    with the literal ``action`` of its decision where one is written."""

    stage: Stage
    line: int
    col: int
    action: str | None = None
    action_line: int = 0
    action_col: int = 0


def tokens(code: str) -> Iterator[Token]:
    """The code's tokens, comments and white space left out."""
    line, start, first = 1, 0, True
    for match in _token().finditer(code):
        kind = match.lastgroup or "other"
        if kind == "newline":
            line, start, first = line + 1, match.end(), True
            continue
        at = match.start(kind)
        text = match.group(kind)
        yield Token(kind, text, line, at - start + 1, first)
        first = False
        if kind == "raw" and "\n" in text:  # a raw string spans lines
            line += text.count("\n")
            start = at + text.rfind("\n") + 1


@functools.lru_cache(maxsize=8)
def _items(code: str) -> tuple[Token, ...]:
    """The tokens of a module, kept for the few functions that read the same code in turn."""
    return tuple(tokens(code))


def _unquote(token: Token) -> str | None:
    if token.kind == "raw":
        return token.text.strip("`")
    if token.kind == "string" and len(token.text) >= 2 and token.text.endswith('"'):
        body = token.text[1:-1]
        return None if "\\" in body else body
    return None


def package(code: str) -> tuple[str, Token] | None:
    """The module's package path (``formal.v2``) and where it is written."""
    found = _pattern(_PACKAGE).match(code)
    if found is None:
        return None
    at = found.start(2)
    before = code[:at]
    line = before.count("\n") + 1
    col = at - (before.rfind("\n") + 1) + 1
    path = "".join(found.group(2).split())
    return path, Token("name", path.split(".")[0], line, col, False)


def _references(code: str, root: str, alias_of: str) -> Iterator[Use]:
    """Every ``<root>.<name>`` and ``<root>["name"]``, and ``<alias>.<name>`` where an
    import names ``<alias_of>`` (``import input.hooks`` makes ``hooks.<name>``)."""
    items = _items(code)
    aliases = {_alias(items, i) for i, t in enumerate(items)
               if t.text == "import" and t.first and _imported(items, i) == alias_of}
    aliases.discard(None)
    for i, token in enumerate(items):
        if i and items[i - 1].text == ".":
            continue  # a field of something else: x.input.hooks is not input
        at = None
        if token.text == root.split(".")[0] and token.kind == "name":
            at = i + 1
            for part in root.split(".")[1:]:
                if (at + 1 < len(items) and items[at].text == "." and items[at + 1].text == part):
                    at += 2
                elif (at + 2 < len(items) and items[at].text == "["
                      and _unquote(items[at + 1]) == part and items[at + 2].text == "]"):
                    at += 3
                else:
                    at = None
                    break
        elif token.kind == "name" and token.text in aliases:
            at = i + 1
        if at is None:
            continue
        if at + 1 < len(items) and items[at].text == "." and items[at + 1].kind == "name":
            name = items[at + 1]
            yield Use(name.text, name.line, name.col)
        elif (at + 2 < len(items) and items[at].text == "[" and items[at + 2].text == "]"
              and _unquote(items[at + 1]) is not None):
            name = items[at + 1]
            yield Use(_unquote(name) or "", name.line, name.col)


def _imported(items: tuple[Token, ...], i: int) -> str:
    parts: list[str] = []
    for token in items[i + 1:]:
        if token.first or token.text == "as":
            break
        parts.append(token.text)
    return "".join(parts)


def _alias(items: tuple[Token, ...], i: int) -> str | None:
    """The name an import binds: its ``as`` name, else the last part of its path."""
    last = None
    for j in range(i + 1, len(items)):
        token = items[j]
        if token.first:
            break
        if token.text == "as" and j + 1 < len(items):
            return items[j + 1].text
        if token.kind == "name":
            last = token.text
    return last


def hook_uses(code: str) -> list[Use]:
    """Every ``input.hooks.<name>`` (the hook's result the service passes in).  The loader
    asks for every policy of every command: only the lines that say ``hooks`` are
    tokenized, unless a raw string (which may span lines) or an import of
    ``input.hooks`` (which names it otherwise) asks for the whole module."""
    if "hooks" not in code:  # most policies: no tokens to make
        return []
    if "`" in code or _pattern(_IMPORTS_HOOKS, re.MULTILINE).search(code):
        return list(_references(code, "input.hooks", "input.hooks"))
    found: list[Use] = []
    for number, row in enumerate(code.split("\n"), start=1):
        if "hooks" in row:
            found.extend(Use(u.name, number, u.col)
                         for u in _references(row, "input.hooks", "input.hooks"))
    return found


def data_uses(code: str) -> list[Use]:
    """Every ``data.<key>`` but those of the module's own package's root (its rules)."""
    found = package(code)
    own = found[0].split(".")[0] if found else None
    return [u for u in _references(code, "data", "data") if u.name != own]


def heads(code: str) -> list[Head]:
    """The heads of the stage rules, in order (``else`` branches as their rule's)."""
    items = _items(code)
    stages = {s.value: s for s in Stage}
    found: list[Head] = []
    depth = 0
    current: Stage | None = None
    for i, token in enumerate(items):
        if token.text in "{[(" and token.kind == "op":
            depth += 1
        elif token.text in "}])" and token.kind == "op":
            depth = max(0, depth - 1)
        if depth or token.kind != "name":
            continue
        at = i
        if token.first:
            if token.text == "default" and i + 1 < len(items):
                at = i + 1
            current = stages.get(items[at].text)
            if current is None:
                continue
            head = items[at]
        elif token.text == "else" and current is not None:
            head = token
        else:
            continue
        value = at + 1
        if value < len(items) and items[value].text in (":=", "="):
            action = _literal_action(items, value + 1)
        else:
            action = None
        if action is None:
            found.append(Head(current, head.line, head.col))
        else:
            found.append(Head(current, head.line, head.col, *action))
    return found


def _literal_action(items: tuple[Token, ...], at: int) -> tuple[str, int, int] | None:
    """The ``"action": "<literal>"`` of an object literal that starts at ``at``."""
    if at >= len(items) or items[at].text != "{":
        return None
    depth = 0
    for j in range(at, len(items)):
        text = items[j].text
        if items[j].kind == "op" and text in "{[(":
            depth += 1
        elif items[j].kind == "op" and text in "}])":
            depth -= 1
            if depth == 0:
                return None
        elif (depth == 1 and _unquote(items[j]) == "action" and j + 2 < len(items)
              and items[j + 1].text == ":"):
            value = items[j + 2]
            literal = _unquote(value)
            if literal is None:
                return None
            return literal, value.line, value.col
    return None


NOW = "time.now_ns()"
NOW_DATA = "data.__now_ns"  # as long as NOW: a replaced call keeps every column
# A test case's time, read from its input (one compiled module serves every case):
NOW_INPUT = f"input.{NOW_KEY}  "


def fixed_now(code: str, into: str = NOW_DATA) -> str:
    """The code with every ``time.now_ns()`` reading ``into`` instead (a fixed time:
    ``data.__now_ns``, or a test case's ``input.__now``); only the calls written exactly
    so, never inside a string."""
    out: list[str] = []
    lines = code.split("\n")
    for token in tokens(code):
        if token.text == "time" and token.kind == "name":
            row = lines[token.line - 1]
            start = token.col - 1
            if row.startswith(NOW, start):
                out.append(f"{token.line}:{start}")
    for spot in reversed(out):
        line, start = (int(x) for x in spot.split(":"))
        row = lines[line - 1]
        lines[line - 1] = row[:start] + into + row[start + len(NOW):]
    return "\n".join(lines)


# Words that stand before "(" without being a call.
_KEYWORDS = frozenset({"if", "in", "not", "some", "every", "with", "as", "else", "default",
                       "import", "package", "true", "false", "null", "contains"})


def all_calls(code: str) -> list[tuple[Use, bool]]:
    """Every ``name(`` and ``a.b.c(`` (``time.clock(...)``, ``hooks.ticket_check(...)``):
    the dotted name where it starts, and whether it is a function's head (``f(x) :=``
    at the top level) rather than a call."""
    return list(_calls(code))


def _calls(code: str) -> Iterator[tuple[Use, bool]]:
    items = _items(code)
    depth = 0
    i = 0
    while i < len(items):
        token = items[i]
        if token.kind == "op" and token.text in "{[(":
            depth += 1
        elif token.kind == "op" and token.text in "}])":
            depth = max(0, depth - 1)
        if token.kind != "name" or (i and items[i - 1].text == "."):
            i += 1
            continue
        parts, j = [token.text], i + 1
        while j + 1 < len(items) and items[j].text == "." and items[j + 1].kind == "name":
            parts.append(items[j + 1].text)
            j += 2
        if (j < len(items) and items[j].text == "(" and token.text not in _KEYWORDS
                and parts[0] not in ("input", "data")):
            yield Use(".".join(parts), token.line, token.col), depth == 0 and token.first
        i = j
