"""The README's two commands work on a clean copy of the repository.

The commands are read from README.md (the first two ``sh`` code blocks after
the title), so this test follows the README. Both run with bash, one after the
other, in one ``git clone`` of this repository (committed files only:
uncommitted changes are not in it, by design): the first builds the clone's
``.venv`` from the package index, the second adds the test dependencies to it:

1. install and run the demo: validate, plan, apply, then nothing left to do;
2. install the test dependencies and run the test suite: literally, but with
   ``PYTEST_ADDOPTS`` selecting one fast test (running the whole suite again
   inside the suite would double its time) and ``GOVSYNC_NESTED_README_TEST``
   set, which makes this module skip itself in the nested run.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from workflowkit import git, git_env

NESTED = "GOVSYNC_NESTED_README_TEST"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bool(os.environ.get(NESTED)),
                       reason=f"{NESTED} is set: this is the README's test suite run by itself"),
]

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parents[1]  # where README.md and pyproject.toml are
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
# The nested run of command 2: one fast test, no .pytest_cache in the clone.
NESTED_ADDOPTS = "-n 0 -k test_examples_stay_valid -p no:cacheprovider"


def readme_commands(readme: str, n: int = 2) -> list[str]:
    """The first ``n`` ```sh blocks after the README's title, in order."""
    title = re.search(r"^# \S.*$", readme, re.M)
    assert title, "README.md has no title line"
    blocks = [body.strip() for lang, body in FENCE.findall(readme[title.end():])
              if lang == "sh"]
    assert len(blocks) >= n, f"README.md has {len(blocks)} sh code block(s), expected {n}"
    return blocks[:n]


def bash(command: str, cwd: Path, extra: dict[str, str], timeout: float = 900
         ) -> tuple[int, str, float]:
    """Run ``command`` with bash in ``cwd``: exit code, stdout+stderr, seconds."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GOVSYNC_", "PYTEST_"))
           and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    started = time.monotonic()
    proc = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, time.monotonic() - started


def report(command: str, code: int, output: str, seconds: float) -> str:
    return f"$ {command}\n-> exit {code} after {seconds:.0f}s\n{output[-6000:]}"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the repository (committed files only); the project folder in it."""
    top = Path(git(HERE, "rev-parse", "--show-toplevel").strip()).resolve()
    target = tmp_path_factory.mktemp("readme") / "clone"
    proc = subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(top), str(target)],
                          env=git_env(), capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    project = target / PROJECT.relative_to(top)
    assert (project / "README.md").is_file() and (project / "pyproject.toml").is_file()
    assert not (project / ".venv").exists()
    return project


@pytest.fixture(scope="module")
def commands(clone: Path) -> list[str]:
    return readme_commands((clone / "README.md").read_text(encoding="utf-8"))


def test_readme_names_the_two_commands(commands: list[str]) -> None:
    install_and_demo, install_and_test = commands
    assert "examples/demo.sh" in install_and_demo
    assert "pytest" in install_and_test


def test_the_two_commands_one_after_the_other(clone: Path, commands: list[str]) -> None:
    """Command 1 on the fresh clone, then command 2 in the same clone, as a reader who
    tries the demo and then the tests does.  One test, so that one xdist worker runs
    both on one clone: apart, each built a clone and a virtual environment of its own
    and installed the package and its dependencies again."""
    command = commands[0]
    code, output, seconds = bash(command, clone, {"NO_COLOR": "1"})
    shown = report(command, code, output, seconds)
    assert code == 0, shown
    assert (clone / ".venv" / "bin" / "govsync").is_file(), shown
    # validate, the plan, the apply of the saved plan, then nothing left to do.
    assert "59 objects in" in output and ": valid." in output, shown
    assert "Plan: 59 to create, 0 to update, 0 blocked" in output, shown
    assert "Apply: 59 applied, 0 failed" in output, shown
    assert "No changes" in output, shown
    assert "In sync" in output, shown

    command = commands[1]
    code, output, seconds = bash(command, clone, {"PYTEST_ADDOPTS": NESTED_ADDOPTS,
                                                  NESTED: "1"})
    shown = report(command, code, output, seconds)
    assert code == 0, shown
    assert re.search(r"\b1 passed\b", output), shown
    assert re.search(r"\b\d+ deselected\b", output), shown  # the whole suite was collected
    assert "error" not in output.splitlines()[-1].lower(), shown
