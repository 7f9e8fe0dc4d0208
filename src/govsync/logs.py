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
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable

from govsync.envvars import LOG as LOG_ENV
from govsync.errors import ConfigError
from govsync.values import SENSITIVE

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
ROOT = "govsync"
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


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
