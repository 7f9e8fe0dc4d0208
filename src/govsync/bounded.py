"""Work that must stay within a budget of time and memory, whatever its input.

A project's rules are code that a pull request may change, evaluated by a C++
runtime that has no budget of its own: ``["a"].map(x, x + x)`` chained a few
dozen times wants gigabytes.  So the evaluation runs in a child process
(``fork``: it shares everything already loaded, and costs a few
milliseconds) with an address-space limit and a deadline.  The child sends
back, through a pipe, the name of each step it starts and then its pickled
result; a child that dies or runs out of time is reported with the last step
it started, so the caller can name the rule that went over.

Where ``fork`` does not exist the work runs in this process, unbounded.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_STEP, _DONE, _FAILED = b"S", b"D", b"F"


class BudgetExceeded(Exception):
    """The work went over its budget; ``last``: the step it was in, ``why``: which budget."""

    def __init__(self, last: str, why: str) -> None:
        super().__init__(f"{why} (in {last or 'its first step'})")
        self.last = last
        self.why = why


def run_bounded(work: Callable[[Callable[[str], None]], T], *, seconds: float,
                memory: int) -> T:
    """``work(step)`` in a child process limited to ``seconds`` of wall time and
    ``memory`` bytes more address space than this process has now; its result
    (which must pickle).  BudgetExceeded when it goes over.  An exception that
    ``work`` raises is raised here again (as the child pickled it)."""
    if not hasattr(os, "fork"):
        return work(lambda name: None)
    base = _address_space()
    limit = base + memory if base else 0  # no limit where the size cannot be read
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: measured through its parent
        os.close(read_fd)
        _child(work, write_fd, limit)
    os.close(write_fd)
    result: T = _parent(pid, read_fd, seconds, memory)
    return result


def _child(work: Callable[[Callable[[str], None]], Any], fd: int,
           limit: int) -> None:  # pragma: no cover - runs in the child
    code = 0
    try:
        with contextlib.suppress(ImportError, ValueError, OSError):
            import resource

            if limit > 0:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        def step(name: str) -> None:
            _send(fd, _STEP, name.encode())

        try:
            tag, value = _DONE, work(step)
        except MemoryError:
            code = 3
            return
        except Exception as exc:  # the parent raises it again
            tag, value = _FAILED, exc
        try:
            payload = pickle.dumps(value)
        except Exception as exc:  # said as what it is, not as a lack of memory
            tag, payload = _FAILED, pickle.dumps(RuntimeError(
                f"the bounded work's {'result' if tag == _DONE else 'error'} "
                f"{type(value).__name__} cannot be sent back ({type(exc).__name__})"))
        _send(fd, tag, payload)
    except BaseException:
        code = 4
    finally:
        os._exit(code)


def _send(fd: int, tag: bytes, payload: bytes) -> None:  # pragma: no cover - in the child
    data = tag + len(payload).to_bytes(8, "big") + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _parent(pid: int, fd: int, seconds: float, memory: int) -> Any:
    deadline = time.monotonic() + seconds
    buffer = bytearray()
    finished = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                finished = True
                break
            buffer += chunk
    finally:
        os.close(fd)
        if not finished:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    last, tag, payload = _records(bytes(buffer))
    if tag == _DONE:
        return pickle.loads(payload)
    if tag == _FAILED:
        raise pickle.loads(payload)
    if not finished:
        raise BudgetExceeded(last, f"more than {seconds:g} s")
    return _died(last, status, memory)


def _died(last: str, status: int, memory: int) -> Any:
    why = f"more than {memory // (1024 * 1024)} MiB of memory"
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) not in (signal.SIGABRT, signal.SIGSEGV):
        why = f"ended by signal {os.WTERMSIG(status)}"
    raise BudgetExceeded(last, why)


def _records(data: bytes) -> tuple[str, bytes, bytes]:
    """(the last step started, the final record's tag, its payload)."""
    last, tag, payload = "", b"", b""
    at = 0
    while at + 9 <= len(data):
        size = int.from_bytes(data[at + 1:at + 9], "big")
        if at + 9 + size > len(data):
            break
        kind, body = data[at:at + 1], data[at + 9:at + 9 + size]
        at += 9 + size
        if kind == _STEP:
            last = body.decode(errors="replace")
        else:
            tag, payload = kind, body
    return last, tag, payload


def _address_space() -> int:
    """This process's virtual size in bytes (0 where it cannot be read)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
