"""Credentials per environment (contract section 5, issue 34 finding 1): staging and
prod on two API instances with two keys, each named in the project file by the
variable that holds it (``apiKey: {fromEnv: VAR}``), never by the key itself.

Two reference servers as processes, real SQLite states, the CLI through CliRunner
and the agent as a process (one process, every environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import Served, stored_objects, without_settings

STAGING_KEY, PROD_KEY = "staging-admin-key", "prod-admin-key"
STAGING_VIEWER = "staging-viewer-key"
HOOK = """\
apiVersion: govsync/v1
kind: Hook
metadata: {name: risk}
spec:
  code: "export default function hook(input) { return 1; }"
  timeoutMs: {var: timeout}
"""
PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
vars: {{timeout: 1000}}
environments:
  staging:
    endpoint: {staging}
    state: .govsync/staging.db
    apiKey: {{fromEnv: STAGING_API_KEY}}
    viewerKey: {{fromEnv: STAGING_VIEWER_KEY}}
  prod:
    endpoint: {prod}
    state: .govsync/prod.db
    apiKey: {{fromEnv: PROD_API_KEY}}
    vars: {{timeout: 2000}}
"""


@pytest.fixture
def servers() -> Iterator[tuple[str, str]]:
    """Two API instances: staging's and prod's, each with its own keys; new for each test,
    whose state is new too (a server holding another test's hook would block its create:
    it exists on the server unrecorded)."""
    staging = Served(["--api-key", STAGING_KEY, "--viewer-key", STAGING_VIEWER])
    try:
        prod = Served(["--api-key", PROD_KEY])
        try:
            yield staging.url, prod.url
        finally:
            prod.stop()
    finally:
        staging.stop()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: tuple[str, str]) -> Path:
    without_settings(monkeypatch)
    for name in ("STAGING_API_KEY", "STAGING_VIEWER_KEY", "PROD_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hook.yaml").write_text(HOOK)
    staging, prod = servers
    (tmp_path / "govsync.yaml").write_text(PROJECT.format(staging=staging, prod=prod))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def hooks_on(url: str, key: str) -> dict[str, int]:
    return {h["name"]: h["timeoutMs"] for h in stored_objects(url, key).get("Hook", [])}


def test_each_environment_applies_with_its_own_key(repo: Path,
                                                   servers: tuple[str, str]) -> None:
    keys = {"STAGING_API_KEY": STAGING_KEY, "PROD_API_KEY": PROD_KEY,
            "GOVSYNC_API_KEY": "a-leftover-key-of-neither"}
    for env in ("staging", "prod"):
        result = run("apply", "--env", env, "--auto-approve", env=keys)
        assert result.exit_code == 0, result.output
    staging, prod = servers
    assert hooks_on(staging, STAGING_KEY).get("risk") == 1000
    assert hooks_on(prod, PROD_KEY).get("risk") == 2000
    for key in (STAGING_KEY, PROD_KEY):
        for state in ("staging.db", "prod.db"):
            assert key.encode() not in (repo / ".govsync" / state).read_bytes()


def test_a_refused_key_names_the_environment_the_endpoint_and_the_variable(
        repo: Path, servers: tuple[str, str]) -> None:
    result = run("apply", "--env", "prod", "--auto-approve",
                 env={"PROD_API_KEY": STAGING_KEY, "GOVSYNC_API_KEY": PROD_KEY})
    assert result.exit_code == 1
    assert (f"environment prod: {servers[1]} refused the key read from PROD_API_KEY"
            in result.output), result.output
    assert STAGING_KEY not in result.output and PROD_KEY not in result.output


def test_a_missing_key_names_the_variable_of_its_environment(repo: Path) -> None:
    result = run("apply", "--env", "prod", "--auto-approve", env={"GOVSYNC_API_KEY": PROD_KEY})
    assert result.exit_code == 1
    assert "set PROD_API_KEY (the key of environment prod)" in result.stderr, result.output


def test_a_read_only_job_reads_with_the_viewer_key_and_apply_is_refused_by_name(
        repo: Path) -> None:
    assert run("apply", "--env", "staging", "--auto-approve",
               env={"STAGING_API_KEY": STAGING_KEY}).exit_code == 0
    (repo / "manifests" / "hook.yaml").write_text(HOOK.replace("{var: timeout}", "3000"))
    viewer = {"STAGING_VIEWER_KEY": STAGING_VIEWER}
    result = run("plan", "--env", "staging", env=viewer)
    assert result.exit_code == 0, result.output
    assert "1 to update" in result.stdout
    result = run("apply", "--env", "staging", "--auto-approve", env=viewer)
    assert result.exit_code == 1
    assert "refused the key read from STAGING_VIEWER_KEY" in result.output, result.output


@pytest.mark.parametrize(("written", "message"), [
    ("apiKey: staging-admin-key", "apiKey: the API key is never read from the project file"),
    ("apiKey: {fromEnv: GOVSYNC_STATE}",
     "apiKey.fromEnv: GOVSYNC_STATE is one of govsync's own settings"),
])
def test_a_key_written_in_the_project_file_is_refused(repo: Path, written: str,
                                                      message: str) -> None:
    text = (repo / "govsync.yaml").read_text()
    (repo / "govsync.yaml").write_text(
        text.replace("    apiKey: {fromEnv: STAGING_API_KEY}", f"    {written}"))
    result = run("validate")
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert STAGING_KEY not in result.stderr


def test_one_agent_runs_both_environments_with_their_keys(repo: Path,
                                                          servers: tuple[str, str]) -> None:
    env = {k: v for k, v in os.environ.items() if k not in {"GOVSYNC_API_KEY"}}
    env.update(STAGING_API_KEY=STAGING_KEY, PROD_API_KEY=PROD_KEY)
    (repo / "govsync.yaml").write_text((repo / "govsync.yaml").read_text().replace(
        "paths: [manifests/]\n", "paths: [manifests/]\nagent: {autoApply: true}\n"))
    done = subprocess.run([sys.executable, "-m", "govsync", "agent", "--once"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "staging: Synced" in done.stdout and "prod: Synced" in done.stdout, done.stdout
    staging, prod = servers
    assert hooks_on(staging, STAGING_KEY).get("risk") == 1000
    assert hooks_on(prod, PROD_KEY).get("risk") == 2000

