"""What the text, Markdown and JSON renderings of a plan share: the symbol and colour
of each action, a field's lines, the summary line, the changes made outside govsync,
the governance lines and the drift verdict.  Colour is ANSI codes written here
(``ansi``), so rendering needs no command-line library."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from govsync.governance import Governance
from govsync.plan import Action, DriftKind, FieldChange, Plan
from govsync.render.linediff import field_lines, lines_of
from govsync.values import KNOWN_AFTER_APPLY_TEXT, SENSITIVE

if TYPE_CHECKING:
    from govsync.drift import DriftReport
    from govsync.render.linediff import Line

# The codes of the colours used, as terminals (and click.style) know them.
_COLOURS = {"black": 30, "red": 31, "green": 32, "yellow": 33, "blue": 34, "magenta": 35,
            "cyan": 36, "white": 37}


def ansi(text: str, fg: str | None = None, *, bold: bool | None = None) -> str:
    """``text`` in a terminal's colour: the codes click.style writes, reset at the end."""
    codes = f"\x1b[{_COLOURS[fg]}m" if fg else ""
    if bold is not None:
        codes += f"\x1b[{1 if bold else 22}m"
    return f"{codes}{text}\x1b[0m"


SYMBOLS: dict[Action, tuple[str, str | None]] = {
    Action.CREATE: ("+", "green"),
    Action.UPDATE: ("~", "yellow"),
    Action.BLOCKED: ("!", "red"),
    Action.ORPHAN: ("-", "magenta"),
    Action.UNCERTAIN: ("?", "cyan"),
    Action.MOVE: (">", "blue"),
    Action.IMPORT: ("<", "blue"),
    Action.DELETE: ("x", "red"),
    Action.REPLACE: ("-/+", "yellow"),
    Action.FORGET: ("/", "magenta"),
    Action.NOOP: (" ", None),
}


ORDER = tuple(SYMBOLS)


# The summary table's columns, and the actions shown only when a plan has some.
TABLE_ORDER = (Action.CREATE, Action.UPDATE, Action.MOVE, Action.IMPORT, Action.REPLACE,
               Action.DELETE, Action.FORGET, Action.BLOCKED, Action.ORPHAN, Action.UNCERTAIN,
               Action.NOOP)


OCCASIONAL = (Action.MOVE, Action.IMPORT, Action.REPLACE, Action.DELETE, Action.FORGET)


# One encoder for every value shown: json.dumps with options makes a new one
# per call, four times the cost of encoding a short value.
_SHOWN = json.JSONEncoder(ensure_ascii=False, sort_keys=True)


def fmt_value(value: Any) -> str:
    if isinstance(value, str) and value in (KNOWN_AFTER_APPLY_TEXT, SENSITIVE):
        return value
    return _SHOWN.encode(value)


Style = Callable[[str, str | None], str]


def _plain(text: str, fg: str | None) -> str:
    return text


# The colour of each kind of diff line in a terminal, by linediff.Tag's values (a StrEnum:
# its members are these strings).
_LINE_COLOURS: dict[str, str | None] = {"+": "green", "-": "red", "@": "cyan", " ": None,
                                        "\\": None}


def _multiline(value: Any) -> bool:
    """linediff.multiline, without loading linediff: a string with a line break."""
    return isinstance(value, str) and ("\n" in value or "\r" in value)


def _diff_line(line: Line, *, markdown: bool) -> str:
    """A line of a field's line diff: under the field in text (``        -old``); in a
    Markdown ``diff`` block its tag comes first, so that GitHub colours it."""
    if line.tag in ("+", "-", " "):  # added, removed, the same
        return f"{line.tag}        {line.text}" if markdown else f"        {line.tag}{line.text}"
    text = f"\\ {line.text}" if line.tag == "\\" else line.text  # no newline at the end
    return f"         {text}" if markdown else f"        {text}"


def _lines_below(head: str, lines: list[Line], markdown: bool,
                 style: Style) -> list[str]:
    out = [head]
    for line in lines:
        text = _diff_line(line, markdown=markdown)
        out.append(_md(text) if markdown else style(text, _LINE_COLOURS[line.tag]))
    return out


def field_change_lines(d: FieldChange, *, markdown: bool = False, style: Style = _plain,
                       suffix: str = "") -> list[str]:
    """A changed field: ``path: before -> after`` on one line, or, for a multi-line
    string, ``path:`` and its line diff below (values arrive masked)."""
    if not (_multiline(d.before) or _multiline(d.after)):
        text = f"      {d.path}: {fmt_value(d.before)} -> {fmt_value(d.after)}{suffix}"
        return [_md(text) if markdown else text]
    lines = field_lines(d.before, d.after)
    assert lines is not None
    # A side that is not a string (absent: null) is named on the field's line.
    sides = [fmt_value(v) if not isinstance(v, str) else "" for v in (d.before, d.after)]
    head = f"      {d.path}:" + (f" {sides[0] or '(lines below)'} -> "
                                 f"{sides[1] or '(lines below)'}" if any(sides) else "")
    return _lines_below(_md(head + suffix) if markdown else head + suffix, lines, markdown,
                        style)


