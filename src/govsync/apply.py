"""Apply: turn a plan into API calls, in dependency order and in parallel.

Safety rules, in the order a change meets them:

1. Before anything is sent (``commands.apply``): no blocked change; a saved
   plan is authentic and its lineage and serial still match the state; every
   secret's value still matches the fingerprint the plan recorded.
2. A create that is not safe to repeat is first recorded as an *intent*
   (``pending``), and is sent only once that write succeeded.  The answer
   replaces it with the id (``applied``) in its own transaction the moment it
   is known.  If the request may have reached the server without an answer,
   the entry becomes ``uncertain``; if govsync dies in between, the next plan
   sees ``pending`` and treats it as uncertain.  Either way the create is
   never repeated blindly.
3. A failure stops only what depends on it; independent branches go on.
   Every change ends with an :class:`ChangeOutcome`, whatever happened to it.
4. What makes every other call fail the same way (a rejected key, a state
   store that fails or a lost workspace lock) stops all sending at once.
5. 429 and 503 answers halve the number of requests in flight; successes
   raise it back by one at a time (AIMD), so a struggling API is not hammered.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from govsync import writes
from govsync.api.catalog import BY_NAME, unwrap
from govsync.api.kinds import BY_KIND, Kind
from govsync.api.resource import Objects, Unfindable
from govsync.errors import (
    AmbiguousError,
    ApiError,
    ApiStatusError,
    ForbiddenError,
    LockLostError,
    NotFoundError,
    StateError,
    UnauthorizedError,
)
from govsync.plan import ENDING, WORK, Action, Change, Plan, protected, top_field
from govsync.scheduling import Throttle, chain_lengths, run_order
from govsync.state import APPLIED, PENDING, UNCERTAIN, Entry, Snapshot, StateStore, now
from govsync.state.records import deposed_address
from govsync.state.writer import Fence, GroupWriter
from govsync.values import MissingSecret, Resolver, UnknownId, scrub, sought

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient


class ChangeStatus(StrEnum):
    """How a change ended."""

    APPLIED = "applied"
    FAILED = "failed"
    SKIPPED = "skipped"
    UNCERTAIN = "uncertain"
    FORGOTTEN = "forgotten"


DONE = frozenset({ChangeStatus.APPLIED, ChangeStatus.FORGOTTEN})


@dataclass
class ChangeOutcome:
    """What became of one change of the plan during apply."""

    address: str
    action: Action
    status: ChangeStatus
    id: str | None = None
    error: str = ""
    code: str = ""
    seconds: float = 0.0


@dataclass(repr=False)
class ApplyResult:
    """Every outcome of an apply, how many requests it sent and why it stopped early, if it
    did."""

    outcomes: list[ChangeOutcome] = field(default_factory=list)
    requests: int = 0
    seconds: float = 0.0  # from the first request to the last answer
    # Why apply stopped sending (a rejected key, a lost lock): what to do next.
    stopped: str = ""
    # The same in a few words, for the changes it kept from being sent.
    stopped_short: str = ""
    # No-ops recorded as the server holds them, nothing sent (Plan.caught_up).
    recorded: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        # Counts, not every outcome (see Plan.__repr__).
        counts = ", ".join(f"{n} {r}" for r, n in self.summary().items() if n)
        return (f"ApplyResult({len(self.outcomes)} outcomes{': ' + counts if counts else ''}, "
                f"requests={self.requests}{f', stopped={self.stopped!r}' if self.stopped else ''})")

    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(ChangeStatus, 0)
        for o in self.outcomes:
            counts[o.status] += 1
        return {str(r): n for r, n in counts.items()}

    @property
    def ok(self) -> bool:
        return not self.stopped and all(o.status in DONE for o in self.outcomes)

    @property
    def took_effect(self) -> bool:
        """Whether anything changed, or may have (an uncertain create)."""
        return any(o.status in (*DONE, ChangeStatus.UNCERTAIN) for o in self.outcomes)


class Reporter(Protocol):
    def start(self, total: int) -> None: ...
    def finished(self, outcome: ChangeOutcome) -> None: ...
    def close(self) -> None: ...


class SilentReporter:
    def start(self, total: int) -> None:
        pass

    def finished(self, outcome: ChangeOutcome) -> None:
        pass

    def close(self) -> None:
        pass


def request_body(kind: Kind, change: Change, send: dict[str, Any],
                 base: Mapping[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(operation, body) for a change: the operation its plan chose (``change.operation``,
    chosen once, by ``plan.py``), the body shaped by its action and the kind's row; an
    update's is laid over ``base``, the object as read (writes.py)."""
    if change.operation is None:
        raise ValueError(f"{change.address}: the plan holds no operation for this change")
    op = BY_NAME[change.operation]
    if change.action in (Action.CREATE, Action.REPLACE):
        obj = send
    else:
        changed = {top_field(f) for f in change.fields}
        obj = writes.update_object(kind, op, change.id, base, send, changed, change.kept)
    wrap = op.wrap
    return op.name, ({wrap: obj} if wrap else obj)


