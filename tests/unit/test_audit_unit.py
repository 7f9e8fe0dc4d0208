"""The audit trail: an apply's history record (credentials in URLs masked), and
``audit export`` from a real SQLite history (order, --since, JSON lines, CSV)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from govsync import audit
from govsync.apply import ApplyResult, ChangeOutcome, ChangeStatus
from govsync.errors import ConfigError
from govsync.formats import FORMAT_VERSION
from govsync.plan import Action, Change, Plan
from govsync.state import LockHolder
from govsync.state.sqlite import SqliteStore

AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def applied() -> tuple[Plan, ApplyResult]:
    plan = Plan("prod", "lin", 4, "d", changes=[
        Change("Hook/h", Action.CREATE, "Hook", request={"name": "h"}, operation="CreateHook"),
        Change("Space/s", Action.CREATE, "Space", request={"name": "s"},
               operation="CreateSpace")])
    result = ApplyResult(outcomes=[
        ChangeOutcome("Hook/h", Action.CREATE, ChangeStatus.APPLIED, id="h-1"),
        ChangeOutcome("Space/s", Action.CREATE, ChangeStatus.FAILED,
                error="cannot reach https://ops:pa55@api.example.com/v1?token=t0k",
                code="unavailable"),
    ], requests=2)
    return plan, result


def test_record_holds_who_what_and_the_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [
        "/usr/local/bin/govsync", "apply", "--state",
        "postgresql://ci:hunter2@db/govsync?sslpassword=pw2", "--endpoint",
        "https://api.example.com/?key=abc", "plan.json"])
    plan, result = applied()
    fields = {"environment": "prod", "actor": "ci-bot", "planId": "0123456789abcdef",
              "reviewDigest": "ab" * 32, "planHash": "cd" * 32, "savedPlan": True,
              "planFile": "plan.json", "approvers": [{"principal": "alice@example.com"}],
              "git": {"commit": "c0ffee", "dirty": False}}
    record = audit.record(plan, result, fields)
    me = LockHolder.me()
    assert AT.match(record.pop("at"))
    assert record == {
        "user": me.user, "host": me.host,
        "command": "govsync apply",  # the subcommand: never an option's value
        "serialBefore": 4,
        "summary": {"applied": 1, "failed": 1, "skipped": 0, "uncertain": 0, "forgotten": 0},
        "ok": False,
        "changes": [
            {"address": "Hook/h", "action": "create", "status": "applied", "id": "h-1",
             "code": "", "error": ""},
            {"address": "Space/s", "action": "create", "status": "failed", "id": None,
             "code": "unavailable",
             "error": "cannot reach https://ops:***@api.example.com/v1?token=***"},
        ],
        **fields,
    }
    assert "hunter2" not in json.dumps(record) and "pa55" not in json.dumps(record)


def test_a_record_is_json_as_the_store_keeps_it(store: SqliteStore) -> None:
    plan, result = applied()
    record = audit.record(plan, result, {"environment": None})
    store.add_history("prod", record)
    assert store.history("prod") == [json.loads(json.dumps(record))]


def test_actor_is_the_first_ci_variable_set() -> None:
    assert audit.actor({}) is None
    assert audit.actor({"GITLAB_USER_LOGIN": "gl", "GITHUB_ACTOR": "gh"}) == "gh"
    assert audit.actor({"GOVSYNC_ACTOR": "", "GITLAB_USER_LOGIN": "gl"}) == "gl"
    assert audit.actor({"GOVSYNC_ACTOR": "bot", "GITHUB_ACTOR": "gh"}) == "bot"


def test_manifests_folder(tmp_path: Path) -> None:
    files = [str(tmp_path / "m" / "a.yaml"), str(tmp_path / "m" / "sub" / "b.yaml")]
    assert audit.manifests_folder(files, None) == str(tmp_path / "m")
    project = str(tmp_path / "repo" / "govsync.yaml")
    assert audit.manifests_folder([], project) == str(tmp_path / "repo")
    assert audit.manifests_folder([], None) == "."


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state(tmp_path: Path) -> None:
    assert audit.git_state(str(tmp_path)) is None  # not a work tree

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c",
                               "user.email=t@example.com", *args], check=True,
                              capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "m.yaml").write_text("a: 1\n")
    git("add", "m.yaml")
    git("commit", "-qm", "first")
    commit = git("rev-parse", "HEAD")
    assert audit.git_state(str(tmp_path)) == {"commit": commit, "dirty": False}
    (tmp_path / "m.yaml").write_text("a: 2\n")
    assert audit.git_state(str(tmp_path)) == {"commit": commit, "dirty": True}


# -- export -----------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "since"), [
    ("2025-01-31", "2025-01-31T00:00:00.000000Z"),
    (" 2025-01-31T12:00:00Z ", "2025-01-31T12:00:00.000000Z"),
    ("2025-01-31T12:00:00.5z", "2025-01-31T12:00:00.500000Z"),
    ("2025-01-31T12:00:00+02:00", "2025-01-31T10:00:00.000000Z"),
    ("2025-01-31T01:00:00-03:00", "2025-01-31T04:00:00.000000Z"),
])
def test_parse_since(text: str, since: str) -> None:
    assert audit.parse_since(text) == since


@pytest.mark.parametrize("text", ["yesterday", "2025-13-01", "", "31/01/2025"])
def test_parse_since_errors(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        audit.parse_since(text)
    assert str(info.value) == (f"--since {text!r}: write a date (2025-01-31) or a time "
                               "(2025-01-31T12:00:00Z)")


def history(store: SqliteStore) -> list[dict[str, Any]]:
    """Three applies, recorded in order; the store reads them newest first."""
    records = [
        {"at": "2025-01-30T09:00:00.000000Z", "user": "ann", "host": "h1", "ok": True,
         "environment": "prod", "changes": [
             {"address": "Hook/a", "action": "create", "status": "applied", "id": "a-1",
              "code": "", "error": ""},
             {"address": "Hook/b", "action": "create", "status": "failed", "id": None,
              "code": "invalid_request", "error": "bad, \"quoted\"\nline"}],
         "approvers": [{"principal": "alice@example.com"}, {"principal": "bob@example.com"}],
         "git": {"commit": "c1", "dirty": False}, "planHash": "h" * 8, "savedPlan": True,
         "actor": "ci-bot"},
        {"at": "2025-01-31T00:00:00.000000Z", "user": "Zoë", "host": "h2", "ok": True,
         "changes": [], "savedPlan": False, "command": "govsync apply --state "
                                                       "postgresql://u:pw@db/x"},
        {"at": "2025-02-01T10:00:00.000000Z", "user": "ann", "host": "h1", "ok": False,
         "environment": None, "changes": [
             {"address": "Space/s", "action": "update", "status": "uncertain", "id": "s-1"}],
         "git": None},
    ]
    for record in records:
        store.add_history("prod", record)
    return store.history("prod")


def test_records_are_oldest_first_from_since(store: SqliteStore) -> None:
    read = history(store)
    assert [r["at"][:10] for r in read] == ["2025-02-01", "2025-01-31", "2025-01-30"]
    out = audit.records(read, "prod")
    assert [r["at"][:10] for r in out] == ["2025-01-30", "2025-01-31", "2025-02-01"]
    assert all(r["formatVersion"] == FORMAT_VERSION and r["workspace"] == "prod" for r in out)
    # a credential a record kept from an older govsync is masked on the way out
    assert out[1]["command"] == "govsync apply --state postgresql://u:***@db/x"
    since = audit.records(read, "prod", audit.parse_since("2025-01-31"))
    assert [r["at"][:10] for r in since] == ["2025-01-31", "2025-02-01"]
    assert audit.records(read, "prod", audit.parse_since("2025-02-02")) == []


def test_json_lines_one_apply_a_line(store: SqliteStore) -> None:
    text = audit.export(history(store), "prod", since="2025-01-31")
    lines = text.splitlines(keepends=True)
    assert len(lines) == 2 and all(line.endswith("}\n") for line in lines)
    first = json.loads(lines[0])
    assert first["user"] == "Zoë" and '"user": "Zoë"' in lines[0]  # not \u escaped
    assert list(first) == sorted(first)


def test_csv_one_row_per_change(store: SqliteStore) -> None:
    text = audit.export(history(store), "prod", fmt="csv")
    assert text.splitlines()[0] == ",".join(audit.CSV_COLUMNS)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["at"][:10], r["address"], r["outcome"]) for r in rows] == [
        ("2025-01-30", "Hook/a", "applied"), ("2025-01-30", "Hook/b", "failed"),
        ("2025-01-31", "", ""),  # an apply without changes: one row
        ("2025-02-01", "Space/s", "uncertain")]
    assert rows[1] == {
        "at": "2025-01-30T09:00:00.000000Z", "workspace": "prod", "environment": "prod",
        "user": "ann", "actor": "ci-bot", "host": "h1", "planHash": "hhhhhhhh",
        "savedPlan": "True", "approvers": "alice@example.com;bob@example.com",
        "gitCommit": "c1", "gitDirty": "False", "ok": "True", "address": "Hook/b",
        "action": "create", "outcome": "failed", "id": "", "code": "invalid_request",
        "error": "bad, \"quoted\"\nline"}
    assert (rows[3]["environment"], rows[3]["gitCommit"], rows[3]["approvers"],
            rows[3]["ok"], rows[3]["id"]) == ("", "", "", "False", "s-1")


def test_export_of_nothing() -> None:
    assert audit.export([], "prod") == ""
    assert audit.export([], "prod", fmt="csv") == ",".join(audit.CSV_COLUMNS) + "\n"
