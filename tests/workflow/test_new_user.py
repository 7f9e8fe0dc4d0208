"""What a new user met (issue 11), each through the command line.

Every test runs in its own temporary directory with no GOVSYNC_ variable
from the developer's shell, against the embedded reference server
(``--endpoint local``) where an endpoint is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GOVSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)


def run(*args: str, input: str | None = None) -> Result:  # noqa: A002
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def write(path: str, text: str) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    return file


def hook(name: str, *, depends: str = "", extra: str = "") -> str:
    meta = f"\n  dependsOn: [{depends}]" if depends else ""
    return (f"apiVersion: govsync/v1\nkind: Hook\nmetadata:\n  name: {name}{meta}\n"
            f"spec:\n  code: \"def handler(event):\\n    return {{}}\"\n{extra}")


# -- 2. validate reports every error at once --------------------------------------


def test_validate_reports_a_cycle_beside_a_dangling_dependency() -> None:
    write("m/a.yaml", "---\n".join([
        hook("lonely", depends="Hook/nowhere"),
        hook("ping", depends="Hook/pong"),
        hook("pong", depends="Hook/ping"),
    ]))
    result = run("validate", "m")
    assert result.exit_code == 1, result.output
    errors = result.stderr.splitlines()
    assert any(e.startswith("m/a.yaml:5:15: ") and "Hook/nowhere" in e for e in errors), errors
    cycle = [e for e in errors if "dependency cycle" in e]
    assert len(cycle) == 2, errors  # one per member, both reported with the dangling one
    assert "3 errors;" in errors[-1]


def test_validate_checks_the_spec_of_a_document_whose_name_is_invalid() -> None:
    write("m/a.yaml", hook("bad/name", extra="  timeoutMS: 10\n"))
    result = run("validate", "m")
    assert result.exit_code == 1, result.output
    errors = result.stderr.splitlines()
    assert any(e.startswith("m/a.yaml:4:9: ") and "must not contain '/'" in e
               for e in errors), errors
    assert any(e.startswith("m/a.yaml:7:3: ") and "timeoutMS" in e and "timeoutMs" in e
               for e in errors), errors
    assert "2 errors;" in errors[-1]
    # The stand-in name never shows: it is only there to check the spec.
    assert "placeholder" not in result.output
