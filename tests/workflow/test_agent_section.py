"""The project file's `agent:` section, through `govsync validate`: every mistake named
at its line and column, all at once, and a secret written in place never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from govsync.cli import cli
from testkit import without_settings

HOOK = ("apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: h}\n"
        "spec: {description: d, code: 'export default function hook() { return 1; }'}\n")


def validate(root: Path, agent: str) -> tuple[int, str]:
    (root / "manifests").mkdir(exist_ok=True)
    (root / "manifests" / "hook.yaml").write_text(HOOK)
    (root / "govsync.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Project\n"
        "paths: [manifests]\nenvironments:\n  prod:\n    agent:\n" + agent)
    done = CliRunner().invoke(cli, ["validate"])
    return done.exit_code, done.output


@pytest.fixture(autouse=True)
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)


def test_a_good_agent_section_is_valid(tmp_path: Path) -> None:
    code, out = validate(tmp_path, (
        "      interval: 2m30s\n      autoApply: true\n      timezone: Europe/Paris\n"
        "      freeze: ['* 17-23 * * 5']\n      plans: approved/\n"
        "      notify:\n        - {type: webhook, url: {fromEnv: HOOK_URL},"
        " secret: {fromEnv: HOOK_SECRET}}\n"
        "        - {type: github, repository: org/gov, token: {fromEnv: GH_TOKEN}}\n"))
    assert code == 0, out
    assert "1 object in 1 file (environment prod): valid." in out


def test_every_mistake_is_named_at_its_place_at_once(tmp_path: Path) -> None:
    code, out = validate(tmp_path, (
        "      interval: soon\n"                                   # line 7
        "      timezone: Mars/Olympus\n"                          # line 8
        "      freeze: ['* * *', '61 * * * *']\n"                 # line 9
        "      notify:\n"
        "        - {type: pager, url: x}\n"                       # line 11
        "        - {type: webhook, url: {fromEnv: 'no such'}}\n"  # line 12
        "        - {type: github, repository: nope}\n"))          # line 13
    assert code == 1
    for place, words in [
            ("govsync.yaml:7:17", "agent.interval: 'soon' is not a duration"),
            ("govsync.yaml:8:17", "agent.timezone 'Mars/Olympus' is not a time zone"),
            ("govsync.yaml:9:16", "not a cron expression of 5 fields"),
            ("govsync.yaml:9:25", "not a valid cron expression"),
            ("govsync.yaml:11:18", "unknown sink type 'pager'"),
            ("govsync.yaml:12:42", "fromEnv names an environment variable"),
            ("govsync.yaml:13:38", "a github sink names its repository")]:
        assert any(line.startswith(place) and words in line for line in out.splitlines()), (
            place, words, out)
    assert "7 errors; nothing was sent and the state is untouched." in out


def test_a_secret_written_in_place_is_refused_and_never_shown(tmp_path: Path) -> None:
    code, out = validate(tmp_path, (
        "      notify:\n"
        "        - {type: webhook, url: 'https://hooks.example/x', secret: s3cr3t-value}\n"
        "        - {type: github, repository: org/gov, token: ghp_canary123}\n"))
    assert code == 1
    assert "govsync.yaml:8:67: secret must be {fromEnv: VARIABLE}" in out, out
    assert "govsync.yaml:9:54: github token must be {fromEnv: VARIABLE}" in out, out
    assert "s3cr3t-value" not in out and "ghp_canary123" not in out


def test_a_sink_never_reads_govsyncs_own_settings(tmp_path: Path) -> None:
    # Issue 30: a commit gave a github sink GOVSYNC_API_KEY as its token, and a
    # webhook GOVSYNC_STATE (with its password) as its URL.
    code, out = validate(tmp_path, (
        "      notify:\n"
        "        - {type: github, repository: org/gov, token: {fromEnv: GOVSYNC_API_KEY}}\n"
        "        - {type: webhook, url: {fromEnv: GOVSYNC_STATE}}\n"
        "        - {type: webhook, url: {fromEnv: HOOK_URL}, secret: {fromEnv: GOVSYNC_UI_TOKEN}}\n"))
    assert code == 1
    for place, variable in [("govsync.yaml:8:64", "GOVSYNC_API_KEY"),
                            ("govsync.yaml:9:42", "GOVSYNC_STATE"),
                            ("govsync.yaml:10:71", "GOVSYNC_UI_TOKEN")]:
        assert any(line.startswith(place) and f"{variable} is one of govsync's own settings"
                   in line for line in out.splitlines()), (place, out)
