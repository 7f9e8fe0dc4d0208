"""A plan's impact (contract section 13, "Impact"): ``plan --impact-from FILE`` replays
recorded inputs through each created or code-changed policy's new and recorded code with
the engine of validate and test; ``impact:`` in the project file asks for it; a bad
window is exit 1 at once; a broken line, a missing or binary file, code that loops are
said and never block; a saved plan keeps it; rules see ``change.impact``; apply never
measures it.  Through the command line, against the reference server where a policy must
be applied first."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from govsync import impactfile, impactreplay
from govsync.planning.impact import Impact, Source, Target, Window
from govsync.refresh import impact as refresh_impact
from testkit import EXAMPLE_SEED, ROOT, Served, in_process, policy_head

KEY = "k" * 32

POLICY = policy_head("analysts") + """\
    package formal.v2

    import future.keywords.if
    import future.keywords.in

    session := {"action": "block", "reason": "closed"} if {
      GROUP in input.user.groups
    }

    pre_request := {"action": "rewrite", "rewritten_query": "SELECT 1"} if {
      input.query.statement_type == "DELETE"
    }
"""

LOOPING = """\
---
apiVersion: govsync/v1
kind: Policy
metadata: {name: loops}
spec:
  userEmail: carol.nguyen@northwind.example
  code: |
    package formal.v2

    import future.keywords.if
    import future.keywords.in

    session := {"action": "block"} if {
      n := count([1 | some a in numbers.range(1, 20000); some b in numbers.range(1, 20000); a != b])
      n > 0
    }
