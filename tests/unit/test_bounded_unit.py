"""Work within a budget of time and memory: a forked child, its result or exception sent
back, and BudgetExceeded naming the step it was in when it went over."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from collections.abc import Callable

import pytest

from govsync.bounded import BudgetExceeded, run_bounded
from govsync.errors import ManifestError, Problem

Step = Callable[[str], None]
MIB = 1024 * 1024


def test_the_result_comes_back() -> None:
    def work(step: Step) -> dict[str, object]:
        step("one")
        return {"pid": os.getpid(), "items": [1, "two", None]}

    result = run_bounded(work, seconds=10, memory=64 * MIB)
    assert result["items"] == [1, "two", None]
    assert result["pid"] != os.getpid()  # it ran in a child


def test_a_result_larger_than_a_pipe_buffer_comes_back_whole() -> None:
    data = os.urandom(3 * MIB)
    assert run_bounded(lambda step: data, seconds=10, memory=64 * MIB) == data


def test_an_exception_of_the_work_is_raised_again() -> None:
    def work(step: Step) -> None:
        step("reading")
        raise KeyError("no such rule")

    with pytest.raises(KeyError, match="no such rule"):
        run_bounded(work, seconds=10, memory=64 * MIB)


def test_a_govsync_error_of_the_work_keeps_its_message() -> None:
    problem = Problem("govsync.yaml", 3, 5, "rule r: broken")

    def work(step: Step) -> None:
        raise ManifestError([problem])

    with pytest.raises(ManifestError) as info:
        run_bounded(work, seconds=10, memory=64 * MIB)
    assert info.value.problems == [problem]
    assert str(info.value) == "govsync.yaml:3:5: rule r: broken"


def test_a_deadline_names_the_last_step_and_ends_the_child() -> None:
    def work(step: Step) -> None:
        step("first")
        step(f"sleeping {os.getpid()}")
        time.sleep(5)

    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as info:
        run_bounded(work, seconds=0.3, memory=64 * MIB)
    assert time.monotonic() - started < 5
    name, pid = info.value.last.split()
    assert (name, info.value.why) == ("sleeping", "more than 0.3 s")
    assert str(info.value) == f"more than 0.3 s (in sleeping {pid})"
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid), 0)


def test_a_memory_blow_up_names_the_last_step() -> None:
    def work(step: Step) -> int:
        step("small")
        kept = bytearray(8 * MIB)
        step("large")
        return len(kept) + len(bytearray(512 * MIB))

    with pytest.raises(BudgetExceeded) as info:
        run_bounded(work, seconds=10, memory=64 * MIB)
    assert (info.value.last, info.value.why) == ("large", "more than 64 MiB of memory")
    assert str(info.value) == "more than 64 MiB of memory (in large)"


def test_memory_within_the_budget_is_fine_and_the_limit_is_the_childs() -> None:
    assert run_bounded(lambda step: len(bytearray(16 * MIB)), seconds=10,
                       memory=64 * MIB) == 16 * MIB
    assert len(bytearray(128 * MIB)) == 128 * MIB  # this process is not limited


def test_a_child_that_dies_before_any_step() -> None:
    def work(step: Step) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with pytest.raises(BudgetExceeded) as info:
        run_bounded(work, seconds=10, memory=64 * MIB)
    assert (info.value.last, info.value.why) == ("", f"ended by signal {int(signal.SIGKILL)}")
    assert str(info.value) == f"ended by signal {int(signal.SIGKILL)} (in its first step)"


def test_an_abort_is_taken_for_running_out_of_memory() -> None:
    # the C++ runtime aborts when an allocation fails under the address-space limit
    def work(step: Step) -> None:
        step("evaluating")
        faulthandler.disable()  # pytest's would print a traceback of the abort
        os.abort()

    with pytest.raises(BudgetExceeded) as info:
        run_bounded(work, seconds=10, memory=32 * MIB)
    assert str(info.value) == "more than 32 MiB of memory (in evaluating)"


def test_a_result_that_does_not_pickle_is_said_as_such() -> None:
    # (Python words it as an AttributeError or a PicklingError, by version.)
    with pytest.raises(RuntimeError, match=r"^the bounded work's result function cannot be "
                                           r"sent back \((AttributeError|PicklingError)\)$"):
        run_bounded(lambda step: (lambda: None), seconds=10, memory=64 * MIB)
