"""Plans and drift reports as text for a terminal (coloured with ``color``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from govsync.plan import Action, Change, Plan
from govsync.planning.impact import Impact
from govsync.policycode import ACTIONS
from govsync.render.codetests import text_lines
from govsync.render.linediff import one_line
from govsync.render.lines import (
    OUTSIDE_NOTE,
    OUTSIDE_TITLE,
    SYMBOLS,
    _unobservable_note,
    _verdict,
    ansi,
    created_lines,
    drift_headline,
    field_change_lines,
    governance_lines,
    outside_lines,
    summary_line,
)
from govsync.render.reasons import reason_words
from govsync.values import shown

if TYPE_CHECKING:
    from govsync.drift import DriftReport


def plan_text(plan: Plan, *, color: bool = False, verbose: bool = False) -> str:

    def style(text: str, fg: str | None, bold: bool = False) -> str:
        return ansi(text, fg, bold=bold) if color and (fg or bold) else text

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
        if c.why:
            lines.append(style(f"      {reason_words(c)}", fg))
        lines += text_lines(c)
        if c.impact is not None:
            lines += impact_lines(c.impact)
    changed = governance_lines(plan)
    if changed:
        lines.append(style(f"# governance of workspace {plan.workspace!r}", "blue", bold=True)
                     + style("  (recorded by apply; needs the approvals it records now)",
                             "blue"))
        lines += [f"      {line}" for line in changed]
    for check in plan.checks:
        lines.append(f"Check {check.name}: {check.status} ({check.detail})")
    if not plan.has_changes():
        lines.append("No changes. The manifests match the recorded state."
                     if not plan.caught_up() else
                     "No changes to send. The manifests now match what changed outside "
                     "govsync; apply records it: "
                     + ", ".join(c.address for c in plan.caught_up()) + ".")
    lines.append(style(summary_line(plan), None, bold=True))
    return "\n".join(lines) + "\n"


def impact_lines(impact: Impact) -> list[str]:
    """A policy's impact: per stage and action the new code's count beside the recorded
    code's, then its examples; or that it is unknown, and why."""
    if not impact.known:
        return [f"      impact: unknown ({impact.why})"]
    evaluated = f" of {impact.evaluated:,}" if impact.evaluated is not None else ""
    lines = [f"      impact ({impact.source}, {impact.window}): the new code decides "
             f"{impact.total(impact.new):,}{evaluated} logged request(s) other than allow"
             + (f", the recorded code {impact.total(impact.recorded):,}"
                if impact.recorded is not None else " (a new policy)")]
    new, before = impact.new or {}, impact.recorded or {}
    stages = [*ACTIONS, *sorted((set(new) | set(before)) - set(ACTIONS))]
    for stage in stages:
        actions = sorted(set(new.get(stage, {})) | set(before.get(stage, {})))
        for action in actions:
            now = new.get(stage, {}).get(action, 0)
            was = (f" (recorded {before.get(stage, {}).get(action, 0):,})"
                   if impact.recorded is not None else "")
            lines.append(f"        {stage} {action}: {now:,}{was}")
    for example in impact.examples:
        who = example.user or "(no user)"
        where = f" on {example.resource}" if example.resource else ""
        lines.append(one_line(f"        e.g. {example.time} {example.stage} "
                              f"{example.decision}: {who}{where}"))
    if impact.why:
        lines.append(f"        note: {impact.why}")
    if impact.skipped:
        lines.append(f"        skipped line(s) of the file: "
                     f"{', '.join(str(n) for n in impact.skipped[:20])}"
                     + ("…" if len(impact.skipped) > 20 else ""))
    return lines


def drift_text(report: DriftReport, *, color: bool = False) -> str:

    def style(text: str, fg: str | None) -> str:
        return ansi(text, fg) if color and fg else text

    headline = drift_headline(report)
    lines = [ansi(headline, bold=True) if color else headline]
    outside = outside_lines(report.plan, style=style)
    if outside:
        lines.append(f"{OUTSIDE_TITLE} ({OUTSIDE_NOTE}):")
        lines += outside
    for c in report.drifted:
        symbol, fg = SYMBOLS[c.action]
        head = f"{symbol} {c.address}  ({c.action})"
        lines.append(ansi(head, fg) if color else head)
        for d in c.diff:
            lines += field_change_lines(d, style=style)
        if c.why:
            lines.append(f"      {reason_words(c)}")
    for check in report.live:
        lines.append(f"Live check {check.name}: {check.status} ({check.detail})")
        for p in check.problems:
            lines.append(f"      {p['message']}")
    note = _unobservable_note(report)
    if note:
        lines.append(note)
    verdict = _verdict(report)
    lines.append(ansi(verdict, bold=True) if color else verdict)
    return "\n".join(lines) + "\n"
