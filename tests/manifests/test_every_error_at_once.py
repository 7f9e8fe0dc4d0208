"""Errors that used to hide each other, or crash: every one at once, at its place.

Issue 34, item 8: a document with a type error hid its dangling reference until
the next run, and a spec written as one variable whose value is not a mapping
crashed ``validate`` with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli

PROJECT = """\
apiVersion: govsync/v1
kind: Project
paths: [manifests/]
vars: {{desc: {value}}}
"""


def validate(root: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    monkeypatch.chdir(root)
    for name in ("GOVSYNC_ENV", "GOVSYNC_PROJECT", "GOVSYNC_STATE", "GOVSYNC_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    return CliRunner().invoke(cli, ["validate"], catch_exceptions=False)


def write(root: Path, manifest: str, value: str = "x") -> None:
    (root / "manifests").mkdir(exist_ok=True)
    (root / "manifests" / "a.yaml").write_text(manifest)
    (root / "govsync.yaml").write_text(PROJECT.format(value=value))


def test_a_type_error_does_not_hide_the_documents_dangling_references(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "apiVersion: govsync/v1\nkind: Connector\n"
                    "metadata: {name: abc, dependsOn: [Space/zzz]}\n"
                    "spec:\n  spaceRef: nothere\n  terminationProtection: 5\n")
    result = validate(tmp_path, monkeypatch)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert any(line.startswith("manifests/a.yaml:5:13: spec.spaceRef refers to Space/nothere,"
                               " which no manifest defines") for line in lines), result.stderr
    assert any(line.startswith("manifests/a.yaml:3:35: metadata.dependsOn names Space/zzz")
               for line in lines), result.stderr
    assert any(line.startswith("manifests/a.yaml:6:26: spec.terminationProtection")
               for line in lines), result.stderr
    assert "3 errors" in result.stderr


def test_a_reference_of_a_broken_document_to_a_defined_object_is_not_reported(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: here}\nspec: {}\n"
                    "---\napiVersion: govsync/v1\nkind: Connector\nmetadata: {name: abc}\n"
                    "spec:\n  spaceRef: here\n  terminationProtection: 5\n")
    result = validate(tmp_path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert "refers to" not in result.stderr
    assert "1 error;" in result.stderr, result.stderr


@pytest.mark.parametrize(("value", "shown"), [
    ('"text"', "the string 'text'"), ("[1, 2]", "a list"), ("null", "null"), ("5", "5"),
])
def test_a_spec_that_is_a_variable_must_be_a_mapping(
        value: str, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: abc}\n"
                    "spec: {var: desc}\n", value)
    result = validate(tmp_path, monkeypatch)
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("manifests/a.yaml:4:7: spec is variable 'desc', whose "
                                    "value is "), result.stderr
    assert shown in result.stderr and "a spec is a mapping" in result.stderr


def test_a_spec_that_is_a_mapping_variable_is_the_spec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "apiVersion: govsync/v1\nkind: Space\nmetadata: {name: abc}\n"
                    "spec: {var: desc}\n", "{terminationProtection: true}")
    result = validate(tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
