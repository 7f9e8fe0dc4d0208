"""Plans and drift reports as text, JSON and Markdown."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import click

from govsync.drift import DriftReport
from govsync.formats import FORMAT_VERSION
from govsync.governance import Governance
from govsync.plan import Action, Change, CheckStatus, DriftKind, FieldChange, Plan
from govsync.render import linediff
from govsync.render.graph import change_graph, legend, mermaid
from govsync.values import KNOWN_AFTER_APPLY_TEXT, SENSITIVE, shown

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


# The colour of each kind of diff line in a terminal.
_LINE_COLOURS: dict[linediff.Tag, str | None] = {
    linediff.Tag.ADDED: "green", linediff.Tag.REMOVED: "red", linediff.Tag.HUNK: "cyan",
    linediff.Tag.SAME: None, linediff.Tag.NO_NEWLINE: None}


def _diff_line(line: linediff.Line, *, markdown: bool) -> str:
    """A line of a field's line diff: under the field in text (``        -old``); in a
    Markdown ``diff`` block its tag comes first, so that GitHub colours it."""
    if line.tag in (linediff.Tag.ADDED, linediff.Tag.REMOVED, linediff.Tag.SAME):
        return f"{line.tag}        {line.text}" if markdown else f"        {line.tag}{line.text}"
    text = f"\\ {line.text}" if line.tag == linediff.Tag.NO_NEWLINE else line.text
    return f"         {text}" if markdown else f"        {text}"


def _lines_below(head: str, lines: list[linediff.Line], markdown: bool,
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
    lines = linediff.field_lines(d.before, d.after)
    if lines is None:
        text = f"      {d.path}: {fmt_value(d.before)} -> {fmt_value(d.after)}{suffix}"
        return [_md(text) if markdown else text]
    # A side that is not a string (absent: null) is named on the field's line.
    sides = [fmt_value(v) if not isinstance(v, str) else "" for v in (d.before, d.after)]
    head = f"      {d.path}:" + (f" {sides[0] or '(lines below)'} -> "
                                 f"{sides[1] or '(lines below)'}" if any(sides) else "")
    return _lines_below(_md(head + suffix) if markdown else head + suffix, lines, markdown,
                        style)


def created_lines(key: str, value: Any, *, markdown: bool = False, style: Style = _plain,
                  suffix: str = "") -> list[str]:
    """A field of a create: ``key: value``, or a multi-line string as its lines."""
    if not linediff.multiline(value):
        text = f"      {key}: {fmt_value(value)}{suffix}"
        return [_md(text) if markdown else text]
    head = f"      {key}:{suffix}"
    return _lines_below(_md(head) if markdown else head, linediff.lines_of(value), markdown,
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


def plan_json(plan: Plan) -> str:
    """Contract section 3: one JSON object, stable key order, secrets "(sensitive)".

    Compact, on one line: the C encoder is 10x faster than indenting (pipe
    through ``jq`` to read it)."""
    return "".join(plan_json_chunks(plan))


# Changes encoded per chunk: the whole plan is never one string or one list of
# dicts (at 100,000 changes those would cost 60 MB more than the plan itself).
_CHUNK = 1000


def plan_json_chunks(plan: Plan) -> Iterator[str]:
    """``plan_json`` in pieces, to be written as they come."""
    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    head = _plan_head(plan)
    yield dumps(head)[:-1] + ',"changes":['
    changes = plan.changes
    for start in range(0, len(changes), _CHUNK):
        yield ("," if start else "") + ",".join(
            dumps(c.public()) for c in changes[start:start + _CHUNK])
    yield "]," + dumps(_plan_tail(plan))[1:] + "\n"


def plan_public(plan: Plan) -> dict[str, Any]:
    return {**_plan_head(plan), "changes": [c.public() for c in plan.changes],
            **_plan_tail(plan)}


def _plan_head(plan: Plan) -> dict[str, Any]:
    return {"formatVersion": FORMAT_VERSION, "workspace": plan.workspace,
            "lineage": plan.lineage, "serial": plan.serial}


def _plan_tail(plan: Plan) -> dict[str, Any]:
    return {"checks": [c.as_dict() for c in plan.checks], "summary": plan.summary(),
            "refreshed": plan.refreshed, "drift": [d.as_dict() for d in plan.drift],
            "targets": plan.targets, "leftOut": plan.left_out,
            "environment": plan.environment,
            "governance": governance_lines(plan) or None}


def governance_lines(plan: Plan) -> list[str]:
    """The workspace's governance the plan changes, one line each ([]: none)."""
    if plan.governance is None:
        return []

    before = plan.governance["from"]
    to = Governance.from_dict(plan.governance["to"], plan.workspace)
    return to.differences(Governance.from_dict(before, plan.workspace)
                          if before is not None else None)


