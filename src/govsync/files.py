"""Files govsync reads and writes: manifest discovery and generated files.

Kept free of heavy imports: `govsync fmt` and `govsync docs` use it without
loading the API models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from govsync.errors import Problem


def manifest_files(paths: Sequence[str]) -> tuple[list[tuple[str, str]], list[Problem]]:
    """(path on disk, path to show) of every manifest file under ``paths``, sorted.

    A file given by name is taken whatever its name; directories are searched
    recursively for ``*.yaml``/``*.yml``, skipping hidden directories.
    """
    found: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for given in paths:
        if os.path.isfile(given):
            found.add((given, display_path(given)))
        elif os.path.isdir(given):
            for root, dirs, names in os.walk(given):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in names:
                    if name.endswith((".yaml", ".yml")):
                        full = os.path.join(root, name)
                        found.add((full, display_path(full)))
        else:
            problems.append(Problem(given, 1, 1, "no such file or directory"))
    return sorted(found, key=lambda pair: pair[1]), problems


def display_path(path: str) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return path
    return path if rel.startswith("..") else rel


def write_generated(directory: str, rendered: Mapping[str, str], *, check: bool = False) -> list[str]:
    """Write (or with ``check``, only compare) generated files; the stale names."""
    stale = []
    for name, text in rendered.items():
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as fh:
                current = fh.read()
        except FileNotFoundError:
            current = None
        if current != text:
            stale.append(name)
            if not check:
                os.makedirs(directory, exist_ok=True)
                with open(path, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
    return stale
