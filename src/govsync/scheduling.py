"""How an apply schedules its changes: the order their ``after`` edges allow, the
longest chain waiting on each (the critical path goes first), and ``Throttle``, the
limit of requests in flight that halves on 429/503 and creeps back up (AIMD)."""

from __future__ import annotations

import asyncio
import contextlib
import graphlib
import heapq
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from govsync.errors import PlanError
from govsync.plan import Change

if TYPE_CHECKING:
    from govsync.api.client import RetryEvent


class Throttle:
    """A concurrency limit with priorities that halves on 429/503 and creeps
    back up (AIMD).

    Waiters are served by priority (lowest first), then in arrival order; a
    release wakes at most one of them.  apply gives each change the length of
    the longest chain of changes waiting on it, negated, so the critical path
    is never queued behind leaves that could run any time.
    """

    def __init__(self, limit: int) -> None:
        self.max = max(1, limit)
        self.limit = self.max
        self.active = 0
        self._calm = 0
        self._seq = 0
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []

    @contextlib.asynccontextmanager
    async def slot(self, priority: int = 0) -> AsyncIterator[None]:
        if self.active < self.limit and not self._waiters:
            self.active += 1
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._seq += 1
            heapq.heappush(self._waiters, (priority, self._seq, future))
            await future  # the releaser counted us in
        try:
            yield
        finally:
            self.active -= 1
            self._calm += 1
            if self._calm >= self.limit and self.limit < self.max:
                self.limit += 1
                self._calm = 0
            self._wake()

    def _wake(self) -> None:
        while self._waiters and self.active < self.limit:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                self.active += 1
                future.set_result(None)

    def slow_down(self) -> None:
        self.limit = max(1, self.limit // 2)
        self._calm = 0

    def on_retry(self, event: RetryEvent) -> None:
        """The client's retry hook: the API asked us to slow down."""
        if event.status in (429, 503):
            self.slow_down()


def chain_lengths(changes: list[Change]) -> dict[str, int]:
    """For each change, the longest chain of changes that wait on it (itself included)."""
    waiting: dict[str, list[str]] = {c.address: [] for c in changes}
    for c in changes:
        for dep in c.after:
            if dep in waiting:
                waiting[dep].append(c.address)
    length: dict[str, int] = {}
    for address in reversed(run_order(changes)):
        length[address] = 1 + max((length.get(w, 0) for w in waiting[address]), default=0)
    return length


def run_order(changes: list[Change]) -> list[str]:
    """The changes' addresses in an order that respects ``after``; PlanError on a cycle.

    A plan made by govsync never has one; a hand-made file could, and would
    otherwise wait forever."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    addresses = {c.address for c in changes}
    for c in changes:
        sorter.add(c.address, *(d for d in c.after if d in addresses))
    try:
        return list(sorter.static_order())
    except graphlib.CycleError as exc:
        cycle = " -> ".join(exc.args[1])
        raise PlanError(f"the plan's changes wait on each other ({cycle}): nothing was "
                        "sent; make a new plan with `govsync plan`") from None