def created_lines(key: str, value: Any, *, markdown: bool = False, style: Style = _plain,
                  suffix: str = "") -> list[str]:
    """A field of a create: ``key: value``, or a multi-line string as its lines."""
    if not _multiline(value):
        text = f"      {key}: {fmt_value(value)}{suffix}"
        return [_md(text) if markdown else text]
    head = f"      {key}:{suffix}"
    return _lines_below(_md(head) if markdown else head, lines_of(value), markdown,
                        style)


def summary_line(plan: Plan) -> str:
    s = plan.summary()
    extra = "".join(f", {s[a]} to {a}" for a in OCCASIONAL if s[a])
    left = f" Left out by --target: {plan.left_out}." if plan.targets else ""
    left += _outside_count(plan)
    return (
        f"Plan: {s['create']} to create, {s['update']} to update{extra}, {s['blocked']} blocked, "
        f"{s['orphan']} orphaned, {s['uncertain']} uncertain, {s['no-op']} unchanged.{left}"
    )


def _outside_count(plan: Plan) -> str:
    """`` Outside govsync: 1 changed, 1 missing.`` ('' when nothing drifted)."""
    if not plan.drift:
        return ""
    changed = sum(1 for d in plan.drift if d.kind == DriftKind.CHANGED)
    missing = len(plan.drift) - changed
    return f" Outside govsync: {changed} changed, {missing} missing."


OUTSIDE_TITLE = "Objects changed outside govsync"


OUTSIDE_NOTE = ("read from the server: changed since govsync last applied them, or missing; "
                "the manifests' changes follow")


def outside_lines(plan: Plan, *, markdown: bool = False, style: Style = _plain) -> list[str]:
    """The refresh's findings, one object each: what changed outside govsync (field by
    field, before is what govsync applied, after what the server holds) and what is
    missing ([] when nothing)."""
    lines: list[str] = []
    for d in plan.drift:
        if d.kind == DriftKind.MISSING:
            text = f"- {d.address}  (missing on the server: recorded as {d.id})"
            lines.append(_md(text) if markdown else style(text, "red"))
            continue
        text = f"~ {d.address}  (changed outside govsync)"
        lines.append(_md(text) if markdown else style(text, "yellow"))
        for f in d.diff:
            lines += field_change_lines(f, markdown=markdown, style=style)
    return lines


def governance_lines(plan: Plan) -> list[str]:
    """The workspace's governance the plan changes, one line each ([]: none)."""
    if plan.governance is None:
        return []

    before = plan.governance["from"]
    to = Governance.from_dict(plan.governance["to"], plan.workspace)
    return to.differences(Governance.from_dict(before, plan.workspace)
                          if before is not None else None)


_EMPHASIS = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def md_text(text: str) -> str:
    """Text from manifests, the logs or a check in Markdown (a line, a table cell): one
    line, and no table, emphasis, link, code, HTML, autolink or mention (a user named
    ``<!-- govsync-plan -->``, ``@org/team`` or ``https://x`` stays text)."""
    flat = " ".join(text.split())
    out = "".join("\\" + ch if ch in "\\`*~[]<>|" else "&amp;" if ch == "&" else ch
                  for ch in flat)
    out = _EMPHASIS.sub(r"\\_", out)  # inside a word (pre_request) it is no emphasis
    return out.replace("@", "@\u200b").replace("://", ":\u200b//").replace("www.", "www\u200b.")


def _md(text: str) -> str:
    """A line inside the diff block: it must not close the fence or break the line."""
    return text.replace("```", "`\u200b``").replace("\r", "\\r").replace("\n", "\\n")


def _verdict(report: DriftReport) -> str:
    if report.in_sync:
        return "In sync."
    return (f"Drift: {len(report.drifted)} change(s) between the manifests and state, "
            + (f"{len(report.outside)} object(s) changed outside govsync or missing, "
               if report.outside else "")
            + f"{sum(len(c.problems) for c in report.live)} live problem(s).")


def drift_headline(report: DriftReport) -> str:
    """The verdict with what was compared and what could not be: the first line of
    every drift report, so that "in sync" is never read as more than it is."""
    n = len(report.plan.changes)
    addresses = f"{n} address{'es' if n != 1 else ''}"
    if report.in_sync:
        line = (f"In sync as far as govsync can see: the manifests match the recorded state "
                f"({addresses} compared)")
    else:
        line = (f"Drift: {len(report.drifted)} change(s) between the manifests and the "
                f"recorded state ({addresses} compared), "
                + (f"{len(report.outside)} object(s) changed outside govsync or missing, "
                   if report.outside else "")
                + f"{sum(len(c.problems) for c in report.live)} live problem(s)")
    live = "; ".join(f"{c.name} {c.status} ({c.detail})" for c in report.live) or "nothing"
    line += f"; live checks: {live}"
    if not report.plan.refreshed:
        line += ("; the server's objects were not read (no endpoint, or --refresh=false), so "
                 "every kind is compared with the recorded state only")
    elif report.unobservable:
        kinds = report.unobservable
        shown = ", ".join(kinds[:5]) + (f" and {len(kinds) - 5} more" if len(kinds) > 5 else "")
        line += (f"; not readable live, so compared with the recorded state only: {len(kinds)} "
                 f"kind{'s' if len(kinds) != 1 else ''} ({shown})")
    return line + "."


def _unobservable_note(report: DriftReport) -> str:
    if not report.unobservable:
        return ""
    return (
        "Not observable live (the API has no read operation for these kinds; they are "
        "compared with the recorded state only): " + ", ".join(report.unobservable) + "."
    )
