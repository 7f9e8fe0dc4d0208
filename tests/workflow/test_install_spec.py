"""What CI installs: the install spec ``govsync init`` writes, and the CI files' shape.

``installed_spec`` reads the installation's ``direct_url.json`` (PEP 610):
here from fake ``.dist-info`` folders, one per way of installing. The CI
templates, the composite action and the release workflow are checked against
the JSON Schemas that check-jsonschema ships (vendored: the tests forbid the
network to prove it).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from govsync import __version__
from govsync.cli import cli
from govsync.errors import ConfigError
from govsync.init import (
    INSTALL_SPEC_ENV,
    INSTALL_SPEC_OPTION,
    MISSING_SPEC_LINE,
    REQUIREMENTS,
    given_spec,
    installed_spec,
    requirements_file,
)

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "src" / "govsync" / "templates" / "ci"
COMMIT = "3f2a" * 10


def dist(tmp_path: Path, direct_url: dict[str, Any] | str | None,
         version: str = "0.1.0") -> metadata.Distribution:
    """An installed govsync as importlib.metadata sees it, with this direct_url.json."""
    info = tmp_path / f"govsync-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: govsync\nVersion: {version}\n")
    if direct_url is not None:
        text = direct_url if isinstance(direct_url, str) else json.dumps(direct_url)
        (info / "direct_url.json").write_text(text)
    return metadata.PathDistribution(info)


# -- installed_spec ------------------------------------------------------------------


def test_a_git_install_is_pinned_to_its_commit(tmp_path: Path) -> None:
    spec = installed_spec(dist(tmp_path, {
        "url": "https://github.com/acme/govsync.git",
        "vcs_info": {"vcs": "git", "commit_id": COMMIT, "requested_revision": "main"}}))
    assert spec.requirement == f"govsync[postgres] @ git+https://github.com/acme/govsync.git@{COMMIT}"
    assert "main" not in spec.requirement  # the branch moves; the commit does not
    assert spec.note == ""


def test_a_git_install_keeps_its_subdirectory(tmp_path: Path) -> None:
    spec = installed_spec(dist(tmp_path, {
        "url": "https://git.example.com/tools.git", "subdirectory": "govsync",
        "vcs_info": {"vcs": "git", "commit_id": COMMIT}}))
    assert spec.requirement == (
        f"govsync[postgres] @ git+https://git.example.com/tools.git@{COMMIT}"
        "#subdirectory=govsync")


def test_a_local_repository_is_written_with_a_warning(tmp_path: Path) -> None:
    spec = installed_spec(dist(tmp_path, {
        "url": "file:///srv/git/govsync.git", "vcs_info": {"vcs": "git", "commit_id": COMMIT}}))
    # With a host: pips before 23.3 reject git+file:///... in a requirement.
    assert spec.requirement == (
        f"govsync[postgres] @ git+file://localhost/srv/git/govsync.git@{COMMIT}")
    assert "CI runners cannot reach it" in spec.note and INSTALL_SPEC_OPTION in spec.note


@pytest.mark.parametrize("editable", [True, False])
def test_a_local_folder_is_refused(tmp_path: Path, editable: bool) -> None:
    spec = installed_spec(dist(tmp_path, {"url": "file:///home/me/src/govsync",
                                          "dir_info": {"editable": editable}}))
    assert spec.requirement is None
    assert "the local folder /home/me/src/govsync" in spec.origin
    assert ("(editable)" in spec.origin) is editable


def test_a_local_wheel_is_refused(tmp_path: Path) -> None:
    spec = installed_spec(dist(tmp_path, {
        "url": "file:///tmp/dist/govsync-0.1.0-py3-none-any.whl",
        "archive_info": {"hashes": {"sha256": "ab" * 32}}}))
    assert spec.requirement is None
    assert "the local file /tmp/dist/govsync-0.1.0-py3-none-any.whl" in spec.origin


def test_a_remote_archive_is_pinned_by_its_hash(tmp_path: Path) -> None:
    url = "https://files.example.com/govsync-0.1.0-py3-none-any.whl"
    spec = installed_spec(dist(tmp_path, {"url": url,
                                          "archive_info": {"hash": "sha256=" + "cd" * 32}}))
    assert spec.requirement == f"govsync[postgres] @ {url}#sha256={'cd' * 32}"


def test_no_record_and_not_published_is_refused(tmp_path: Path) -> None:
    spec = installed_spec(dist(tmp_path, None, version="0.1.0"))
    assert spec.requirement is None
    assert "not a release on the package index" in spec.origin


def test_no_record_and_published_pins_the_version(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("govsync.init.INDEX_RELEASES", frozenset({"0.3.0"}))
    assert installed_spec(dist(tmp_path, None, version="0.3.0")).requirement == (
        "govsync[postgres]==0.3.0")


@pytest.mark.parametrize("text", ["{", "[]", '{"vcs_info": {}}', json.dumps(
    {"url": "https://example.com/x.git", "vcs_info": {"vcs": "git"}})])
def test_an_unreadable_record_is_refused(tmp_path: Path, text: str) -> None:
    spec = installed_spec(dist(tmp_path, text))
    assert spec.requirement is None and spec.origin


def test_this_editable_install_is_refused() -> None:
    spec = installed_spec()
    assert spec.requirement is None
    assert "local folder" in spec.origin or "not installed" in spec.origin


def test_a_given_spec_is_one_line() -> None:
    assert given_spec("  govsync==1.0 ").requirement == "govsync==1.0"
    for bad in ("", "  ", "# a comment", "govsync==1.0\nevil==6.6.6"):
        with pytest.raises(ConfigError, match="one requirement line"):
            given_spec(bad)


# -- govsync init and requirements-govsync.txt --------------------------------------


def requirement_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_init_writes_the_given_spec(tmp_path: Path) -> None:
    spec = f"govsync[postgres] @ git+https://github.com/acme/govsync@{COMMIT}"
    result = CliRunner().invoke(cli, ["init", str(tmp_path)], env={INSTALL_SPEC_ENV: spec})
    assert result.exit_code == 0, result.output
    assert requirement_lines(tmp_path / REQUIREMENTS) == [spec]
    assert "Warning" not in result.output


def test_init_without_a_spec_scaffolds_and_warns(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["init", str(tmp_path)], env={INSTALL_SPEC_ENV: ""})
    assert result.exit_code == 0, result.output
    assert "Warning: CI will not run yet" in result.stdout
    assert f"{INSTALL_SPEC_OPTION} SPEC" in result.stdout and INSTALL_SPEC_ENV in result.stdout
    assert "local folder" in result.stdout  # why: this test runs an editable install
    assert (tmp_path / "manifests").is_dir() and (tmp_path / ".github/workflows").is_dir()
    assert requirement_lines(tmp_path / REQUIREMENTS) == [MISSING_SPEC_LINE]


def test_the_placeholder_stops_pip_before_any_index(tmp_path: Path) -> None:
    """CI's `pip install -r requirements-govsync.txt` fails on it, quoting the instructions."""
    path = tmp_path / REQUIREMENTS
    path.write_text(requirements_file(installed_spec(dist(tmp_path, {
        "url": "file:///src/govsync", "dir_info": {"editable": True}}))))
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
                           "--disable-pip-version-check", "-r", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert MISSING_SPEC_LINE in proc.stderr, proc.stderr
    text = path.read_text()
    assert "the local folder /src/govsync (editable)" in text
    assert "git+https://github.com/OWNER/govsync@COMMIT" in text and INSTALL_SPEC_OPTION in text


