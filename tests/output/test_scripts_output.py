"""Output for scripts (contract section 3): every JSON document against its
schema in docs/json/, apply's JSON lines, `govsync show`, and GOVSYNC_LOG.

Everything runs against the embedded reference server (`--endpoint local`)
in a folder of its own; the log test runs the real entry point as a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from govsync.render.schemas import schemas

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "docs" / "json"
SECRET = "canary-secret-7f3a9c1e5b"
KEY = "canary-key-2d8e6b4a0c"
MANIFESTS = """\
apiVersion: govsync/v1
kind: LogIntegration
metadata:
  name: siem
spec:
  logStoreB:
    site: eu1.logstore-b.example
    accountId: acme-security
    apiKey: {fromEnv: CANARY_LOGSTORE_KEY}
---
apiVersion: govsync/v1
kind: Space
metadata:
  name: analytics
spec:
  description: Analytics
---
apiVersion: govsync/v1
kind: Connector
metadata:
  name: prod-eu
spec:
  spaceRef: analytics
"""


def check(name: str, document: Any) -> None:
    """``document`` is valid against docs/json/``name`` (the committed file) with every
    object closed: a key the schema does not describe fails."""
    schema = json.loads((SCHEMAS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(document, closed(schema), cls=jsonschema.Draft202012Validator)


def closed(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists its
    properties and says nothing of others."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: closed(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def test_closing_a_schema_refuses_an_undescribed_key() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object",
                                                     "properties": {"b": {}}}}}
    jsonschema.validate({"a": {"b": 1}, "c": 2}, schema)
    with pytest.raises(jsonschema.ValidationError, match="'c' was unexpected"):
        jsonschema.validate({"a": {"b": 1}, "c": 2}, closed(schema))
    with pytest.raises(jsonschema.ValidationError, match="'d' was unexpected"):
        jsonschema.validate({"a": {"b": 1, "d": 2}}, closed(schema))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "objects.yaml").write_text(MANIFESTS)
    return tmp_path


def gov(*args: str, **env: str | None) -> Result:
    base: dict[str, str | None] = {"CANARY_LOGSTORE_KEY": SECRET, "GOVSYNC_LOG": None,
                                   "GOVSYNC_ENDPOINT": "local", "GOVSYNC_API_KEY": None,
                                   "GOVSYNC_STATE": None, "GOVSYNC_WORKSPACE": None}
    return CliRunner().invoke(cli, list(args), env={**base, **env}, catch_exceptions=False)


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_the_committed_schemas_are_the_code_s() -> None:
    # `govsync docs --check` (tests/docs) covers it too; this names the file that differs.
    for name, schema in schemas().items():
        assert json.loads((SCHEMAS / name).read_text()) == schema, name


def test_every_json_document_matches_its_schema(repo: Path) -> None:
    valid = gov("validate", "m", "--format", "json")
    assert valid.exit_code == 0 and json.loads(valid.stdout) == {
        "formatVersion": "1.0", "valid": True, "errors": [], "warnings": []}
    check("validate.schema.json", json.loads(valid.stdout))

    plan = gov("plan", "m", "--format", "json", "--out", "plan.json")
    assert plan.exit_code == 0, plan.output
    check("plan.schema.json", json.loads(plan.stdout))
    shown = gov("show", "plan.json", "--format", "json")
    assert shown.exit_code == 0 and json.loads(shown.stdout) == json.loads(plan.stdout)
    check("plan.schema.json", json.loads(shown.stdout))

    applied = gov("apply", "plan.json", "--format", "json")
    assert applied.exit_code == 0, applied.output
    for line in lines(applied.stdout):
        check("apply.schema.json", line)

    drift = gov("drift", "m", "--format", "json")
    assert drift.exit_code == 0, drift.output
    check("drift.schema.json", json.loads(drift.stdout))
    for args, name in ((("state", "export"), "state-export.schema.json"),
                       (("state", "list", "--format", "json"), "state-list.schema.json"),
                       (("state", "history", "--format", "json"), "state-history.schema.json")):
        run = gov(*args)
        assert run.exit_code == 0, run.output
        document = json.loads(run.stdout)
        assert document["formatVersion"] == "1.0"
        check(name, document)
    assert SECRET not in json.dumps(gov("state", "export").stdout)

    # Drift against changed manifests, and invalid manifests.
    (repo / "m" / "objects.yaml").write_text(MANIFESTS.replace("acme-security", "acme-other")
                                             + "---\nkind: Space\n")
    invalid = gov("validate", "m", "--format", "json")
    assert invalid.exit_code == 1
    document = json.loads(invalid.stdout)
    check("validate.schema.json", document)
    assert document["valid"] is False and document["errors"]
    assert {e["file"] for e in document["errors"]} == {"m/objects.yaml"}
    assert all(e["line"] > 0 and e["column"] > 0 for e in document["errors"])
    (repo / "m" / "objects.yaml").write_text(MANIFESTS.replace("acme-security", "acme-other"))
    drifted = gov("drift", "m", "--format", "json")
    assert drifted.exit_code == 2
    check("drift.schema.json", json.loads(drifted.stdout))
    assert json.loads(drifted.stdout)["changes"][0]["action"] == "blocked"


def test_a_failing_json_command_prints_an_error_document(repo: Path) -> None:
    (repo / "m" / "objects.yaml").write_text(MANIFESTS.replace("description:", "descriptio:"))
    for command in ("plan", "drift"):
        run = gov(command, "m", "--format", "json")
        assert run.exit_code == 1, run.output
        document = json.loads(run.stdout)  # stdout is one JSON document, nothing else
        check("error.schema.json", document)
        (error,) = document["errors"]
        assert error["file"] == "m/objects.yaml" and error["line"] == 16
        assert "spec.descriptio" in error["message"]
        assert "spec.descriptio" in run.stderr  # and the message for a person, as before
    (repo / "state.db").mkdir()  # a state that cannot be opened
    for args in (("state", "list"), ("state", "history"), ("show", "plan.json"),
                 ("audit", "export")):
        run = gov(*args, "--format", "json", GOVSYNC_STATE="state.db")
        assert run.exit_code == 1, run.output
        document = json.loads(run.stdout)
        check("error.schema.json", document)
        assert document["error"] and document["errors"][0]["file"] == ""


def test_a_state_export_reads_back(repo: Path) -> None:
    assert gov("apply", "m", "--auto-approve").exit_code == 0
    (repo / "backup.json").write_text(gov("state", "export").stdout)
    moved = gov("state", "import-all", "backup.json", "--workspace", "copy")
    assert moved.exit_code == 0, moved.output
    data = json.loads((repo / "backup.json").read_text())
    (repo / "future.json").write_text(json.dumps({**data, "formatVersion": "2.0"}))
    future = gov("state", "import-all", "future.json", "--workspace", "copy")
    assert future.exit_code == 1 and "format '2.0'" in future.stderr


def test_apply_json_prints_a_line_per_change_then_a_summary(repo: Path) -> None:
    run = gov("apply", "m", "--auto-approve", "--format", "json")
    assert run.exit_code == 0, run.output
    *changes, summary = lines(run.stdout)  # stdout holds JSON lines only
    assert sorted(c["address"] for c in changes) == [
        "Connector/prod-eu", "LogIntegration/siem", "Space/analytics"]
    assert all(c["type"] == "change" and c["outcome"] == "applied" and c["id"]
               and c["action"] == "create" and "error" not in c for c in changes)
    # A change is printed when it finishes: the connector waits on its space.
    order = [c["address"] for c in changes]
    assert order.index("Space/analytics") < order.index("Connector/prod-eu")
    assert summary["type"] == "summary" and summary["ok"] is True
    assert summary["stopped"] is None and summary["requests"] == 3
    assert summary["counts"] == {"applied": 3, "failed": 0, "skipped": 0, "uncertain": 0,
                                 "forgotten": 0}
    assert "+ Connector/prod-eu" in run.stderr  # the plan went to stderr
    assert SECRET not in run.stdout + run.stderr

    again = gov("apply", "m", "--auto-approve", "--format", "json")
    assert again.exit_code == 0
    (summary,) = lines(again.stdout)
    assert summary["ok"] is True and summary["requests"] == 0


def test_apply_json_needs_auto_approve_or_a_saved_plan(repo: Path) -> None:
    run = gov("apply", "m", "--format", "json")
    assert run.exit_code == 2 and run.stdout == ""
    assert "--format json cannot ask for confirmation: pass --auto-approve" in run.stderr


def test_apply_json_ends_with_a_summary_when_it_cannot_start(repo: Path) -> None:
    assert gov("apply", "m", "--auto-approve").exit_code == 0
    (repo / "m" / "objects.yaml").write_text(MANIFESTS.replace("acme-security", "acme-other"))
    run = gov("apply", "m", "--auto-approve", "--format", "json")
    assert run.exit_code == 1
    (summary,) = lines(run.stdout)
    check("apply.schema.json", summary)
    assert summary["ok"] is False and "blocked change" in summary["stopped"]
    assert "Error: the plan has 1 blocked change(s)" in run.stderr


def test_show_renders_a_saved_plan_without_the_state(repo: Path, tmp_path: Path) -> None:
    assert gov("plan", "m", "--out", "plan.json").exit_code == 0
    # Elsewhere, naming no state: the file does not choose the state it is checked
    # against (whoever wrote it would), so it is shown, not authenticated.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    text = gov("show", str(repo / "plan.json"))
    assert text.exit_code == 0, text.output
    assert "Authentication: not checked: there is no state at .govsync/state.db" in text.stdout
    # Naming its state, it is checked there.
    found = gov("show", str(repo / "plan.json"), "--state", str(repo / ".govsync/state.db"))
    assert "Authentication: verified" in found.stdout, found.output
    assert "+ LogIntegration/siem" in text.stdout and '"apiKey": "(sensitive)"' in text.stdout
    assert "CreateIntegrationLog LogIntegration/siem" in text.stdout  # what is sent
    assert "(sensitive: the value of $" in text.stdout
    assert "Plan: 3 to create" in text.stdout
    assert not (elsewhere / ".govsync").exists()
    markdown = gov("show", str(repo / "plan.json"), "--format", "markdown")
    assert markdown.stdout.startswith("### govsync saved plan: workspace `default`")
    assert SECRET not in text.stdout + markdown.stdout

    broken = gov("show", str(repo / "m" / "objects.yaml"))
    assert broken.exit_code == 1 and broken.stderr.startswith("Error: ")
    assert "not a govsync plan" in broken.stderr


def test_govsync_log_rejects_an_unknown_level(repo: Path) -> None:
    run = gov("validate", "m", GOVSYNC_LOG="loud")
    assert run.exit_code == 1
    assert "GOVSYNC_LOG='loud': use one of debug, info, warning" in run.stderr


@pytest.mark.parametrize("level", ["debug", "info"])
def test_govsync_log_shows_every_call_and_no_secret(repo: Path, level: str) -> None:
    """The real entry point, a real apply: every call logged, neither the secret
    the LogIntegration sends nor the key."""
    env = {**os.environ, "CANARY_LOGSTORE_KEY": SECRET, "GOVSYNC_API_KEY": KEY,
           "GOVSYNC_LOG": level, "GOVSYNC_ENDPOINT": "local"}
    for name in ("GOVSYNC_STATE", "GOVSYNC_WORKSPACE", "GOVSYNC_PROJECT", "GOVSYNC_ENV"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-m", "govsync", "apply", "m", "--auto-approve",
                           "--format", "json"], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert all(json.loads(line) for line in done.stdout.splitlines())  # logs: stderr only
    logged = [line for line in done.stderr.splitlines() if " govsync." in line]
    for operation in ("CreateIntegrationLog", "CreateSpace", "CreateConnector"):
        assert any(f"INFO govsync.api.client: {operation}: 200 in " in line
                   and "(attempt 1 of " in line for line in logged), (operation, logged)
    sending = [line for line in logged if ": sending POST " in line]
    # The three creates, and the Lists that looked their names up first.
    creates = [line for line in sending if ": sending POST /core.v1." in line
               and "/Create" in line]
    assert len(creates) == (3 if level == "debug" else 0)
    assert SECRET not in done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr
    # The secret was sent (the server keeps no copy: it is write-only).
    outcomes = {line["address"]: line["outcome"] for line in lines(done.stdout)[:-1]}
    assert outcomes["LogIntegration/siem"] == "applied"


def test_the_log_handler_hides_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from govsync import logs

    logs.configure("warning", hidden=[KEY])
    try:
        logging.getLogger("govsync.test").warning("a message that quotes %s", KEY)
        logging.getLogger("govsync.test").info("not shown at warning")
    finally:
        logs.configure(None)
    err = capsys.readouterr().err
    assert "a message that quotes (sensitive)" in err
    assert KEY not in err and "not shown" not in err
    assert logging.getLogger("govsync").propagate is True


def test_apply_json_reports_a_failed_change(repo: Path) -> None:
    (repo / "m" / "objects.yaml").write_text(
        MANIFESTS.replace("spaceRef: analytics", "spaceId: space-that-does-not-exist"))
    run = gov("apply", "m", "--auto-approve", "--format", "json")
    assert run.exit_code == 1
    *changes, summary = lines(run.stdout)
    for line in (*changes, summary):
        check("apply.schema.json", line)
    (failed,) = [c for c in changes if c["outcome"] == "failed"]
    assert failed["address"] == "Connector/prod-eu" and failed["error"] and failed["id"] is None
    assert summary["ok"] is False and summary["counts"]["failed"] == 1
    assert summary["counts"]["applied"] == 2 and summary["stopped"] is None


def test_the_group_flags_read_the_same_anywhere_and_in_either_spelling(repo: Path) -> None:
    assert gov("apply", "m", "--auto-approve").exit_code == 0
    verbose = [gov(*args) for args in (("-v", "plan", "m"), ("plan", "m", "-v"),
                                       ("plan", "m", "--verbose"), ("plan", "-vv", "m"))]
    assert all(run.exit_code == 0 and run.stdout == verbose[0].stdout for run in verbose)
    assert "Space/analytics  (no-op)" in verbose[0].stdout
    assert "(no-op)" not in gov("plan", "m").stdout
    quiet = [gov(*args) for args in (("-q", "plan", "m"), ("plan", "m", "-q"),
                                     ("plan", "m", "--quiet"), ("-q", "-v", "plan", "m"))]
    assert all(run.exit_code == 0 for run in quiet)
    assert quiet[0].stdout == quiet[1].stdout == quiet[2].stdout
    assert "(no-op)" in quiet[3].stdout  # -v still counts beside -q
