"""The project file and environments (contract section 5): precedence, variables,
and every bad input as one line at its place."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import without_settings

HOOK = """
apiVersion: govsync/v1
kind: Hook
metadata: {name: risk_score}
spec:
  code: "export default function hook() { return 1; }"
  timeoutMs: {var: timeout}
"""
PROJECT = """
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
vars: {timeout: 1000}
state: top.db
environments:
  staging:
    vars: {timeout: 500}
  prod:
    workspace: production
    state: prod.db
    vars: {timeout: "slow"}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    without_settings(monkeypatch)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hook.yaml").write_text(HOOK.lstrip(), encoding="utf-8")
    (tmp_path / "govsync.yaml").write_text(textwrap.dedent(PROJECT).lstrip(), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # the project file is found in a parent
    return tmp_path


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_validate_checks_every_environment_and_names_it(repo: Path) -> None:
    result = run("validate")
    assert result.exit_code == 1
    assert (f"{repo}/manifests/hook.yaml:6:14: (environment prod) spec.timeoutMs: must be an integer,"
            " not the string 'slow' (the value of variable timeout in environment prod)"
            ) in result.stderr
    assert "(environment staging): valid" in result.stdout
    assert run("validate", "--env", "staging").exit_code == 0
    assert run("validate", "--env", "prod", "--var", "timeout=20").exit_code == 0


def test_precedence_option_then_variable_then_environment_then_top(repo: Path) -> None:
    def state_of(*args: str, env: dict[str, str] | None = None) -> str:
        result = run("state", "list", *args, env=env)
        assert result.exit_code == 0, result.output
        return result.stderr

    assert f"workspace 'production' ({repo}/prod.db does not exist" in state_of("--env", "prod")
    # default: the env's name; staging has no state: the top level's
    assert f"workspace 'staging' ({repo}/top.db does not exist" in state_of("--env", "staging")
    assert "workspace 'cli'" in state_of("--env", "prod", "--workspace", "cli")
    assert "workspace 'production'" in state_of(env={"GOVSYNC_ENV": "prod"})
    # A variable that agrees is fine; one that contradicts the environment is an
    # error naming both (contract section 5), never a silent override.
    assert "workspace 'production'" in state_of(
        "--env", "prod", env={"GOVSYNC_WORKSPACE": "production"})
    contradicts = run("state", "list", "--env", "prod", env={"GOVSYNC_WORKSPACE": "fromenv"})
    assert contradicts.exit_code == 1
    assert ("GOVSYNC_WORKSPACE=fromenv contradicts environment prod of "
            f"{repo}/govsync.yaml, whose workspace is production") in contradicts.stderr
    refused = run("state", "list", "--env", "prod", env={"GOVSYNC_STATE": "elsewhere.db"})
    assert refused.exit_code == 1 and "GOVSYNC_STATE=elsewhere.db contradicts" in refused.stderr
    # Not set by the environment (prod has no endpoint): the variable holds.
    assert run("state", "list", "--env", "prod", env={"GOVSYNC_ENDPOINT": "local"}).exit_code == 0


@pytest.mark.parametrize("command", [["plan"], ["apply", "--auto-approve"], ["drift"],
                                     ["state", "list"], ["graph"]])
def test_a_project_with_environments_and_no_env_is_an_error_listing_them(
        repo: Path, command: list[str]) -> None:
    """Issue 34: with no --env, plan planned workspace default, offline, as if the
    project's top level were an environment; now nothing is read and the error
    lists the environments."""
    result = run(*command, env={"GOVSYNC_WORKSPACE": "fromenv"})
    assert result.exit_code == 1
    assert (f"{repo}/govsync.yaml defines environments (prod, staging) and none is selected: "
            "pass --env NAME (or set GOVSYNC_ENV)") in result.stderr, result.output
    assert not (repo / "top.db").exists() and not (repo / "sub" / ".govsync").exists()


def test_paths_given_with_env_say_what_they_replace(repo: Path) -> None:
    """Issue 34: `plan --env prod manifests/` silently dropped prod's patches."""
    text = (repo / "govsync.yaml").read_text()
    (repo / "govsync.yaml").write_text(text.replace(
        "    workspace: production\n",
        "    workspace: production\n    paths: [manifests/, envs/prod/]\n"))
    (repo / "envs" / "prod").mkdir(parents=True)
    (repo / "envs" / "prod" / "patch.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Patch\nmetadata: {name: p}\n"
        "spec: {target: Hook/risk_score, merge: {timeoutMs: 9}}\n")
    whole = run("plan", "--env", "prod")
    assert whole.exit_code == 0 and "timeoutMs: 9" in whole.stdout, whole.output
    assert "Note:" not in whole.stderr
    part = run("plan", "--env", "prod", "--var", "timeout=20", f"{repo}/manifests")
    assert part.exit_code == 0, part.output
    assert (f"Note: the paths given replace environment prod's paths ({repo}/manifests/, "
            f"{repo}/envs/prod/): {repo}/envs/prod/ and the patches there are not read"
            ) in part.stderr, part.stderr


def test_a_new_state_where_no_project_file_is_is_said(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    without_settings(monkeypatch)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "hook.yaml").write_text(HOOK.replace("{var: timeout}", "5"))
    monkeypatch.chdir(tmp_path)
    first = run("apply", "m", "--endpoint", "local", "--auto-approve")
    assert first.exit_code == 0, first.output
    assert ("Note: made a new state at .govsync/state.db (there is no govsync.yaml here or "
            "above") in first.stderr, first.stderr
    again = run("apply", "m", "--endpoint", "local", "--auto-approve")
    assert "Note: made a new state" not in again.stderr


def test_the_default_state_lives_beside_the_project_file(repo: Path) -> None:
    """Issue 23: from a subfolder, the state is the project's, not a new one here."""
    text = (repo / "govsync.yaml").read_text()
    (repo / "govsync.yaml").write_text(text.replace("state: top.db\n", ""))
    result = run("state", "list", "--env", "staging")
    assert result.exit_code == 0, result.output
    assert f"({repo}/.govsync/state.db does not exist" in result.stderr, result.stderr


def test_a_var_that_no_vars_declares_is_an_error(repo: Path) -> None:
    result = run("plan", "--env", "staging", "--var", "timout=10")
    assert result.exit_code == 1
    assert ("--var timout: no vars of" in result.stderr
            and "did you mean 'timeout'?" in result.stderr), result.stderr


def test_plan_uses_the_environments_variables(repo: Path) -> None:
    result = run("plan", "--env", "staging")
    assert result.exit_code == 0, result.output
    assert "timeoutMs: 500" in result.stdout
    result = run("plan", "--env", "staging", "--var", "timeout=42")
    assert "timeoutMs: 42" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["validate", "--env", "qa"], "govsync.yaml: known are prod, staging"),
    (["validate", "--var", "no-equals"], "--var 'no-equals': write --var NAME=VALUE"),
    (["validate", "--var", "x=[1, 2]"], "--var x: the value must be a YAML scalar"),
    (["validate", "--project", "missing.yaml"], "--project missing.yaml: no such file"),
    (["plan", "--target", "Nope/*", "--env", "staging"], "--target 'Nope/*' matches no address"),
])
def test_bad_options_are_one_line(repo: Path, args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 1
    assert message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("edit", "where", "message"), [
    (("vars: {timeout: 1000}", "vars: {timeout: 1000}\napiKey: abc"), "govsync.yaml:5:1",
     "apiKey: the API key is never read from the project file"),
    (("paths: [manifests/]", "path: [manifests/]"), "govsync.yaml:3:1",
     "unknown field path: did you mean 'paths'?"),
    (("    workspace: production", "    workspace: production\n    endpont: x"),
     "govsync.yaml:11:5", "unknown field environments.prod.endpont: did you mean 'endpoint'?"),
    (("kind: Project", "kind: Projekt"), "govsync.yaml:2:7", "kind must be Project"),
])
def test_project_file_errors_name_their_place(repo: Path, edit: tuple[str, str], where: str,
                                              message: str) -> None:
    text = (repo / "govsync.yaml").read_text()
    (repo / "govsync.yaml").write_text(text.replace(*edit))
    result = run("validate")
    assert result.exit_code == 1
    assert f"{repo}/{where}: {message}" in result.stderr, result.stderr


