"""What a reviewer sees of a policy change's impact (contract section 13, "Impact"):
the pull-request comment (Markdown) and the plan page (HTML) of a saved plan whose
changes carry ``impact``, shown by ``govsync show``.  The plan is a real one (a policy
applied, then changed, and one created); its impact is written into the file as
``plan --impact`` writes it, so the rendering is judged on values a test controls,
hostile ones included (the logs hold whatever users and resources are named)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from govsync.planning.impact import Window, bucket
from govsync.render.markdown import MARKDOWN_LIMIT
from testkit import in_process

SEED = Path(__file__).resolve().parents[2] / "examples" / "server-seed.yaml"
POLICY = """\
apiVersion: govsync/v1
kind: Policy
metadata: {{name: {name}}}
spec:
  userEmail: carol.nguyen@northwind.example
  code: |
    package formal.v2

    {stage} := {{"action": "{action}"}} if {{ input.user.username == "{user}" }}
"""
ENV = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}

EXAMPLES = [{"time": f"2026-11-27T0{n}:00:00Z", "stage": "session", "decision": "block",
             "user": f"user{n}", "resource": "dwh"} for n in range(5)]
SERIES = [{"start": f"2026-11-{21 + d}T00:00:00Z", "new": 6 * d, "recorded": d}
          for d in range(7)]
CHANGED = {"known": True, "why": "", "window": "7d", "source": "report",
           "new": {"session": {"block": 42}, "pre_request": {"rewrite": 3}},
           "recorded": {"session": {"block": 10}}, "evaluated": 1204,
           "examples": EXAMPLES, "skippedLines": [], "series": SERIES}
CREATED = {"known": True, "why": "reports: not offered by the endpoint; replayed "
           "logs/recorded.jsonl instead", "window": "36h", "source": "file",
           "new": {"pre_request": {"rewrite": 7}}, "recorded": None, "evaluated": 500,
           "examples": [], "skippedLines": [3, 9]}
UNKNOWN = {"known": False, "why": "the report did not finish within 120 s (status "
           "'queued')", "window": "7d", "source": "report"}


def govsync(folder: Path, *args: str, code: int = 0) -> str:
    ran = in_process([*args], env=ENV, cwd=folder)
    assert "Traceback" not in ran.err, ran.err
    assert ran.code == code, (args, ran.out, ran.err)
    return ran.out + ran.err


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved plan: Policy/hours changed (applied, then its code edited) and
    Policy/fresh created."""
    folder = tmp_path_factory.mktemp("impact")
    hours = POLICY.format(name="hours", stage="session", action="block", user="ana")
    (folder / "m.yaml").write_text(hours)
    govsync(folder, "apply", "m.yaml", "--endpoint", "local", "--local-seed", str(SEED),
            "--state", "state.db", "--auto-approve")
    (folder / "m.yaml").write_text(hours.replace('"ana"', '"bo"') + "---\n" + POLICY.format(
        name="fresh", stage="pre_request", action="rewrite", user="cy"))
    govsync(folder, "plan", "m.yaml", "--state", "state.db", "--refresh=false",
            "--out", "plan.json")
    return folder / "plan.json"


def with_impact(saved: Path, impacts: dict[str, Any], name: str = "impact.json",
                copies: int = 0) -> Path:
    """The saved plan with ``impact`` in the changes named (and ``copies`` more
    created policies, each with the first impact given)."""
    data = json.loads(saved.read_text())
    for change in data["changes"]:
        if change["address"] in impacts:
            change["impact"] = impacts[change["address"]]
    template = next(c for c in data["changes"] if c["action"] == "create")
    first = next(iter(impacts.values()))
    data["changes"] += [dict(template, address=f"Policy/p{n:03d}", impact=first)
                        for n in range(copies)]
    path = saved.parent / name
    path.write_text(json.dumps(data))
    return path


def show(path: Path, fmt: str, code: int = 0) -> str:
    return govsync(path.parent, "show", path.name, "--format", fmt, code=code)


def section(markdown: str) -> str:
    """The comment's impact section (up to the graph of the changes)."""
    start = markdown.index("#### Impact over logged traffic")
    end = markdown.find("<details><summary><b>", start)
    return markdown[start:end if end >= 0 else len(markdown)]


