"""Apply: turn a plan into API calls, in dependency order and in parallel.

Safety rules, in the order a change meets them:

1. Before anything is sent: no blocked change; a saved plan's lineage and
   serial still match the state; every secret's value still matches the
   fingerprint the plan recorded.
2. A create that is not safe to repeat is first recorded as an *intent*
   (``pending``).  The answer replaces it with the id (``applied``) in its own
   transaction the moment it is known.  If the request may have reached the
   server without an answer, the entry becomes ``uncertain``; if govsync dies
   in between, the next plan sees ``pending`` and treats it as uncertain.
   Either way the create is never repeated blindly.
3. A failure stops only what depends on it; independent branches go on.
4. 429 and 503 answers halve the number of requests in flight; successes
   raise it back by one at a time (AIMD), so a struggling API is not hammered.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from govsync.api.kinds import BY_KIND, EVERY_FIELD, Kind, wrap_key
from govsync.errors import (
    AmbiguousError,
    ApiError,
    ApiStatusError,
    BlockedPlanError,
    ForbiddenError,
    StalePlanError,
    StateError,
    UnauthorizedError,
)
from govsync.manifests.loader import REF, SECRET
from govsync.plan import CREATE, ORPHAN, UPDATE, Change, Plan
from govsync.state.base import APPLIED, PENDING, UNCERTAIN, Entry, Snapshot, StateStore, now

APPLIED_OK, FAILED, SKIPPED, UNSURE, FORGOTTEN = "applied", "failed", "skipped", "uncertain", "forgotten"
REDACTED = "(sensitive)"


@dataclass
class Outcome:
    address: str
    action: str
    status: str
    id: str | None = None
    error: str = ""
    code: str = ""
    seconds: float = 0.0


@dataclass
class ApplyResult:
    outcomes: list[Outcome] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0  # from the first request to the last answer
    # Why apply stopped sending (a rejected key): what to do next.
    stopped: str = ""

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys((APPLIED_OK, FAILED, SKIPPED, UNSURE, FORGOTTEN), 0)
        for o in self.outcomes:
            counts[o.status] += 1
        return counts

    @property
    def ok(self) -> bool:
        return all(o.status in (APPLIED_OK, FORGOTTEN) for o in self.outcomes)


class Reporter(Protocol):
    def start(self, total: int) -> None: ...
    def finished(self, outcome: Outcome) -> None: ...
    def close(self) -> None: ...


class SilentReporter:
    def start(self, total: int) -> None:
        pass

    def finished(self, outcome: Outcome) -> None:
        pass

    def close(self) -> None:
        pass


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


def chain_lengths(changes: list[Change]) -> dict[str, int]:
    """For each change, the longest chain of changes that wait on it (itself included)."""
    waiting: dict[str, list[str]] = {c.address: [] for c in changes}
    for c in changes:
        for dep in c.after:
            if dep in waiting:
                waiting[dep].append(c.address)
    length: dict[str, int] = {}
    # Plans list changes after what they depend on: walk backwards.
    for c in reversed(changes):
        length[c.address] = 1 + max((length.get(w, 0) for w in waiting[c.address]), default=0)
    return length


def check_saved_plan(plan: Plan, snapshot: Snapshot) -> None:
    """A saved plan is applied only onto the state it was made from."""
    if plan.lineage != snapshot.lineage:
        raise StalePlanError(
            f"the plan was made for another state (lineage {plan.lineage}, this state is "
            f"{snapshot.lineage}): make a new plan with `govsync plan --out`"
        )
    if plan.serial != snapshot.serial:
        raise StalePlanError(
            f"the state changed since the plan was made (serial {plan.serial} -> "
            f"{snapshot.serial}): make a new plan with `govsync plan --out` and review it"
        )


def check_secrets(plan: Plan, snapshot: Snapshot, environ: Mapping[str, str]) -> None:
    """Every secret's current value must match the fingerprint in the plan."""
    for change in plan.changes:
        if change.action not in (CREATE, UPDATE) or change.request is None:
            continue
        for path in BY_KIND[change.kind].secrets:
            marker = _dig(change.request, path.split("."))
            if not (isinstance(marker, dict) and SECRET in marker):
                continue
            variable = marker[SECRET]["env"]
            value = environ.get(variable)
            if not value:
                raise StalePlanError(
                    f"{change.address}: environment variable {variable} (secret {path}) is not set"
                )
            if snapshot.fingerprint(value) != marker[SECRET]["fingerprint"]:
                raise StalePlanError(
                    f"{change.address}: the value of {variable} (secret {path}) changed since "
                    "the plan was made: make a new plan and review it"
                )