def test_a_leftover_endpoint_variable_never_sends_prod_elsewhere(repo: Path) -> None:
    """Issue 23: `export GOVSYNC_ENDPOINT=local` left over from the walkthrough beat
    environments.prod.endpoint; now it is an error naming both, and nothing is sent."""
    text = (repo / "govsync.yaml").read_text()
    (repo / "govsync.yaml").write_text(text.replace(
        "    workspace: production\n",
        "    workspace: production\n    endpoint: https://governance.example.com\n"))
    result = run("apply", "--env", "prod", "--var", "timeout=20", "--auto-approve",
                 env={"GOVSYNC_ENDPOINT": "local"})
    assert result.exit_code == 1
    assert ("GOVSYNC_ENDPOINT=local contradicts environment prod of "
            f"{repo}/govsync.yaml, whose endpoint is https://governance.example.com"
            ) in result.stderr
    assert not (repo / ".govsync").exists() and not (repo / "sub" / ".govsync").exists()


def test_a_saved_plan_carries_its_environment_workspace_and_state(repo: Path) -> None:
    """Issue 34: `apply plans/prod.json` asked for --env although the plan records it,
    and `show` of it looked for the state in the wrong place."""
    local = {"GOVSYNC_ENDPOINT": "local"}
    saved = repo / "prod.json"
    made = run("plan", "--env", "prod", "--var", "timeout=20", "--out", str(saved), env=local)
    assert made.exit_code == 0, made.output
    assert f'"state":"{repo}/prod.db"' in saved.read_text()
    shown = run("show", str(saved), env=local)
    assert shown.exit_code == 0, shown.output
    assert "Authentication: verified" in shown.output, shown.output
    other = repo / "other.db"
    refused = run("apply", str(saved), "--state", str(other), env=local)
    assert refused.exit_code == 1
    assert (f"{saved} was made against state {repo}/prod.db, and this run names state "
            f"{other}") in refused.stderr, refused.output
    assert not other.exists()
    wrong_env = run("apply", str(saved), "--env", "staging", env=local)
    assert wrong_env.exit_code == 1 and "is a plan for environment prod" in wrong_env.stderr
    applied = run("apply", str(saved), env=local)
    assert applied.exit_code == 0, applied.output
    assert "environment prod, workspace 'production'" in applied.stderr


def test_environments_check_passes_the_default_sqlite_state_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 43, finding 8: the README calls the default SQLite state fine on one
    machine, so `environments --check` says so and exits 0; a missing key still fails."""
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "govsync.yaml").write_text(textwrap.dedent("""\
        apiVersion: govsync/v1
        kind: Project
        paths: [manifests/]
        environments:
          staging: {endpoint: local}
          prod: {endpoint: https://prod.example.com, apiKey: {fromEnv: PROD_API_KEY}}
        """), encoding="utf-8")
    checked = run("environments", "--check", env={"PROD_API_KEY": "k"})
    assert checked.exit_code == 0, checked.output
    assert ("environment staging: warning: no state set: the default SQLite file "
            ".govsync/state.db is used, fine on one machine") in checked.stderr
    assert "settings of 2 environment(s) are complete" in checked.stderr + checked.stdout
    listed = run("environments", "--format", "json", env={"PROD_API_KEY": "k"})
    rows = {r["name"]: r for r in json.loads(listed.stdout)["environments"]}
    assert rows["prod"]["problems"] == [] and rows["prod"]["warnings"]
    missing = run("environments", "--check", env={})
    assert missing.exit_code == 1
    assert "environment prod: PROD_API_KEY is not set" in missing.stderr