def plan_text(plan: Plan, *, color: bool = False, verbose: bool = False) -> str:

    def style(text: str, fg: str | None, bold: bool = False) -> str:
        return click.style(text, fg=fg, bold=bold) if color and (fg or bold) else text

    lines: list[str] = []
    outside = outside_lines(plan, style=style)
    if outside:
        lines.append(style(OUTSIDE_TITLE, "yellow", bold=True) + f" ({OUTSIDE_NOTE}):")
        lines += outside
        lines.append("")
    for c in plan.changes:
        if c.action == Action.NOOP and not verbose:
            continue
        symbol, fg = SYMBOLS[c.action]
        head = f"{symbol} {c.address}"
        lines.append(style(head, fg, bold=True) + style(f"  ({c.action})", fg))
        def source(path: str, change: Change = c) -> str:
            patch = change.patch_of(path) if verbose else None
            return f"   # set by {patch}" if patch else ""

        if c.action == Action.CREATE and c.request is not None:
            for key in sorted(c.request):
                lines += created_lines(key, shown(c.request[key]), style=style,
                                       suffix=source(key))
        for d in c.diff:
            lines += field_change_lines(d, style=style, suffix=source(d.path))
        if c.reason:
            lines.append(style(f"      {c.reason}", fg))
    changed = governance_lines(plan)
    if changed:
        lines.append(style(f"# governance of workspace {plan.workspace!r}", "blue", bold=True)
                     + style("  (recorded by apply; needs the approvals it records now)",
                             "blue"))
        lines += [f"      {line}" for line in changed]
    for check in plan.checks:
        lines.append(f"Check {check.name}: {check.status} ({check.detail})")
    if not plan.has_changes():
        lines.append("No changes. The manifests match the recorded state.")
    lines.append(style(summary_line(plan), None, bold=True))
    return "\n".join(lines) + "\n"


MARKDOWN_LIMIT = 60_000


