"""govsync as its users get it: the built wheel, and the install spec ``init`` writes.

One module-scoped source repository (this project's files, committed in a
temporary git repository), then:

1. ``python -m build`` makes a wheel and an sdist that ``twine check`` accepts;
   the wheel, installed in a fresh virtual environment, runs ``--version``
   and the README's demo, and its ``govsync init`` refuses to guess where a
   local wheel file came from;
2. govsync installed from the repository by git URL (``git+file://``, so
   that ``direct_url.json`` records the commit) runs ``govsync init`` in a
   new git repository, and the requirement it writes installs, in yet another
   fresh environment, that very commit;
3. the composite action's install step installs the action's own source.

The fresh environments see this environment's third-party packages (a link
to each, govsync's own left out) and govsync is installed with ``--no-deps``,
so nothing but the build's setuptools comes from the package index; ``pip
check`` proves that the wheel's declared dependencies are satisfied.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from workflowkit import fresh_venv, git, git_env

from govsync import __version__
from govsync.init import MISSING_SPEC_LINE, REQUIREMENTS
from testkit import examples

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parents[2]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
# No bytecode compiled by pip, in the environments installed into or in each build's
# isolated one: every build would compile setuptools' thousand modules for one use.
NO_COMPILE = {"PIP_NO_COMPILE": "1"}


def run(args: list[str | Path], cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 300) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL,
                          env={**git_env(), "NO_COLOR": "1", **NO_COMPILE, **(env or {})})
    assert proc.returncode == 0, (
        f"{' '.join(map(str, args))} -> exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout + proc.stderr


def pip_install(venv_bin: Path, *args: str | Path) -> str:
    """``pip install --no-deps`` into that environment (nothing it links to is touched)."""
    return run([*PIP, "--python", venv_bin / "python", "install", "--no-deps", *args])


def direct_url(venv_bin: Path) -> dict[str, object]:
    code = ("from importlib.metadata import distribution as d; "
            "print(d('govsync').read_text('direct_url.json'))")
    out = subprocess.run([venv_bin / "python", "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    data: dict[str, object] = json.loads(out)
    return data


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This project's files (uncommitted changes included) in a new git repository."""
    target = tmp_path_factory.mktemp("source") / "govsync.git"
    files = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=PROJECT).split("\0")
    for rel in filter(None, files):
        if (PROJECT / rel).is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT / rel, target / rel)
    git(target.parent, "init", "-q", "-b", "main", str(target))
    git(target, "add", "-A")
    git(target, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "src")
    return target, git(target, "rev-parse", "HEAD").strip()


def test_the_wheel_installs_and_runs_the_demo(source: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = source
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", dist, repo], timeout=600)
    [wheel] = dist.glob("govsync-*.whl")
    [sdist] = dist.glob("govsync-*.tar.gz")
    assert wheel.name == f"govsync-{__version__}-py3-none-any.whl"
    assert "PASSED" in run([sys.executable, "-m", "twine", "check", "--strict", wheel, sdist])
    # The dashboard's front-end files ship in it (no CDN), the vendored one with its licence.
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert {f"govsync/ui/static/{name}" for name in (
        "app.css", "app.js", "svg-pan-zoom.min.js", "svg-pan-zoom.LICENSE")} <= shipped
    # Development tools (the generator of api/_generated_checks.py) stay in the repository.
    assert not any("checkgen" in name for name in shipped), sorted(shipped)

    venv = fresh_venv(tmp_path / "venv")
    pip_install(venv, wheel)
    run([*PIP, "--python", venv / "python", "check"])  # its dependencies are all there
    assert run([venv / "govsync", "--version"]).strip() == f"govsync, version {__version__}"
    # The README's first command, with the wheel's govsync on PATH.
    demo = run(["sh", "examples/demo.sh"], cwd=repo,
                env={"PATH": f"{venv}:{os.environ['PATH']}"})
    assert f"Apply: {N} applied, 0 failed" in demo and "In sync" in demo, demo[-3000:]
    # The policies' tests pass, and the plan measures them over the recorded requests.
    assert " passed, 0 failed, 0 errors\n== govsync plan" in demo, demo[:3000]
    assert "Check impact: passed (measured over" in demo, demo[-3000:]
    assert "Traceback" not in demo, demo[-3000:]

    # Installed from a local wheel file: init scaffolds, but will not guess the spec.
    out = run([venv / "govsync", "init", tmp_path / "governance"])
    assert "Warning: CI will not run yet" in out and "--install-spec SPEC" in out, out
    assert f"the local file {wheel}" in out, out
    assert (tmp_path / "governance" / REQUIREMENTS).read_text().endswith(MISSING_SPEC_LINE + "\n")


def test_the_spec_init_writes_installs_the_same_commit(source: tuple[Path, str],
                                                       tmp_path: Path) -> None:
    repo, commit = source
    # The URL as init writes it back (file://localhost): the reader's install below
    # finds the wheel built of that commit in pip's cache, as a second runner would.
    url = f"git+file://localhost{repo}@{commit}"
    writer = fresh_venv(tmp_path / "writer")
    pip_install(writer, url)
    assert direct_url(writer)["vcs_info"] == {"vcs": "git", "commit_id": commit,
                                              "requested_revision": commit}

    governance = tmp_path / "governance"
    governance.mkdir()
    git(governance, "init", "-q")
    out = run([writer / "govsync", "init"], cwd=governance)
    assert "CI runners cannot reach it" in out, out  # a file:// repository
    spec = (governance / REQUIREMENTS).read_text().splitlines()[-1]
    assert spec == f"govsync[postgres] @ git+file://localhost{repo}@{commit}"

    reader = fresh_venv(tmp_path / "reader")
    pip_install(reader, "-r", governance / REQUIREMENTS)
    assert run([reader / "govsync", "--version"]).strip() == f"govsync, version {__version__}"
    assert direct_url(reader)["vcs_info"]["commit_id"] == commit  # type: ignore[index]


def test_the_action_installs_its_own_source(source: tuple[Path, str], tmp_path: Path) -> None:
    repo, _ = source
    action = yaml.safe_load((repo / "action.yml").read_text())
    [step] = [s for s in action["runs"]["steps"] if s.get("name") == "Install govsync"]
    venv = fresh_venv(tmp_path / "venv")
    (venv / "pip").unlink(missing_ok=True)
    # `python -m pip` of the step is this environment's pip, run by the fresh interpreter.
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "python").write_text(
        f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then shift 2; exec {sys.executable} -m pip '
        f'--python {venv / "python"} "$@"; fi\nexec {venv / "python"} "$@"\n')
    (shim / "python").chmod(0o755)
    env = {"INSTALL_SPEC": "", "EXTRAS": "postgres", "ACTION_PATH": str(repo),
           "PIP_NO_DEPS": "1", "PATH": f"{shim}:{venv}:/usr/bin:/bin"}
    out = run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
              cwd=tmp_path, env=env, timeout=600)
    assert f"govsync, version {__version__}" in out, out
    assert direct_url(venv)["url"] == repo.as_uri()
