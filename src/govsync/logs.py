"""Logs for whoever debugs a run: ``GOVSYNC_LOG=debug|info|warning``, to stderr.

Library modules log through ``logging.getLogger(__name__)`` under the
``govsync`` logger and configure nothing; the command line's entry point
calls :func:`configure` once per invocation (library functions have no
process-wide side effects).  What is logged:

- info: every API call as it ends (operation, HTTP status or error, seconds,
  attempt), and each retry (why, and after how long);
- debug: each request as it is sent (operation, path, size), without its body;
- warning: a call that failed for good.

No log call is given a request or an answer body, so secret values never
reach a record; the handler also replaces the API key (and any other value
it is told to hide) with ``(sensitive)``, should one slip into a message.

The long-running commands (``agent``, ``ui``) also call :func:`throttle`: every
logger's warnings (uvicorn's, asyncio's) go through one handler, and each kind
of line is written at most ``BURST`` times a ``WINDOW`` (a flood of failing
connections once wrote 148,000 lines in 25 s).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Iterable

from govsync.envvars import LOG as LOG_ENV
from govsync.errors import ConfigError
from govsync.values import SENSITIVE

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
ROOT = "govsync"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Of one kind of line (logger, level, message before its arguments): at most BURST
# in WINDOW seconds; how many more were left out is said on the next one written.
BURST = 10
WINDOW = 60.0
KINDS_KEPT = 1000


class StderrHandler(logging.Handler):
    """Writes to the ``sys.stderr`` of the moment (a test runner may swap it),
    with every hidden value replaced by ``(sensitive)``."""

    def __init__(self, level: int, hidden: Iterable[str] = ()) -> None:
        super().__init__(level)
        # Longest first, so a value that contains another is hidden whole.
        self.hidden = sorted({h for h in hidden if h}, key=len, reverse=True)
        self.setFormatter(logging.Formatter(FORMAT))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            for value in self.hidden:
                text = text.replace(value, SENSITIVE)
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except Exception:  # a log line must never end the command
            self.handleError(record)


def level(value: str | None) -> int | None:
    """The level ``GOVSYNC_LOG`` asks for (None: no logs); ConfigError if unknown."""
    name = (value or "").strip().lower()
    if not name:
        return None
    try:
        return LEVELS[name]
    except KeyError:
        raise ConfigError(f"{LOG_ENV}={value!r}: use one of {', '.join(LEVELS)} "
                          "(or leave it unset for no logs)") from None


def configure(value: str | None, hidden: Iterable[str] = ()) -> None:
    """Send the ``govsync`` logs at ``value``'s level to stderr (None or '': none).

    Replaces what an earlier call set up, so it may run once per command."""
    logger = logging.getLogger(ROOT)
    for handler in [h for h in logger.handlers if isinstance(h, StderrHandler)]:
        logger.removeHandler(handler)
    wanted = level(value)
    if wanted is None:
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
        return
    logger.addHandler(StderrHandler(wanted, hidden))
    logger.setLevel(wanted)
    logger.propagate = False  # ours only: not twice through a handler on the root


class Throttle(logging.Filter):
    """At most ``burst`` records of one kind in ``window`` seconds."""

    def __init__(self, burst: int = BURST, window: float = WINDOW) -> None:
        super().__init__()
        self.burst = burst
        self.window = window
        self._kinds: dict[tuple[str, int, str], list[float]] = {}  # [start, written, left out]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, record.levelno, str(record.msg))
        moment = time.monotonic()
        with self._lock:
            if len(self._kinds) > KINDS_KEPT:
                self._kinds.clear()
            seen = self._kinds.setdefault(kind, [moment, 0, 0])
            if moment - seen[0] >= self.window:
                seen[0], seen[1] = moment, 0
            if seen[1] >= self.burst:
                seen[2] += 1
                return False
            seen[1] += 1
            left_out, seen[2] = int(seen[2]), 0
        if left_out:
            record.msg = f"{record.msg} [{left_out} more like this left out]"
        return True


def throttle(hidden: Iterable[str] = ()) -> None:
    """For a long-running command: warnings of every logger to stderr through one
    handler, and every govsync handler, rate-limited by kind of line."""
    hidden = list(hidden)
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, StderrHandler)]:
        root.removeHandler(handler)
    handler = StderrHandler(logging.WARNING, hidden)
    handler.addFilter(Throttle())
    root.addHandler(handler)
    for own in logging.getLogger(ROOT).handlers:
        if isinstance(own, StderrHandler):
            own.addFilter(Throttle())