def plan_markdown(plan: Plan, *, limit: int = MARKDOWN_LIMIT, title: str = "govsync plan") -> str:
    """A pull-request comment: summary table first, changes by kind in
    collapsible sections; never longer than ``limit`` characters."""
    s = plan.summary()
    # Moves and imports get a column only when there are some.
    columns = [a for a in TABLE_ORDER if s[a] or a not in OCCASIONAL]
    headings = ["unchanged" if a == Action.NOOP else str(a) for a in columns]
    head = [
        f"### {title}: workspace `{plan.workspace}`",
        "",
        "| " + " | ".join(headings) + " |",
        "|" + "---:|" * len(headings),
        "| " + " | ".join(str(s[a]) for a in columns) + " |",
        "",
    ]
    if plan.targets:
        shown_targets = ", ".join(f"`{t}`" for t in plan.targets)
        head += [f"> Targeted with --target {shown_targets}: {plan.left_out} change(s) left out.",
                 ""]
    if plan.blocked():
        head += [
            f"> **{len(plan.blocked())} blocked change(s)**: the API cannot make them; "
            "`govsync apply` will refuse this plan until they are reverted.",
            "",
        ]
    changed = governance_lines(plan)
    if changed:
        head += [f"> **Governance of workspace `{plan.workspace}` changes** (applied only with "
                 "the approvals the workspace records now):", ">"]
        head += [f"> - {_md(line)}" for line in changed]
        head.append("")
    for check in plan.checks:
        head.append(f"- check **{check.name}**: {check.status} ({check.detail})")
    if plan.checks:
        head.append("")
    outside = outside_lines(plan, markdown=True)
    if outside:
        head += [f"#### {OUTSIDE_TITLE}", "", f"_{OUTSIDE_NOTE}_", "", "```diff", *outside,
                 "```", ""]
    if not plan.has_changes():
        head.append("No changes. The manifests match the recorded state.")
    by_kind: dict[str, list[Any]] = {}
    for c in plan.changes:
        if c.action != Action.NOOP:
            by_kind.setdefault(c.kind, []).append(c)
    sections: list[tuple[str, int]] = []  # (text, number of changes)
    for kind in sorted(by_kind):
        changes = by_kind[kind]
        counts = ", ".join(
            f"{sum(1 for c in changes if c.action == a)} {a}"
            for a in ORDER if any(c.action == a for c in changes)
        )
        body = [f"<details><summary><b>{kind}</b>: {counts}</summary>", "", "```diff"]
        for c in changes:
            symbol = SYMBOLS[c.action][0]
            body.append(_md(f"{symbol} {c.address} ({c.action})"))
            if c.action == Action.CREATE and c.request is not None:
                for key in sorted(c.request):
                    body += created_lines(key, shown(c.request[key]), markdown=True)
            for d in c.diff:
                body += field_change_lines(d, markdown=True)
            if c.reason:
                body.append(_md(f"      {c.reason}"))
        body += ["```", "", "</details>", ""]
        sections.append(("\n".join(body), len(changes)))
    text = "\n".join(head) + "\n"
    if plan.has_changes():
        text += _graph_part(plan, limit - len(text) - sum(len(b) + 1 for b, _ in sections),
                            limit - len(text), limit)
    kinds = sorted(by_kind)
    reserve = 0  # room kept for the note; grows until the note fits in it
    while True:
        kept: list[str] = []
        left: list[tuple[str, int]] = []
        used = len(text)
        for kind, (section, n) in zip(kinds, sections, strict=True):
            if used + len(section) + 1 + reserve > limit:
                left.append((kind, n))  # too big: leave it out, try the next ones
                continue
            kept.append(section + "\n")
            used += len(section) + 1
        note = _left_out_note(left, limit)
        if len(note) <= reserve or not left:
            break
        reserve = len(note)
    return text + "".join(kept) + note


def _graph_part(plan: Plan, room: int, free: int, limit: int) -> str:
    """The Mermaid graph of the changes, collapsed, if it fits in ``room`` (what the
    changes leave); else a note, if the note and a note of left-out changes fit in
    ``free`` (what the header leaves)."""

    graph = change_graph(plan)
    block = (f"<details><summary><b>Graph</b> of the changes "
             f"({legend(a for a in graph.nodes.values() if a is not None)})</summary>\n\n"
             f"```mermaid\n{mermaid(graph)}```\n\n</details>\n\n")
    if len(block) <= room:
        return block
    note = (f"> The graph of the changes is left out: the comment would exceed {limit:,} "
            "characters. Run `govsync graph --plan` to see it.\n\n")
    # The cap holds whatever is left out: room for the changes' own note stays.
    return note if len(note) + _LEFT_OUT_NOTE_ROOM <= free else ""


# Enough for the note that says which changes were left out.
_LEFT_OUT_NOTE_ROOM = 400


def _left_out_note(left: list[tuple[str, int]], limit: int) -> str:
    if not left:
        return ""
    count = sum(n for _, n in left)
    kinds = ", ".join(k for k, _ in left)
    if len(kinds) > 2000:
        kinds = f"{len(left)} kinds"
    return (
        f"\n> {count} change(s) not shown ({kinds}): the comment would exceed "
        f"{limit:,} characters. Run `govsync plan` to see them all.\n"
    )


