"""Helpers of the workflow tests: the apply tests' kit, and git as a command.

The reference server and govsync as processes come from
``tests/apply/applykit.py`` (imported from there, not copied); this module
puts that folder on ``sys.path`` so that a test here can run on its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

APPLY_TESTS = Path(__file__).resolve().parents[1] / "apply"
if str(APPLY_TESTS) not in sys.path:
    sys.path.insert(0, str(APPLY_TESTS))
pytest.register_assert_rewrite("applykit")

from applykit import KEY, Background, Govsync, Run, Server, object_id  # noqa: E402

__all__ = ["KEY", "Background", "Govsync", "Run", "Server", "applying", "git", "git_env",
           "object_id"]


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
