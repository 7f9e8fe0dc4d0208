"""Ctrl-C during ``apply``, as Terraform does it: the first SIGINT stops sending, lets
the calls in flight end and be recorded, and apply exits 1 saying what was and was
not applied; a second one aborts at once (the calls still in flight become
``uncertain``, as before).

Signal handling is the command line's (a process-wide act): the library is told
through a ``threading.Event``, as the agent tells it on SIGTERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click


@contextmanager
def graceful(stopping: threading.Event) -> Iterator[None]:
    """While applying: the first SIGINT sets ``stopping``; the second raises
    KeyboardInterrupt.  Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, frame: FrameType | None) -> None:
        if stopping.is_set():
            raise KeyboardInterrupt
        stopping.set()
        click.echo("\nInterrupted: nothing more is sent; waiting for the calls in flight to "
                   "answer and be recorded (Ctrl-C again aborts at once, leaving them "
                   "uncertain).", err=True)

    before = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
