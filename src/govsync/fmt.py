"""``govsync fmt``: rewrite manifests in one canonical layout, keeping every comment.

The canonical layout is the one of ``examples/manifests``:

* documents separated by ``---`` (no leading ``---``, no ``...``), the
  comments above the first document (the editor modeline) kept on top;
* two-space indentation, block sequences indented under their key
  (``key:`` then ``  - item``), flow style and quoting kept, long strings
  never rewrapped;
* top-level keys in the order ``apiVersion``, ``kind``, ``metadata``,
  ``spec``, then any others as they were; ``metadata`` keys ``name``,
  ``dependsOn``, then any others;
* full-line comments indented like the line they precede (or, at the end of
  a block, like the block they close); end-of-line comments keep their column.

How: each document goes through ruamel.yaml's round-trip mode, which keeps
comments, quotes and flow style while it re-indents.  ruamel attaches a
comment to the key *before* it, so moving keys in its model would carry the
comments above a key to the wrong place; keys are therefore reordered as
blocks of lines (a key, the comments directly above it and its value), with
the positions of the re-indented document.  The result must load to the same
data as the input (both read with PyYAML, as govsync's loader does), or the file
is reported and left alone (or, when moving keys would put an alias above
its anchor, the keys keep their order).

ruamel.yaml and PyYAML are imported only when a file is formatted.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from govsync.errors import ManifestError, Problem
from govsync.files import manifest_files, yaml_loader
from govsync.manifests.yamlio import METADATA_KEYS, TOP_KEYS, iter_documents

# Wide enough that ruamel never folds a long string onto a second line.
WIDTH = 1 << 20

_MARKER = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)")
_DIRECTIVE = re.compile(r"^%")
# A block sequence entry whose content is a mapping: "- key: value" / "- key:".
_MAPPING_ENTRY = re.compile(r"""^(?:"[^"]*"|'[^']*'|[^\s'"#\[{?][^#]*?)\s*:(?:\s|$)""")

BLANK, COMMENT, CONTENT, INSIDE_SCALAR, KEEP_END = "blank", "comment", "content", "scalar", "keep"
# The header of a keep-chomped block scalar: "|+", ">+", "|2+", "|+2".
_KEEP = re.compile(r"[|>](?:[1-9]?\+|\+[1-9])")


@dataclass
class FormatReport:
    """What ``format_paths`` found: files looked at, files (to be) rewritten, errors."""

    files: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def format_paths(paths: Sequence[str], *, write: bool = True) -> FormatReport:
    """Format every manifest file under ``paths`` (``write=False``: only report).

    A file with a YAML error is reported (``FILE:LINE:COL``) and left alone;
    the other files are still formatted.
    """

    report = FormatReport()
    files, report.problems = manifest_files(paths)
    for path, display in files:
        report.files.append(display)
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
            original = raw.decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            report.problems.append(Problem(display, 1, 1, f"cannot read: {exc}"))
            continue
        # Read first as validate reads it, so that a YAML error is reported in
        # the same words at the same place, not in ruamel's.
        syntax = [item for item in iter_documents(original, display)
                  if isinstance(item, Problem)]
        if syntax:
            report.problems.extend(syntax)
            continue
        crlf = "\r\n" in original
        text = original.replace("\r\n", "\n").replace("\r", "\n")
        try:
            formatted = format_text(text, display)
        except ManifestError as exc:
            report.problems.extend(exc.problems)
            continue
        if formatted == text and not raw.startswith(b"\xef\xbb\xbf"):
            continue
        report.changed.append(display)
        if write:
            _write(path, formatted.replace("\n", "\r\n") if crlf else formatted)
    return report


