"""The command line: parse, call one library function, render (docs/architecture.md).

``cli`` is the click group, ``main`` the console script; root.py holds both and the
options every command shares, and each command's module is loaded when it runs.
"""

from govsync.cli.root import cli, main

__all__ = ["cli", "main"]
