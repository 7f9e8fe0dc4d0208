"""The YAML language server (what VS Code's YAML extension and other editors run)
checks every document a user opens as `govsync validate` does (issue 35).

The editor's settings map the schema to the manifest folders: a file's
`# yaml-language-server: $schema=` modeline covers only its first document.
One server per folder, reused for all its documents.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from toolkit import ROOT, LanguageServer

from govsync.cli import cli
from govsync.init import EDITOR_SETTINGS

EXAMPLES = ROOT / "examples"
# A file of two documents: the second's timeoutMs is on line 10 (from 0).
TWO_DOCUMENTS = ("apiVersion: govsync/v1\nkind: Space\nmetadata: {name: a}\nspec: {}\n---\n"
                 "apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: h}\n"
                 "spec:\n  code: x\n  timeoutMs: 5000\n")


def documents(text: str) -> int:
    return sum(1 for d in yaml.safe_load_all(text) if d is not None)


def misspelt(text: str) -> tuple[str, list[int]]:
    """``text`` with every document's ``metadata`` key misspelt, and those lines (0-based)."""
    lines = [text[:m.start()].count("\n")
             for m in re.finditer(r"^metadata:", text, re.MULTILINE)]
    return re.sub(r"^metadata:", "metdata:", text, flags=re.MULTILINE), lines


def server(folder: Path) -> Iterator[LanguageServer]:
    settings = json.loads((folder / EDITOR_SETTINGS).read_text())
    running = LanguageServer(folder, settings)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def examples() -> Iterator[LanguageServer]:
    yield from server(EXAMPLES)


@pytest.fixture(scope="module")
def repository() -> Iterator[LanguageServer]:
    """The repository opened at its root, as a new user opens it (issue 43, finding 14)."""
    yield from server(ROOT)


@pytest.fixture(scope="module")
def scaffold(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("init") / "governance"
    done = CliRunner().invoke(cli, ["init", str(folder), "--install-spec", "govsync==1.0"])
    assert done.exit_code == 0, done.output
    return folder


@pytest.fixture(scope="module")
def initialised(scaffold: Path) -> Iterator[LanguageServer]:
    yield from server(scaffold)


def manifest_files(folder: Path) -> list[Path]:
    return sorted((folder / "manifests").glob("*.yaml"))


def check_folder(ls: LanguageServer, folder: Path) -> int:
    """Every document of every manifest file: valid as written, and a misspelt field
    in any one of them is underlined on its line.  Returns the documents seen."""
    seen = 0
    for path in manifest_files(folder):
        text = path.read_text()
        assert ls.diagnostics(path, text) == [], path.name
        wrong, lines = misspelt(text)
        assert len(lines) == documents(text), path.name
        underlined = {d["range"]["start"]["line"] for d in ls.diagnostics(path, wrong)
                      if "metdata" in d["message"]}
        assert underlined == set(lines), path.name
        seen += len(lines)
    return seen


def test_every_example_document_is_checked_by_the_editor(examples: LanguageServer) -> None:
    assert check_folder(examples, EXAMPLES) == sum(
        documents(p.read_text()) for p in manifest_files(EXAMPLES)) > 12


def test_the_examples_are_checked_in_the_repository_opened_at_its_root(
        repository: LanguageServer) -> None:
    assert check_folder(repository, EXAMPLES) == sum(
        documents(p.read_text()) for p in manifest_files(EXAMPLES)) > 12


def test_the_repositorys_other_yaml_is_left_alone(repository: LanguageServer) -> None:
    """Only the examples' manifests are mapped at the root: the tests' broken manifests,
    the seed and the CI files are not underlined as manifests."""
    for path in (ROOT / "tests" / "manifests" / "broken" / "39-dangling-policy-ref"
                 / "manifest.yaml", EXAMPLES / "server-seed.yaml"):
        text = path.read_text()
        assert repository.diagnostics(path, misspelt(text)[0]) == [], path


def test_every_document_init_writes_is_checked_by_the_editor(
        initialised: LanguageServer, scaffold: Path) -> None:
    assert check_folder(initialised, scaffold) == 10


def test_a_misspelt_spec_field_in_a_second_document_is_underlined(
        initialised: LanguageServer, scaffold: Path) -> None:
    path = scaffold / "manifests" / "extra.yaml"
    found = initialised.diagnostics(path, TWO_DOCUMENTS.replace("timeoutMs", "timeoutMS"))
    assert [(d["range"]["start"]["line"], d["message"]) for d in found] == [
        (10, "Property timeoutMS is not allowed.")]


def test_a_file_outside_the_manifest_folders_is_left_alone(
        initialised: LanguageServer, scaffold: Path) -> None:
    text = "apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: h}\nspec: {timeoutMS: 1}\n"
    assert initialised.diagnostics(scaffold / "local-seed-copy.yaml", text) == []


def test_hover_says_what_a_field_means_in_any_document(
        initialised: LanguageServer, scaffold: Path) -> None:
    path = scaffold / "manifests" / "extra.yaml"
    shown = initialised.hover(path, TWO_DOCUMENTS, 10, 4)
    assert "How long the hook may run, in milliseconds (at most 60000)." in shown, shown
    assert "Timeoutms" not in shown