def _md_inline(text: str) -> str:
    """Text in a Markdown paragraph: no emphasis or HTML from names and details."""
    return "".join("\\" + ch if ch in "\\`*_[]<>|" else ch for ch in text)


def _md(text: str) -> str:
    """A line inside the diff block: it must not close the fence or break the line."""
    return text.replace("```", "`\u200b``").replace("\r", "\\r").replace("\n", "\\n")


# -- drift ----------------------------------------------------------------------


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
    if report.unobservable:
        kinds = report.unobservable
        shown = ", ".join(kinds[:5]) + (f" and {len(kinds) - 5} more" if len(kinds) > 5 else "")
        line += (f"; not readable live, so compared with the recorded state only: {len(kinds)} "
                 f"kind{'s' if len(kinds) != 1 else ''} ({shown})")
    return line + "."


def drift_public(report: DriftReport) -> dict[str, Any]:
    body = plan_public(report.plan)
    body["changes"] = [c for c in body["changes"] if c["action"] != Action.NOOP]
    return {
        "inSync": report.in_sync,
        "headline": drift_headline(report),
        "compared": {
            "state": len(report.plan.changes),
            "live": [c.name for c in report.live if c.status != CheckStatus.SKIPPED],
            "notLive": report.unobservable,
        },
        **body,
        "live": [{"name": c.name, "status": c.status, "detail": c.detail, "problems": c.problems}
                 for c in report.live],
        "unobservable": report.unobservable,
    }


def drift_json(report: DriftReport) -> str:
    return json.dumps(drift_public(report), ensure_ascii=False, separators=(",", ":")) + "\n"


def _unobservable_note(report: DriftReport) -> str:
    if not report.unobservable:
        return ""
    return (
        "Not observable live (the API has no read operation for these kinds; they are "
        "compared with the recorded state only): " + ", ".join(report.unobservable) + "."
    )


def drift_text(report: DriftReport, *, color: bool = False) -> str:

    def style(text: str, fg: str | None) -> str:
        return click.style(text, fg=fg) if color and fg else text

    headline = drift_headline(report)
    lines = [click.style(headline, bold=True) if color else headline]
    outside = outside_lines(report.plan, style=style)
    if outside:
        lines.append(f"{OUTSIDE_TITLE} ({OUTSIDE_NOTE}):")
        lines += outside
    for c in report.drifted:
        symbol, fg = SYMBOLS[c.action]
        head = f"{symbol} {c.address}  ({c.action})"
        lines.append(click.style(head, fg=fg) if color else head)
        for d in c.diff:
            lines += field_change_lines(d, style=style)
        if c.reason:
            lines.append(f"      {c.reason}")
    for check in report.live:
        lines.append(f"Live check {check.name}: {check.status} ({check.detail})")
        for p in check.problems:
            lines.append(f"      {p['message']}")
    note = _unobservable_note(report)
    if note:
        lines.append(note)
    verdict = _verdict(report)
    lines.append(click.style(verdict, bold=True) if color else verdict)
    return "\n".join(lines) + "\n"


def drift_markdown(report: DriftReport) -> str:
    title, _, rest = plan_markdown(report.plan, title="govsync drift").partition("\n")
    text = f"{title}\n\n**{_md_inline(drift_headline(report))}**\n{rest}"
    extra = ["", "#### Live checks", ""]
    for check in report.live:
        extra.append(f"- **{check.name}**: {check.status} ({check.detail})")
        for p in check.problems[:200]:
            extra.append(f"  - {p['message']}")
    note = _unobservable_note(report)
    if note:
        extra += ["", note]
    extra += ["", "**In sync.**" if report.in_sync else "**Drift detected.**", ""]
    tail = "\n".join(extra)
    return text[: MARKDOWN_LIMIT - len(tail)] + tail