def _write(path: str, text: str) -> None:
    """Replace the file atomically, keeping its permissions."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".govsync-fmt-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        shutil.copymode(path, tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# -- one file ---------------------------------------------------------------------


def format_text(text: str, file: str = "<text>") -> str:
    """The canonical layout of ``text`` (a whole manifest file).

    Raises ManifestError (with ``FILE:LINE:COL``) when the text is not valid
    YAML, or when formatting would change what it means.
    """
    documents = _documents(text.replace("\r\n", "\n").split("\n"))
    if not any(_has_content(doc.lines) for doc in documents):  # comments only, or nothing
        lines = _strip_blank_edges([line.rstrip() for doc in documents for line in doc.lines])
        return "\n".join(lines) + "\n" if lines else ""
    before = _load(text)
    for reorder in (True, False):
        # Without reordering when moving keys breaks the document: an alias
        # (*a) moved above its anchor (&a).
        result = "---\n".join(_format_document(doc, file, reorder=reorder)
                               for doc in documents if _has_content(doc.lines))
        if before is None or _same(before, _load(result)):
            return result
    raise ManifestError([Problem(
        file, 1, 1, "cannot format this file without changing what it means "
        "(recursive aliases?); left unchanged")])


@dataclass
class _Document:
    """The lines of one document, and the line number (from 1) of each in the file."""

    lines: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)

    def add(self, line: str, number: int) -> None:
        self.lines.append(line)
        self.numbers.append(number)

    def extend(self, other: _Document) -> None:
        self.lines += other.lines
        self.numbers += other.numbers


def _documents(lines: list[str]) -> list[_Document]:
    """Split at document markers.

    ``---`` and ``...`` at column 0 are document markers wherever they appear
    (YAML forbids them inside scalars).  A document of comments only is glued
    to the next document (or, at the end, to the previous one): an empty
    document means nothing, its comments are kept.  Directives (``%YAML``)
    stay with the document they introduce, marker included.
    """
    if lines and lines[-1] == "":
        lines = lines[:-1]
    docs = [_Document()]
    for number, line in enumerate(lines, start=1):
        m = _MARKER.match(line)
        current = docs[-1]
        if m and m.group(1) == "---" and any(_DIRECTIVE.match(x) for x in current.lines):
            current.add(line, number)  # "%YAML 1.2" then "---": one document
        elif m:
            docs.append(_Document())
            rest = line[3:].strip()
            if rest:
                docs[-1].add(rest, number)
        else:
            current.add(line, number)
    merged: list[_Document] = []
    pending = _Document()
    for doc in docs:
        if not _has_content(doc.lines):
            if any(line.strip() for line in doc.lines):
                pending.extend(doc)
            continue
        if pending.lines:
            pending.extend(doc)
            doc, pending = pending, _Document()
        merged.append(doc)
    if pending.lines:
        if merged:
            merged[-1].extend(pending)
        else:
            merged.append(pending)
    return merged


def _has_content(lines: Iterable[str]) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in lines)


def _strip_blank_edges(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def _new_yaml() -> Any:
    # A fresh instance per document: ruamel remembers a document's %YAML
    # version and would repeat it in the next dump.
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = WIDTH
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.explicit_start = False
    return yaml


def _format_document(doc: _Document, file: str, *, reorder: bool = True) -> str:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    source = "\n".join(doc.lines) + "\n"
    yaml = _new_yaml()
    try:
        data = yaml.load(source)
    except MarkedYAMLError as exc:
        raise ManifestError([_syntax_problem(file, doc.numbers, exc)]) from exc
    except YAMLError as exc:
        message = "YAML error: " + " ".join(str(exc).split())
        raise ManifestError([Problem(file, doc.numbers[0], 1, message)]) from exc
    if isinstance(data, CommentedMap) and reorder:
        _order_flow_maps(data)
    out = io.StringIO()
    yaml.dump(data, out)
    body = out.getvalue().split("\n")
    body = _strip_blank_edges([line.rstrip() for line in body if line != "..."])
    if isinstance(data, CommentedSeq) and not data.fa.flow_style():
        # ruamel indents a top-level sequence by the offset ("  - a"): not under a key.
        body = [line[2:] if line.startswith("  ") else line.lstrip(" ") for line in body]
    kinds = _line_kinds(body)
    body = _reindent_comments(body, kinds)
    if reorder:
        body = _reorder_keys(body, kinds)
    return "\n".join(_strip_blank_edges(body)) + "\n"


def _syntax_problem(file: str, numbers: list[int], exc: Any) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    index, col = (mark.line, mark.column + 1) if mark is not None else (0, 1)
    # The end of the document: one line after its last.
    line = numbers[index] if index < len(numbers) else numbers[-1] + 1
    what = exc.problem or "invalid YAML"
    if exc.context:
        what = f"{exc.context}, {what}"
    return Problem(file, line, col, "YAML error: " + " ".join(what.split()))


def _ordered(keys: Sequence[Any], first: Sequence[str]) -> list[Any]:
    head = [k for k in first if k in keys]
    return head + [k for k in keys if k not in head]


def _order_flow_maps(doc: Any) -> None:
    """Reorder keys of flow mappings (``{kind: ..., apiVersion: ...}``) in the model.

    Block mappings are reordered as lines (see the module docstring); a flow
    mapping sits on its lines, and ruamel keeps its comments in place.
    """
    maps: list[tuple[Any, tuple[str, ...]]] = [(doc, TOP_KEYS)]
    metadata = doc.get("metadata")
    if hasattr(metadata, "fa") and hasattr(metadata, "move_to_end"):
        maps.append((metadata, METADATA_KEYS))
    for m, order in maps:
        if m.fa.flow_style():
            for key in reversed([k for k in order if k in m]):
                m.move_to_end(key, last=False)


# -- lines ----------------------------------------------------------------------


def _line_kinds(lines: list[str]) -> list[str]:
    """What each line is: blank, comment, content, or inside a multi-line scalar
    (its first line is content).  The last line of a keep-chomped block
    scalar (``|+``) is KEEP_END: blank lines after it would join its value."""

    kinds = [BLANK if not line.strip() else COMMENT if line.lstrip().startswith("#") else CONTENT
             for line in lines]
    loader = yaml_loader()
    try:
        for token in yaml.scan("\n".join(lines) + "\n", Loader=loader):
            if isinstance(token, yaml.ScalarToken) and token.end_mark.line > token.start_mark.line:
                first, end = token.start_mark.line, token.end_mark.line
                end = min(end + (1 if token.end_mark.column else 0), len(lines))
                for i in range(first + 1, end):
                    kinds[i] = INSIDE_SCALAR
                if _KEEP.match(lines[first], token.start_mark.column) and end > first + 1:
                    kinds[end - 1] = KEEP_END
    except yaml.YAMLError:
        pass  # ruamel wrote it, so it is YAML; if PyYAML disagrees, leave lines as they are
    return kinds


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _levels(line: str) -> list[int]:
    """Indentation levels a content line opens: its own, and the content of
    each ``- `` entry that holds a mapping."""
    col = _indent(line)
    levels = [col]
    rest = line[col:]
    while rest.startswith("-") and (len(rest) == 1 or rest[1] == " "):
        stripped = rest[1:].lstrip(" ")
        col += len(rest) - len(stripped)
        rest = stripped
        if not rest or rest.startswith("#"):
            break
        if rest.startswith("-") or _MAPPING_ENTRY.match(rest):
            levels.append(col)
    return levels


def _reindent_comments(lines: list[str], kinds: list[str]) -> list[str]:
    """Indent each full-line comment like the content line it precedes.

    ruamel keeps a comment's original column even when it re-indents the
    content around it.  A comment deeper than the next line closes the block
    above it instead: it takes the deepest enclosing level it reaches.
    """
    out = list(lines)
    content = [i for i, k in enumerate(kinds) if k == CONTENT]
    stack: list[int] = []
    nxt = 0  # index into ``content`` of the next content line
    for i, line in enumerate(lines):
        if kinds[i] == CONTENT:
            col = _indent(line)
            stack = [level for level in stack if level < col] + _levels(line)
            nxt += 1
            continue
        if kinds[i] != COMMENT:
            continue
        col = _indent(line)
        following = _indent(lines[content[nxt]]) if nxt < len(content) else None
        if following is not None and col <= following:
            new = following
        else:
            candidates = stack + ([following] if following is not None else [])
            new = max((level for level in candidates if level <= col), default=0)
        out[i] = " " * new + line.lstrip(" ")
    return out


def _reorder_keys(lines: list[str], kinds: list[str]) -> list[str]:
    """Put top-level and metadata keys of a block-mapping document in order."""

    loader = yaml_loader()
    try:
        root = yaml.compose("\n".join(lines) + "\n", Loader=loader)
    except yaml.YAMLError:
        return lines
    top = _block_keys(root) if root is not None else None
    if top is None or root is None:
        return lines
    order = list(range(len(lines)))  # which input line goes on each output line
    blocks, trailer = _blocks(lines, kinds, top, len(lines))
    metadata = next((v for k, v in root.value if k.value == "metadata"), None)
    inner = _block_keys(metadata)
    if inner is not None:
        j = [name for name, _ in top].index("metadata")
        end = blocks[j + 1][0] if j + 1 < len(blocks) else trailer
        order[inner[0][1]:end] = _permutation(lines, kinds, inner, end, METADATA_KEYS)
    # Moving lines inside metadata leaves every top-level block where it was.
    top_order = _permutation(lines, kinds, top, len(lines), TOP_KEYS)
    order[top[0][1]:] = [order[i] for i in top_order]
    return [lines[i] for i in order]


def _block_keys(node: Any) -> list[tuple[str, int]] | None:
    """(key, line) of a block mapping's keys, or None when there is nothing to do."""

    if not isinstance(node, yaml.MappingNode) or node.flow_style or not node.value:
        return None
    keys = []
    for key, _value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            return None
        keys.append((key.value, key.start_mark.line))
    return keys