def test_the_scaffold_readme_links_no_package_index_page() -> None:
    from govsync.init import scaffold

    files = scaffold("github", given_spec("govsync==1.0"))
    readme = files["README.md"]
    assert "pypi.org" not in readme and "<owner>" not in readme
    assert "pip install -r requirements-govsync.txt" in readme
    assert "repo: local" in readme  # pre-commit runs the pinned govsync
    for name, text in files.items():
        assert not re.search(r"pip install (--quiet )?\"?govsync", text), name


# -- the CI files against their JSON Schemas ---------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("check-jsonschema tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


@pytest.mark.parametrize(("schema", "path"), [
    ("vendor.github-workflows", TEMPLATES / "github-actions.yml"),
    ("vendor.gitlab-ci", TEMPLATES / "gitlab-ci.yml"),
    ("vendor.github-workflows", ROOT / ".github/workflows/release.yml"),
    ("vendor.github-actions", ROOT / "action.yml"),
])
def test_ci_files_match_their_schemas(schema: str, path: Path, no_network: None) -> None:
    from check_jsonschema.cli.main_command import main as check_jsonschema

    result = CliRunner().invoke(check_jsonschema, ["--builtin-schema", schema, str(path)])
    assert result.exit_code == 0, result.output
    assert "validation done" in result.output


