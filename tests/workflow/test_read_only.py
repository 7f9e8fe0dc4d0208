"""Commands that only read create nothing (issue 11): no state file appears where
none was, and an empty folder of manifests is an error, not a plan of orphans."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from govsync.cli import cli
from testkit import without_settings

HOOK = ('apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: risk_score}\n'
        'spec: {code: "def handler(e):\\n    return 1\\n"}\n')


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "hook.yaml").write_text(HOOK)
    return tmp_path


@pytest.mark.parametrize("args", [
    ["state", "list"], ["state", "list", "--format", "json"], ["state", "history"],
    ["plan", "m"], ["plan", "m", "--format", "json"], ["drift", "m"], ["validate", "m"],
    ["audit", "export"],
])
def test_reading_creates_no_state(here: Path, args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert not (here / ".govsync").exists(), (args, result.output)


def test_plan_out_creates_the_state_it_authenticates_with(here: Path) -> None:
    result = CliRunner().invoke(cli, ["plan", "m", "--out", "p.json"])
    assert result.exit_code == 0, result.output
    assert (here / ".govsync" / "state.db").is_file()


def test_an_empty_folder_is_an_error_not_a_plan_of_orphans(here: Path) -> None:
    (here / "empty").mkdir()
    result = CliRunner().invoke(cli, ["plan", "empty"])
    assert result.exit_code == 1
    assert "empty:1:1: no manifest files (*.yaml, *.yml) here" in result.stderr
    result = CliRunner().invoke(cli, ["state", "list", "--state", "mysql://x"])
    assert result.exit_code == 1 and "the scheme 'mysql' is not a state backend" in result.stderr
    assert not (here / "mysql:").exists()


@pytest.mark.parametrize("extra", [[], ["--endpoint", "local", "--local-seed", "broken.yaml"]])
def test_apply_checks_what_it_needs_before_showing_the_plan(here: Path, extra: list[str]) -> None:
    # Issue 11: the whole plan and "Applying..." came before "no endpoint".
    (here / "broken.yaml").write_text("groups: [unclosed\n")
    result = CliRunner().invoke(cli, ["apply", "m", "--auto-approve", *extra])
    assert result.exit_code == 1
    assert "Hook/risk_score" not in result.output and "Applying" not in result.output
    assert ("no API endpoint configured" if not extra else "cannot load seed") in result.stderr
