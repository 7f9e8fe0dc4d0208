"""What a plan shows a reviewer of a policy change's impact over logged traffic
(contract section 13, "Impact"): per created or code-changed policy, how many logged
requests the new code would decide other than allow, by stage and action, beside the
recorded code's count and the difference, out of how many were evaluated, over which
window; a few examples; a chart of the triggers over the window.  Unknown impact is
shown with why.  Markdown (the pull-request comment) and HTML (the plan page, the
dashboard's too) word it from here; every value from the logs is escaped here."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import NamedTuple

from govsync.plan import Action, Change, Plan
from govsync.planning.impact import Counts, Impact, Source, parse_window
from govsync.policycode.stages import STAGES
from govsync.render.lines import md_text
from govsync.render.svg import Bars, bar_chart

# Policies listed in the summary table, and shown in full, at most (a comment is
# bounded; `plan --format json` has them all).
LISTED = 50
DETAILED = 10
# Policies shown in full on the plan page (each with its chart); the table lists all.
PAGE_DETAILED = 200
# Characters of why an impact is unknown shown in a comment's cell.
WHY_CHARS = 300
# More policies than this in a comment: each policy's examples are collapsed.
OPEN_EXAMPLES = 2
# Characters of a user's or a resource's name shown (logs hold anything).
NAME_CHARS = 60

DASH = "\u2014"
_SOURCE = {Source.REPORT: "the endpoint's impact reports",
           Source.FILE: "recorded inputs replayed locally (--impact-from)"}
_STAGE_ORDER = {row.stage.value: i for i, row in enumerate(STAGES)}


def measured(plan: Plan) -> list[Change]:
    """The changes that carry a policy's impact."""
    return [c for c in plan.changes if c.impact is not None]


class Row(NamedTuple):
    """One stage and action: the new code's count, the recorded code's (None: a created
    policy, no code before)."""

    stage: str
    action: str
    new: int
    recorded: int | None

    @property
    def difference(self) -> int | None:
        return None if self.recorded is None else self.new - self.recorded


def rows(impact: Impact) -> list[Row]:
    """Every stage and action either code triggers, in the stages' order."""
    new, recorded = impact.new or {}, impact.recorded
    keys = {(s, a) for counts in (new, recorded or {}) for s, acts in counts.items()
            for a in acts}
    return [Row(s, a, _get(new, s, a), None if recorded is None else _get(recorded, s, a))
            for s, a in sorted(keys, key=lambda k: (_STAGE_ORDER.get(k[0], 9), k))]


def _get(counts: Counts, stage: str, action: str) -> int:
    return counts.get(stage, {}).get(action, 0)


def signed(n: int | None) -> str:
    """A difference: ``+32``, ``-5``, ``0``; ``new policy`` where there was no code."""
    if n is None:
        return "new policy"
    return f"+{n:,}" if n > 0 else f"\u2212{-n:,}" if n < 0 else "0"


def share(n: int, impact: Impact) -> str:
    """``42 (3.5 %)`` of the evaluated requests, where their number is known."""
    if not impact.evaluated or n == 0:
        return f"{n:,}"
    percent = 100 * n / impact.evaluated
    shown = f"{percent:.1f}" if percent >= 0.1 or n == 0 else "<0.1"
    return f"{n:,} ({shown.removesuffix('.0')} %)"


def over(impact: Impact) -> str:
    """``the last 7d, by the endpoint's impact reports, over 1,204 logged requests``
    (a file replayed whole: ``all recorded, by ...``)."""
    counted = (f", over {impact.evaluated:,} logged request(s)"
               if impact.evaluated is not None else "")
    try:
        window = f"the last {parse_window(impact.window).text}"
    except ValueError:
        window = impact.window
    return f"{window}, by {_SOURCE[impact.source]}{counted}"


def skipped_note(impact: Impact) -> str:
    if not impact.skipped:
        return ""
    lines = ", ".join(str(n) for n in impact.skipped[:10])
    more = f" and {len(impact.skipped) - 10} more" if len(impact.skipped) > 10 else ""
    return (f"{len(impact.skipped)} line(s) of the file could not be read and were not "
            f"counted (line {lines}{more})")


def headline(change: Change, impact: Impact) -> str:
    """One line: ``42 request(s) (+32)``, or ``impact unknown`` (why follows it)."""
    if not impact.known:
        return "impact unknown"
    new = Impact.total(impact.new)
    if impact.recorded is None:
        return f"{new:,} request(s) (new policy)"
    return f"{new:,} request(s) ({signed(new - Impact.total(impact.recorded))})"


def _name(value: str | None) -> str:
    if not value:
        return DASH
    return value if len(value) <= NAME_CHARS else value[:NAME_CHARS - 1] + "\u2026"


def _what(change: Change) -> str:
    return "created" if change.action == Action.CREATE else "changed"


# -- Markdown ----------------------------------------------------------------------------


