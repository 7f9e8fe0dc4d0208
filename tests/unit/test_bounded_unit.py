"""Work within a budget of time and memory: a worker process (a fresh interpreter, never a
fork), its result or exception sent back, and BudgetExceeded naming the step it was in
when it went over.  The work is named by reference, so it is defined at the top here."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import pytest

from govsync import bounded
from govsync.bounded import BudgetExceeded, run_bounded
from govsync.errors import ManifestError, Problem

Step = Callable[[str], None]
MIB = 1024 * 1024
# The process that imported this module: this one, or a fork of it (which would
# inherit the value); a fresh interpreter imports the module again.
IMPORTED_BY = os.getpid()


def where(step: Step) -> dict[str, object]:
    step("one")
    return {"pid": os.getpid(), "imported by": IMPORTED_BY, "parent": os.getppid(),
            "items": [1, "two", None]}


def echo(step: Step, data: object) -> object:
    return data


def fails(step: Step) -> None:
    step("reading")
    raise KeyError("no such rule")


def raises(step: Step, error: Exception) -> None:
    raise error


def sleeps(step: Step) -> None:
    step("first")
    step(f"sleeping {os.getpid()}")
    time.sleep(5)  # the point: a rule that outlasts its time limit


def blows_up(step: Step) -> int:
    step("small")
    kept = bytearray(8 * MIB)
    step("large")
    return len(kept) + len(bytearray(512 * MIB))


def allocates(step: Step, size: int) -> int:
    return len(bytearray(size))


def killed(step: Step) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def aborts(step: Step) -> None:
    # the C++ runtime aborts when an allocation fails under the address-space limit
    step("evaluating")
    faulthandler.disable()  # pytest's would print a traceback of the abort
    os.abort()


def unpicklable(step: Step) -> object:
    return lambda: None


def test_the_result_comes_back_from_a_fresh_process() -> None:
    result = run_bounded(where, seconds=10, memory=64 * MIB)
    assert result["items"] == [1, "two", None]
    assert result["pid"] != os.getpid()  # it ran in another process
    assert result["parent"] == os.getpid()
    assert result["imported by"] == result["pid"]  # which imported it itself: no fork


def test_the_worker_is_reused() -> None:
    first = run_bounded(where, seconds=10, memory=64 * MIB)
    assert run_bounded(where, seconds=10, memory=64 * MIB)["pid"] == first["pid"]


def test_the_work_runs_while_threads_hold_locks() -> None:
    # A fork would copy this lock held (and the threads' state): a child that needed
    # it would wait forever.  The worker does not share this process's memory.
    held, stop = threading.Lock(), threading.Event()

    def holds() -> None:
        with held:
            stop.wait(30)

    def spins() -> None:
        while not stop.is_set():
            sum(range(1000))

    threads = [threading.Thread(target=holds)] + [threading.Thread(target=spins)
                                                  for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert held.locked()
        assert run_bounded(echo, {"a": 1}, seconds=10, memory=64 * MIB) == {"a": 1}
        assert run_bounded(where, seconds=10, memory=64 * MIB)["imported by"] != os.getpid()
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_a_result_larger_than_a_pipe_buffer_comes_back_whole() -> None:
    data = os.urandom(3 * MIB)
    assert run_bounded(echo, data, seconds=10, memory=64 * MIB) == data


def test_an_exception_of_the_work_is_raised_again() -> None:
    with pytest.raises(KeyError, match="no such rule"):
        run_bounded(fails, seconds=10, memory=64 * MIB)


def test_a_govsync_error_of_the_work_keeps_its_message() -> None:
    problem = Problem("govsync.yaml", 3, 5, "rule r: broken")
    with pytest.raises(ManifestError) as info:
        run_bounded(raises, ManifestError([problem]), seconds=10, memory=64 * MIB)
    assert info.value.problems == [problem]
    assert str(info.value) == "govsync.yaml:3:5: rule r: broken"


def test_a_deadline_names_the_last_step_and_ends_the_child() -> None:
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as info:
        # (2 s: a worker started afresh under a loaded machine reaches its step in time)
        run_bounded(sleeps, seconds=2, memory=64 * MIB)
    assert time.monotonic() - started < 5
    name, pid = info.value.last.split()
    assert (name, info.value.why) == ("sleeping", "more than 2 s")
    assert str(info.value) == f"more than 2 s (in sleeping {pid})"
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid), 0)
    assert run_bounded(echo, "next", seconds=10, memory=64 * MIB) == "next"  # a new worker


def test_a_memory_blow_up_names_the_last_step() -> None:
    with pytest.raises(BudgetExceeded) as info:
        run_bounded(blows_up, seconds=10, memory=64 * MIB)
    assert (info.value.last, info.value.why) == ("large", "more than 64 MiB of memory")
    assert str(info.value) == "more than 64 MiB of memory (in large)"


def test_memory_within_the_budget_is_fine_and_the_limit_is_the_childs() -> None:
    assert run_bounded(allocates, 16 * MIB, seconds=10, memory=64 * MIB) == 16 * MIB
    assert len(bytearray(128 * MIB)) == 128 * MIB  # this process is not limited


def test_a_child_that_dies_before_any_step() -> None:
    with pytest.raises(BudgetExceeded) as info:
        run_bounded(killed, seconds=10, memory=64 * MIB)
    assert (info.value.last, info.value.why) == ("", f"ended by signal {int(signal.SIGKILL)}")
    assert str(info.value) == f"ended by signal {int(signal.SIGKILL)} (in its first step)"


def test_an_abort_is_taken_for_running_out_of_memory() -> None:
    with pytest.raises(BudgetExceeded) as info:
        run_bounded(aborts, seconds=10, memory=32 * MIB)
    assert str(info.value) == "more than 32 MiB of memory (in evaluating)"


def test_a_result_that_does_not_pickle_is_said_as_such() -> None:
    # (Python words it as an AttributeError or a PicklingError, by version.)
    with pytest.raises(RuntimeError, match=r"^the bounded work's result function cannot be "
                                           r"sent back \((AttributeError|PicklingError)\)$"):
        run_bounded(unpicklable, seconds=10, memory=64 * MIB)


CALLER_GONE = """
import os, sys, threading, time
sys.path.insert(0, {here!r})
from govsync.bounded import run_bounded
import test_bounded_unit as t
threading.Thread(target=run_bounded, args=(t.slow_answer,),
                 kwargs={{"seconds": 30, "memory": 256 << 20}}, daemon=True).start()