def _dig(data: Any, keys: list[str]) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def materialize(
    kind: Kind, request: Mapping[str, Any], ids: Mapping[str, str], snapshot: Snapshot,
    environ: Mapping[str, str],
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(request to send, resolved spec for state, secret values) of a planned request."""
    send = dict(request)
    spec = dict(request)
    for ref in kind.references:
        value = request.get(ref.id_field)
        if isinstance(value, dict) and REF in value:
            target = value[REF]
            if target not in ids:
                raise LookupError(target)
            send[ref.id_field] = spec[ref.id_field] = ids[target]
    secrets: list[str] = []
    for path in kind.secrets:
        keys = path.split(".")
        marker = _dig(request, keys)
        if not (isinstance(marker, dict) and SECRET in marker):
            continue
        value = environ[marker[SECRET]["env"]]
        secrets.append(value)
        _put(send, keys, value)
        _put(spec, keys, snapshot.fingerprint(value))
    return send, spec, secrets


def _put(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        data[key] = dict(data[key])
        data = data[key]
    data[keys[-1]] = value


def request_body(kind: Kind, change: Change, send: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(operation, body) for a change, following the kind's row."""
    if change.action == CREATE:
        op = kind.create
        obj = send
    else:
        assert kind.update is not None
        op = kind.update
        fields = send if kind.updatable == EVERY_FIELD else {
            k: send[k] for k in kind.updatable if k in send
        }
        obj = {"id": change.id, **fields} if kind.update_with_id else fields
    wrap = wrap_key(op.request)
    return op.name, ({wrap: obj} if wrap else obj)


def scrub(value: Any, secrets: list[str]) -> Any:
    """The API's answer without any secret value it may echo (biA keys...)."""
    if not secrets:
        return value
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    if isinstance(value, str) and value in secrets:
        return REDACTED
    return value


Client = Any  # govsync.api.client.AsyncClient (imported lazily)


async def run(
    plan: Plan,
    store: StateStore,
    snapshot: Snapshot,
    client_factory: Callable[[Callable[[Any], None]], Client],
    *,
    environ: Mapping[str, str],
    parallelism: int = 32,
    forget_orphans: bool = False,
    reporter: Reporter | None = None,
) -> ApplyResult:
    """Apply ``plan``'s creates and updates; record every success at once."""
    if plan.blocked():
        raise BlockedPlanError(
            f"the plan has {len(plan.blocked())} blocked change(s) the API cannot make: "
            "revert them in the manifests; nothing was applied"
        )
    reporter = reporter or SilentReporter()
    workspace = snapshot.workspace
    result = ApplyResult()
    todo = [c for c in plan.changes if c.action in (CREATE, UPDATE)]
    orphans = [c for c in plan.changes if c.action == ORPHAN] if forget_orphans else []
    reporter.start(len(todo) + len(orphans))
    ids = {a: e.id for a, e in snapshot.entries.items() if e.status == APPLIED and e.id}
    unsure = {c.address for c in plan.changes if c.action == UNCERTAIN}
    done: dict[str, asyncio.Event] = {c.address: asyncio.Event() for c in todo}
    status: dict[str, str] = {}
    throttle = Throttle(parallelism)
    chain = chain_lengths(todo)

    def on_retry(event: Any) -> None:
        if event.status in (429, 503):
            throttle.slow_down()

    fatal: list[BaseException] = []

    async def one(change: Change) -> None:
        try:
            outcome = await _wait_and_apply(change)
        except StateError as exc:  # the state is broken: stop everything
            fatal.append(exc)
            outcome = Outcome(change.address, change.action, FAILED, change.id, str(exc))
        status[change.address] = outcome.status
        result.outcomes.append(outcome)
        reporter.finished(outcome)
        done[change.address].set()

    async def _wait_and_apply(change: Change) -> Outcome:
        for dep in change.after:
            if dep in done:
                await done[dep].wait()
                if status.get(dep) != APPLIED_OK:
                    return Outcome(change.address, change.action, SKIPPED, change.id,
                                   f"{dep} was not applied")
            elif dep in unsure:
                return Outcome(change.address, change.action, SKIPPED, change.id,
                               f"{dep} is uncertain (settle it with govsync state resolve)")
        if fatal:
            return Outcome(change.address, change.action, SKIPPED, change.id,
                           "the state store failed")
        async with throttle.slot(-chain[change.address]):
            if result.stopped:  # checked once a slot is ours: queued changes stop too
                return Outcome(change.address, change.action, SKIPPED, change.id,
                               "not sent: the API rejected the key")
            started = time.monotonic()
            outcome = await _apply_one(change)
            outcome.seconds = time.monotonic() - started  # the call, not the queueing
            return outcome

    async def _apply_one(change: Change) -> Outcome:
        kind = BY_KIND[change.kind]
        assert change.request is not None
        try:
            send, spec, secrets = materialize(kind, change.request, ids, snapshot, environ)
        except LookupError as exc:
            return Outcome(change.address, change.action, SKIPPED, change.id,
                           f"the id of {exc.args[0]} is not known")
        operation, body = request_body(kind, change, send)
        intent = change.action == CREATE and not kind.create.retry_safe
        if intent:
            store.put(workspace, Entry(change.address, kind.name, None, PENDING, spec, None, now()))
        result.requests += 1
        try:
            answer = await client.call(operation, body)
        except AmbiguousError as exc:
            if intent:
                store.put(workspace, Entry(change.address, kind.name, None, UNCERTAIN, spec,
                                           None, now()))
                return Outcome(change.address, change.action, UNSURE, None,
                               f"{exc.message}: the object may or may not exist; settle it with "
                               f"`govsync state resolve {change.address} --id ID | --absent`")
            return Outcome(change.address, change.action, FAILED, change.id, exc.message)
        except ApiError as exc:
            if intent:
                store.remove(workspace, change.address)
            if isinstance(exc, UnauthorizedError | ForbiddenError) and not result.stopped:
                # Every other call would fail the same way: stop sending.
                result.stopped = (
                    f"the API answered {exc.status} {exc.code} for {operation}: check that "
                    "GOVSYNC_API_KEY holds a key for this endpoint with write permission "
                    "(a viewer key may only call ListGroups)")
            code = exc.code if isinstance(exc, ApiStatusError) else ""
            return Outcome(change.address, change.action, FAILED, change.id, exc.message, code)
        from govsync.api.client import unwrap

        obj, object_id = unwrap(operation, answer)
        object_id = object_id or change.id
        store.put(workspace, Entry(change.address, kind.name, object_id, APPLIED, spec,
                                   scrub(obj, secrets), now()))
        if object_id:
            ids[change.address] = object_id
        return Outcome(change.address, change.action, APPLIED_OK, object_id)

    client: Client = client_factory(on_retry) if todo else None
    try:
        if todo:
            async with client:
                began = time.monotonic()
                await asyncio.gather(*(one(c) for c in todo))
                result.seconds = time.monotonic() - began
        for change in orphans:
            store.remove(workspace, change.address)
            outcome = Outcome(change.address, ORPHAN, FORGOTTEN, change.id,
                              "dropped from state; the object stays on the server")
            result.outcomes.append(outcome)
            reporter.finished(outcome)
    finally:
        reporter.close()
    if fatal:
        raise fatal[0]
    order = {c.address: i for i, c in enumerate(plan.changes)}
    result.outcomes.sort(key=lambda o: order.get(o.address, 0))
    return result