def test_the_schemas_catch_a_mistake(tmp_path: Path, no_network: None) -> None:
    from check_jsonschema.cli.main_command import main as check_jsonschema

    broken = tmp_path / "workflow.yml"
    broken.write_text((TEMPLATES / "github-actions.yml").read_text().replace(
        "runs-on: ubuntu-latest", "runs_on: ubuntu-latest", 1))
    result = CliRunner().invoke(check_jsonschema,
                                ["--builtin-schema", "vendor.github-workflows", str(broken)])
    assert result.exit_code == 1, result.output


def run_scripts(doc: Any) -> Iterator[str]:
    """Every `run:` script of a workflow or an action."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "run" and isinstance(value, str):
                yield value
            else:
                yield from run_scripts(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from run_scripts(item)


@pytest.mark.parametrize("path", [TEMPLATES / "github-actions.yml", ROOT / "action.yml",
                                  ROOT / ".github/workflows/release.yml"])
def test_scripts_take_values_from_the_environment_only(path: Path) -> None:
    """No ${{ }} in a script: an input or a branch name can never become shell code."""
    scripts = list(run_scripts(yaml.safe_load(path.read_text())))
    assert scripts
    for script in scripts:
        assert "${{" not in script, script


def test_the_action_installs_its_own_ref_by_default() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert {"command", "paths", "env", "install-spec"} <= set(action["inputs"])
    assert action["inputs"]["install-spec"]["default"] == ""
    install = next(s for s in action["runs"]["steps"] if s.get("name") == "Install govsync")
    assert install["env"]["ACTION_PATH"] == "${{ github.action_path }}"
    assert 'pip install "$ACTION_PATH' in install["run"]


def test_the_release_workflow_publishes_with_trusted_publishing() -> None:
    wf = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    on = wf.get("on", wf.get(True))
    assert on == {"push": {"tags": ["v*"]}}
    publish = wf["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    assert publish["needs"] == "build"
    assert any(s.get("uses", "").startswith("pypa/gh-action-pypi-publish@")
               for s in publish["steps"])
    assert "id-token" not in json.dumps(wf["jobs"]["build"])  # only the job that publishes


def release_check(tag: str) -> subprocess.CompletedProcess[str]:
    """The release workflow's first check, run here as the workflow runs it."""
    wf = yaml.safe_load((ROOT / ".github/workflows/release.yml").read_text())
    step = next(s for s in wf["jobs"]["build"]["steps"] if s.get("name", "").startswith("Check"))
    return subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                               "TAG": tag, "REPOSITORY_URL": "https://github.com/acme/govsync"})


def test_the_release_refuses_a_tag_that_disagrees() -> None:
    proc = release_check("v9.9.9")
    assert proc.returncode == 1, proc
    assert f"the tag v9.9.9 is not v{__version__}" in proc.stdout, proc.stdout


def test_the_release_refuses_a_version_it_does_not_list_and_a_missing_home() -> None:
    from govsync.init import INDEX_RELEASES

    proc = release_check(f"v{__version__}")
    assert proc.returncode == 1, proc
    assert "the tag" not in proc.stdout
    if __version__ not in INDEX_RELEASES:
        assert f"{__version__} is not in INDEX_RELEASES" in proc.stdout, proc.stdout
    assert "[project.urls] Repository is None" in proc.stdout, proc.stdout
