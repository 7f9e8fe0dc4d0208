"""logs.Throttle: a long-running command writes each kind of line at most BURST times
a WINDOW (issue 30: a flood of failing connections wrote 148,000 lines in 25 s)."""

from __future__ import annotations

import logging

from govsync.logs import Throttle


def record(name: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_each_kind_of_line_is_written_at_most_burst_times_a_window() -> None:
    throttle = Throttle(burst=3, window=3600.0)
    accept = [throttle.filter(record("asyncio", "socket.accept() out of system resource"))
              for _ in range(1000)]
    assert accept.count(True) == 3 and accept[:3] == [True] * 3
    # Another kind (logger, or message before its arguments) has a burst of its own;
    # the same message with other arguments is the same kind.
    assert throttle.filter(record("govsync.agent", "sink %s failed", "a"))
    assert [throttle.filter(record("govsync.agent", "sink %s failed", n)) for n in "bcde"] == [
        True, True, False, False]


def test_the_first_line_after_a_quiet_window_says_how_many_were_left_out() -> None:
    throttle = Throttle(burst=1, window=0.0)  # every line opens a new window
    first = record("x", "same")
    assert throttle.filter(first) and first.getMessage() == "same"
    held = Throttle(burst=1, window=3600.0)
    assert held.filter(record("x", "same"))
    assert not held.filter(record("x", "same")) and not held.filter(record("x", "same"))
    held.window = 0.0  # the window has passed
    later = record("x", "same")
    assert held.filter(later) and later.getMessage() == "same [2 more like this left out]"
