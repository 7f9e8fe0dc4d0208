"""Plans as HTML: the dashboard's plan page, and ``govsync plan --format html``.

Every value shown comes from a plan, whose values are masked already (a
secret is ``(sensitive)``), and every piece of user data is escaped here, by
``esc``, the one function that turns text into HTML.  The page is the same
whether the dashboard serves it (its styles and scripts linked from
``/static/``) or ``plan --format html`` writes it as one file (inlined, with a
Content-Security-Policy that lets the file load nothing: it works offline and
inside a CI artifact).  Scripts only enhance it: without them every change,
reason and approval is there to read.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from importlib import resources
from typing import Any
from urllib.parse import urlencode

from govsync.plan import Action, Change, DriftKind, Plan
from govsync.render import linediff
from govsync.render.codetests import html_section
from govsync.render.graph import Graph
from govsync.render.impactview import html_section as impact_section
from govsync.render.lines import (
    OCCASIONAL,
    ORDER,
    SYMBOLS,
    TABLE_ORDER,
    fmt_value,
    governance_lines,
    summary_line,
)
from govsync.render.reasons import reason_words
from govsync.render.svg import graph_svg
from govsync.values import shown

# The front-end files, shipped in the package (no CDN): read as data, so that
# writing a plan file never imports the dashboard's web stack.
STATIC = resources.files("govsync") / "ui" / "static"
STYLES = ("app.css",)
SCRIPTS = ("svg-pan-zoom.min.js", "app.js")
# A written plan file may load nothing at all: no request leaves it.
FILE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
               "img-src data:; base-uri 'none'; form-action 'none'")
# Changes shown in a served page at once; a written file holds them all.
PAGE_SIZE = 200
# A file's change graph is drawn up to this many changes (the dashboard draws any number).
FILE_GRAPH_LIMIT = 2000


def esc(text: Any) -> str:
    """User data as HTML text or an attribute value (quotes included)."""
    return html.escape(str(text), quote=True)


def url(path: str, **query: Any) -> str:
    """A link with its query (empty values left out), escaped for an attribute."""
    kept = {k: v for k, v in query.items() if v not in (None, "", 0)}
    return esc(path + ("?" + urlencode(kept) if kept else ""))


class Assets(StrEnum):
    """How a page gets its styles and scripts."""

    LINKED = "linked"    # from the dashboard's /static/
    INLINE = "inline"    # inside the page (a file that stands alone)


def _read(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def page(title: str, body: str, *, assets: Assets = Assets.LINKED, prefix: str = "",
         nav: str = "") -> str:
    """A whole HTML document around ``body`` (already HTML)."""
    if assets == Assets.INLINE:
        head = (f'<meta http-equiv="Content-Security-Policy" content="{esc(FILE_POLICY)}">'
                + "".join(f"<style>{_read(s)}</style>" for s in STYLES))
        # "</" cannot appear inside the inlined scripts' text: nothing closes their tag.
        tail = "".join(f"<script>{_read(s).replace('</', '<' + chr(92) + '/')}</script>"
                       for s in SCRIPTS)
    else:
        head = "".join(f'<link rel="stylesheet" href="{esc(prefix)}/static/{s}">'
                       for s in STYLES)
        tail = "".join(f'<script src="{esc(prefix)}/static/{s}" defer></script>'
                       for s in SCRIPTS)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer"><link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title>{head}</head><body>"
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header class="top"><span class="brand">govsync</span>{nav}</header>'
        f'<main id="main" tabindex="-1">{body}</main>{tail}</body></html>\n'
    )


# -- approvals ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Approvals:
    """What a plan needs to be applied: how many approvals, by whom, and which it has."""

    required: int = 0
    # Who may sign (principals), and where that list comes from.
    signers: tuple[str, ...] = ()
    source: str = ""
    # (principal, key) of each valid signature of distinct people.
    collected: tuple[tuple[str, str], ...] = ()
    not_counted: tuple[str, ...] = ()
    # Said under the counts (where signatures are kept, or why none are read).
    note: str = ""

    @property
    def missing(self) -> int:
        return max(0, self.required - len(self.collected))


def approvals_section(approvals: Approvals) -> str:
    if approvals.required == 0 and not approvals.collected:
        return ('<section aria-labelledby="approvals"><h2 id="approvals">Approvals</h2>'
                "<p>None required for this workspace.</p></section>")
    signed = {p for p, _ in approvals.collected}
    waiting = [s for s in approvals.signers if s not in signed]
    state = "ok" if approvals.missing == 0 else "missing"
    items = "".join(f"<li>{esc(p)} <span class=muted>({esc(k)})</span></li>"
                    for p, k in approvals.collected) or "<li>none yet</li>"
    out = [
        '<section aria-labelledby="approvals"><h2 id="approvals">Approvals</h2>',
        f'<p class="approvals {state}"><strong>{len(approvals.collected)} of '
        f"{approvals.required}</strong> required approval(s) collected"
        + (f"; <strong>{approvals.missing} missing</strong>" if approvals.missing else "")
        + ".</p>",
        f"<h3>Approved by</h3><ul>{items}</ul>",
    ]
    if approvals.missing and waiting:
        out.append("<h3>May still approve</h3><ul>"
                   + "".join(f"<li>{esc(s)}</li>" for s in waiting) + "</ul>")
    if approvals.source:
        out.append(f'<p class="muted">Allowed signers: {esc(approvals.source)}.</p>')
    if approvals.not_counted:
        out.append("<h3>Not counted</h3><ul>"
                   + "".join(f"<li>{esc(w)}</li>" for w in approvals.not_counted) + "</ul>")
    if approvals.note:
        out.append(f'<p class="muted">{esc(approvals.note)}</p>')
    out.append("</section>")
    return "".join(out)


# -- changes -----------------------------------------------------------------------------


def action_badge(action: Action) -> str:
    symbol = SYMBOLS[action][0].strip() or "="
    return (f'<span class="badge a-{esc(action.value)}"><span aria-hidden="true">'
            f"{esc(symbol)}</span> {esc(action.value)}</span>")


def _value(value: Any) -> str:
    return f"<code>{esc(fmt_value(value))}</code>"


def _lines(lines: Sequence[linediff.Line]) -> str:
    """A line diff as ``git diff`` shows it, in one ``<pre>``: removed lines in ``<del>``,
    added ones in ``<ins>`` (what they are, for screen readers too), runs of each in one."""
    out: list[str] = []
    open_tag = ""
    for line in lines:
        tag = {linediff.Tag.ADDED: "ins", linediff.Tag.REMOVED: "del"}.get(line.tag, "")
        if tag != open_tag:
            out.append((f"</{open_tag}>" if open_tag else "") + (f"<{tag}>" if tag else ""))
            open_tag = tag
        if line.tag == linediff.Tag.HUNK:
            out.append(f'<span class="hunk">{esc(line.text)}</span>\n')
        elif line.tag == linediff.Tag.NO_NEWLINE:
            out.append(f'<span class="hunk">\\ {esc(line.text)}</span>\n')
        else:
            out.append(f"{esc(line.tag.value)}{esc(line.text)}\n")
    if open_tag:
        out.append(f"</{open_tag}>")
    return f'<pre class="linediff">{"".join(out)}</pre>'


def fields_table(change: Change) -> str:
    """A change's fields: each changed one before and after (multi-line strings as a
    line diff); a create's request, field by field."""
    rows: list[str] = []
    if change.action == Action.CREATE and change.request is not None:
        for key in sorted(change.request):
            value = shown(change.request[key])
            cell = (_lines(linediff.lines_of(value)) if linediff.multiline(value)
                    else _value(value))
            rows.append(f"<tr><th scope=row>{esc(key)}</th><td colspan=2>{cell}</td></tr>")
    for d in change.diff:
        lines = linediff.field_lines(d.before, d.after)
        if lines is not None:
            rows.append(f"<tr><th scope=row>{esc(d.path)}</th><td colspan=2>{_lines(lines)}"
                        "</td></tr>")
        else:
            rows.append(f"<tr><th scope=row>{esc(d.path)}</th><td>{_value(d.before)}</td>"
                        f"<td>{_value(d.after)}</td></tr>")
    if not rows:
        return ""
    head = ("<tr><th scope=col>field</th><th scope=col colspan=2>value</th></tr>"
            if change.action == Action.CREATE else
            "<tr><th scope=col>field</th><th scope=col>before</th>"
            "<th scope=col>after</th></tr>")
    return f'<table class="fields"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def change_block(change: Change, *, graph_link: str = "") -> str:
    """One change: its action, address, why, and its fields."""
    reason = f'<p class="reason">{esc(reason_words(change))}</p>' if change.why else ""
    moved = (f'<p class="muted">moved from {esc(change.moved_from)}</p>'
             if change.moved_from else "")
    link = (f' <a class="small" href="{graph_link}">in the graph</a>' if graph_link else "")
    return (f'<article class="change" id="c-{esc(change.address)}">'
            f"<h3>{action_badge(change.action)} <code>{esc(change.address)}</code>{link}</h3>"
            f"{reason}{moved}{fields_table(change)}</article>")


