"""Plans and drift reports as Markdown: pull-request comments, bounded in length."""

from __future__ import annotations

from typing import Any

from govsync.drift import DriftReport
from govsync.plan import Action, Plan
from govsync.render.codetests import markdown_section
from govsync.render.graph import change_graph, legend, mermaid
from govsync.render.impactview import markdown_section as impact_section
from govsync.render.lines import (
    OCCASIONAL,
    ORDER,
    OUTSIDE_NOTE,
    OUTSIDE_TITLE,
    SYMBOLS,
    TABLE_ORDER,
    _md,
    _unobservable_note,
    created_lines,
    drift_headline,
    field_change_lines,
    governance_lines,
    md_text,
    outside_lines,
)
from govsync.render.reasons import blocked_advice, reason_words
from govsync.values import shown

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
            f"> **{len(plan.blocked())} blocked change(s)**: `govsync apply` will refuse this "
            f"plan: {blocked_advice(plan.blocked())}.",
            "",
        ]
    changed = governance_lines(plan)
    if changed:
        head += [f"> **Governance of workspace `{plan.workspace}` changes** (applied only with "
                 "the approvals the workspace records now):", ">"]
        head += [f"> - {_md(line)}" for line in changed]
        head.append("")
    for check in plan.checks:
        head.append(f"- check **{check.name}**: {check.status} ({md_text(check.detail)})")
    if plan.checks:
        head.append("")
    head += markdown_section(plan)
    head += impact_section(plan)
    outside = outside_lines(plan, markdown=True)
    if outside:
        head += [f"#### {OUTSIDE_TITLE}", "", f"_{OUTSIDE_NOTE}_", "", "```diff", *outside,
                 "```", ""]
    if not plan.has_changes():
        head.append("No changes. The manifests match the recorded state.")
    head += _deletes(plan)
    by_kind: dict[str, list[Any]] = {}
    for c in plan.changes:
        if c.action not in (Action.NOOP, Action.DELETE):  # deletes: shown above, open
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
            if c.why:
                body.append(_md(f"      {reason_words(c)}"))
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


# Deletes listed in the open block; the rest are counted (the table has them all).
_DELETES_SHOWN = 200


def _deletes(plan: Plan) -> list[str]:
    """The deletes, never collapsed: a ``diff`` block whose lines start with ``-``, which
    GitHub colours red (its ``x`` symbol is not coloured)."""
    deletes = [c for c in plan.changes if c.action == Action.DELETE]
    if not deletes:
        return []
    lines = [f"#### {len(deletes)} to delete (after every other change)", "", "```diff"]
    for c in deletes[:_DELETES_SHOWN]:
        lines.append(_md(f"- {c.address} (delete)"))
        if c.why:
            lines.append(_md(f"      {reason_words(c)}"))
    if len(deletes) > _DELETES_SHOWN:
        lines.append(f"  ... and {len(deletes) - _DELETES_SHOWN} more: run `govsync plan` "
                     "to see them all")
    return [*lines, "```", ""]


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


def drift_markdown(report: DriftReport) -> str:
    title, _, rest = plan_markdown(report.plan, title="govsync drift").partition("\n")
    text = f"{title}\n\n**{md_text(drift_headline(report))}**\n{rest}"
    extra = ["", "#### Live checks", ""]
    for check in report.live:
        extra.append(f"- **{check.name}**: {check.status} ({md_text(check.detail)})")
        for p in check.problems[:200]:
            extra.append(f"  - {p['message']}")
    note = _unobservable_note(report)
    if note:
        extra += ["", note]
    extra += ["", "**In sync.**" if report.in_sync else "**Drift detected.**", ""]
    tail = "\n".join(extra)
    return text[: MARKDOWN_LIMIT - len(tail)] + tail
