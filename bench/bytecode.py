"""Compile govsync's bytecode before timing anything.

A wheel install compiles every module when it installs; an editable install
writes ``__pycache__`` on the first run, unless PYTHONDONTWRITEBYTECODE is set
(as on the machines these figures come from), in which case every run
compiles govsync's ~60 modules from source again (~30 ms).  The benchmarks
time govsync as a user runs it, so they compile the package once first.
"""

from __future__ import annotations

import compileall
import importlib.util
import os


def compile_package() -> None:
    spec = importlib.util.find_spec("govsync")
    assert spec is not None and spec.origin is not None, "govsync is not installed"
    compileall.compile_dir(os.path.dirname(spec.origin), quiet=1)
