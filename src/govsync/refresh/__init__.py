"""Refresh: read every recorded object from the server before a plan (contract section 12).

``read(client, entries)`` reads the objects state records, concurrently
across kinds: a kind with a List is read in pages (a scoped List once per
scope id), else with one Get per object.  ``compare`` then says, per
address, what changed outside govsync and what is missing.

What an endpoint offers is learned, not assumed, once per run and per kind,
without side effects: a List's first page answers 200 where the endpoint has
it; an unknown operation is 404 ``not_found`` (the reference server's
``--operations spec`` answers every operation of api-lifecycle.md so).  A
Get answers 404 for an unknown id too, so a kind that has only a Get (or a
scoped List) is read only once a List has shown that the endpoint has the
reads of api-lifecycle.md.

What govsync last applied is the answer it recorded when it applied (the
object as the server returned it, with the defaults the server filled in),
else, where the answer carries no fields (an import, an id-only answer), the
spec it sent.  Fields the server sets (``id``, timestamps, the fields its
update cannot change and no manifest sets: a policy's ``ast`` and
``version``), objects embedded in another (a connector's ``space``) and
secrets (never returned, or recorded only as ``(sensitive)`` or a keyed
fingerprint) never count as drift.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from govsync.api.kinds import BY_KIND, POLICY_KIND
from govsync.api.resource import Offers, found_with, read_with
from govsync.plan import (
    REFRESH_CHECK,
    Action,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    Observation,
    Plan,
    creating,
    say_unread,
)
from govsync.refresh import code
from govsync.refresh.compare import by_address, compare, compare_read, outside_changes
from govsync.refresh.lookup import look_up, read_imports, unread_reason, verify_id
from govsync.refresh.reader import CONCURRENCY, LANES, Reader, Reading, read
from govsync.state import Entry

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

__all__ = ["LANES", "Observed", "Offers", "Owners", "Reader", "Reading", "annotate", "compare", "look_up", "observe",
           "outside_changes", "read", "refreshed", "skipped", "unread_reason", "verify_id"]

# Who else records an object: (live ids) -> {id: (workspace, address)} of the other
# workspaces of the state (StateStore.recorded_elsewhere).
Owners = Callable[[Collection[str]], Mapping[str, tuple[str, str]]]


# -- the plan's view ------------------------------------------------------------------


@dataclass
class Observed:
    """A refresh's outcome: what was read, and what differs from what govsync applied."""

    reading: Reading
    drift: list[Drifted]

    @property
    def missing(self) -> frozenset[str]:
        return frozenset(d.address for d in self.drift if d.kind == DriftKind.MISSING)

    def observation(self, *, running: bool = False) -> Observation:
        """What the planner is given: the live objects, what changed outside govsync, and
        whether the endpoint lacks the operations of api-lifecycle.md."""
        reading = self.reading
        return Observation(
            read=True, live=reading.live,
            changed={d.address: d for d in self.drift if d.kind == DriftKind.CHANGED},
            lacks_writes=reading.offers_reads is False or reading.endpoint_lacks_reads,
            running=running)


async def observe(client: AsyncClient, entries: Mapping[str, Entry],
                  ignore: Mapping[str, Sequence[str]] | None = None,
                  *, concurrency: int = CONCURRENCY, offers: Offers | None = None) -> Observed:
    """Read every recorded object and compare it with what govsync last applied (each
    kind as soon as it is read, while the others are read)."""
    drift: list[Drifted] = []
    reading = await read(client, entries, concurrency=concurrency,
                         done=lambda read, reading: drift.extend(
                             compare_read(read, reading, ignore)), offers=offers)
    return Observed(reading, sorted(drift, key=by_address))