def _code(text: str) -> str:
    """An address in a code span inside a table (nothing is escaped in a span but the
    table's pipe)."""
    return " ".join(text.split()).replace("`", "'").replace("|", "\\|")


def markdown_section(plan: Plan) -> list[str]:
    """The pull-request comment's section: one row a policy, then each policy's counts
    by stage and action beside the recorded code's, and its examples."""
    changes = measured(plan)
    if not changes:
        return []
    out = ["#### Impact over logged traffic", "",
           "_What each created or code-changed policy's new code would decide other than "
           "allow, over the requests logged in the window, beside the recorded code. "
           "Unknown impact never blocks by itself._", "",
           "| policy | window | new code | recorded code | difference | evaluated |",
           "|---|---|---:|---:|---:|---:|"]
    for c in changes[:LISTED]:
        i = c.impact
        assert i is not None
        if not i.known:
            out.append(f"| `{_code(c.address)}` | {md_text(i.window)} | **unknown**: "
                       f"{md_text(_why(i))} | {DASH} | {DASH} | {DASH} |")
            continue
        new = Impact.total(i.new)
        recorded = None if i.recorded is None else Impact.total(i.recorded)
        out.append(f"| `{_code(c.address)}` | {md_text(i.window)} | {share(new, i)} | "
                   f"{'new policy' if recorded is None else share(recorded, i)} | "
                   f"**{signed(None if recorded is None else new - recorded)}** | "
                   f"{'?' if i.evaluated is None else f'{i.evaluated:,}'} |")
    if len(changes) > LISTED:
        out.append(f"| _... and {len(changes) - LISTED} more_ | | | | | |")
    out.append("")
    collapse = len(changes) > OPEN_EXAMPLES
    for c in changes[:DETAILED]:
        out += _markdown_policy(c, collapse)
    if len(changes) > DETAILED:
        out += [f"_{len(changes) - DETAILED} more policies are not shown in full: "
                "`govsync plan --format json` shows every one's `impact`._", ""]
    return out


def _why(impact: Impact) -> str:
    why = impact.why or "not measured"
    return why if len(why) <= WHY_CHARS else why[:WHY_CHARS - 1] + "\u2026"


def _markdown_policy(change: Change, collapse: bool) -> list[str]:
    i = change.impact
    assert i is not None
    out = [f"##### `{_code(change.address)}` ({_what(change)}): {md_text(headline(change, i))}",
           ""]
    if not i.known:
        return [*out, f"> **Impact unknown**: {md_text(_why(i))}. "
                "The plan is made all the same; this never blocks by itself.", ""]
    out += [f"_Over {md_text(over(i))}._", ""]
    if i.why:  # measured, with a note (reports failed, the file replayed instead)
        out += [f"> Note: {md_text(_why(i))}.", ""]
    table = rows(i)
    if not table:
        out += ["The new code " + ("and the recorded code " if i.recorded is not None else "")
                + "would decide allow for every logged request.", ""]
    else:
        out += ["| stage | action | new code | recorded code | difference |",
                "|---|---|---:|---:|---:|"]
        out += [f"| {md_text(r.stage)} | {md_text(r.action)} | {share(r.new, i)} | "
                f"{DASH if r.recorded is None else share(r.recorded, i)} | "
                f"{signed(r.difference)} |" for r in table]
        out.append("")
    note = skipped_note(i)
    if note:
        out += [f"> {md_text(note)}.", ""]
    if i.examples:
        body = ["| time | stage | user | resource | decision |", "|---|---|---|---|---|",
                *(f"| {md_text(e.time)} | {md_text(e.stage)} | {md_text(_name(e.user))} | "
                  f"{md_text(_name(e.resource))} | **{md_text(e.decision)}** |"
                  for e in i.examples)]
        title = f"{len(i.examples)} example(s) of what the new code decides"
        if collapse:
            out += [f"<details><summary>{escape(title)}</summary>", "", *body, "",
                    "</details>", ""]
        else:
            out += [f"{title}:", "", *body, ""]
    return out


# -- HTML --------------------------------------------------------------------------------


def html_section(plan: Plan) -> str:
    """The plan page's section: the comment's, with a chart of each policy's triggers
    over the window (new code beside recorded code)."""
    changes = measured(plan)
    if not changes:
        return ""
    summary = "".join(_html_row(c) for c in changes)
    blocks = "".join(_html_policy(c) for c in changes[:PAGE_DETAILED])
    if len(changes) > PAGE_DETAILED:
        blocks += (f'<p class="muted">{len(changes) - PAGE_DETAILED} more policies are not '
                   "shown in full: <code>govsync plan --format json</code> shows every "
                   "one's <code>impact</code>.</p>")
    return ('<section aria-labelledby="impact" class="impact"><h2 id="impact">Impact over '
            "logged traffic</h2><p>What each created or code-changed policy's new code "
            "would decide other than allow, over the requests logged in the window, beside "
            "the recorded code. Unknown impact never blocks by itself.</p>"
            '<table class="fields"><thead><tr><th scope=col>policy</th>'
            "<th scope=col>window</th><th scope=col>new code</th><th scope=col>recorded "
            "code</th><th scope=col>difference</th><th scope=col>evaluated</th></tr></thead>"
            f"<tbody>{summary}</tbody></table>{blocks}</section>")


