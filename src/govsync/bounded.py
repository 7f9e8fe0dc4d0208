"""Work that must stay within a budget of time and memory, whatever its input.

A project's rules, and policy and hook code (policycode/), are code that a pull
request may change, evaluated by C++ runtimes that have no budget of their own:
``["a"].map(x, x + x)`` chained a few dozen times wants gigabytes of CEL, a Rego
term nested 100,000 deep overflows rego-cpp's stack.  So the evaluation runs in
another process with a memory budget and a deadline.

That process is a fresh interpreter (``python -m govsync.bounded``), started
once and reused: never a fork of this one, which may be running threads (the
agent's web server and notifier, a dashboard's requests) whose locks a forked
child would inherit held.  It is started by ``subprocess`` (fork and exec in C,
safe with threads) ahead of need (``prestart``), so its start-up overlaps the
caller's own work.  One piece of work at a time: the caller sends a function
(named by module and name, so it must be a module's top-level function) and its
arguments, pickled; the worker sets its limits, sends back the name of each step
it starts and then the pickled result.  A worker that dies or runs out of time
is reported with the last step it started, so the caller can name the rule that
went over, and a new worker is started for the next piece of work.

The memory budget is held two ways: the worker's address-space limit (what the
work maps beyond the worker's size as it starts it), and the caller's watch of
the worker's resident size, every 20 ms.  The second is what holds engines that
reserve their address space in advance and fill it later (V8 reserves a terabyte
an isolate, rego-cpp's allocator 256 GiB): they are started outside the limit
(``reserved``), and then only the watch sees what they use.

Where there is no interpreter to start (``sys.executable`` empty: an embedded Python)
the work runs in this process, unbounded; where starting one fails, nothing is
evaluated (BudgetExceeded).  The worker is given no credential of the caller's
environment and imports nothing from the directory the caller runs in.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # subprocess is imported when a worker starts: validate never needs it
    from subprocess import Popen

# pickle, signal and subprocess are imported where the worker is used (docs/architecture.md's
# heavy list): importing this module costs validate nothing of them.

T = TypeVar("T")

_STEP, _TIMED, _DONE, _FAILED = b"S", b"T", b"D", b"F"
# How often the caller looks at the worker's resident memory while it works.
_WATCH_SECONDS = 0.02
_OUT_OF_MEMORY = 3  # the worker's exit code when the work ran out of its memory


class BudgetExceeded(Exception):
    """The work went over its budget; ``last``: the step it was in, ``why``: which budget."""

    def __init__(self, last: str, why: str) -> None:
        super().__init__(f"{why} (in {last or 'its first step'})")
        self.last = last
        self.why = why


def run_bounded(work: Callable[..., T], *args: Any, seconds: float, memory: int,
                worker: str = "") -> T:
    """``work(step, *args)`` in the worker process, limited to ``seconds`` of wall time
    and ``memory`` bytes more address space than the worker has when it starts the
    work; its result (which must pickle).  ``step(name, seconds=None)`` names the step
    the work starts, and may give it a deadline of its own (a hook's timeout in a batch
    of cases): the worker is stopped when the step outlasts it, as when the whole work
    outlasts ``seconds``.  ``work`` is a module's top-level function
    and ``args`` pickle.  BudgetExceeded when it goes over.  An exception that
    ``work`` raises is raised here again (as the worker pickled it).  ``worker``
    names the process (one each name): native engines that cannot share a process
    (rego-cpp's allocator breaks the CEL runtime loaded after it) get their own."""
    return _worker(worker).run(work, args, seconds=seconds, memory=memory)


def prestart(preload: Sequence[str] = (), worker: str = "") -> None:
    """Start the worker now, if it is not running, importing the modules ``preload``
    names while the caller goes on (the next ``run_bounded`` finds it ready)."""
    _worker(worker).start(preload)


class _Worker:
    """The one worker process of this process, used by one caller at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Popen[bytes] | None = None
        self._size = 0  # the worker's resident size after its first piece of work
        self._preload: tuple[str, ...] = ()

    def start(self, preload: Sequence[str] = ()) -> None:
        if not self._lock.acquire(blocking=False):
            return  # in use: it is running, and prestart never waits for it
        try:
            self._preload = tuple(dict.fromkeys((*self._preload, *preload)))
            with contextlib.suppress(BudgetExceeded):  # said by the run that needs it
                self._start()
        finally:
            self._lock.release()

    def _start(self) -> Popen[bytes] | None:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._process = None
        if not sys.executable:
            return None
        import subprocess

        # Nothing of the caller's secrets, and no module from the directory it runs in
        # (a checkout's own govsync/ would run with them): -P, absolute paths only.
        environment = {k: v for k, v in os.environ.items() if k in _ENVIRONMENT}
        environment["PYTHONPATH"] = os.pathsep.join(_import_path())
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-P", "-m", "govsync.bounded", *self._preload],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment,
                close_fds=True, cwd=os.path.dirname(os.path.dirname(__file__)))
        except OSError as exc:
            raise BudgetExceeded("", f"its evaluator could not be started ({exc.strerror}): "
                                 "nothing was evaluated") from None
        self._size = 0
        return self._process

    def run(self, work: Callable[..., T], args: tuple[Any, ...], *, seconds: float,
            memory: int) -> T:
        with self._lock:
            process = self._start()
            if process is None:
                return work(lambda name, seconds=None: None, *args)
            import pickle

            request = pickle.dumps((_import_path(), pickle.dumps((work, args, memory))))
            answered = False
            try:
                result: T = self._exchange(process, request, seconds, memory)
                answered = True
            except Exception as exc:  # the work's own exception is an answer too
                answered = not isinstance(exc, BudgetExceeded | OSError)
                raise
            finally:
                if answered:
                    self._check(process, memory)
                else:  # interrupted (Ctrl-C) with the work under way: not reusable
                    self._stop(process)
            return result

    def _exchange(self, process: Popen[bytes], request: bytes, seconds: float,
                  memory: int) -> Any:
        import pickle

        assert process.stdin is not None and process.stdout is not None
        send = memoryview(len(request).to_bytes(8, "big") + request)
        into, out = process.stdin.fileno(), process.stdout.fileno()
        os.set_blocking(into, False)
        deadline = time.monotonic() + seconds
        # Resident memory is watched from here too: an engine that reserves its address
        # space in advance (V8 reserves a terabyte as it starts) and fills it later is
        # not seen by the worker's address-space limit.
        # Its size is taken once it says it has the work (unpickled: the modules that
        # brings are imported), so what the import costs is not counted as the work's.
        resident: int | None = None
        records = _Records()
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                self._stop(process)
                raise BudgetExceeded(records.last, f"more than {seconds:g} s")
            if records.deadline is not None:
                if now >= records.deadline:
                    self._stop(process)
                    raise BudgetExceeded(records.last, f"more than {records.seconds:g} s")
                left = min(left, records.deadline - now)
            if resident is None and records.size:
                resident = _resident(process.pid) + memory
            if resident is not None and _resident(process.pid) > resident:
                _drain(out, records)  # the step it said it began, before it was stopped
                self._stop(process)
                raise BudgetExceeded(records.last,
                                     f"more than {memory // (1024 * 1024)} MiB of memory")
            readable, writable, _ = select.select([out], [into] if send else [], [],
                                                  min(left, _WATCH_SECONDS))
            if writable:
                try:
                    send = send[os.write(into, send):]
                except BrokenPipeError:
                    send = memoryview(b"")
            if not readable:
                continue
            chunk = os.read(out, 1 << 20)
            if not chunk:  # the worker ended: it went over, or something killed it
                status = self._stop(process)
                return _died(records.last, status, memory)
            if records.size + len(chunk) > memory:  # an answer larger than the work's budget
                self._stop(process)
                raise BudgetExceeded(records.last, f"an answer of more than "
                                                   f"{memory // (1024 * 1024)} MiB")
            records.feed(chunk)
            if records.tag == _DONE:
                return pickle.loads(records.payload)
            if records.tag == _FAILED:
                raise pickle.loads(records.payload)

    def _check(self, process: Popen[bytes], memory: int) -> None:
        """Replace a worker that ended, or whose resident size grew well past its size
        after its first piece of work (kept fragments of a large result).  Resident, not
        address space: an engine's reservations (V8's, an isolate at a time) are no use
        of memory, and would have a worker replaced after every few hooks."""
        if process.poll() is not None:
            self._stop(process)
            return
        size = _resident(process.pid)
        if not self._size:
            self._size = size
        elif size > self._size + memory // 2:  # kept fragments of a large result
            self._stop(process)

    def _stop(self, process: Popen[bytes]) -> int:
        """End the worker (at once) and reap it; its wait status."""
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        code = process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self._process is process:
            self._process = None
        # Popen's return code: -N for a signal; as a wait status for _died.
        return (-code) & 0x7F if code < 0 else (code & 0xFF) << 8

    def close(self) -> None:
        """At exit: the worker reads the end of its input and leaves."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError):
            if process.stdin is not None:
                process.stdin.close()
        try:
            process.wait(timeout=2)
        except Exception:
            self._stop(process)
        with contextlib.suppress(OSError):
            if process.stdout is not None:
                process.stdout.close()
        self._process = None