def _blocks(
    lines: list[str], kinds: list[str], keys: list[tuple[str, int]], end: int
) -> tuple[list[tuple[int, int]], int]:
    """Line ranges of each key's block (up to line ``end``), and where the trailer starts.

    A key's block starts at the comments at its own column directly above it
    (blank lines between allowed) and ends where the next block starts.  The
    first key's comments stay above everything (the document's header), and
    comments at the mapping's column or less after the last value stay at the
    end (the trailer).
    """
    col = _indent(lines[keys[0][1]])
    starts = [keys[0][1]]
    for _name, line in keys[1:]:
        s = line
        while s - 1 > starts[-1] and (kinds[s - 1] == BLANK or (
                kinds[s - 1] == COMMENT and _indent(lines[s - 1]) == col)):
            s -= 1
        while s < line and kinds[s] == BLANK:  # blank lines stay with the block above
            s += 1
        starts.append(s)
    last = end
    while last > keys[-1][1] + 1 and kinds[last - 1] in (BLANK, COMMENT):
        last -= 1
    trailer = next((i for i in range(last, end)
                    if kinds[i] == COMMENT and _indent(lines[i]) <= col), end)
    return list(zip(starts, starts[1:] + [trailer], strict=True)), trailer


def _permutation(
    lines: list[str], kinds: list[str], keys: list[tuple[str, int]], end: int,
    order: Sequence[str],
) -> list[int]:
    """Indices of lines ``keys[0]..end`` with the keys' blocks in canonical order."""
    start = keys[0][1]
    names = [name for name, _ in keys]
    wanted = _ordered(names, order)
    if wanted == names:
        return list(range(start, end))
    bounds, trailer = _blocks(lines, kinds, keys, end)
    # Blank lines after a block separate places, not keys: they stay where they were.
    bodies, gaps = {}, []
    for name, (s, e) in zip(names, bounds, strict=True):
        cut = e
        while cut > s + 1 and kinds[cut - 1] == BLANK:
            cut -= 1
        bodies[name] = range(s, cut)
        gaps.append(range(cut, e))
    out: list[int] = []
    for name, gap in zip(wanted, gaps, strict=True):
        out.extend(bodies[name])
        if kinds[bodies[name][-1]] != KEEP_END:
            out.extend(gap)
    out.extend(range(trailer, end))
    return out


def _load(text: str) -> list[Any] | None:
    """The documents of ``text`` as govsync's loader reads them (PyYAML), None if it cannot."""

    loader = yaml_loader()
    try:
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError:
        return None


def _same(a: Any, b: Any, seen: set[tuple[int, int]] | None = None) -> bool:
    """Deep equality that follows each shared or recursive node once (aliases)."""
    seen = set() if seen is None else seen
    if isinstance(a, dict | list):
        if type(a) is not type(b) or len(a) != len(b):
            return False
        pair = (id(a), id(b))
        if pair in seen:
            return True
        seen.add(pair)
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(_same(a[k], b[k], seen) for k in a)
        return all(_same(x, y, seen) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and a != a:  # NaN
        return isinstance(b, float) and b != b
    return bool(a == b) and type(a) is type(b)
