"""How a failed call is tried again: the policy a client is given (RetryPolicy) and
what it tells the caller before each new attempt (RetryEvent).  Plain values, so the
commands that choose a policy need not load the client (httpx) to do it; which
failures are retried is the client's (``api.client``'s docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random

__all__ = ["RetryEvent", "RetryPolicy"]


@dataclass(frozen=True)
class RetryEvent:
    """Passed to ``on_retry`` before the client sleeps and tries again."""

    operation: str
    attempt: int  # the attempt that failed, from 1
    status: int | None  # the HTTP status, None when no answer came
    delay: float  # seconds until the next attempt
    reason: str  # "503", "ConnectError", ...


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` more attempts at most, each after a full-jitter exponential
    backoff (``backoff`` seconds doubled each time, at most ``max_backoff``, drawn
    from ``rng``) or the server's ``Retry-After``; ``on_retry`` hears of each before
    the wait; ``sleep`` waits (anyio's by default)."""

    max_retries: int = 4
    backoff: float = 0.25
    max_backoff: float = 8.0
    on_retry: Callable[[RetryEvent], None] | None = None
    rng: random.Random | None = None
    sleep: Callable[[float], Awaitable[object] | object] | None = None
