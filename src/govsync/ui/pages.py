"""The dashboard's pages as HTML: the overview, an environment, its plan, its history
and audit, and its dependency graph.

Server-rendered and complete without a script; every value passes through
``render.html.esc``.  The plan's sections are ``render.html``'s, the same as the
file ``govsync plan --format html`` writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from govsync.plan import Action
from govsync.render.graph import LEGEND, change_graph
from govsync.render.html import (
    Filter,
    PlanPage,
    action_badge,
    approvals_section,
    blocked_section,
    changes_section,
    checks_section,
    esc,
    page,
    plan_body,
    summary_table,
    uncertain_section,
    url,
)
from govsync.render.lines import summary_line
from govsync.render.svg import graph_svg
from govsync.statuses import Outcome, RecordType, outcome_of, record_type
from govsync.ui.dashboard import EnvironmentView

# History records shown on an environment's page (all of them on its history page).
RECENT = 5


def _when(text: Any, now: datetime | None = None) -> str:
    """An ISO time as an age ("5 min ago"), with the time itself as a tooltip."""
    if not text:
        return "never"
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return esc(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            n = seconds // size
            age = f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''} ago"
            break
    else:
        age = f"{seconds} s ago"
    return f'<time datetime="{esc(moment.isoformat())}" title="{esc(text)}">{esc(age)}</time>'


def status_badge(view: EnvironmentView) -> str:
    return f'<span class="badge status st-{esc(view.status.value)}">{esc(view.status.value)}</span>'


def _nav(prefix: str, names: Sequence[str], current: str | None, section: str = "") -> str:
    items = [f'<li><a href="{esc(prefix)}/"'
             + (' aria-current="page"' if current is None else "") + ">Overview</a></li>"]
    for name in names:
        here = ' aria-current="page"' if name == current and not section else ""
        items.append(f'<li><a href="{esc(prefix)}/environments/{esc(name)}"{here}>'
                     f"{esc(name)}</a></li>")
    return f'<nav aria-label="environments"><ul>{"".join(items)}</ul></nav>'


def _sub_nav(prefix: str, name: str, section: str) -> str:
    base = f"{prefix}/environments/{name}"
    links = [("", "Status and changes"), ("/plan", "Plan"), ("/history", "History and audit"),
             ("/graph", "Graph")]
    return ('<nav class="sub" aria-label="this environment"><ul>' + "".join(
        f'<li><a href="{esc(base + path)}"' + (' aria-current="page"' if path == section
                                               else "") + f">{esc(label)}</a></li>"
        for path, label in links) + "</ul></nav>")


def _approvers(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "—"
    people = [str(a.get("principal", "")) for a in record.get("approvers") or []
              if isinstance(a, dict)]
    return esc(", ".join(people)) if people else "no approvals recorded"


def _apply_cell(record: Mapping[str, Any] | None) -> str:
    if record is None:
        return "never"
    who = record.get("actor") or record.get("user") or "unknown"
    return f"{_when(record.get('at'))} by {esc(who)} ({esc(outcome_of(record))})"


def overview(views: Sequence[EnvironmentView], names: Sequence[str], prefix: str = "") -> str:
    rows = []
    for v in views:
        apply = v.last(RecordType.APPLY)
        drift = v.last(RecordType.DRIFT)
        drift_cell = (_when(drift.get("at")) if drift is not None
                      else (_when(v.agent.last_cycle) if v.agent and v.agent.last_cycle
                            else "none recorded"))
        pending = (", ".join(f"{n} {a}" for a, n in v.plan.summary().items()
                             if n and a != Action.NOOP) or "none") if v.plan else "—"
        rows.append(
            f'<tr><th scope=row><a href="{esc(prefix)}/environments/{esc(v.name)}">'
            f"{esc(v.name)}</a><div class=muted>workspace {esc(v.workspace)}</div></th>"
            f"<td>{status_badge(v)}<div>{esc(v.reason)}</div></td>"
            f"<td><code>{esc(v.revision or '—')}</code></td>"
            f"<td>{_apply_cell(apply)}</td><td>{_approvers(apply)}</td>"
            f"<td>{drift_cell}</td><td>{esc(pending)}</td>"
            f"<td>{_when(v.made_at.isoformat())}</td></tr>")
    body = (
        "<h1>Environments</h1>"
        '<table class="overview"><caption>Each environment planned against its recorded '
        "state (read-only: no secret is read and the API is not called)</caption><thead><tr>"
        "<th scope=col>environment</th><th scope=col>status</th><th scope=col>revision</th>"
        "<th scope=col>last apply</th><th scope=col>approved by</th>"
        "<th scope=col>last drift check</th><th scope=col>pending</th>"
        "<th scope=col>planned</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>")
    return page("govsync: environments", body, prefix=prefix, nav=_nav(prefix, names, None))


def _head(view: EnvironmentView, names: Sequence[str], prefix: str, section: str,
          title: str) -> tuple[str, str]:
    facts = [("status", status_badge(view) + " " + esc(view.reason)),
             ("workspace", esc(view.workspace)), ("state", f"<code>{esc(view.state)}</code>"),
             ("revision", f"<code>{esc(view.revision or '—')}</code>"),
             ("planned", f"{_when(view.made_at.isoformat())} in {view.seconds:.2f} s")]
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    head = (f"<h1>{esc(title)}: <code>{esc(view.name)}</code></h1>"
            f"{_sub_nav(prefix, view.name, section)}<dl class=facts>{dl}</dl>")
    return head, _nav(prefix, names, view.name, section)


def _problems(view: EnvironmentView) -> str:
    if not view.error:
        return ""
    items = "".join(f"<li><code>{esc(p.where)}</code> {esc(p.message)}</li>"
                    for p in view.problems[:200])
    return (f'<section class="alert" aria-labelledby="error"><h2 id="error">Cannot plan this '
            f"environment</h2><p>{esc(view.error)}</p>"
            + (f"<ul>{items}</ul>" if items else "") + "</section>")


def agent_refresh(view: EnvironmentView) -> str:
    """What the agent's last cycle found on the server (its record in history): this page
    is planned without the API, so what changed outside govsync is the agent's word."""
    record = next((r for r in view.history
                   if record_type(r) == RecordType.DRIFT and "drifted" in r), None)
    title = '<section aria-labelledby="server"><h2 id="server">On the server</h2>'
    if record is None:
        return (title + "<p>No agent cycle is recorded: this page compares the manifests "
                "with the recorded state only (it never calls the API). `govsync drift`, "
                "or the agent, reads the server.</p></section>")
    status = str(record.get("status") or "")
    drifted = record.get("drifted") or 0
    listed = [c for c in record.get("changes") or [] if isinstance(c, dict)][:20]
    items = "".join(f"<li><code>{esc(c.get('address', ''))}</code> {esc(c.get('action', ''))}"
                    "</li>" for c in listed)
    return (title + f"<p>The agent's last cycle read the server {_when(record.get('at'))} "
            f"(revision <code>{esc(record.get('revision') or '—')}</code>): "
            f'<span class="badge status st-{esc(status)}">{esc(status)}</span> '
            f"{esc(record.get('reason') or '')}.</p>"
            f"<p>{esc(drifted)} object(s) changed outside govsync or missing on the server "
            "at that cycle; this page does not read the server itself.</p>"
            + (f"<ul>{items}</ul>" if items else "") + "</section>")


