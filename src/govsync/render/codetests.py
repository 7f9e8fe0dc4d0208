"""What a plan shows of a created or code-changed policy (contract section 13): whether
its code compiles (offline, and by the service), its PolicyTests' results, and each case
whose decision the change alters.  Text, Markdown and HTML word it from here."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from govsync.plan import CaseStatus, Change, Plan, PolicyTests, Service
from govsync.render.lines import md_text

# Cases listed per policy, at most (the counts say the rest).
LISTED = 20

_SERVICE = {Service.VALID: "compiles", Service.INVALID: "does not compile",
            Service.UNKNOWN: "not asked"}


def tested(plan: Plan) -> list[Change]:
    """The changes that carry a policy's tests."""
    return [c for c in plan.changes if c.tests is not None]


def counts(tests: PolicyTests) -> str:
    found = (f"{tests.count(CaseStatus.PASSED)} passed, {tests.count(CaseStatus.FAILED)} "
             f"failed, {tests.count(CaseStatus.ERROR)} errors")
    return found if tests.cases else "no test case (kind: PolicyTest)"


def compiles(tests: PolicyTests) -> str:
    """Offline, then the service: ``compiles offline; the service: compiles``."""
    offline = f"does not compile offline ({tests.compiles})" if tests.compiles else (
        "compiles offline")
    return f"{offline}; the service: {_SERVICE[tests.service]}"


def decision(value: Any) -> str:
    """A decision in one line (``no decision`` for an undefined rule)."""
    if value is None:
        return "no decision"
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 160 else text[:159] + "…"


def summary(tests: PolicyTests) -> str:
    """One line: the code, the tests, what changes."""
    changed = (f"; {len(tests.changed)} decision(s) change" if tests.recorded
               else "; new policy")
    return f"code {compiles(tests)}; tests {counts(tests)}{changed}"


def detail_lines(tests: PolicyTests) -> list[str]:
    """A line a case that does not pass, then a line a decision that changes."""
    out = [f"{c.status.upper()} {c.test} {c.case!r} ({c.stage}): {c.message}"
           for c in tests.cases if c.status != CaseStatus.PASSED][:LISTED]
    out += [f"decision changes: {c.test} {c.case!r} ({c.stage}): {decision(c.before)} -> "
            f"{decision(c.after)}" for c in tests.changed[:LISTED]]
    more = len(tests.changed) - LISTED
    if more > 0:
        out.append(f"... and {more} more decision(s) that change")
    return out


def text_lines(change: Change) -> list[str]:
    """The tests of a change, under it in a terminal's plan."""
    if change.tests is None:
        return []
    return [f"      {summary(change.tests)}",
            *(f"        {line}" for line in detail_lines(change.tests))]


def markdown_section(plan: Plan) -> list[str]:
    """The pull-request comment's section: one row a policy, then for each changed
    policy the cases whose decision differs, and the cases that do not pass."""
    changes = tested(plan)
    if not changes:
        return []
    out = ["#### Policy code and tests", "",
           "| policy | compiles (govsync) | compiles (service) | tests | decisions changed |",
           "|---|---|---|---|---:|"]
    for c in changes:
        t = c.tests
        assert t is not None
        offline = "no" if t.compiles else "yes"
        out.append(f"| `{c.address}` | {offline} | {_SERVICE[t.service]} | {counts(t)} | "
                   f"{len(t.changed) if t.recorded else 'new'} |")
    out.append("")
    for c in changes:
        t = c.tests
        assert t is not None
        failing = [r for r in t.cases if r.status != CaseStatus.PASSED]
        if not (failing or t.changed or t.compiles):
            continue
        out += [f"<details open><summary><code>{escape(c.address)}</code></summary>", ""]
        if t.compiles:
            out += [f"- does not compile offline: {md_text(t.compiles)}"]
        for r in failing[:LISTED]:
            out.append(f"- **{r.status}** `{_md(r.test)}` {md_text(repr(r.case))} ({r.stage}): "
                       f"{md_text(r.message)}")
        if t.changed:
            out += ["", "| test | case | stage | recorded code | new code |",
                    "|---|---|---|---|---|"]
            out += [f"| `{_md(r.test)}` | {md_text(r.case)} | {r.stage} | "
                    f"`{_md(decision(r.before))}` | `{_md(decision(r.after))}` |"
                    for r in t.changed[:LISTED]]
            if len(t.changed) > LISTED:
                out.append(f"\n_... and {len(t.changed) - LISTED} more._")
        out += ["", "</details>", ""]
    return out


def html_section(plan: Plan) -> str:
    """The plan page's section: the same as the comment's."""
    changes = tested(plan)
    if not changes:
        return ""
    rows = "".join(
        f"<tr><th scope=row><code>{escape(c.address)}</code></th>"
        f"<td>{'no' if c.tests.compiles else 'yes'}</td>"
        f"<td>{_SERVICE[c.tests.service]}</td><td>{escape(counts(c.tests))}</td>"
        f"<td>{len(c.tests.changed) if c.tests.recorded else 'new'}</td></tr>"
        for c in changes if c.tests is not None)
    blocks = []
    for c in changes:
        t = c.tests
        if t is None or not (t.changed or any(r.status != CaseStatus.PASSED for r in t.cases)
                             or t.compiles):
            continue
        items = "".join(f"<li>{escape(line)}</li>" for line in detail_lines(t))
        blocks.append(f'<article class="change"><h4><code>{escape(c.address)}</code></h4>'
                      f"<ul>{items}</ul></article>")
    return ('<section aria-labelledby="policy-tests"><h2 id="policy-tests">Policy code and '
            'tests</h2><table class="fields"><thead><tr><th scope=col>policy</th>'
            "<th scope=col>compiles (govsync)</th><th scope=col>compiles (service)</th>"
            "<th scope=col>tests</th><th scope=col>decisions changed</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>{''.join(blocks)}</section>")


def _md(text: str) -> str:
    """Text inside a code span of a table: no pipes, no line breaks, no backticks."""
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")