"""


def record(i: int, when: datetime | None = None) -> str:
    """Line i: users u0..; every second one an analyst, every third a contractor; the
    odd lines pre_request, DELETE every fourth."""
    stage = "pre_request" if i % 2 else "session"
    groups = [g for g, every in (("analysts", 2), ("contractors", 3)) if i % every == 0]
    item = {"user": {"username": f"u{i}", "groups": groups}, "resource": {"name": "dwh"},
            "query": {"statement_type": "DELETE" if i % 4 == 1 else "SELECT"}}
    time = (when or datetime(2026, 11, 20, 9, 0, tzinfo=UTC)) + timedelta(minutes=i)
    return json.dumps({"time": time.isoformat().replace("+00:00", "Z"), "stage": stage,
                       "input": item})


def write(folder: Path, group: str = "analysts", *, extra: str = "") -> None:
    (folder / "m.yaml").write_text(POLICY.replace("GROUP", json.dumps(group)) + extra)


def recorded(folder: Path, lines: list[str], name: str = "rec.jsonl") -> Path:
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def run(folder: Path, *args: str, endpoint: str | None = None) -> tuple[int, str, str]:
    where = ["--endpoint", endpoint] if endpoint else []
    ran = in_process([*args, *where, "--state", str(folder / "state.db")],
                     env={"PATH": "/usr/bin:/bin", "GOVSYNC_API_KEY": KEY}, cwd=folder)
    assert "Traceback" not in ran.err, ran.err
    return ran.code, ran.out, ran.err


def plan_json(folder: Path, *args: str, endpoint: str | None = None) -> dict:  # type: ignore[type-arg]
    code, out, err = run(folder, "plan", "m.yaml", *args, "--format", "json",
                         endpoint=endpoint)
    assert code == 0, out + err
    return json.loads(out)  # type: ignore[no-any-return]


def change_of(plan: dict, address: str = "Policy/analysts") -> dict:  # type: ignore[type-arg]
    return next(c for c in plan["changes"] if c["address"] == address)  # type: ignore[no-any-return]


def closed(schema: object) -> object:
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def described(impact: dict) -> None:  # type: ignore[type-arg]
    """``impact`` is what docs/json/plan.schema.json says, every key described."""
    schema = json.loads((ROOT / "docs/json/plan.schema.json").read_text())
    jsonschema.validate(impact, closed(schema["properties"]["changes"]["items"]["properties"][
        "impact"]), cls=jsonschema.Draft202012Validator)


def checks(plan: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["name"]: c for c in plan["checks"]}


@pytest.fixture
def server() -> Iterator[Served]:
    served = Served(["--api-key", KEY, "--seed", str(EXAMPLE_SEED)])
    try:
        yield served
    finally:
        served.stop()


# -- a created policy, offline ------------------------------------------------------


def test_a_created_policy_counts_what_its_code_decides_over_the_file(tmp_path: Path) -> None:
    write(tmp_path)
    recorded(tmp_path, [record(i) for i in range(12)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    impact = change_of(plan)["impact"]
    # session lines 0,2,..,10: analysts are 0,2,4,6,8,10 -> 6 blocks; pre_request lines
    # 1,5,9 are DELETEs -> 3 rewrites
    assert impact["known"] is True and impact["source"] == "file"
    assert impact["new"] == {"session": {"block": 6}, "pre_request": {"rewrite": 3}}
    assert impact["recorded"] is None and impact["newTotal"] == 9
    assert impact["evaluated"] == 12 and impact["skippedLines"] == []
    assert len(impact["examples"]) == 5
    assert impact["examples"][0] == {"time": "2026-11-20T09:00:00Z", "stage": "session",
                                     "decision": "block", "user": "u0", "resource": "dwh"}
    described(impact)
    assert checks(plan)["impact"]["status"] == "passed"
    assert "12 recorded input(s) of rec.jsonl" in checks(plan)["impact"]["detail"]
    code, out, _ = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl")
    assert code == 0
    assert ("impact (file, all recorded): the new code decides 9 of 12 logged "
            "request(s) other than allow (a new policy)") in out
    assert "        session block: 6\n" in out and "        pre_request rewrite: 3\n" in out
    assert "e.g. 2026-11-20T09:00:00Z session block: u0 on dwh" in out
    # saved from a workspace never written (planned again in it): the impact kept
    code, out, err = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl",
                         "--out", "plan.json")
    assert code == 0, out + err
    code, out, err = run(tmp_path, "show", "plan.json", "--format", "json")
    assert code == 0, out + err
    assert change_of(json.loads(out))["impact"] == impact


def test_a_broken_line_is_named_and_the_rest_counted(tmp_path: Path) -> None:
    write(tmp_path)
    lines = [record(i) for i in range(6)]
    lines[2] = '{"time": "2026-11-20T09:02:00Z", "stage": "session", "input": {'  # cut
    lines.insert(4, '{"time": "yesterday", "stage": "session", "input": {}}')
    lines.append('{"time": "2026-11-20T09:02:00Z", "stage": "lunch", "input": {}}')
    lines.append('{"time": "2026-11-20T09:02:00Z", "stage": ["session"], "input": {}}')
    recorded(tmp_path, lines)
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    impact = change_of(plan)["impact"]
    assert impact["known"] is True
    assert impact["skippedLines"] == [3, 5, 8, 9]
    assert impact["evaluated"] == 5
    assert impact["new"] == {"session": {"block": 2}, "pre_request": {"rewrite": 2}}
    line = checks(plan)["impact"]
    assert line["status"] == "warning"
    assert "4 line(s) of rec.jsonl skipped (lines 3, 5, 8, 9; line 3: not JSON" in line["detail"]
    assert "line 5: time 'yesterday' is not a time" in line["detail"]
    code, out, err = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl")
    assert code == 0
    assert "skipped line(s) of the file: 3, 5, 8, 9" in out


def test_a_file_a_windows_tool_wrote_reads_whole(tmp_path: Path) -> None:
    """A byte order mark before the first line and CRLF line ends (PowerShell's UTF-8)."""
    write(tmp_path)
    text = "\r\n".join(record(i) for i in range(4)) + "\r\n"
    (tmp_path / "rec.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode())
    impact = change_of(plan_json(tmp_path, "--impact-from", "rec.jsonl"))["impact"]
    assert impact["skippedLines"] == [] and impact["evaluated"] == 4, impact


def test_code_that_fails_on_every_request_is_not_measured_as_harmless(tmp_path: Path) -> None:
    """A division by zero on every request decides nothing: unknown, with why, never
    "0 requests" (a rule reading change.impact.known would let it through)."""
    write(tmp_path)
    manifest = (tmp_path / "m.yaml").read_text()
    (tmp_path / "m.yaml").write_text(manifest.replace('{"action": ', '{"r": 1 / 0, "action": '))
    recorded(tmp_path, [record(i) for i in range(4)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    impact = change_of(plan)["impact"]
    assert impact["known"] is False, impact
    assert impact["why"].startswith("the new code failed on 3 recorded request(s) and "
                                    "decided none other than allow (first: "), impact["why"]


def test_a_name_from_the_logs_prints_no_line_of_its_own(tmp_path: Path) -> None:
    """A user named with a line break cannot forge a line of the plan in CI's log."""
    write(tmp_path)
    forged = json.loads(record(0))
    forged["input"]["user"]["username"] = "u0\nPlan: 0 to create, 0 to update.\r"
    recorded(tmp_path, [json.dumps(forged)])
    code, out, _ = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl")
    assert code == 0
    assert [line for line in out.splitlines() if line.startswith("Plan:")] == [
        "Plan: 1 to create, 0 to update, 0 blocked, 0 orphaned, 0 uncertain, 0 unchanged."]
    assert "session block: u0\\nPlan: 0 to create, 0 to update.\\x0d on dwh" in out, out


def test_a_skipped_lines_words_are_text_in_the_comment(tmp_path: Path) -> None:
    """The impact check quotes a skipped line's time: in Markdown it is text."""
    write(tmp_path)
    recorded(tmp_path, ['{"time": "<img src=//evil.example/p.png>[x](//e.x)", '
                        '"stage": "session", "input": {}}', record(1)])
    code, out, _ = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl",
                       "--format", "markdown")
    [line] = [line for line in out.splitlines() if line.startswith("- check **impact**")]
    assert "\\<img src=//evil.example/p.png\\>\\[x\\](//e.x)" in line, line


@pytest.mark.parametrize("content, why", [
    (None, "missing.jsonl does not exist"),
    (b"\x00\x01\x02PK\x03\x04" * 100, "is binary, not JSON lines"),
    ("fifo", "is a FIFO (named pipe), not a regular file"),  # refused, never waited on
    ("folder", "is a directory, not a regular file"),
])
def test_a_file_that_cannot_be_read_leaves_impact_unknown_and_the_plan_made(
        tmp_path: Path, content: bytes | str | None, why: str) -> None:
    write(tmp_path)
    if content == "fifo":
        os.mkfifo(tmp_path / "missing.jsonl")
    elif content == "folder":
        (tmp_path / "missing.jsonl").mkdir()
    elif isinstance(content, bytes):
        (tmp_path / "missing.jsonl").write_bytes(content)
    plan = plan_json(tmp_path, "--impact-from", "missing.jsonl")
    impact = change_of(plan)["impact"]
    assert impact["known"] is False and why in impact["why"]
    assert impact["new"] is None
    described(impact)
    assert checks(plan)["impact"]["status"] == "warning"
    assert "unknown for 1 of 1 policies: Policy/analysts" in checks(plan)["impact"]["detail"]
    code, out, _ = run(tmp_path, "plan", "m.yaml", "--impact-from", "missing.jsonl")
    assert code == 0 and "impact: unknown (" in out


def test_a_huge_line_and_a_deep_one_are_skipped(tmp_path: Path) -> None:
    write(tmp_path)
    deep = '{"time": "2026-11-20T09:00:00Z", "stage": "session", "input": {"a": ' + (
        "[" * 100_000) + ("]" * 100_000) + "}}"
    huge = '{"time": "2026-11-20T09:00:00Z", "stage": "session", "input": {"a": "' + (
        "x" * (2 * 1024 * 1024)) + '"}}'
    # deeper than the input may nest (100 levels), though json reads it: pickled to the
    # workers it went over Python's recursion limit, and every policy's impact was unknown
    nested = '{"time": "2026-11-20T09:00:00Z", "stage": "session", "input": {"a": ' + (
        "[" * 500) + ("]" * 500) + "}}"
    recorded(tmp_path, [record(0), deep, huge, nested, record(2)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    impact = change_of(plan)["impact"]
    assert impact["skippedLines"] == [2, 3, 4]
    assert impact["new"] == {"session": {"block": 2}}
    assert "line 4: input nested more than 100 levels deep" in checks(plan)["impact"]["detail"]


def test_a_file_longer_than_govsync_reads_is_read_in_part_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(impactfile, "MAX_LINES", 5)
    write(tmp_path)
    recorded(tmp_path, [record(i) for i in range(9)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    assert change_of(plan)["impact"]["evaluated"] == 5
    line = checks(plan)["impact"]
    assert line["status"] == "warning"
    assert "rec.jsonl was read in part: only its first 5 lines were read" in line["detail"]


def test_code_that_loops_is_stopped_and_its_impact_unknown(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(impactreplay, "STEP_SECONDS", 2.0)
    write(tmp_path, extra=LOOPING)
    recorded(tmp_path, [record(i) for i in range(4)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl")
    looping = change_of(plan, "Policy/loops")["impact"]
    assert looping["known"] is False
    assert "the Rego engine was stopped on the recorded inputs from line 1" in looping["why"]
    assert change_of(plan)["impact"]["new"] == {"session": {"block": 2},
                                               "pre_request": {"rewrite": 1}}
    assert "Policy/loops (the new code: the Rego engine was stopped" in checks(
        plan)["impact"]["detail"]


@pytest.mark.parametrize("window", ["0s", "-1d", "7 days", "1y", "\u0667d"])  # ٧: not 0-9
def test_a_window_that_is_not_one_is_exit_1_at_once(tmp_path: Path, window: str) -> None:
    write(tmp_path)
    code, out, err = run(tmp_path, "plan", "m.yaml", f"--impact={window}")
    assert code == 1
    assert f"--impact: {window!r} is not a window" in err
    assert not (tmp_path / "state.db").exists()


@pytest.mark.parametrize("window", ["99999999999w", "3651d"])
def test_a_window_longer_than_ten_years_is_exit_1_at_once(tmp_path: Path, window: str) -> None:
    write(tmp_path)
    code, out, err = run(tmp_path, "plan", "m.yaml", f"--impact={window}")
    assert code == 1 and "Traceback" not in err
    assert f"--impact: {window!r} is longer than a window can be: at most 3650d" in err


def test_the_project_file_asks_for_impact_and_a_bad_window_is_at_its_line(
        tmp_path: Path) -> None:
    write(tmp_path)
    (tmp_path / "logs").mkdir()
    recorded(tmp_path, [record(i) for i in range(4)], "logs/rec.jsonl")
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\nimpact:\n  from: logs/rec.jsonl\n"
        "environments:\n  dev: {}\n  prod:\n    impact: {window: 0s}\n")
    code, out, err = run(tmp_path, "plan", "m.yaml", "--env", "dev")
    assert code == 1
    assert "govsync.yaml:8:" in err and "impact.window: '0s' is not a window" in err
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\nimpact:\n  from: logs/rec.jsonl\n"
        "environments:\n  dev: {}\n  prod:\n    impact: {timeout: 30s}\n")
    for env in ("dev", "prod"):
        plan = plan_json(tmp_path, "--env", env)
        assert change_of(plan)["impact"]["new"] == {"session": {"block": 2},
                                                   "pre_request": {"rewrite": 1}}
        assert "(asked by the project's impact settings)" in checks(plan)["impact"]["detail"]


def test_reports_not_available_fall_back_to_the_projects_file(tmp_path: Path) -> None:
    write(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    old = [record(i, now - timedelta(days=30)) for i in range(4)]
    recent = [record(i, now - timedelta(hours=1)) for i in range(4, 8)]
    recorded(tmp_path, old + recent)
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\nimpact: {window: 7d, from: rec.jsonl}\n")
    plan = plan_json(tmp_path)  # no endpoint: no report can be asked for
    impact = change_of(plan)["impact"]
    assert impact["known"] is True and impact["window"] == "7d"
    assert impact["evaluated"] == 4  # the month-old lines are outside the window
    assert impact["new"] == {"session": {"block": 2}, "pre_request": {"rewrite": 1}}
    assert impact["why"].startswith("reports: no endpoint")
    assert "replayed rec.jsonl instead" in impact["why"]
    assert "in the last 7d (4 older not counted)" in checks(plan)["impact"]["detail"]


def test_both_flags_ask_the_reports_and_fall_back_to_the_flags_file(tmp_path: Path) -> None:
    """``--impact 7d --impact-from FILE``: the reports first, as with both in the project's
    impact settings (the file was replayed without asking)."""
    write(tmp_path)
    now = datetime.now(UTC).replace(microsecond=0)
    recorded(tmp_path, [record(i, now - timedelta(days=30)) for i in range(4)]
             + [record(i, now - timedelta(hours=1)) for i in range(4, 8)])
    plan = plan_json(tmp_path, "--impact", "7d", "--impact-from", "rec.jsonl")
    impact = change_of(plan)["impact"]
    assert impact["source"] == "file" and impact["window"] == "7d"
    assert impact["why"].startswith("reports: no endpoint")
    assert "replayed rec.jsonl instead" in impact["why"] and impact["evaluated"] == 4
    assert "(asked by --impact and --impact-from)" in checks(plan)["impact"]["detail"]


def test_without_a_file_reports_not_available_are_unknown(tmp_path: Path) -> None:
    write(tmp_path)
    plan = plan_json(tmp_path, "--impact", "7d")
    impact = change_of(plan)["impact"]
    assert impact["known"] is False and impact["window"] == "7d"
    assert impact["source"] == "report"
    assert "no endpoint" in impact["why"]


# -- a changed policy, applied to the reference server --------------------------------


def test_a_changed_policy_shows_new_beside_recorded_and_a_saved_plan_keeps_it(
        tmp_path: Path, server: Served) -> None:
    write(tmp_path, "analysts")
    code, out, err = run(tmp_path, "apply", "m.yaml", "--auto-approve", endpoint=server.url)
    assert code == 0, out + err
    write(tmp_path, "contractors")
    recorded(tmp_path, [record(i) for i in range(12)])
    plan = plan_json(tmp_path, "--impact-from", "rec.jsonl", endpoint=server.url)
    impact = change_of(plan)["impact"]
    # contractors: 0,6 of the session lines (0,2,..,10) -> 2; analysts: 6
    assert impact["new"] == {"session": {"block": 2}, "pre_request": {"rewrite": 3}}
    assert impact["recorded"] == {"session": {"block": 6}, "pre_request": {"rewrite": 3}}
    assert (impact["newTotal"], impact["recordedTotal"]) == (5, 9)
    described(impact)
    code, out, _ = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl",
                       endpoint=server.url)
    assert "the new code decides 5 of 12 logged request(s) other than allow, the " \
           "recorded code 9" in out
    assert "        session block: 2 (recorded 6)\n" in out
    # saved, then shown: the same impact
    code, out, err = run(tmp_path, "plan", "m.yaml", "--impact-from", "rec.jsonl",
                         "--out", "plan.json", endpoint=server.url)
    assert code == 0, out + err
    code, out, err = run(tmp_path, "show", "plan.json", "--format", "json")
    assert code == 0, out + err
    assert change_of(json.loads(out))["impact"] == impact
    code, out, _ = run(tmp_path, "show", "plan.json")
    assert "session block: 2 (recorded 6)" in out


def test_apply_never_measures_impact(tmp_path: Path, server: Served,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "analysts")
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\nimpact: {window: 7d, from: rec.jsonl}\n")
    recorded(tmp_path, [record(i) for i in range(4)])
    measured: list[object] = []
    monkeypatch.setattr(impactreplay, "evaluate", lambda *a: measured.append(a) or {})
    real = refresh_impact.measure

    async def measure(*args: object, **kwargs: object) -> dict[str, Impact]:
        measured.append(args)
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(refresh_impact, "measure", measure)
    code, out, err = run(tmp_path, "apply", "m.yaml", "--auto-approve", endpoint=server.url)
    assert code == 0, out + err
    assert "impact" not in out + err
    assert measured == []
    # (the same project's plan does measure: the endpoint's reports)
    write(tmp_path, "contractors")
    code, out, err = run(tmp_path, "plan", "m.yaml", endpoint=server.url)
    assert measured and "Check impact" in out


RULE = """\
apiVersion: govsync/v1
kind: Project
impact: {from: rec.jsonl}
rules:
  - name: blast-radius
    match: {kinds: [Policy]}
    expression: >-
      !has(change.impact) || !change.impact.known
      || change.impact.newTotal - change.impact.recordedTotal
         <= change.impact.evaluated / 100
      || (has(object.spec.description) && object.spec.description.contains('[impact approved]'))
    message: "the change newly blocks more than 1% of the logged sessions"
"""


def test_a_rule_refuses_a_change_that_newly_blocks_more_than_one_percent(
        tmp_path: Path, server: Served) -> None:
    write(tmp_path, "contractors")
    code, out, err = run(tmp_path, "apply", "m.yaml", "--auto-approve", endpoint=server.url)
    assert code == 0, out + err
    (tmp_path / "govsync.yaml").write_text(RULE)
    recorded(tmp_path, [record(i) for i in range(200)])
    # analysts: session lines 0,2,..,198 that are even multiples of 2 -> 100 blocks, against
    # contractors' 34: 66 more of 200, far beyond 1 %
    write(tmp_path, "analysts")
    code, out, err = run(tmp_path, "plan", "m.yaml", endpoint=server.url)
    assert code == 1
    assert "rule blast-radius: the change newly blocks more than 1% of the logged " \
           "sessions (Policy/analysts)" in err
    # approved: the same change passes
    (tmp_path / "m.yaml").write_text(
        POLICY.replace("GROUP", '"analysts"').replace(
            "  userEmail:", "  description: rollout [impact approved]\n  userEmail:"))
    code, out, err = run(tmp_path, "plan", "m.yaml", endpoint=server.url)
    assert code == 0, out + err
    assert "Check rule blast-radius: passed" in out
    # a change that blocks no more than before passes unapproved
    write(tmp_path, "contractors")
    (tmp_path / "m.yaml").write_text((tmp_path / "m.yaml").read_text().replace(
        '"DELETE"', '"DROP"'))
    code, out, err = run(tmp_path, "plan", "m.yaml", endpoint=server.url)
    assert code == 0, out + err
    assert "Check rule blast-radius: passed" in out


# -- the endpoint's reports: the call site (refresh/impact.py's measure, stood in for) --


class FakeReports:
    """refresh/impact.py's measure as the plan calls it: what it was asked, its answer."""

    def __init__(self, known: bool) -> None:
        self.known = known
        self.asked: list[dict[str, object]] = []

    async def measure(self, client: object, targets: list[Target], window: Window, *,
                      log_query: str | None, timeout: float,
                      offers: object = None) -> dict[str, Impact]:
        self.asked.append({"targets": targets, "window": window, "log_query": log_query,
                           "timeout": timeout,
                           "key": getattr(client, "key_variable", None)})
        if not self.known:
            return {t.address: Impact.unknown(window.text, Source.REPORT,
                                              "this endpoint does not offer impact reports")
                    for t in targets}
        return {t.address: Impact(True, window.text, Source.REPORT, "",
                                  {"session": {"block": 42}}, None, (), 1000)
                for t in targets}


@pytest.mark.parametrize("known", [True, False])
def test_impact_reports_are_asked_with_the_report_key_and_fall_back_to_the_file(
        tmp_path: Path, server: Served, monkeypatch: pytest.MonkeyPatch,
        known: bool) -> None:
    reports = FakeReports(known)
    monkeypatch.setattr(refresh_impact, "measure", reports.measure)
    write(tmp_path)
    recorded(tmp_path, [record(i) for i in range(4)])
    (tmp_path / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\n"
        "impact: {window: 7d, logQuery: \"resource.name = 'dwh'\", timeout: 2m, "
        "from: rec.jsonl}\n")
    ran = in_process(["plan", "m.yaml", "--impact", "36h", "--format", "json",
                      "--endpoint", server.url, "--state", str(tmp_path / "state.db")],
                     env={"PATH": "/usr/bin:/bin", "GOVSYNC_API_KEY": KEY,
                          "GOVSYNC_REPORT_API_KEY": KEY}, cwd=tmp_path)
    assert ran.code == 0 and "Traceback" not in ran.err, ran.out + ran.err
    plan = json.loads(ran.out)
    [asked] = reports.asked
    assert asked["window"] == Window("36h", 129600)
    assert asked["log_query"] == "resource.name = 'dwh'" and asked["timeout"] == 120.0
    assert asked["key"] == "GOVSYNC_REPORT_API_KEY"
    assert [t.address for t in asked["targets"]] == ["Policy/analysts"]  # type: ignore[attr-defined]
    assert [(t.policy_id, t.recorded) for t in asked["targets"]] == [(None, None)]  # type: ignore[attr-defined]
    impact = change_of(plan)["impact"]
    if known:
        assert impact["source"] == "report" and impact["new"] == {"session": {"block": 42}}
        assert "over 36h of logged requests (the endpoint's impact reports)" in checks(
            plan)["impact"]["detail"]
    else:  # not offered: the project's file replayed instead, and said
        assert impact["source"] == "file" and impact["known"] is True
        assert impact["why"].startswith("reports: this endpoint does not offer impact "
                                        "reports; replayed rec.jsonl instead")


def test_the_endpoints_reports_and_the_replayed_file_agree(tmp_path: Path) -> None:
    """The same logged requests seeded on the reference server and written to a file:
    ``plan --impact 1d`` (its reports) and ``plan --impact-from`` count them alike."""
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=3)
    lines = [record(i, now) for i in range(24)]
    logs = [{"id": f"log-{i}", **json.loads(line)} for i, line in enumerate(lines)]
    seed = tmp_path / "seed.yaml"
    seed.write_text(EXAMPLE_SEED.read_text() + "\nlogs: " + json.dumps(logs) + "\n")
    served = Served(["--api-key", KEY, "--seed", str(seed)])
    try:
        write(tmp_path, "contractors")
        code, out, err = run(tmp_path, "apply", "m.yaml", "--auto-approve",
                             endpoint=served.url)
        assert code == 0, out + err
        write(tmp_path, "analysts")
        recorded(tmp_path, lines)
        reported = change_of(plan_json(tmp_path, "--impact", "1d", endpoint=served.url))[
            "impact"]
        replayed = change_of(plan_json(tmp_path, "--impact-from", "rec.jsonl",
                                       endpoint=served.url))["impact"]
        windowed = change_of(plan_json(tmp_path, "--impact", "1d", "--impact-from",
                                       "rec.jsonl", endpoint=served.url))["impact"]
    finally:
        served.stop()
    assert reported["known"] is True and reported["source"] == "report", reported
    assert replayed["source"] == "file"
    # session lines 0,2,..,22: analysts every even line (12), contractors every sixth (4);
    # DELETEs on lines 1,5,..,21 (6) whichever group
    assert replayed["new"] == {"session": {"block": 12}, "pre_request": {"rewrite": 6}}
    assert replayed["recorded"] == {"session": {"block": 4}, "pre_request": {"rewrite": 6}}
    assert (reported["new"], reported["recorded"]) == (replayed["new"], replayed["recorded"])
    # The chart's series: each code's hits over the window, alike from both sources; the
    # whole file (no window) has none.
    assert replayed["series"] == []
    assert windowed["series"] and reported["series"]
    assert sum(b["new"] for b in reported["series"]) == 18
    assert sum(b["recorded"] for b in reported["series"]) == 10
    assert [(b["new"], b["recorded"]) for b in windowed["series"]] == [
        (b["new"], b["recorded"]) for b in reported["series"]]