def environment(view: EnvironmentView, names: Sequence[str], chosen: Filter,
                prefix: str = "") -> str:
    head, nav = _head(view, names, prefix, "", "Environment")
    base = f"{prefix}/environments/{view.name}"
    body = [head, _problems(view), agent_refresh(view)]
    plan = view.plan
    if plan is not None:
        body += [summary_table(plan), blocked_section(plan),
                 checks_section(plan, view.problems), uncertain_section(plan),
                 approvals_section(view.approvals),
                 changes_section(plan, chosen=chosen, path=base, graph=f"{base}/graph")]
    body.append('<section aria-labelledby="recent"><h2 id="recent">Recent history</h2>'
                + history_table(view.history[:RECENT])
                + f'<p><a href="{esc(base)}/history">All history and audit, with filters</a>'
                "</p></section>")
    return page(f"govsync: {view.name}", "".join(body), prefix=prefix, nav=nav)


def plan_page(view: EnvironmentView, names: Sequence[str], chosen: Filter,
              prefix: str = "") -> str:
    head, nav = _head(view, names, prefix, "/plan", "Plan")
    base = f"{prefix}/environments/{view.name}"
    if view.plan is None:
        return page(f"govsync: plan of {view.name}", head + _problems(view), prefix=prefix,
                    nav=nav)
    extra = PlanPage(view.approvals, tuple(view.problems))
    body = plan_body(view.plan, extra, change_graph(view.plan), chosen=chosen,
                     path=f"{base}/plan", graph_url=f"{base}/graph")
    return page(f"govsync: plan of {view.name}", head + body, prefix=prefix, nav=nav)