async def refreshed(client: AsyncClient, entries: Mapping[str, Entry],
                    make: Callable[[Observation], Plan],
                    ignore: Mapping[str, Sequence[str]] | None = None,
                    recheck: Callable[[], Mapping[str, Entry]] | None = None,
                    owners: Owners | None = None, running: bool = False,
                    codes: Mapping[str, str] | None = None, offers: Offers | None = None,
                    ) -> tuple[Plan, Observed, Observation]:
    """Refresh, then look up on the server what the plan would create and read what it
    imports, then the plan ``make`` makes from all that (decided once), with the
    refresh's findings on it, and the observation it was made from.

    ``recheck``: the workspace's entries read again (the state was read before the
    server, without the lock: an apply running meanwhile records its intent before it
    sends, so what the lookup finds that it made is recorded by then).  ``owners``:
    who else of the state records an id.  ``running``: an apply holds the lock.
    ``codes``: the policies' code the service is asked about (address -> code), asked
    while the server is read; a policy the plan then creates that was not among them
    (a missing one) is asked after.  ``offers``: what the endpoint was found to offer
    before (the caller keeps it)."""
    offers = offers if offers is not None else Offers()
    asking = asyncio.ensure_future(code.ask(client, codes or {}))
    try:
        observed = await observe(client, entries, ignore, offers=offers)
    except BaseException:
        asking.cancel()
        raise
    seen = observed.observation(running=running)
    plan = make(seen)
    looked = creating(plan)
    imports = [c for c in plan.changes if c.action == Action.IMPORT and c.id]
    ending = [c for c in plan.changes if c.action in (Action.DELETE, Action.REPLACE) and c.id]
    if looked or imports or ending:
        reader = Reader(client, observed.reading, offers=offers)
        found = await look_up(reader, looked)
        read_back = await read_imports(reader, imports)
        ids = {i for ids in found.values() for i in ids} | {
            c.id for c in (*imports, *ending) if c.id}
        before = _ids(entries)
        if recheck is not None and any((a.split("/", 1)[0], i) not in before
                                       for a, got in found.items() for i in got):
            now = _ids(recheck()) - before
            found = {a: tuple(i for i in got if (a.split("/", 1)[0], i) not in now)
                     for a, got in found.items()}
        seen = dataclasses.replace(
            seen, found=found, imports=read_back,
            owners=owners(ids) if owners is not None and ids else {},
            read_with={**{c.address: found_with(BY_KIND[c.kind]) for c in looked},
                       **{c.address: read_with(BY_KIND[c.kind]) for c in imports}})
    verdicts = await asking
    more = {c.address: str(c.request["code"]) for c in plan.changes
            if c.kind == POLICY_KIND and c.request is not None
            and isinstance(c.request.get("code"), str) and c.address not in (codes or {})
            and c.action in (Action.CREATE, Action.REPLACE)}
    if more:
        verdicts = verdicts.merged(await code.ask(client, more))
    if verdicts.answers:
        seen = verdicts.observed(seen)
    if verdicts.answers or looked or imports or ending:
        plan = make(seen)
    annotate(plan, observed)
    code.note(plan, verdicts, len(codes or {}) + len(more))
    return plan, observed, seen


def _ids(entries: Mapping[str, Entry]) -> set[tuple[str, str]]:
    """(kind, id) of every object ``entries`` record."""
    return {(e.kind, e.id) for e in entries.values() if e.id}


def annotate(plan: Plan, observed: Observed) -> None:
    """Put a refresh's findings on ``plan``: ``outside`` on each change, the drift list
    (of the plan's addresses: ``--target`` leaves the rest out), one check line."""
    addresses = {c.address for c in plan.changes}
    plan.refreshed = True
    plan.drift = [d for d in observed.drift if d.address in addresses]
    changed = {d.address: d.diff for d in plan.drift if d.kind == DriftKind.CHANGED}
    for change in plan.changes:
        if change.address in changed:
            change.outside = changed[change.address]
    reading = observed.reading
    say_unread(plan, "the endpoint does not offer its read", reading.live.keys())
    status = (CheckStatus.FAILED if reading.failed
              else CheckStatus.WARNING if reading.endpoint_lacks_reads else CheckStatus.PASSED)
    plan.checks.append(Check(REFRESH_CHECK, status, reading.summary()))


def skipped(plan: Plan, why: str) -> None:
    """The plan's line for a refresh not made."""
    plan.checks.append(Check(REFRESH_CHECK, CheckStatus.SKIPPED,
                             f"the server was not read: {why}"))