def cells(row: str) -> list[str]:
    """A Markdown table row's cells, split at its unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def test_the_comment_shows_new_code_beside_recorded_code_with_the_difference(
        saved: Path) -> None:
    md = section(show(with_impact(saved, {"Policy/hours": CHANGED, "Policy/fresh": CREATED}),
                      "markdown"))
    rows = {cells(line)[0]: cells(line) for line in md.splitlines()
            if line.startswith("| `Policy/")}
    assert rows["`Policy/hours`"] == ["`Policy/hours`", "7d", "45 (3.7 %)", "10 (0.8 %)",
                                      "**+35**", "1,204"]
    assert rows["`Policy/fresh`"] == ["`Policy/fresh`", "36h", "7 (1.4 %)", "new policy",
                                      "**new policy**", "500"]
    hours = md[md.index("##### `Policy/hours` (changed): 45 request(s) (+35)"):]
    assert "_Over the last 7d, by the endpoint's impact reports, over 1,204 logged " \
           "request(s)._" in hours
    assert "| session | block | 42 (3.5 %) | 10 (0.8 %) | +32 |" in hours
    assert "| pre_request | rewrite | 3 (0.2 %) | 0 | +3 |" in hours
    # Two policies: their examples are open, all five, in the order given.
    assert "5 example(s) of what the new code decides:" in hours
    shown = [cells(line)[2] for line in hours.splitlines() if "| **block** |" in line]
    assert shown == [f"user{n}" for n in range(5)]
    fresh = md[md.index("##### `Policy/fresh` (created): 7 request(s) (new policy)"):]
    assert "by recorded inputs replayed locally (--impact-from), over 500" in fresh
    assert "| pre_request | rewrite | 7 (1.4 %) | \u2014 | new policy |" in fresh
    assert "2 line(s) of the file could not be read and were not counted (line 3, 9)" in fresh
    assert ("> Note: reports: not offered by the endpoint; replayed logs/recorded.jsonl "
            "instead.") in fresh


def test_unknown_impact_is_shown_with_why_and_the_plan_is_shown_all_the_same(
        saved: Path) -> None:
    out = show(with_impact(saved, {"Policy/hours": UNKNOWN}), "markdown")
    md = section(out)
    (row,) = [line for line in md.splitlines() if line.startswith("| `Policy/hours`")]
    assert cells(row) == ["`Policy/hours`", "7d", "**unknown**: the report did not finish "
                          "within 120 s (status 'queued')", "\u2014", "\u2014", "\u2014"]
    assert ("> **Impact unknown**: the report did not finish within 120 s (status "
            "'queued'). The plan is made all the same; this never blocks by itself.") in md
    assert "##### `Policy/hours` (changed): impact unknown\n" in md
    assert "| stage | action |" not in md
    assert "<b>Policy</b>: 1 create, 1 update" in out


def test_a_plan_without_impact_has_no_impact_section(saved: Path) -> None:
    assert "Impact" not in show(saved, "markdown")
    assert 'id="impact"' not in show(saved, "html")


def test_names_from_the_logs_cannot_break_the_comment_or_the_page(saved: Path) -> None:
    hostile = [{"time": "2026-11-27T09:00:00Z", "stage": "session", "decision": "block",
                "user": "<!-- govsync-plan --> | `x` [a](https://evil.example) <img src=x>",
                "resource": "line\nbreak | **bold**"},
               {"time": "<script>alert(1)</script>", "stage": "session",
                "decision": "block&<b>", "user": "x" * 500, "resource": None}]
    path = with_impact(saved, {"Policy/hours": dict(CHANGED, examples=hostile,
                                                    why="<b>never</b>")})
    md = section(show(path, "markdown"))
    # Every < and ] of the logs escaped: no comment, tag or link.
    assert re.findall(r"(?<!\\)<|(?<!\\)\]\(", md) == [], md
    rows = [line for line in md.splitlines() if "2026-11-27T09" in line or "script" in line]
    assert len(rows) == 2 and all(len(cells(r)) == 5 for r in rows), rows
    assert "x" * 59 + "\u2026" in md and "x" * 60 not in md
    page = show(path, "html")
    assert "<!-- govsync-plan" not in page and "<img src=x>" not in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<strong>block&amp;&lt;b&gt;</strong>" in page


def test_many_policies_keep_the_comment_bounded(saved: Path) -> None:
    long_why = dict(UNKNOWN, why="the endpoint said: " + "no " * 3000)
    path = with_impact(saved, {"Policy/hours": CHANGED, "Policy/fresh": long_why},
                       copies=300)
    md = show(path, "markdown")
    assert len(md) <= MARKDOWN_LIMIT
    impact = section(md)
    assert "| _... and 252 more_ |" in impact
    assert impact.count("\n##### `Policy/") == 10
    assert "_292 more policies are not shown in full: `govsync plan --format json`" in impact
    # More than two policies: each one's examples collapsed.
    assert "<details><summary>5 example(s) of what the new code decides</summary>" in impact
    assert max(len(line) for line in impact.splitlines()) < 600
    page = show(path, "html")
    assert page.count('<figure class="chart">') == 199  # 200 in full, one unknown
    assert page.count('<tr><th scope=row><a href="#impact-Policy/') == 302
    assert "102 more policies are not shown in full" in page


def test_the_plan_page_shows_the_counts_beside_a_chart_of_the_window(saved: Path) -> None:
    page = show(with_impact(saved, {"Policy/hours": CHANGED, "Policy/fresh": CREATED}),
                "html")
    part = page[page.index('<section aria-labelledby="impact"'):]
    part = part[:part.index("</section>")]
    fresh = part[part.index('id="impact-Policy/fresh"'):part.index('id="impact-Policy/hours"')]
    hours = part[part.index('id="impact-Policy/hours"'):]
    assert "<td>session</td><td>block</td><td>42 (3.5 %)</td><td>10 (0.8 %)</td>" \
           "<td>+32</td>" in hours
    (chart,) = re.findall(r'<figure class="chart">.*?</figure>', hours)
    assert ('aria-label="Requests Policy/hours&#x27;s new code and recorded code decide '
            'other than allow, over the last 7d"') in chart
    # A bar for every bucket with a count (the first day has none), new and recorded.
    assert len(re.findall(r'<rect class="series-0"', chart)) == 6
    assert len(re.findall(r'<rect class="series-1"', chart)) == 6
    assert "<title>2026-11-27T00:00:00Z: new code 36</title>" in chart
    assert ">2026-11-21</text>" in chart and ">2026-11-27</text>" in chart
    assert "new code</span>" in chart and "recorded code</span>" in chart
    assert hours.count("<td><strong>block</strong></td>") == 5
    # Without a series: the counts by stage and action, new code only (a created policy).
    (chart,) = re.findall(r'<figure class="chart">.*?</figure>', fresh)
    assert re.search(r">pre_request</text><text [^>]*>rewrite</text>", chart)
    assert "recorded code" not in chart
    assert len(re.findall(r"<rect ", chart)) == 1
    assert "2 line(s) of the file could not be read" in fresh
    assert '<p class="reason">Note: reports: not offered by the endpoint;' in fresh


def test_a_saved_plan_with_a_malformed_series_is_refused_in_one_line(saved: Path) -> None:
    bad = with_impact(saved, {"Policy/hours": dict(CHANGED, series=[{"start": 1, "new": -1}])},
                      name="bad.json")
    out = show(bad, "markdown", code=1)
    assert "impact's series is [{start, new, recorded}]" in out
    assert len(out.strip().splitlines()) == 1, out


def test_a_window_is_cut_into_buckets_that_count_the_times_inside_it() -> None:
    end = datetime(2026, 11, 28, 0, 0, tzinfo=UTC)
    week = bucket(Window("7d", 604800), end,
                  ["2026-11-21T00:00:00Z", "2026-11-27T23:59:59+00:00",
                   "2026-11-27T12:00:00Z", "2026-11-20T23:59:59Z", "2026-11-28T00:00:00Z",
                   "yesterday", "2026-11-25T10:00:00"],
                  ["2026-11-22T05:00:00Z"])
    assert [b.start for b in week] == [f"2026-11-{d}T00:00:00Z" for d in range(21, 28)]
    assert [b.new for b in week] == [1, 0, 0, 0, 0, 0, 2]
    assert [b.recorded for b in week] == [0, 1, 0, 0, 0, 0, 0]
    hours = bucket(Window("90m", 5400), end, [], None)
    assert len(hours) == 18 and hours[0].start == "2026-11-27T22:30:00Z"
    assert {b.recorded for b in hours} == {None}
    assert len(bucket(Window("365d", 365 * 86400), end, [])) <= 48
    assert len(bucket(Window("3650d", 3650 * 86400), end, [])) <= 48  # months, several a bucket
