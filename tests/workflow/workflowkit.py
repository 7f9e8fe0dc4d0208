"""Helpers of the workflow tests: the apply tests' kit, and git as a command.

The reference server and govsync as processes come from
``tests/apply/applykit.py`` (imported from there, not copied); this module
puts that folder on ``sys.path`` so that a test here can run on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

APPLY_TESTS = Path(__file__).resolve().parents[1] / "apply"
if str(APPLY_TESTS) not in sys.path:
    sys.path.insert(0, str(APPLY_TESTS))
pytest.register_assert_rewrite("applykit")

from applykit import KEY, Background, Govsync, Run, Server, object_id  # noqa: E402

__all__ = ["KEY", "Background", "Govsync", "Run", "Server", "applying", "fresh_venv", "git",
           "git_env", "object_id"]


def git_env() -> dict[str, str]:
    """The environment without the machine's git configuration (signing, hooks, aliases)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_TERMINAL_PROMPT="0")
    return env


def git(repo: Path, *args: str) -> str:
    """Run ``git ARGS`` in ``repo``; its stdout (an AssertionError when it fails)."""
    proc = subprocess.run(["git", *args], cwd=repo, env=git_env(), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (
        f"git {' '.join(args)} -> exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def applying(line: str) -> bool:
    """The line an apply prints (to stderr) once it holds the lock and starts sending."""
    return line.startswith("Applying ")


def fresh_venv(path: Path) -> Path:
    """A new virtual environment (no pip of its own) that sees this one's third-party
    packages, a link to each, govsync's own left out: an install into it resolves the
    declared dependencies against them (``pip check`` proves them satisfied) and
    downloads nothing but a build's setuptools.  Its bin/."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   capture_output=True, timeout=120)
    [site] = (path / "lib").glob("python*/site-packages")
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        name = entry.name.lower()
        if name.startswith(("govsync", "__editable__", "_virtualenv", "__pycache__")) or (
                name.endswith(".pth")):
            continue
        (site / entry.name).symlink_to(entry)
    return path / "bin"
