"""Line diffs of multi-line strings (a Hook's ``code``...), as ``git diff`` shows them.

A one-character change in a field of forty lines is invisible when both values
are printed as escaped one-line strings.  A string field with a line break is
shown instead as its lines: the lines that differ marked ``-`` and ``+``, with
``CONTEXT`` unchanged lines around them and a hunk header (``@@ -5,7 +5,7 @@``)
where lines are left out.  ``difflib`` (the standard library's) finds the
lines, loaded where two values are compared (a create shows its lines without it);
the text, Markdown and HTML renderers lay them out.

Values reach this module already masked: a secret is ``(sensitive)``, one line,
so it is never split into lines here.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Any, NamedTuple


class Tag(StrEnum):
    """What a line of a diff is (its first column in ``git diff``)."""

    ADDED = "+"
    REMOVED = "-"
    SAME = " "
    HUNK = "@"
    # After a last line that has no line break (``\\ No newline at end of file``).
    NO_NEWLINE = "\\"


class Line(NamedTuple):
    tag: Tag
    text: str


# Unchanged lines shown around each change, as git does.
CONTEXT = 3
NO_NEWLINE_TEXT = "No newline at end of file"
# Control characters other than tab would move the cursor or end a line: escaped
# (a table for str.translate: compiling the same as a regular expression took 0.4 ms
# of the start-up of every plan that shows lines).
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x09), *range(0x0b, 0x20), 0x7f)} | {
    c: f"\\u{c:04x}" for c in (0x2028, 0x2029)}
_ONE_LINE = _CONTROL | {0x0a: "\\n"}


def multiline(value: Any) -> bool:
    """Whether ``value`` is shown as lines: a string with a line break."""
    return isinstance(value, str) and ("\n" in value or "\r" in value)


def shown_line(text: str) -> str:
    """One line as it is printed: control characters escaped (``\\x1b``), tabs kept."""
    return text.translate(_CONTROL)


def one_line(text: str) -> str:
    """Text that must stay on its line (a name from the logs): a line break escaped too,
    so that it cannot print a line of its own (a forged ``Plan:`` line in CI's log)."""
    return text.translate(_ONE_LINE)


def _split(value: str) -> list[str]:
    """The lines, each with its own line break (the last may have none)."""
    return value.splitlines(keepends=True)


def _line(tag: Tag, raw: str) -> Iterator[Line]:
    body = raw.rstrip("\r\n")
    yield Line(tag, shown_line(body))
    if body == raw:  # the string ends without a line break
        yield Line(Tag.NO_NEWLINE, NO_NEWLINE_TEXT)


def lines_of(value: str) -> list[Line]:
    """Every line of a new value (a create), each marked added."""
    return [line for raw in _split(value) for line in _line(Tag.ADDED, raw)]


def diff(before: str, after: str, context: int = CONTEXT) -> list[Line]:
    """The lines that change from ``before`` to ``after`` with ``context`` lines around
    them; a hunk header before each group, unless one group shows every line."""
    import difflib  # 1 ms with heapq: only where a multi-line value changes

    old, new = _split(before), _split(after)
    groups = list(difflib.SequenceMatcher(None, old, new, autojunk=False)
                  .get_grouped_opcodes(context))
    whole = len(groups) == 1 and groups[0][0][1] == 0 and groups[0][0][3] == 0 and (
        groups[0][-1][2] == len(old) and groups[0][-1][4] == len(new))
    out: list[Line] = []
    for group in groups:
        if not whole:
            out.append(Line(Tag.HUNK, _hunk(group)))
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                for raw in old[i1:i2]:
                    out += _line(Tag.SAME, raw)
                continue
            for raw in old[i1:i2]:
                out += _line(Tag.REMOVED, raw)
            for raw in new[j1:j2]:
                out += _line(Tag.ADDED, raw)
    return out


def _hunk(group: list[tuple[str, int, int, int, int]]) -> str:
    """``@@ -start,count +start,count @@`` (lines counted from 1, as unified diffs do)."""
    def span(start: int, stop: int) -> str:
        count = stop - start
        first = start + 1 if count else start
        return f"{first}" if count == 1 else f"{first},{count}"

    first, last = group[0], group[-1]
    return f"@@ -{span(first[1], last[2])} +{span(first[3], last[4])} @@"


def field_lines(before: Any, after: Any) -> list[Line] | None:
    """A changed field as lines when either value is a multi-line string; None when
    both fit on one line (shown ``before -> after`` as ever).  A value that is not
    a string on the other side (absent: null) counts as no lines."""
    if not (multiline(before) or multiline(after)):
        return None
    return diff(before if isinstance(before, str) else "",
                after if isinstance(after, str) else "")