class Applier:
    """Applies the changes of one plan with one client, recording each success at once."""

    def __init__(
        self,
        store: StateStore,
        snapshot: Snapshot,
        client: AsyncClient,
        *,
        environ: Mapping[str, str],
        throttle: Throttle | None = None,
        reporter: Reporter | None = None,
        api_key: str | None = None,
        endpoint: str | None = None,
        stopping: threading.Event | None = None,
        live: Mapping[str, dict[str, Any] | None] | None = None,
        reads: bool = True,
    ) -> None:
        self.store = store
        # The objects as the refresh just read them (an update is laid over its object);
        # where an object was not read, ``reads`` says whether apply may read it now.
        self.live = live or {}
        self.reads = reads
        self.entries = snapshot.entries
        # Set by another thread (the agent, on SIGTERM): what is in flight is
        # answered and recorded, nothing more is sent.
        self.stopping = stopping
        # To record as the workspace's endpoint once it has answered (None: nothing to).
        self.endpoint = endpoint
        # Never recorded, even echoed inside an answer (with the request's secrets).
        self.hidden = sought([api_key] if api_key else [])
        self.workspace = snapshot.workspace
        self.client = client
        # Reads that settle what an answer left unknown, and the read before a write.
        self.objects = Objects(client)
        self.throttle = throttle or Throttle(32)
        self.reporter = reporter or SilentReporter()
        self.ids = {a: e.id for a, e in snapshot.entries.items() if e.status == APPLIED and e.id}
        self.resolver = Resolver(self.ids, snapshot.fingerprint, environ)
        self.unsure = {a for a, e in snapshot.entries.items() if e.status in (PENDING, UNCERTAIN)}
        self.result = ApplyResult()
        self._done: dict[str, asyncio.Event] = {}
        self._status: dict[str, ChangeStatus] = {}
        self._chain: dict[str, int] = {}
        self._writer: GroupWriter | None = None
        self._fence = Fence(store, self.workspace, waits=store.writes_wait)

    async def run(self, plan: Plan, work: list[Change]) -> ApplyResult:
        """Apply ``work`` (from ``plan.work()``): sends in dependency order, then orphans."""
        sends = [c for c in work if c.action in WORK and c.action not in ENDING]
        # Deletes and forgets after every other change (dependants first: their ``after``).
        endings = [c for c in work if c.action in ENDING]
        orphans = [c for c in work if c.action == Action.ORPHAN]
        self._chain = chain_lengths(sends + endings)  # PlanError on a cycle, before sending
        self.unsure |= {c.address for c in plan.changes if c.action == Action.UNCERTAIN}
        self._done = {c.address: asyncio.Event() for c in sends + endings}
        self.reporter.start(len(sends) + len(endings) + len(orphans))
        if self.store.writes_wait:
            self._writer = GroupWriter(self.store, self.workspace)
        try:
            began = time.monotonic()
            for phase in (sends, endings):
                if phase:
                    async with asyncio.TaskGroup() as group:
                        for change in phase:
                            group.create_task(self._run(change))
                if phase is sends:
                    await self._delete_replaced(sends)
            if sends or endings:
                self.result.seconds = time.monotonic() - began
            for change in orphans:
                self._finish(self._forget(change))
        finally:
            if self._writer is not None:
                self._writer.close()  # every write asked for is made
                self._writer = None
            self.reporter.close()
        order = {c.address: i for i, c in enumerate(plan.changes)}
        self.result.outcomes.sort(key=lambda o: order.get(o.address, 0))
        return self.result

    async def record_live(self, changes: list[Change]) -> None:
        """Record each of ``changes`` (Plan.caught_up) with its manifest's spec and the
        object as read (not read: the spec alone, which the next refresh compares); nothing
        is sent."""
        for change in changes:
            resolved, live = self._resolve(change), self.live.get(change.address)
            if isinstance(resolved, ChangeOutcome) or self.result.stopped:
                continue
            hidden = sought([*resolved[2], *self.hidden])
            with contextlib.suppress(StateError):  # said by result.stopped
                await self._record(Entry(change.address, change.kind, change.id, APPLIED,
                                         resolved[1], scrub(dict(live), hidden) if live
                                         else None, now()))
                self.result.recorded.append(change.address)

    def _finish(self, outcome: ChangeOutcome) -> None:
        self._status[outcome.address] = outcome.status
        self.result.outcomes.append(outcome)
        self.reporter.finished(outcome)
        if outcome.address in self._done:
            self._done[outcome.address].set()

    def _stop(self, short: str, why: str) -> None:
        if not self.result.stopped:
            self.result.stopped, self.result.stopped_short = why, short

    def _key_refused(self, exc: ApiStatusError, operation: str) -> None:
        """Every other call would fail the same way: stop sending."""
        self._stop("the API rejected the key",
                   f"the API answered {exc.status} {exc.code} for {operation}: {exc.message}; apply "
                   "needs a key with write permission (a viewer key may only call Get and "
                   "List operations)")

    async def _run(self, change: Change) -> None:
        try:
            outcome = await self._change(change)
        except Exception as exc:  # a defect must not end the other changes
            outcome = _outcome(change, ChangeStatus.FAILED,
                               f"internal error: {type(exc).__name__}: {exc}")
        self._finish(outcome)

    async def _change(self, change: Change) -> ChangeOutcome:
        for dep in change.after:
            if dep in self._done:
                await self._done[dep].wait()
                if self._status.get(dep) != ChangeStatus.APPLIED:
                    return _outcome(change, ChangeStatus.SKIPPED, f"{dep} was not applied")
            elif dep in self.unsure:
                return _outcome(change, ChangeStatus.SKIPPED,
                                f"{dep} is uncertain (settle it with govsync state resolve)")
        if self.stopping is not None and self.stopping.is_set():
            self._stop("stopping", "stopped on request: the changes not sent yet were not "
                                   "sent (the next apply sends them)")
        if self.result.stopped:
            return _outcome(change, ChangeStatus.SKIPPED, f"not sent: {self.result.stopped_short}")
        async with self.throttle.slot(-self._chain[change.address]):
            if self.stopping is not None and self.stopping.is_set():
                self._stop("stopping", "stopped on request: the changes not sent yet were "
                                       "not sent (the next apply sends them)")
            if self.result.stopped:  # checked once a slot is ours: queued changes stop too
                return _outcome(change, ChangeStatus.SKIPPED,
                                f"not sent: {self.result.stopped_short}")
            started = time.monotonic()
            answer: ChangeOutcome | Entry
            if change.action == Action.MOVE:
                answer = self._move(change)
                if answer.status == ChangeStatus.APPLIED and change.operation:
                    answer = await self._send(change)
            elif change.action == Action.IMPORT and not change.operation:
                answer = await self._adopt(change)
            elif change.action == Action.DELETE:
                answer = await self._delete(change)
            elif change.action == Action.FORGET:
                answer = self._forget(change)
            else:
                answer = await self._send(change)
        # An answer is recorded once the slot is given back: the next call goes
        # out while this write commits.  What waits on this change still waits
        # for the write.
        outcome = await self._recorded(change, answer) if isinstance(answer, Entry) else answer
        outcome.seconds = time.monotonic() - started  # the call and its record, not the queueing
        return outcome

    async def _record(self, entry: Entry) -> None:
        """One state write; a failing store (or a lost lock) stops all sending.

        A store whose writes wait on the network writes on the applier's
        worker thread (``GroupWriter``: the writes asked for meanwhile are
        committed together), so other calls go on meanwhile; the change waits
        for its own entry's commit."""
        try:
            if self._writer is None:
                self.store.put(self.workspace, entry)
            else:
                await asyncio.wrap_future(self._writer.put(entry))
        except StateError as exc:
            if isinstance(exc, LockLostError):
                self._stop("the workspace lock was lost", str(exc))
            else:
                self._stop("the state store failed", f"the state store failed: {exc}")
            raise

    async def _fenced(self) -> None:
        """Before a request: the workspace lock still held, or LockLostError (and all
        sending stops: contract section 7, a process that lost its lock sends nothing)."""
        try:
            await self._fence.check()
        except LockLostError as exc:
            self._stop("the workspace lock was lost", str(exc))
            raise

    def _resolve(self, change: Change) -> tuple[Any, Any, list[str]] | ChangeOutcome:
        """(body, spec to record, secret values) of a change, or why it cannot be sent."""
        if change.request is None:
            return _outcome(change, ChangeStatus.FAILED, "the plan holds no request for this change")
        try:
            return self.resolver.send(change.request)
        except UnknownId as exc:
            return _outcome(change, ChangeStatus.SKIPPED, f"the id of {exc.address} is not known")
        except MissingSecret as exc:
            return _outcome(change, ChangeStatus.FAILED,
                            f"environment variable {exc.variable} (a secret) is not set")

    async def _send(self, change: Change) -> ChangeOutcome | Entry:
        """Send one change: its outcome, or the entry that records the API's yes."""
        kind = BY_KIND[change.kind]
        resolved = self._resolve(change)
        if isinstance(resolved, ChangeOutcome):
            return resolved
        send, spec, secrets = resolved
        base = None
        if change.action not in (Action.CREATE, Action.REPLACE) and kind.replace_all:
            read = await self._base(change, kind)
            if isinstance(read, ChangeOutcome):
                return read
            base = read
        operation, body = request_body(kind, change, send, base)
        intent = change.action == Action.CREATE and not kind.create.retry_safe
        try:
            if intent:  # its write is fenced: it is the check that the lock is held
                await self._record(Entry(change.address, kind.name, None, PENDING, spec, None,
                                         now()))
            elif change.action == Action.REPLACE:
                await self._depose(change, spec)
            else:
                await self._fenced()
        except StateError as exc:
            return _outcome(change, ChangeStatus.SKIPPED if isinstance(exc, LockLostError)
                            else ChangeStatus.FAILED, f"not sent: {exc}")
        self.result.requests += 1
        try:
            answer = await self.client.call(operation, body, secrets=secrets)
        except AmbiguousError as exc:
            if intent:
                return await self._uncertain(change, spec, exc.message)
            if change.action == Action.REPLACE:
                return await self._settle_replace(change, kind, spec, send, exc.message)
            if change.action != Action.CREATE:
                return await self._settle_update(change, kind, spec, body, exc.message)
            return _outcome(change, ChangeStatus.FAILED, exc.message)
        except ApiError as exc:
            if intent:
                with contextlib.suppress(StateError):
                    self.store.remove(self.workspace, change.address)
            elif change.action == Action.REPLACE:
                with contextlib.suppress(StateError):
                    await self._restore(change)
            if isinstance(exc, UnauthorizedError | ForbiddenError):
                self._key_refused(exc, operation)
            code = exc.code if isinstance(exc, ApiStatusError) else ""
            return _outcome(change, ChangeStatus.FAILED, exc.message, code)

        try:
            obj, object_id = unwrap(operation, answer)
        except ApiError as exc:
            # The server said yes but its answer cannot be read: the object
            # may exist, under an id we do not know.
            if intent:
                return await self._uncertain(change, spec, exc.message)
            if change.action == Action.REPLACE:
                return await self._settle_replace(change, kind, spec, send, exc.message)
            return _outcome(change, ChangeStatus.FAILED, exc.message)
        return Entry(change.address, kind.name, object_id or change.id, APPLIED, spec,
                     scrub(obj, sought([*secrets, *self.hidden])),
                     now())

    async def _base(self, change: Change, kind: Kind) -> dict[str, Any] | None | ChangeOutcome:
        """The object a replace-all update is laid over, read just before it is sent (None:
        not read, so the manifest's fields alone are sent, as the plan said).  Where the
        plan showed the object as read before (``live``, the refresh's read before a
        prompt), a field changed on the server since is neither overwritten nor recorded
        unseen: the change fails and the next plan shows it."""
        seen = self.live.get(change.address)
        if not self.reads or change.id is None or (seen is None and kind.get is None):
            return seen
        try:
            fresh = await self.objects.present(kind, change.id, self._spec(change.address))
        except Unfindable:
            return seen
        except ApiError as exc:
            if isinstance(exc, UnauthorizedError | ForbiddenError):
                raise
            return _outcome(change, ChangeStatus.FAILED, f"not sent: reading the object before "
                            f"updating it failed ({exc.message})")
        if fresh is None:
            return _outcome(change, ChangeStatus.FAILED, "not sent: the object is no longer on "
                            "the server (deleted since the plan): plan again")
        if seen is not None:
            op = kind.update
            assert op is not None
            moved = writes.changed_since(kind, op, seen, fresh)
            if moved:
                return _outcome(change, ChangeStatus.FAILED, (
                    f"not sent: {', '.join(moved)} changed on the server since the plan was "
                    "made, and this update sends the whole object: plan again to see it"))
        return fresh

    def _spec(self, address: str) -> dict[str, Any]:
        entry = self.entries.get(address)
        return (entry.read_spec() or {}) if entry is not None else {}

    async def _settle_update(self, change: Change, kind: Kind, spec: dict[str, Any],
                             body: dict[str, Any], why: str) -> ChangeOutcome | Entry:
        """An update sent without an answer: one read says whether it took effect."""
        op = kind.update
        sent = body.get(op.wrap, body) if op is not None and op.wrap else body
        try:
            live = (await self.objects.present(kind, change.id, spec) if change.id else None)
        except (ApiError, Unfindable):
            live = None
        if live is not None and writes.took_effect(kind, sent, live):
            return Entry(change.address, kind.name, change.id, APPLIED, spec,
                         scrub(live, self.hidden), now())
        return _outcome(change, ChangeStatus.FAILED, f"{why}; a read shows it did not take effect "
                        "(or could not tell): the next plan sends it again")

    async def _settle_replace(self, change: Change, kind: Kind, spec: dict[str, Any],
                              sent: dict[str, Any], why: str) -> ChangeOutcome | Entry:
        """A replace's create sent without an answer: a List of the kind's objects of
        that name says whether the new one exists (then it is recorded, and the old one
        deleted as after any replace)."""
        found = (await writes.created_beside(self.objects, kind, change.id, sent)
                 if change.id else None)
        if isinstance(found, dict):
            new_id = found.get(kind.create.id_field, found.get("id"))
            return Entry(change.address, kind.name, str(new_id), APPLIED, spec,
                         scrub(found, self.hidden), now())
        if found is False:
            with contextlib.suppress(StateError):
                await self._restore(change)
            return _outcome(change, ChangeStatus.FAILED, (
                f"{why}; a read shows no new {kind.name} was created: state keeps the old "
                f"one ({change.id}); plan the replace again"))
        return _outcome(change, ChangeStatus.UNCERTAIN, (
            f"{why}: a new {kind.name} may or may not exist, and no read can tell now; "
            f"state records the create as unknown and the old one ({change.id}) as deposed: "
            "the next plan looks for the new one, and deletes the old one"))

    async def _depose(self, change: Change, spec: dict[str, Any]) -> None:
        """Before a replace's create is sent: the old object recorded as deposed and the new
        one's create as an intent, in one write, so a kill at any moment after leaves
        both where the next plan finds them (it settles the create, deletes the old)."""
        old = self.entries.get(change.address)
        assert old is not None and change.id is not None
        deposed = Entry(deposed_address(change.address, change.id), old.kind, change.id,
                        APPLIED, old.read_spec(), old.response, now())
        pending = Entry(change.address, change.kind, None, PENDING, spec, None, now())
        try:
            if self._writer is None:
                self.store.put_many(self.workspace, [deposed, pending])
            else:
                await asyncio.wrap_future(self._writer.put_many([deposed, pending]))
        except StateError as exc:
            if isinstance(exc, LockLostError):
                self._stop("the workspace lock was lost", str(exc))
            else:
                self._stop("the state store failed", f"the state store failed: {exc}")
            raise

    async def _restore(self, change: Change) -> None:
        """A replace whose create did not take effect: the old object back at its address,
        its deposed record dropped (a deposed record whose id its address records again is
        dropped by the next plan too, should govsync die between the two writes)."""
        old = self.entries.get(change.address)
        assert old is not None and change.id is not None
        await self._record(old)
        self.store.remove(self.workspace, deposed_address(change.address, change.id))

    async def _delete(self, change: Change) -> ChangeOutcome:
        """Send one delete; the entry goes once the server said yes (or a read says the
        object is gone).  A refusal (still referred to, protected) leaves state as it was."""
        kind = BY_KIND[change.kind]
        if change.id is None or kind.delete is None:
            return _outcome(change, ChangeStatus.FAILED, "the plan holds no id or no delete for it")
        entry = self.entries.get(change.address)
        if entry is not None and protected(entry.read_spec()):
            # The plan blocks it; a plan made before protection was turned on cannot.
            return _outcome(change, ChangeStatus.FAILED, "not sent: terminationProtection is true "
                            "in state; turn it off with an applied change first")
        spec = self._spec(change.address)
        operation, body = writes.delete_body(kind, change.id, spec)
        try:
            await self._fenced()  # a process that lost its lock sends nothing
        except StateError as exc:
            return _outcome(change, ChangeStatus.SKIPPED if isinstance(exc, LockLostError)
                            else ChangeStatus.FAILED, f"not sent: {exc}")
        self.result.requests += 1
        try:
            await self.client.call(operation, body)
        except (AmbiguousError, NotFoundError) as exc:
            # No answer, or "not found": a second read says whether the object is gone
            # (its Get, else a fresh List); where none can tell, state keeps it.
            try:
                live = await self.objects.present(kind, change.id, spec)
            except (ApiError, Unfindable) as unread:
                return _outcome(change, ChangeStatus.UNCERTAIN, (
                    f"{exc.message}; no read can tell whether it took effect ({unread}): "
                    f"state keeps {change.address}, and the next plan reads it again"))
            if live is not None:
                return _outcome(change, ChangeStatus.FAILED, f"{exc.message}; the object is still "
                                "on the server: state keeps it")
        except ApiError as exc:
            if isinstance(exc, UnauthorizedError | ForbiddenError):
                self._key_refused(exc, operation)
            code = exc.code if isinstance(exc, ApiStatusError) else ""
            return _outcome(change, ChangeStatus.FAILED,
                            f"{exc.message} (state keeps {change.address})", code)
        try:
            self._answered()
            # (deletes run after every put: the writer's thread writes nothing meanwhile)
            self.store.remove(self.workspace, change.address)
        except StateError as exc:
            return _outcome(change, ChangeStatus.UNCERTAIN, f"deleted on the server, but state "
                            f"still records it: {exc}; `govsync state forget {change.address}`")
        self.ids.pop(change.address, None)
        return _outcome(change, ChangeStatus.APPLIED)

    async def _delete_replaced(self, sends: list[Change]) -> None:
        """The old object of each replace that took effect, deleted once what refers to it
        points at the new one (dependants' old objects first)."""
        replaced = [c for c in sends if c.action == Action.REPLACE
                    and self._status.get(c.address) == ChangeStatus.APPLIED and c.id]
        if not replaced or self.result.stopped:
            return
        outcomes = {o.address: o for o in self.result.outcomes}
        by_address = {c.address: c for c in replaced}
        for address in reversed(run_order(replaced)):
            change = by_address[address]
            kind = BY_KIND[change.kind]
            assert change.id is not None
            deposed = deposed_address(address, change.id)
            spec = self._spec(address)
            operation, body = writes.delete_body(kind, change.id, spec)
            try:
                await self._fenced()
                self.result.requests += 1
                try:
                    await self.client.call(operation, body)
                except ApiError as exc:
                    if not (isinstance(exc, AmbiguousError | NotFoundError)
                            and await self._gone(kind, change.id, spec)):
                        raise
                    # no answer (or "not found"), but a read shows it gone
                self.store.remove(self.workspace, deposed)
            except (StateError, ApiError) as exc:
                outcome = outcomes[address]
                outcome.status = ChangeStatus.FAILED
                outcome.error = (f"created anew (id {outcome.id}) and its references moved, "
                                 f"but the old one ({change.id}) was not deleted: "
                                 f"{getattr(exc, 'message', exc)}; state records it as "
                                 f"{deposed}: the next plan deletes it")

    async def _gone(self, kind: Kind, object_id: str, spec: Mapping[str, Any]) -> bool:
        """Whether a second read shows the object gone (False: still there, or no read can
        tell)."""
        try:
            return await self.objects.present(kind, object_id, spec) is None
        except (ApiError, Unfindable):
            return False

    async def _recorded(self, change: Change, entry: Entry) -> ChangeOutcome:
        """Record the API's yes; until that is done, the change is not applied."""
        try:
            self._answered()
            await self._record(entry)
        except StateError as exc:
            return _outcome(change, ChangeStatus.UNCERTAIN,
                            f"sent and answered (id {entry.id}), but not recorded: {exc}; "
                            f"settle it with `govsync state resolve {change.address} "
                            f"--id {entry.id}`", object_id=entry.id)
        if entry.id:
            self.ids[change.address] = entry.id
        return _outcome(change, ChangeStatus.APPLIED, object_id=entry.id)

    def _answered(self) -> None:
        """The endpoint has taken a change: record it as the workspace's, once."""
        if self.endpoint is not None:
            endpoint, self.endpoint = self.endpoint, None
            self.store.set_endpoint(self.workspace, endpoint)

    async def _uncertain(self, change: Change, spec: dict[str, Any], why: str) -> ChangeOutcome:
        with contextlib.suppress(StateError):
            self._answered()  # it may hold the object now
        with contextlib.suppress(StateError):  # pending already says the same
            await self._record(Entry(change.address, change.kind, None, UNCERTAIN, spec, None,
                                     now()))
        return _outcome(change, ChangeStatus.UNCERTAIN,
                        f"{why}: the object may or may not exist; settle it with "
                        f"`govsync state resolve {change.address} --id ID | --absent`",
                        object_id=None)

    def _move(self, change: Change) -> ChangeOutcome:
        """Re-address the state entry (one transaction); nothing is sent."""
        assert change.moved_from is not None
        try:
            self.store.rename(self.workspace, change.moved_from, change.address)
        except StateError as exc:
            if isinstance(exc, LockLostError):
                self._stop("the workspace lock was lost", str(exc))
            return _outcome(change, ChangeStatus.FAILED, str(exc))
        if change.id:
            self.ids[change.address] = change.id
        return _outcome(change, ChangeStatus.APPLIED)

    async def _adopt(self, change: Change) -> ChangeOutcome:
        """Record an imported object with the manifest's spec; nothing is sent."""
        resolved = self._resolve(change)
        if isinstance(resolved, ChangeOutcome):
            return resolved
        if change.id is None:
            return _outcome(change, ChangeStatus.FAILED, "the plan holds no id for this import")
        _send, spec, _secrets = resolved
        try:
            await self._record(Entry(change.address, change.kind, change.id, APPLIED, spec, None,
                               now()))
        except StateError as exc:
            return _outcome(change, ChangeStatus.FAILED, f"not recorded: {exc}")
        self.ids[change.address] = change.id
        return _outcome(change, ChangeStatus.APPLIED)

    def _forget(self, change: Change) -> ChangeOutcome:
        try:
            self.store.remove(self.workspace, change.address)
        except StateError as exc:
            return _outcome(change, ChangeStatus.FAILED, str(exc))
        return _outcome(change, ChangeStatus.FORGOTTEN,
                        "dropped from state; the object stays on the server")


_KEEP = object()


def _outcome(change: Change, status: ChangeStatus, error: str = "", code: str = "",
             *, object_id: Any = _KEEP) -> ChangeOutcome:
    return ChangeOutcome(change.address, change.action, status,
                   change.id if object_id is _KEEP else object_id, error, code)