@dataclass(frozen=True)
class HistoryFilter:
    """Which history records a page lists: kind, outcome, who, an address, a date."""

    kind: str = ""      # apply | drift
    outcome: str = ""   # ok | failed
    who: str = ""
    address: str = ""
    since: str = ""

    def keeps(self, record: Mapping[str, Any]) -> bool:
        who = " ".join(str(record.get(k) or "") for k in ("user", "actor", "host")).lower()
        return ((not self.kind or record_type(record) == self.kind)
                and (not self.outcome
                     or (outcome_of(record) == Outcome.OK) == (self.outcome == Outcome.OK))
                and (not self.who or self.who.lower() in who)
                and (not self.address or any(self.address.lower() in str(c.get("address", "")).lower()
                                             for c in record.get("changes") or []))
                and (not self.since or str(record.get("at", "")) >= self.since))


def history_table(records: Sequence[Mapping[str, Any]], address: str = "") -> str:
    if not records:
        return "<p>No history recorded.</p>"
    rows = []
    for r in records:
        summary = r.get("summary") or {}
        counts = ", ".join(f"{v} {k}" for k, v in summary.items() if v) or "nothing"
        git: Mapping[str, Any] = r["git"] if isinstance(r.get("git"), dict) else {}
        changes = [c for c in r.get("changes") or []
                   if not address or address.lower() in str(c.get("address", "")).lower()]
        items = "".join(
            f"<tr><td><code>{esc(c.get('address', ''))}</code></td><td>{esc(c.get('action', ''))}"
            f"</td><td>{esc(c.get('status', ''))}</td><td><code>{esc(c.get('id') or '')}</code>"
            f"</td><td>{esc(' '.join(x for x in (c.get('code') or '', c.get('error') or '') if x))}"
            "</td></tr>" for c in changes[:500])
        more = f"<p>and {len(changes) - 500} more</p>" if len(changes) > 500 else ""
        details = (
            f"<details><summary>{len(changes)} change(s)</summary>"
            '<dl class="facts">'
            f"<dt>plan hash</dt><dd><code>{esc(r.get('planHash', '—'))}</code></dd>"
            f"<dt>saved plan</dt><dd>{esc(r.get('planFile') or r.get('savedPlan') or '—')}</dd>"
            f"<dt>git commit</dt><dd><code>{esc(git.get('commit', '—'))}</code>"
            f"{' (dirty)' if git.get('dirty') else ''}</dd>"
            f"<dt>command</dt><dd><code>{esc(r.get('command', '—'))}</code></dd></dl>"
            "<table><thead><tr><th scope=col>address</th><th scope=col>action</th>"
            "<th scope=col>outcome</th><th scope=col>id</th><th scope=col>error</th></tr>"
            f"</thead><tbody>{items}</tbody></table>{more}</details>")
        outcome = outcome_of(r)
        rows.append(
            f"<tr><td>{_when(r.get('at'))}</td><td>{esc(record_type(r))}</td>"
            f"<td>{esc(r.get('actor') or r.get('user') or '')}@{esc(r.get('host') or '')}</td>"
            f'<td><span class="badge s-{"passed" if outcome == Outcome.OK else "failed"}">'
            f"{outcome}</span></td><td>{esc(counts)}</td><td>{_approvers(r)}</td>"
            f"<td>{details}</td></tr>")
    return ("<table><thead><tr><th scope=col>when</th><th scope=col>what</th>"
            "<th scope=col>who</th><th scope=col>outcome</th><th scope=col>summary</th>"
            "<th scope=col>approved by</th><th scope=col>details</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def history_page(view: EnvironmentView, names: Sequence[str], chosen: HistoryFilter,
                 prefix: str = "") -> str:
    head, nav = _head(view, names, prefix, "/history", "History and audit")
    path = f"{prefix}/environments/{view.name}/history"

    def select(name: str, label: str, values: Sequence[str], current: str) -> str:
        options = "".join(f'<option value="{esc(v)}"{" selected" if v == current else ""}>'
                          f"{esc(v)}</option>" for v in values)
        return (f'<label>{esc(label)} <select name="{name}"><option value="">any</option>'
                f"{options}</select></label>")

    def text(name: str, label: str, current: str, kind: str = "text") -> str:
        return (f'<label>{esc(label)} <input type="{kind}" name="{name}" value="{esc(current)}" '
                'autocomplete="off"></label>')

    form = (f'<form class="filters" method="get" action="{esc(path)}" role="search" '
            'aria-label="filter the history">'
            + select("kind", "Record", [RecordType.APPLY, RecordType.DRIFT], chosen.kind)
            + select("outcome", "Outcome", list(Outcome), chosen.outcome)
            + text("who", "User, CI actor or host", chosen.who)
            + text("address", "Address contains", chosen.address)
            + text("since", "Since", chosen.since[:10], "date")
            + '<button type="submit">Filter</button></form>')
    kept = [r for r in view.history if chosen.keeps(r)]
    body = (head + form
            + f'<p class="muted">{len(kept)} of the last {len(view.history)} record(s); '
            "<code>govsync audit export</code> writes every one (JSON lines or CSV).</p>"
            + history_table(kept, chosen.address))
    return page(f"govsync: history of {view.name}", body, prefix=prefix, nav=nav)