time.sleep(0.5)  # the worker has the work: its caller goes away before the answer
os._exit(0)
"""


def slow_answer(step: Step) -> bytes:
    time.sleep(1.5)
    return b"x" * (1 << 20)  # more than a pipe holds: the write meets the closed end


def test_a_worker_whose_caller_is_gone_ends_quietly() -> None:
    """The embedded server's report workers outlive a command that ends: a worker's
    answer to a caller gone is dropped without a traceback on the terminal."""
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", CALLER_GONE.format(here=here)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_what_importing_the_work_costs_is_not_counted_as_the_works_memory() -> None:
    # (Its module takes 64 MiB as it is imported in the worker; the work takes none.)
    from ballast_work import small

    assert run_bounded(small, seconds=30, memory=32 * MIB) == 64


@pytest.mark.parametrize("cores", [1, 2, 8])
def test_work_is_shared_in_order_one_share_a_named_worker(monkeypatch: pytest.MonkeyPatch,
                                                          cores: int) -> None:
    monkeypatch.setattr(bounded, "cores", lambda: cores)
    for count, least in ((0, 10), (5, 10), (25, 10), (1001, 250)):
        items = list(range(count))
        shares = bounded.shares(items, least)
        names = bounded.workers("code", count, least)
        assert [i for share in shares for i in share] == items  # all, once, in order
        assert len(shares) == (0 if not items else len(names)) <= cores
        assert names[0] == "code" and len(set(names)) == len(names)
        done: list[int] = []
        bounded.side_by_side(len(shares), done.append, "test")  # (append holds the GIL)
        assert sorted(done) == list(range(len(shares)))
