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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from govsync.api.kinds import BY_KIND
from govsync.plan import (
    REFRESH_CHECK,
    Action,
    Check,
    CheckStatus,
    Drifted,
    DriftKind,
    Plan,
    protected,
    protected_reason,
    say_unread,
)
from govsync.refresh.adopt import block_existing, unread_reason, verify_id, verify_imports
from govsync.refresh.compare import by_address, compare, compare_read, outside_changes
from govsync.refresh.reading import CONCURRENCY, LANES, Reading, read
from govsync.state import Entry

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient

__all__ = ["LANES", "Observed", "Reading", "annotate", "block_existing", "compare", "observe",
           "outside_changes", "read", "refreshed", "skipped", "unread_reason", "verify_id",
           "verify_imports"]


# -- the plan's view ------------------------------------------------------------------


@dataclass
class Observed:
    """A refresh's outcome: what was read, and what differs from what govsync applied."""

    reading: Reading
    drift: list[Drifted]

    @property
    def missing(self) -> frozenset[str]:
        return frozenset(d.address for d in self.drift if d.kind == DriftKind.MISSING)


async def observe(client: AsyncClient, entries: Mapping[str, Entry],
                  ignore: Mapping[str, Sequence[str]] | None = None,
                  *, concurrency: int = CONCURRENCY) -> Observed:
    """Read every recorded object and compare it with what govsync last applied (each
    kind as soon as it is read, while the others are read)."""
    drift: list[Drifted] = []
    reading = await read(client, entries, concurrency=concurrency,
                         done=lambda read, reading: drift.extend(
                             compare_read(read, reading, ignore)))
    return Observed(reading, sorted(drift, key=by_address))


async def refreshed(client: AsyncClient, entries: Mapping[str, Entry],
                    make: Callable[[frozenset[str]], Plan],
                    ignore: Mapping[str, Sequence[str]] | None = None,
                    heal: dict[str, Drifted] | None = None,
                    recheck: Callable[[], Mapping[str, Entry]] | None = None,
                    observed: Observed | None = None,
                    ) -> tuple[Plan, Observed]:
    """Refresh (``observed``: read already), then the plan ``make`` makes with the
    missing objects as creates, its creates of objects that exist unrecorded blocked,
    and the refresh's findings on it.  ``heal`` (self-heal): filled with what changed
    outside govsync before ``make`` runs, for it to plan the updates that undo it."""
    if observed is None:
        observed = await observe(client, entries, ignore)
    if heal is not None:
        heal.update((d.address, d) for d in observed.drift if d.kind == DriftKind.CHANGED)
    plan = make(observed.missing)
    await block_existing(client, plan, entries, observed.reading, recheck)
    await verify_imports(client, plan, observed.reading)
    annotate(plan, observed)
    return plan, observed



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
    _check_endings(plan, reading)
    say_unread(plan, "the endpoint does not offer its read", reading.live.keys())
    status = (CheckStatus.FAILED if reading.failed
              else CheckStatus.WARNING if reading.endpoint_lacks_reads else CheckStatus.PASSED)
    plan.checks.append(Check(REFRESH_CHECK, status, reading.summary()))


def _check_endings(plan: Plan, reading: Reading) -> None:
    """Deletes the server would refuse or the endpoint cannot make, blocked in the plan:
    an object protected live (terminationProtection true), an endpoint without the
    deletes of api-lifecycle.md (``serve --operations spec``)."""
    lacks = reading.offers_reads is False or reading.endpoint_lacks_reads
    for change in plan.changes:
        update = BY_KIND[change.kind].update
        if (change.action == Action.UPDATE and lacks and update is not None
                and not update.spec):
            change.action, change.operation = Action.BLOCKED, None
            change.reason = (f"this endpoint does not offer {update.name} (it serves the "
                             "spec's operations only): revert the change in the manifest")
        if change.action != Action.DELETE:
            continue
        live = reading.live.get(change.address)
        if protected(live):
            change.action, change.operation = Action.BLOCKED, None
            change.reason = protected_reason(change.reason.split(":", 1)[0], "live")
        elif lacks:
            change.action, change.operation = Action.BLOCKED, None
            change.reason = (f"{change.reason.split(':', 1)[0]}: this endpoint does not offer "
                             "the deletes of api-lifecycle.md; forget it instead (destroy: "
                             "false, or `govsync apply --forget-orphans`)")


def skipped(plan: Plan, why: str) -> None:
    """The plan's line for a refresh not made."""
    plan.checks.append(Check(REFRESH_CHECK, CheckStatus.SKIPPED,
                             f"the server was not read: {why}"))