def graph_page(view: EnvironmentView, names: Sequence[str], node: str, text: str,
               prefix: str = "") -> str:
    head, nav = _head(view, names, prefix, "/graph", "Dependency graph")
    path = f"{prefix}/environments/{view.name}/graph"
    graph = view.graph
    form = (f'<form class="graph-search" method="get" action="{esc(path)}" role="search" '
            'aria-label="search the graph">'
            f'<label>Find an address <input name="q" value="{esc(text)}" autocomplete="off">'
            '</label><button type="submit">Find</button></form>')
    found = ""
    if text:
        matches = [a for a in graph.nodes if text.lower() in a.lower()][:50]
        found = ('<ul class="graph-found">' + "".join(
            f'<li><a href="{url(path, node=a)}">{esc(a)}</a></li>' for a in matches)
            + "</ul>") if matches else f"<p>No address contains {esc(text)}.</p>"
    # Focusable: it scrolls, and may hold no link to reach it by (axe's
    # scrollable-region-focusable).
    panel = '<aside class="graph-panel" aria-live="polite" tabindex="0" aria-label="the selected object">'
    if node in graph.nodes:
        deps = sorted(a for a, b in graph.edges if b == node)
        users = sorted(b for a, b in graph.edges if a == node)
        action = graph.nodes[node]

        def items(addresses: list[str]) -> str:
            return "".join(f'<li><a href="{url(path, node=a)}">{esc(a)}</a></li>'
                           for a in addresses) or "<li>nothing</li>"

        panel += (f"<h2>{esc(node)}</h2>"
                  + (f"<p>Plan: {action_badge(action)}</p>" if action is not None else "")
                  + f"<h3>Depends on ({len(deps)})</h3><ul>{items(deps)}</ul>"
                  f"<h3>Depended on by ({len(users)})</h3><ul>{items(users)}</ul>")
    else:
        panel += "<p>Select an object to see what it depends on and what depends on it.</p>"
    panel += "</aside>"
    legend = ('<p class="legend">'
              + "".join(action_badge(a) for a in LEGEND)
              + '<span class="badge">unchanged</span></p>')
    summary = (f"<p>{len(graph.nodes)} objects, {len(graph.edges)} dependencies"
               + (f"; {esc(summary_line(view.plan))}" if view.plan else "") + "</p>")
    body = (head + _problems(view) + summary + legend + form + found
            + '<div class="graph-layout">'
            + graph_svg(graph, node_url=path, selected=node if node in graph.nodes else None)
            + panel + "</div>")
    return page(f"govsync: graph of {view.name}", body, prefix=prefix, nav=nav)
