"""The generated reference (docs/cli.md, docs/kinds.md) and the help of every command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from govsync.api.kinds import KINDS
from govsync.cli import cli
from govsync.docs import CLI_MD, KINDS_MD, json_schemas, root_context, walk_commands, write_docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def every_command() -> list[tuple[str, click.Command]]:
    return [(sub.command_path, command) for sub, command in walk_commands(cli, root_context(cli))]


COMMANDS = every_command()


def test_docs_are_current() -> None:
    # Fails when a command, an option, a help text, a kind or the schema changed
    # without `govsync docs` being run.
    result = CliRunner().invoke(cli, ["docs", "--check", "--out", str(DOCS)])
    assert result.exit_code == 0, result.output + "\nRun `govsync docs` and commit docs/."


def test_docs_check_detects_stale_files(tmp_path: Path) -> None:
    assert write_docs(str(tmp_path), cli) == [CLI_MD, KINDS_MD, *json_schemas()]
    assert write_docs(str(tmp_path), cli, check=True) == []
    (tmp_path / KINDS_MD).write_text("old\n")

    result = CliRunner().invoke(cli, ["docs", "--check", "--out", str(tmp_path)])

    assert result.exit_code == 1
    assert "Stale: kinds.md" in result.stderr
    assert (tmp_path / KINDS_MD).read_text() == "old\n"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference as `govsync docs` writes it now (not as committed: that is
    test_docs_are_current's question)."""
    out = tmp_path_factory.mktemp("docs")
    assert write_docs(str(out), cli)
    return out


def test_docs_do_not_depend_on_the_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            generated: Path) -> None:
    monkeypatch.setenv("COLUMNS", "37")
    result = CliRunner().invoke(cli, ["docs", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in (CLI_MD, KINDS_MD):
        assert (tmp_path / name).read_text() == (generated / name).read_text(), name


@pytest.mark.parametrize("path, command", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_has_help_with_an_example(path: str, command: click.Command) -> None:
    assert command.help and command.help.strip(), path
    assert "Example:" in command.help, f"{path}: add an Example section to its docstring"
    lines = command.help.splitlines()
    example = lines.index(next(line for line in lines if line.strip() == "Example:"))
    assert any(line.strip().startswith("govsync") for line in lines[example + 1:]), path


@pytest.mark.parametrize("path, command", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_help_works_on_every_command(path: str, command: click.Command) -> None:
    args = path.split()[1:]
    result = CliRunner().invoke(cli, [*args, "--help"], prog_name="govsync")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: {path}")
    assert "Example:" in result.stdout


@pytest.mark.parametrize("path, command", COMMANDS, ids=[p for p, _ in COMMANDS])
def test_every_command_is_in_the_reference(path: str, command: click.Command,
                                           generated: Path) -> None:
    text = (generated / CLI_MD).read_text()
    assert f"\n## {path}\n" in text


def test_every_kind_is_in_the_reference(generated: Path) -> None:
    text = (generated / KINDS_MD).read_text()
    for kind in KINDS:
        section = text.split(f"\n## {kind.name}\n", 1)[1].split("\n## ", 1)[0]
        assert kind.summary in section
        assert f"`{kind.create_op}`" in section
        for ref in kind.references:
            assert f"`{ref.ref_field}` → [{ref.target}]" in section
        for secret in kind.secrets:
            assert f"`{secret}`" in section
        assert f"| can change after create | {kind.changeable} |" in section