@dataclass(frozen=True)
class Filter:
    """Which changes a page shows: by action, kind and part of the address; one page."""

    action: str = ""
    kind: str = ""
    text: str = ""
    page: int = 1

    def keeps(self, change: Change) -> bool:
        return ((not self.action or change.action == self.action)
                and (not self.kind or change.kind == self.kind)
                and (not self.text or self.text.lower() in change.address.lower()))

    def query(self, **more: Any) -> dict[str, Any]:
        return {"action": self.action, "kind": self.kind, "q": self.text, **more}


def filter_form(plan: Plan, chosen: Filter, path: str) -> str:
    kinds = sorted({c.kind for c in plan.changes if c.action != Action.NOOP})
    actions = [a for a in ORDER if a != Action.NOOP]

    def options(values: Iterable[str], selected: str) -> str:
        return "".join(f'<option value="{esc(v)}"{" selected" if v == selected else ""}>'
                       f"{esc(v)}</option>" for v in values)

    return (f'<form class="filters" method="get" action="{esc(path)}" role="search" '
            'aria-label="filter the changes"><label>Action <select name="action"><option value="">any</option>'
            f"{options(actions, chosen.action)}</select></label>"
            '<label>Kind <select name="kind"><option value="">any</option>'
            f"{options(kinds, chosen.kind)}</select></label>"
            f'<label>Address contains <input name="q" value="{esc(chosen.text)}" '
            'autocomplete="off"></label><button type="submit">Filter</button></form>')


