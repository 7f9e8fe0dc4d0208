"""A plan's refresh read in a forked child while the manifests are read: for the
command line only (forking is the entry point's choice, as in ``cli.reading``).

A refresh needs the state only, and is mostly waiting on the server: 1,000
recorded objects are a List page per kind and, sent beside them, a Get for each
object of the kinds without a List, each 50 ms away, plus the client's CPU a
call.  Begun before the manifests are read, in a second process, it costs a
plan the part of it that outlasts the reading (bench/refresh).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, NoReturn

from govsync import commands, runtime
from govsync.errors import GovsyncError
from govsync.settings import Settings
from govsync.state import Snapshot

if TYPE_CHECKING:
    import logging

    from govsync.refresh import Observed

class ForkedRefresh:
    """A refresh read by a forked child while this process reads the manifests (a
    ``commands.Early``).  The child reads the server and compares (``commands.observe``)
    and sends what it observed back pickled; anything unexpected (the child failed,
    its answer did not come whole) is None, and the plan then reads the server
    itself, so its errors are said as without this."""

    def __init__(self, snapshot: Snapshot, pid: int, pipe: int) -> None:
        self.snapshot = snapshot
        self._pid: int | None = pid
        self._pipe = pipe

    def observed(self) -> Observed | None:
        if self._pid is None:
            return None
        import pickle  # here: only a run with a refresh pays for it

        try:
            with os.fdopen(self._pipe, "rb") as pipe:
                found: Observed | None = pickle.load(pipe)
                if pipe.read(1):
                    raise ValueError("the reading process sent more than it read")
        except Exception as exc:
            found, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = ""
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        if status != 0 or found is None:
            _log().info("the refresh's second process did not finish (%s): reading the "
                     "server here", why or f"exit status {status}")
            return None
        return found

    def close(self) -> None:
        """The child stopped and reaped where its answer was not taken (an error on
        the way: it must not read on behind a command that has ended)."""
        if self._pid is None:
            return
        with contextlib.suppress(OSError):
            os.close(self._pipe)
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self._pid, 0)
        self._pid = None


@contextlib.contextmanager
def early_refresh(settings: Settings, workspace: commands.Workspace
                  ) -> Iterator[ForkedRefresh | None]:
    """A refresh of the workspace's recorded objects begun now, in a forked child, to
    overlap the reading of the manifests (it needs the state only): a plan's refresh
    is mostly waiting on the server, and the second core reads meanwhile.  None where
    the plan would not refresh (``commands.early_snapshot``), the endpoint is the
    embedded server (in this process), or this platform cannot fork."""
    found = _start(settings, workspace)
    try:
        yield found
    finally:
        if found is not None:
            found.close()


def _start(settings: Settings, workspace: commands.Workspace) -> ForkedRefresh | None:
    # Never in a process with other threads (a test runner, an embedding program): a
    # lock one of them holds stays held in the child for ever.
    if (not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or not settings.endpoint
            or settings.endpoint.strip() == "local" or threading.active_count() > 1):
        return None
    try:
        store = workspace.existing()
    except GovsyncError:  # the plan opens it again and says why it cannot, in its place
        return None
    snapshot = commands.early_snapshot(settings, store)
    if snapshot is None:
        return None
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read the server, send what it observed, leave at once
        _child(settings, snapshot, read_fd, write_fd)
    os.close(write_fd)
    _log().debug("reading the server in a second process (pid %d) while the manifests load",
              pid)
    return ForkedRefresh(snapshot, pid, read_fd)


def _child(settings: Settings, snapshot: Snapshot, read_fd: int, write_fd: int) -> NoReturn:
    code = 0
    try:
        import pickle

        os.close(read_fd)
        observed = runtime.run(commands.observe(settings, snapshot))
        data = pickle.dumps(observed, protocol=5)
        with os.fdopen(write_fd, "wb") as out:
            out.write(data)
    except BaseException:
        code = 1
    os._exit(code)


def _log() -> logging.Logger:
    """This module's logger (logging: 3 ms, loaded where something is logged)."""
    import logging

    return logging.getLogger(__name__)