def _html_row(change: Change) -> str:
    i = change.impact
    assert i is not None
    head = (f'<th scope=row><a href="#impact-{escape(change.address)}"><code>'
            f"{escape(change.address)}</code></a></th><td>{escape(i.window)}</td>")
    if not i.known:
        return (f"<tr>{head}<td colspan=4><strong>unknown</strong>: "
                f"{escape(i.why or 'not measured')}</td></tr>")
    new = Impact.total(i.new)
    recorded = None if i.recorded is None else Impact.total(i.recorded)
    return (f"<tr>{head}<td>{escape(share(new, i))}</td>"
            f"<td>{'new policy' if recorded is None else escape(share(recorded, i))}</td>"
            f"<td><strong>{escape(signed(None if recorded is None else new - recorded))}"
            f"</strong></td><td>{'?' if i.evaluated is None else f'{i.evaluated:,}'}"
            "</td></tr>")


def _html_policy(change: Change) -> str:
    i = change.impact
    assert i is not None
    head = (f'<article class="change" id="impact-{escape(change.address)}">'
            f"<h3><code>{escape(change.address)}</code> ({_what(change)}): "
            f"{escape(headline(change, i))}</h3>")
    if not i.known:
        return (f'{head}<p class="reason">Impact unknown: {escape(i.why or "not measured")}. '
                "The plan is made all the same; this never blocks by itself.</p></article>")
    parts = [head, f'<p class="muted">Over {escape(over(i))}.</p>']
    if i.why:
        parts.append(f'<p class="reason">Note: {escape(_why(i))}.</p>')
    table = rows(i)
    if table:
        body = "".join(
            f"<tr><td>{escape(r.stage)}</td><td>{escape(r.action)}</td>"
            f"<td>{escape(share(r.new, i))}</td>"
            f"<td>{'&mdash;' if r.recorded is None else escape(share(r.recorded, i))}</td>"
            f"<td>{escape(signed(r.difference))}</td></tr>" for r in table)
        counts = ('<table class="fields"><caption>Requests decided other than allow, by '
                  "stage and action</caption><thead><tr><th scope=col>stage</th>"
                  "<th scope=col>action</th><th scope=col>new code</th><th scope=col>"
                  "recorded code</th><th scope=col>difference</th></tr></thead>"
                  f"<tbody>{body}</tbody></table>")
    else:
        counts = ("<p>The new code " + ("and the recorded code " if i.recorded is not None
                                        else "") + "would decide allow for every logged "
                  "request.</p>")
    parts.append(f'<div class="impact-grid">{counts}{chart(change)}</div>')
    note = skipped_note(i)
    if note:
        parts.append(f'<p class="reason">{escape(note)}.</p>')
    if i.examples:
        body = "".join(
            f"<tr><td>{escape(e.time)}</td><td>{escape(e.stage)}</td>"
            f"<td>{escape(_name(e.user))}</td><td>{escape(_name(e.resource))}</td>"
            f"<td><strong>{escape(e.decision)}</strong></td></tr>" for e in i.examples)
        parts.append('<table class="fields"><caption>Examples of what the new code decides'
                     "</caption><thead><tr><th scope=col>time</th><th scope=col>stage</th>"
                     "<th scope=col>user</th><th scope=col>resource</th>"
                     f"<th scope=col>decision</th></tr></thead><tbody>{body}</tbody></table>")
    parts.append("</article>")
    return "".join(parts)


def chart(change: Change) -> str:
    """The policy's triggers over the window (its series), new code beside recorded
    code; without a series, its counts by stage and action, the same two side by side."""
    i = change.impact
    assert i is not None
    names = ["new code"] + (["recorded code"] if i.recorded is not None else [])
    if i.series:
        labels = [b.start for b in i.series]
        values: list[Sequence[int]] = [[b.new for b in i.series]]
        if i.recorded is not None:
            values.append([b.recorded or 0 for b in i.series])
        title = (f"Requests {change.address}'s new code"
                 + (" and recorded code" if i.recorded is not None else "")
                 + f" decide other than allow, over the last {i.window}")
        return bar_chart(Bars(title, labels, tuple(zip(names, values, strict=True)),
                              time=True))
    table = rows(i)
    if not table:
        return ""
    labels = [f"{r.stage}\n{r.action}" for r in table]
    values = [[r.new for r in table]]
    if i.recorded is not None:
        values.append([r.recorded or 0 for r in table])
    title = (f"Requests {change.address}'s new code"
             + (" and recorded code" if i.recorded is not None else "")
             + f" decide other than allow over the last {i.window}, by stage and action")
    return bar_chart(Bars(title, labels, tuple(zip(names, values, strict=True))))