# What the worker keeps of the caller's environment: never a credential.
_ENVIRONMENT = frozenset({"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT"})


def _import_path() -> list[str]:
    """Where the worker imports from: the caller's path without the directory it runs in
    (nor a relative entry), which a checkout under review controls."""
    here = os.getcwd()
    return [p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != here]


_WORKERS: dict[str, _Worker] = {}


# -- work shared among several workers, one a core --------------------------------------

def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def _how_many(pieces: int, least: int) -> int:
    """How many workers share ``pieces`` of work: at least ``least`` each, at most one a
    core, one for too few."""
    return max(1, min(cores(), pieces // least))


def workers(name: str, pieces: int, least: int) -> list[str]:
    """The workers to share ``pieces`` of work among, at least ``least`` each and at
    most one a core: ``name``, ``name-1``, ...  (one worker for none)."""
    return [f"{name}-{i}" if i else name for i in range(_how_many(pieces, least))]


def shares(items: Sequence[T], least: int) -> list[list[T]]:
    """``items`` in consecutive shares of about equal size, as many as ``workers``
    names for them (none for no items): the i-th for the i-th worker."""
    if not items:
        return []
    size = -(-len(items) // _how_many(len(items), least))
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def side_by_side(count: int, work: Callable[[int], None], name: str) -> None:
    """``work(0)`` ... ``work(count - 1)`` at once: each in a thread (named ``name-i``)
    but the first, which the caller runs; returns when all have (at once for none)."""
    if count < 1:
        return
    threads = [threading.Thread(target=work, args=(i,), name=f"{name}-{i}")
               for i in range(1, count)]
    for thread in threads:
        thread.start()
    work(0)
    for thread in threads:
        thread.join()


def _worker(name: str) -> _Worker:
    found = _WORKERS.get(name)
    return found if found is not None else _WORKERS.setdefault(name, _Worker())


@atexit.register
def _close_all() -> None:
    for worker in list(_WORKERS.values()):
        worker.close()


def _drain(out: int, records: _Records) -> None:
    """What the worker has already written, read without waiting (at most its budget)."""
    while select.select([out], [], [], 0)[0] and records.size < (64 << 20):
        chunk = os.read(out, 1 << 20)
        if not chunk:
            return
        records.feed(chunk)


def _died(last: str, status: int, memory: int) -> Any:
    import signal

    why = f"more than {memory // (1024 * 1024)} MiB of memory"
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) not in (signal.SIGABRT, signal.SIGSEGV):
        why = f"ended by signal {os.WTERMSIG(status)}"
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) != _OUT_OF_MEMORY:
        why = f"its evaluator ended with exit code {os.WEXITSTATUS(status)}"
    raise BudgetExceeded(last, why)


class _Records:
    """What the worker has sent of a piece of work, read as it comes: the last step begun
    (and its own deadline, if it has one), then the final record's tag and payload."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._at = 0
        self.size = 0
        self.last = ""
        self.seconds = 0.0
        self.deadline: float | None = None
        self.tag, self.payload = b"", b""

    def feed(self, chunk: bytes) -> None:
        self._buffer += chunk
        self.size += len(chunk)
        data = self._buffer
        while self._at + 9 <= len(data):
            at = self._at
            size = int.from_bytes(data[at + 1:at + 9], "big")
            if at + 9 + size > len(data):
                break
            kind, body = bytes(data[at:at + 1]), bytes(data[at + 9:at + 9 + size])
            self._at = at + 9 + size
            if kind == _STEP:
                self.last, self.deadline = body.decode(errors="replace"), None
            elif kind == _TIMED:
                seconds, _, name = body.decode(errors="replace").partition("\n")
                self.last, self.seconds = name, float(seconds)
                self.deadline = time.monotonic() + self.seconds
            else:
                self.tag, self.payload = kind, body
        if self._at > 1 << 16:  # what is read is dropped
            del self._buffer[:self._at]
            self._at = 0


def _resident(pid: int) -> int:
    """A process's resident size in bytes (0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            pages = int(fh.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _address_space(pid: int | str = "self") -> int:
    """A process's virtual size in bytes (0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            pages = int(fh.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# -- the worker's side ------------------------------------------------------------------


def _serve(preload: Sequence[str]) -> int:  # pragma: no cover - runs in the worker
    """Read requests from standard input until it ends; each answered on the
    original standard output (print and C++ output go to standard error)."""
    import pickle

    answer = os.dup(1)
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    for name in preload:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    while True:
        head = requests.read(8)
        if len(head) < 8:
            return 0
        body = requests.read(int.from_bytes(head, "big"))
        path, inner = pickle.loads(body)
        sys.path[:] = path
        code = _one(inner, answer)
        if code:
            return code


def _one(inner: bytes, fd: int) -> int:  # pragma: no cover - runs in the worker
    """One request: 0, or the code to leave with (3: out of memory)."""
    import pickle

    def step(name: str, seconds: float | None = None) -> None:
        if seconds is None:
            _send(fd, _STEP, name.encode())
        else:
            _send(fd, _TIMED, f"{seconds!r}\n{name}".encode())

    try:
        work, args, memory = pickle.loads(inner)
    except Exception as exc:
        _send(fd, _FAILED, pickle.dumps(RuntimeError(
            f"the bounded work cannot be received ({type(exc).__name__}: {exc})")))
        return 0
    size = _address_space()
    _limit(size + memory if size else 0)  # no limit where the size cannot be read
    _send(fd, _STEP, b"")  # the work received: the caller takes its size from here
    try:  # the answer is made under the limit too
        try:
            tag, value = _DONE, work(step, *args)
        except MemoryError:
            return _OUT_OF_MEMORY
        except Exception as exc:  # the parent raises it again
            tag, value = _FAILED, exc
        try:
            payload = pickle.dumps(value)
        except MemoryError:
            return _OUT_OF_MEMORY
        except Exception as exc:  # said as what it is, not as a lack of memory
            tag, payload = _FAILED, pickle.dumps(RuntimeError(
                f"the bounded work's {'result' if tag == _DONE else 'error'} "
                f"{type(value).__name__} cannot be sent back ({type(exc).__name__})"))
    finally:
        _limit(0)
    _send(fd, tag, payload)
    return 0


def reserved(make: Callable[[], T]) -> T:  # pragma: no cover - runs in the worker
    """In the worker, during a piece of work: ``make()`` without the address-space limit,
    which is then laid again, raised by what ``make`` reserved.  For an engine that
    reserves address space it does not use as it starts (V8 reserves its sandbox, a
    terabyte, for every isolate, and crashes when it cannot): what it then uses is
    bounded by its own limits and by the caller's watch of the worker's resident size."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return make()
    before = _address_space()
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    try:
        return make()
    finally:
        grown = max(0, _address_space() - before)
        wanted = soft + grown
        resource.setrlimit(resource.RLIMIT_AS, (
            wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard))


def _limit(size: int) -> None:  # pragma: no cover - runs in the worker
    """The worker's soft address-space limit: ``size`` bytes, or none (0)."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = hard if size <= 0 or (0 <= hard < size) else size
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _send(fd: int, tag: bytes, payload: bytes) -> None:  # pragma: no cover - in the worker
    data = tag + len(payload).to_bytes(8, "big") + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


if __name__ == "__main__":  # pragma: no cover - the worker
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the caller's Ctrl-C is the caller's
    try:
        sys.exit(_serve(sys.argv[1:]))
    except BrokenPipeError:  # the caller is gone (it ended, or stopped waiting): so are we
        sys.exit(0)
