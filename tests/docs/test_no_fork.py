"""Only the command line forks (docs/architecture.md, issue 31 finding 5).

Forking copies a process with its threads' locks held where they were: the agent
and the dashboard run threads, so library code that forks can deadlock the child.
The entry point (``cli/``) alone may fork; the rules' evaluation uses a worker
started fresh (bounded.py).  The check reads every module's syntax tree: a call
of ``os.fork`` or ``os.forkpty`` (however imported), a multiprocessing
context or start method named ``fork``, or multiprocessing and
``ProcessPoolExecutor`` at all (their default start method forks on Linux
before Python 3.14).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "govsync"
FORKS = frozenset({"fork", "forkpty"})


def forks(source: str) -> list[int]:
    """The lines of ``source`` that fork, or choose forking for multiprocessing."""
    tree = ast.parse(source)
    from_os = {alias.asname or alias.name for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "os"
               for alias in node.names if alias.name in FORKS}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        chooses = name in ("get_context", "set_start_method") and any(
            isinstance(a, ast.Constant) and a.value == "fork" for a in node.args)
        if (isinstance(func, ast.Attribute) and name in FORKS) or name in from_os or chooses:
            lines.append(node.lineno)
    for node in ast.walk(tree):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        pools = ([a.name for a in node.names] if isinstance(node, ast.ImportFrom) else [])
        if any(m.split(".")[0] == "multiprocessing" for m in modules) or (
                "ProcessPoolExecutor" in pools):
            lines.append(node.lineno)
    lines.sort()
    return lines


LIBRARY = sorted(p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts)


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_library_module_forks(path: Path) -> None:
    assert forks(path.read_text()) == [], f"{path.relative_to(PACKAGE)} forks: only cli/ may"


def test_the_check_finds_each_way_of_forking() -> None:
    assert forks("import os\npid = os.fork()\n") == [2]
    assert forks("from os import fork as f\n\nf()\n") == [3]
    assert forks("import os\nos.forkpty()\n") == [2]
    assert forks("import multiprocessing as mp\nmp.get_context('fork')\n") == [1, 2]
    assert forks("from multiprocessing import set_start_method\n"
                 "set_start_method('fork')\n") == [1, 2]
    assert forks("from concurrent.futures import ProcessPoolExecutor\n") == [1]
    assert forks("import subprocess\nsubprocess.Popen(['true'])\n"
                 "from concurrent.futures import ThreadPoolExecutor\n") == []
    # and the command line's reader is found, so the walk reaches cli/ when asked
    assert forks((PACKAGE / "cli" / "forkread.py").read_text())
