"""Issue 23's smaller findings, as a new team meets them on its first days."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli
from testkit import without_settings

HOOKS = "".join(
    f"---\napiVersion: govsync/v1\nkind: Hook\nmetadata: {{name: h{i}}}\n"
    f"spec: {{code: \"def handler(e):\\n    return 1\\n\", timeoutMs: 100}}\n" for i in range(3))
PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
endpoint: local
environments:
  staging: {}
  prod: {}
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    without_settings(monkeypatch)
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "hooks.yaml").write_text(HOOKS)
    (tmp_path / "govsync.yaml").write_text(PROJECT)
    return tmp_path


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_state_forget_takes_several_addresses_all_or_none(repo: Path) -> None:
    assert run("apply", "--env", "staging", "--auto-approve").exit_code == 0
    refused = run("state", "forget", "Hook/h0", "Hook/nope", "--env", "staging")
    assert refused.exit_code == 1 and "Hook/nope is not in the state" in refused.stderr
    assert "nothing was forgotten" in refused.stderr
    assert "Hook/h0" in run("state", "list", "--env", "staging").stdout
    done = run("state", "forget", "Hook/h0", "Hook/h1", "--env", "staging")
    assert done.exit_code == 0, done.output
    assert done.stdout.count("it stays on the server") == 2
    listed = run("state", "list", "--env", "staging").stdout
    assert "Hook/h0" not in listed and "Hook/h1" not in listed and "Hook/h2" in listed


def test_graph_of_a_plan_without_changes_says_so(repo: Path) -> None:
    assert run("apply", "--env", "staging", "--auto-approve").exit_code == 0
    result = run("graph", "--env", "staging", "--plan")
    assert result.exit_code == 0
    assert "No changes: the plan's graph is empty" in result.stderr
    assert result.stdout.startswith("flowchart LR")


def test_a_saved_plan_of_prod_applied_with_another_env_names_the_flag(repo: Path) -> None:
    # (Without --env, the plan's own environment is used: issue 34.)
    assert run("plan", "--env", "prod", "--out", "p.json").exit_code == 0
    refused = run("apply", "p.json", "--env", "staging")
    assert refused.exit_code == 1
    assert "is a plan for environment prod" in refused.stderr
    assert "run it with --env prod" in refused.stderr and "--workspace" not in refused.stderr


def test_init_ignores_plans_and_their_signatures(tmp_path: Path) -> None:
    assert run("init", str(tmp_path / "new"), "--ci", "none").exit_code == 0
    ignored = (tmp_path / "new" / ".gitignore").read_text().splitlines()
    assert {"plans/", "plan*.json", "plan*.json.sig", ".govsync/"} <= set(ignored)


def test_the_default_state_follows_the_project_from_a_subfolder(repo: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Finding 1: `cd manifests && govsync apply --env staging` used a new, empty state
    there, and created every object a second time."""
    assert run("apply", "--env", "staging", "--auto-approve").exit_code == 0
    monkeypatch.chdir(repo / "manifests")
    again = run("apply", "--env", "staging", "--auto-approve")
    assert again.exit_code == 0, again.output
    assert "No changes" in again.stdout
    assert not (repo / "manifests" / ".govsync").exists()
