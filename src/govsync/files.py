"""Files govsync reads and writes: manifest discovery and generated files.

Kept free of heavy imports: `govsync fmt` and `govsync docs` use it without
loading the API models.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from typing import BinaryIO

import yaml

from govsync.errors import Problem

# Only their owner may read the files that hold secrets: the state (the key of secrets'
# fingerprints, SQLite's -wal and -shm files taking its mode), key files, lock files and
# the embedded server's database (the objects it was sent, secrets included).
PRIVATE_MODE = 0o600


def yaml_loader() -> type:
    """PyYAML's safe loader: the C one (libyaml) when the install has it, about
    twenty times faster than the pure-Python one, which is the fallback."""

    loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return loader


def nesting_refused(exc: BaseException) -> bool:
    """Whether a YAML error is libyaml refusing to nest past its own limit.

    The libyaml that PyYAML 6.0.4 and later bundle stops at 1,000 levels.  Its
    scanner reads up to 1,024 characters ahead, so on ``[[[[...`` it can refuse
    before govsync's count of the parser's events reaches govsync's own, lower,
    limit.  It is the same refusal, and callers word it as theirs."""

    return (isinstance(exc, yaml.MarkedYAMLError)
            and exc.problem == "exceeded maximum nesting depth")


def manifest_files(paths: Sequence[str]) -> tuple[list[tuple[str, str]], list[Problem]]:
    """(path on disk, path to show) of every manifest file under ``paths``, sorted.

    A file given by name is taken whatever its name; directories are searched
    recursively for ``*.yaml``/``*.yml``, skipping hidden directories.  Only
    regular files are read: a symbolic link that leads outside the directory
    searched (``ln -s ~/.netrc manifests/x.yaml``), a FIFO, a socket or a
    device is refused by name, never opened.
    """
    found: set[tuple[str, str]] = set()
    problems: list[Problem] = []
    for given in paths:
        if os.path.isdir(given):
            root = os.path.realpath(given)
            for top, dirs, names in os.walk(given):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(dirs):
                    full = os.path.join(top, name)
                    if os.path.islink(full) and not _inside(full, root):
                        problems.append(Problem(display_path(full), 1, 1, _LEAVES % given))
                for name in names:
                    if name.endswith((".yaml", ".yml")):
                        full = os.path.join(top, name)
                        problem = refused(full, root, given)
                        if problem is not None:
                            problems.append(problem)
                        else:
                            found.add((full, display_path(full)))
        elif os.path.lexists(given):
            problem = refused(given, None, given)
            if problem is not None:
                problems.append(problem)
            else:
                found.add((given, display_path(given)))
        else:
            problems.append(Problem(given, 1, 1, "no such file or directory"))
    return sorted(found, key=lambda pair: pair[1]), problems


_LEAVES = ("a symbolic link that leads outside %s: refusing to read it (manifests must live "
           "under the paths given; copy the file in instead)")


def _inside(path: str, root: str) -> bool:
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def inside(path: str, root: str) -> bool:
    """Whether ``path``, its symbolic links followed, is ``root`` or below it."""
    return _inside(path, os.path.realpath(root))


# A state URL's scheme (a SQLite state may be a plain path, with none).
SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite state URL (None for another backend)."""
    scheme = SCHEME.match(url)
    name = scheme.group(1).lower() if scheme else ""
    if name not in ("", "sqlite"):
        return None
    return url.removeprefix("sqlite:///").removeprefix("sqlite://")


def exposed_state(state: str, checkout: str | None = None) -> str:
    """Why a SQLite state lies where a commit can replace it ('' if it does not): inside
    ``checkout`` (the agent's), or tracked by git.  One line, the path and the fix."""
    path = sqlite_path(state)
    if path is None:
        return ""
    if checkout is not None and inside(path, checkout):
        return (f"the state {path} is inside the agent's checkout {checkout}, where a commit "
                "can replace it: give --state a file outside the checkout, or a "
                "postgresql:// URL")
    if os.path.isfile(path) and tracked_by_git(path):
        return (f"the state {path} is tracked by git, so a commit can replace it: run `git rm "
                f"--cached {path}` and list it in .gitignore, or give --state a file outside "
                "the repository")
    return ""


def tracked_by_git(path: str) -> bool:
    """Whether git tracks the file at ``path`` (in the work tree it lies in).  git is
    asked only where a ``.git`` is found above the file; no git, no work tree: False."""
    real = os.path.realpath(path)
    folder = here = os.path.dirname(real)
    while not os.path.exists(os.path.join(here, ".git")):
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent
    import subprocess  # a slow import: only when a state file lies in a work tree

    try:
        done = subprocess.run(["git", "ls-files", "--error-unmatch", "--",
                               os.path.basename(real)], cwd=folder, capture_output=True,
                              timeout=15, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def refused(path: str, root: str | None, given: str) -> Problem | None:
    """Why ``path`` must not be read (None: it is a regular file where it should be)."""
    shown = display_path(path)
    if root is not None and os.path.islink(path) and not _inside(path, root):
        return Problem(shown, 1, 1, _LEAVES % given)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return Problem(shown, 1, 1, f"cannot read file: {exc.strerror}")
    if not stat.S_ISREG(mode):
        return Problem(shown, 1, 1, f"is {_what(mode)}, not a regular file: refusing to read it")
    return None


def _what(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


class Unreadable(Exception):
    """A file that must not or cannot be read; the message says why (no path in it)."""


def open_regular(path: str) -> BinaryIO:
    """The regular file at ``path`` opened for reading (a symbolic link to one is
    followed), without blocking and checked after opening: a FIFO, a socket or a device
    put in its place is refused by name (``Unreadable``), never waited on."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror}") from exc
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unreadable(f"it is {_what(mode)}, not a regular file: refusing to read it")
    return os.fdopen(fd, "rb")


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (a symbolic link to one is followed).

    Opened without blocking and checked after opening, so a FIFO, a socket
    or a device put in its place can never hang the reader: each is refused
    by name.  ``Unreadable`` when it is not a regular file, cannot be read,
    or is larger than ``limit`` bytes."""
    with open_regular(path) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise Unreadable(f"cannot read it: {exc.strerror}") from exc
    if len(data) > limit:
        raise Unreadable(f"it is larger than {_size(limit)}")
    return data


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit // 1024} KiB"


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
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8", newline="\n") as fh:
                    fh.write(text)
    return stale
