"""What the agent tells its log (``GOVSYNC_LOG=info``) for whoever is on call: each
cycle's outcome, each change of an environment's status, each apply (what it
applied, what failed), each notification sent or not, each signal received.

Lines go through ``govsync.agent.journal`` at info (a failure at warning), with
the arguments apart from the message, so the rate limit of ``logs.Throttle``
counts each kind of line (not each environment) and no body reaches a record.
"""

from __future__ import annotations

import logging
from typing import Any

from govsync.agent.cycle import Cycle

log = logging.getLogger(__name__)


def counts(summary: Any) -> str:
    """An apply's summary (``{applied: 2, failed: 1}``) as ``2 applied, 1 failed``."""
    found = [f"{n} {a}" for a, n in dict(summary or {}).items() if n]
    return ", ".join(found) or "nothing"


def cycle_ended(previous: Cycle | None, result: Cycle, *, ran: bool) -> None:
    """One environment's cycle (``ran``: this agent's own; else its leader's record)."""
    name = result.environment
    if ran:
        log.info("agent: %s: cycle at %s: %s (%s) in %.1fs", name, result.revision or "-",
                 result.status, result.reason, result.seconds)
    before = previous.status if previous is not None else None
    if before != result.status:
        log.info("agent: %s: status %s -> %s at %s", name, before or "unknown",
                 result.status, result.revision or "-")
    applied = result.applied
    if not ran or applied is None:
        return
    if result.healed:
        log.info("agent: %s: self-heal at %s: put back %d object(s) changed outside govsync "
                 "or missing on the server", name, result.revision or "-", result.healed)
    if applied.interrupted:
        log.warning("agent: %s: the apply was stopped (the agent is stopping): applied %s",
                    name, counts(applied.summary))
    elif applied.ok:
        log.info("agent: %s: apply at %s: %s%s", name, result.revision or "-",
                 counts(applied.summary), f" from {applied.plan}" if applied.plan else "")
    else:
        log.warning("agent: %s: the apply failed: %s (%s)", name,
                    applied.reason or result.reason, counts(applied.summary))


def delivered(environment: str, sink: str, event: str, result: str, error: str) -> None:
    """A notification's outcome, as the notifier settles it."""
    if error:
        log.warning("agent: %s: notification %s to %s %s: %s", environment, event, sink,
                    result, error)
    else:
        log.info("agent: %s: notification %s to %s %s", environment, event, sink, result)


def signalled(name: str, *, again: bool = False) -> None:
    """SIGTERM or SIGINT received."""
    log.info("agent: %s received: %s", name,
             "stopping (again)" if again else
             "finishing the calls in flight, recording them, then exiting")