def changes_section(plan: Plan, *, chosen: Filter | None = None, path: str = "",
                    graph: str = "") -> str:
    """The pending changes (no-ops left out), grouped by kind.  With ``chosen`` (a served
    page), filtered and one page of them with links to the others; else all."""
    pending = [c for c in plan.changes if c.action != Action.NOOP]
    if not pending:
        return ('<section aria-labelledby="changes"><h2 id="changes">Changes</h2>'
                "<p>No changes. The manifests match the recorded state.</p></section>")
    out = ['<section aria-labelledby="changes"><h2 id="changes">Changes</h2>']
    if chosen is not None:
        out.append(filter_form(plan, chosen, path))
        pending = [c for c in pending if chosen.keeps(c)]
        pages = max(1, -(-len(pending) // PAGE_SIZE))
        number = min(max(chosen.page, 1), pages)
        first = (number - 1) * PAGE_SIZE
        shown_now = pending[first:first + PAGE_SIZE]
        out.append(f'<p class="muted">{len(pending)} change(s)'
                   + (f", {first + 1} to {first + len(shown_now)} shown" if pages > 1 else "")
                   + ".</p>")
        out.append(_pager(path, chosen, number, pages, "pages of changes"))
        # (a second landmark of the page: a name of its own, axe's landmark-unique)
        nav = _pager(path, chosen, number, pages, "pages of changes, at the end")
    else:
        shown_now, nav = pending, ""
    by_kind: dict[str, list[Change]] = {}
    for c in shown_now:
        by_kind.setdefault(c.kind, []).append(c)
    for kind in sorted(by_kind):
        changes = by_kind[kind]
        counts = ", ".join(f"{sum(1 for c in changes if c.action == a)} {a}"
                           for a in ORDER if any(c.action == a for c in changes))
        out.append(f'<details open class="kind"><summary><strong>{esc(kind)}</strong>: '
                   f"{esc(counts)}</summary>")
        out += [change_block(c, graph_link=(url(graph, node=c.address) if graph else ""))
                for c in changes]
        out.append("</details>")
    out.append(nav)
    out.append("</section>")
    return "".join(out)


def _pager(path: str, chosen: Filter, number: int, pages: int, name: str) -> str:
    if pages <= 1:
        return ""
    links = []
    if number > 1:
        links.append(f'<a href="{url(path, **chosen.query(page=number - 1))}" '
                     'rel="prev">previous</a>')
    links.append(f"<span>page {number} of {pages}</span>")
    if number < pages:
        links.append(f'<a href="{url(path, **chosen.query(page=number + 1))}" '
                     'rel="next">next</a>')
    return f'<nav class="pager" aria-label="{esc(name)}">{" ".join(links)}</nav>'


def summary_table(plan: Plan) -> str:
    s = plan.summary()
    columns = [a for a in TABLE_ORDER if s[a] or a not in OCCASIONAL]
    head = "".join(f"<th scope=col>{action_badge(a)}</th>" for a in columns)
    cells = "".join(f"<td>{s[a]}</td>" for a in columns)
    return (f'<table class="summary"><caption>{esc(summary_line(plan))}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody><tr>{cells}</tr></tbody></table>")


def blocked_section(plan: Plan) -> str:
    blocked = plan.blocked()
    if not blocked:
        return ""
    return ('<section aria-labelledby="blocked" class="alert"><h2 id="blocked">Blocked: '
            f"{len(blocked)} change(s) the API cannot make</h2><p>Apply refuses this plan "
            "until they are reverted in the manifests.</p>"
            + "".join(change_block(c) for c in blocked) + "</section>")


@dataclass(frozen=True)
class RuleProblem:
    """A rule an object breaks (an error: apply refuses), where and why."""

    where: str
    message: str


def checks_section(plan: Plan, errors: Sequence[RuleProblem] = ()) -> str:
    """Rule results and the plan's other checks (groups, lock, endpoint)."""
    if not plan.checks and not errors:
        return ('<section aria-labelledby="checks"><h2 id="checks">Rules and checks</h2>'
                "<p>No rules or checks apply.</p></section>")
    rows = [f'<tr class="failed"><td><span class="badge s-failed">error</span></td>'
            f"<td>{esc(e.where)}</td><td>{esc(e.message)}</td></tr>" for e in errors]
    rows += [f'<tr><td><span class="badge s-{esc(c.status)}">{esc(c.status)}</span></td>'
             f"<td>{esc(c.name)}</td><td>{esc(c.detail)}</td></tr>" for c in plan.checks]
    return ('<section aria-labelledby="checks"><h2 id="checks">Rules and checks</h2>'
            '<table class="checks"><thead><tr><th scope=col>result</th><th scope=col>rule or '
            "check</th><th scope=col>detail</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def outside_section(plan: Plan) -> str:
    """What the refresh found: objects changed outside govsync (field by field: what
    govsync applied, what the server holds) and objects missing on the server."""
    if not plan.drift:
        return ""
    blocks = []
    for d in plan.drift:
        if d.kind == DriftKind.MISSING:
            blocks.append(f'<article class="change"><h4><code>{esc(d.address)}</code> '
                          f"missing on the server</h4><p class=\"reason\">recorded as "
                          f"{esc(d.id or '')}; planned as a create</p></article>")
            continue
        rows = "".join(
            f"<tr><th scope=row>{esc(f.path)}</th><td>{_value(f.before)}</td>"
            f"<td>{_value(f.after)}</td></tr>" for f in d.diff)
        blocks.append(f'<article class="change"><h4><code>{esc(d.address)}</code> changed '
                      'outside govsync</h4><table class="fields"><thead><tr><th scope=col>'
                      "field</th><th scope=col>applied by govsync</th><th scope=col>on the "
                      f"server</th></tr></thead><tbody>{rows}</tbody></table></article>")
    return ('<section aria-labelledby="outside" class="notice"><h2 id="outside">Objects '
            f"changed outside govsync: {len(plan.drift)}</h2><p>Read from the server before "
            "planning; the manifests' changes follow.</p>" + "".join(blocks) + "</section>")


def governance_section(plan: Plan) -> str:
    lines = governance_lines(plan)
    if not lines:
        return ""
    return ('<section aria-labelledby="governance" class="notice"><h2 id="governance">'
            f"Governance of workspace {esc(plan.workspace)} changes</h2><p>Applied only with "
            "the approvals the workspace records now.</p><ul>"
            + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul></section>")


def resolve_commands(address: str, environment: str | None, workspace: str) -> list[str]:
    """The two commands that settle an uncertain create, ready to copy."""
    scope = f"--env {environment}" if environment else f"--workspace {workspace}"
    return [f"govsync state resolve {scope} {address} --id ID",
            f"govsync state resolve {scope} {address} --absent"]


def copyable(command: str) -> str:
    return (f'<div class="copy"><code>{esc(command)}</code><button type="button" '
            f'class="copy-button" data-copy="{esc(command)}" hidden>Copy</button></div>')


def uncertain_section(plan: Plan) -> str:
    uncertain = [c for c in plan.changes if c.action == Action.UNCERTAIN]
    if not uncertain:
        return ""
    out = ['<section aria-labelledby="uncertain" class="notice"><h2 id="uncertain">'
           f"Uncertain: {len(uncertain)} create(s) sent without an answer</h2>"
           "<p>Check the server, then settle each: <code>--id</code> with the object's id "
           "if it exists, <code>--absent</code> if it does not (the next apply creates "
           "it).</p>"]
    for c in uncertain:
        commands = "".join(copyable(cmd) for cmd in
                           resolve_commands(c.address, plan.environment, plan.workspace))
        out.append(f'<article class="change"><h3>{action_badge(c.action)} '
                   f"<code>{esc(c.address)}</code></h3>{commands}</article>")
    out.append("</section>")
    return "".join(out)


def graph_section(graph: Graph, *, title: str, node_url: str = "") -> str:
    if not graph.nodes:
        return ""
    return (f'<section aria-labelledby="graph"><h2 id="graph">{esc(title)}</h2>'
            + graph_svg(graph, node_url=node_url) + "</section>")


@dataclass(frozen=True)
class PlanPage:
    """Everything the plan page shows beyond the plan itself."""

    approvals: Approvals = field(default_factory=Approvals)
    errors: tuple[RuleProblem, ...] = ()
    # Saved plans: the file, whether it verifies, its review digest.
    facts: tuple[tuple[str, str], ...] = ()


def plan_body(plan: Plan, extra: PlanPage, graph: Graph, *, chosen: Filter | None = None,
              path: str = "", graph_url: str = "") -> str:
    """The plan page's content below its heading: what will change, what is blocked and
    why, the rules, the approvals, and what depends on what."""
    facts = [("workspace", plan.workspace), ("environment", plan.environment or "none"),
             ("state", f"serial {plan.serial}, lineage {plan.lineage or 'none yet'}"),
             ("made by", f"govsync {plan.version}"), *extra.facts]
    if plan.id:
        facts.append(("plan id", plan.id))
    if plan.git:
        facts.append(("git commit", f"{plan.git.get('commit', '')}"
                      + (" (with uncommitted changes)" if plan.git.get("dirty") else "")))
    if plan.targets:
        facts.append(("targets", f"{', '.join(plan.targets)} ({plan.left_out} left out)"))
    if not plan.secrets_read:
        facts.append(("secrets", "not read: a secret whose value changed is not seen here"))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts)
    if len(graph.nodes) > FILE_GRAPH_LIMIT and not graph_url:
        drawn = (f'<p class="muted">The graph of {len(graph.nodes)} changes is left out of '
                 "this file: run <code>govsync ui</code> to explore it.</p>")
    else:
        drawn = graph_section(graph, title="What depends on what", node_url=graph_url)
    return (f'<dl class="facts">{dl}</dl>{summary_table(plan)}{outside_section(plan)}'
            f"{governance_section(plan)}{blocked_section(plan)}{html_section(plan)}"
            f"{impact_section(plan)}"
            f"{checks_section(plan, extra.errors)}"
            f"{approvals_section(extra.approvals)}{uncertain_section(plan)}"
            f"{changes_section(plan, chosen=chosen, path=path)}{drawn}")


def plan_file(plan: Plan, extra: PlanPage, graph: Graph) -> str:
    """``govsync plan --format html``: one self-contained file (styles and scripts inside,
    nothing loaded), for a CI artifact."""
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    extra = PlanPage(extra.approvals, extra.errors, (*extra.facts, ("written", made)))
    env = f" (environment {plan.environment})" if plan.environment else ""
    heading = f"<h1>Plan for workspace <code>{esc(plan.workspace)}</code>{esc(env)}</h1>"
    return page(f"govsync plan: {plan.workspace}", heading + plan_body(plan, extra, graph),
                assets=Assets.INLINE)

