"""What plan, drift and apply read from the server: the refresh of the recorded
objects (contract section 12) and the live references (a Policy's groupName)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from govsync import envvars, live, runtime
from govsync.api.kinds import BY_KIND
from govsync.commands.endpoint import endpoint_change, key_rejected
from govsync.errors import (
    ApiError,
    BlockedPlanError,
    ManifestError,
    Problem,
    TransportError,
    UnauthorizedError,
)
from govsync.live import LiveValue
from govsync.manifests.manifest import ManifestSet
from govsync.plan import (
    CODE_CHECK,
    REFRESH_CHECK,
    Action,
    Check,
    CheckStatus,
    Observation,
    Plan,
    Recorded,
    creating,
    say_unread,
    unrecorded,
)
from govsync.render.reasons import reason_words
from govsync.settings import Settings
from govsync.state import Entry, Snapshot, exists

if TYPE_CHECKING:
    from govsync import refresh
    from govsync.api.client import AsyncClient
    from govsync.api.resource import Offers

# A plan made from the manifests and what the server showed (nothing: an offline plan).
MakePlan = Callable[[Observation], Plan]


def refreshing(settings: Settings) -> bool:
    """Whether this run reads the recorded objects from the server (contract section 12)."""
    return settings.refresh and bool(settings.endpoint)


class Refreshed(NamedTuple):
    """A plan, what the refresh observed (None: the server was not read), and the
    observation the plan was decided from."""

    plan: Plan
    observed: refresh.Observed | None
    seen: Observation


def unread(plan: Plan, settings: Settings, codes: Mapping[str, str] | None = None) -> Plan:
    """A plan made without a refresh says so, and what its updates send; and that the
    service was not asked about policies' code."""
    say_unread(plan, "--refresh=false" if settings.endpoint else "no endpoint")
    if settings.endpoint:
        plan.checks.append(Check(REFRESH_CHECK, CheckStatus.SKIPPED, (
            "the server was not read (--refresh=false): compared with the recorded state "
            "only; outside changes, missing objects and duplicates are not looked for")))
    if codes:
        plan.checks.append(Check(CODE_CHECK, CheckStatus.SKIPPED, (
            f"GetPolicyCodeValidity not asked ("
            f"{'--refresh=false' if settings.endpoint else 'no endpoint'}): the service's "
            f"check of {len(codes)} policies' code was not made (govsync validate compiles "
            "it offline)")))
    return plan


def refreshed(settings: Settings, snapshot: Snapshot, make: MakePlan, *,
              owners: refresh.Owners | None = None, running: bool = False,
              codes: Mapping[str, str] | None = None,
              offers: Offers | None = None) -> Refreshed:
    """The plan ``make`` makes, after a refresh where this run reads the server, and the
    service asked about the policies' ``codes`` (address -> code) meanwhile (``offers``:
    what the endpoint was found to offer before, kept by the caller)."""
    if not refreshing(settings):
        plan, seen = offline(make, owners)
        return Refreshed(unread(plan, settings, codes), None, seen)
    return runtime.run(refreshed_async(settings, snapshot, make, owners=owners,
                                       running=running, codes=codes, offers=offers))


def offline(make: MakePlan, owners: refresh.Owners | None) -> tuple[Plan, Observation]:
    """The plan made without reading the server (and what it was made from); what it
    adopts, deletes or replaces is still held to whose it is (the state knows: an id
    another workspace records)."""
    plan = make(Observation())
    ids = {c.id for c in plan.changes if c.id and c.action in (
        Action.IMPORT, Action.DELETE, Action.REPLACE)}
    found = owners(ids) if owners is not None and ids else {}
    if not found:
        return plan, Observation()
    seen = Observation(owners=found)
    return make(seen), seen


async def refreshed_async(settings: Settings, snapshot: Snapshot, make: MakePlan, *,
                          owners: refresh.Owners | None = None, running: bool = False,
                          codes: Mapping[str, str] | None = None,
                          offers: Offers | None = None) -> Refreshed:
    """Read every recorded object, look up what the plan would create, ask the service
    about the policies' ``codes`` meanwhile, then plan from all of it.  Not where the
    state belongs to another endpoint, whose ids would all look missing here."""
    if not refreshing(settings):
        plan, seen = offline(make, owners)
        return Refreshed(unread(plan, settings, codes), None, seen)
    from govsync import refresh  # with asyncio: offline commands never load it

    if snapshot.entries and endpoint_change(snapshot, settings):
        plan, seen = offline(make, owners)
        refresh.skipped(plan, "the state was applied against another endpoint")
        refresh.code.skipped(plan, len(codes or {}), "the state was applied against "
                             "another endpoint")
        return Refreshed(plan, None, seen)
    try:
        async with runtime.client(settings, connections=refresh.LANES, reads=True) as client:
            return Refreshed(*await refresh.refreshed(
                client, snapshot.entries, make, settings.selection.ignore_changes,
                lambda: recorded_now(settings), owners=owners, running=running,
                codes=codes, offers=offers))
    except UnauthorizedError as exc:
        raise key_rejected(exc) from exc


def recorded_now(settings: Settings) -> Mapping[str, Entry]:
    """The workspace's entries as the state holds them now (a plan read them before the
    server, without the lock)."""
    if not exists(settings.state):
        return {}
    with runtime.open_state(settings) as store:
        return store.snapshot(settings.workspace, responses=False, create=False).entries


async def check_creates(plan: Plan, settings: Settings, snapshot: Snapshot,
                        owners: refresh.Owners | None = None,
                        offers: Offers | None = None) -> None:
    """A saved plan's creates, at apply time: none of an object that now exists on the
    server unrecorded (BlockedPlanError follows; nothing is sent).  ``offers``: what
    the endpoint was found to offer before."""
    from govsync import refresh

    looked = creating(plan)
    if not refreshing(settings) or not looked:
        return
    try:
        async with runtime.client(settings) as client:
            reader = refresh.Reader(client, refresh.Reading(), offers=offers)
            found = await refresh.look_up(reader, looked)
    except UnauthorizedError as exc:
        raise key_rejected(exc) from exc
    if not reader.reading.complete:
        raise ApiError(f"cannot check that the plan's creates do not exist on the server yet: "
                       f"{reader.reading.summary()}; nothing was applied")
    seen = Observation(read=True, found=found,
                       owners=owners({i for ids in found.values() for i in ids})
                       if owners is not None else {})
    recorded = Recorded(snapshot.entries)
    entries = snapshot.entries
    refused = []
    for change in looked:
        mine = entries[change.address].id if change.address in entries else None
        why = unrecorded(BY_KIND[change.kind], change.address, seen, recorded, mine)
        if why is not None:
            shown = dataclasses.replace(change, action=Action.BLOCKED, id=why.id, why=why)
            refused.append(f"{change.address}: {reason_words(shown)}")
    if refused:
        raise BlockedPlanError(f"the plan cannot be applied as it was made: {'; '.join(refused)}"
                               "; nothing was applied: plan again")


def refused_partial(observed: refresh.Observed | None, doing: str) -> None:
    """ApiError when some recorded objects could not be read: never act on a partial
    picture."""
    if observed is None or observed.reading.complete:
        return
    raise ApiError(f"{observed.reading.summary()}; {doing}: run again once the server "
                   "answers (or --refresh=false to compare with the recorded state only)")


def skip_live(plan: Plan, values: list[LiveValue], why: str) -> None:

    for ref in live.refs(values):
        plan.checks.append(Check(ref.check, CheckStatus.SKIPPED, f"{ref.noun}s not checked: {why}"))


async def check_live(plan: Plan, manifests: ManifestSet, client: AsyncClient,
                     addresses: list[str] | None, *, unreachable: bool = False) -> None:
    """Check the live references of ``addresses`` (None: all); record it on ``plan``.

    ManifestError for names that do not exist.  An endpoint that cannot be read is
    an ApiError naming it and why with ``unreachable`` (plan: a wrong endpoint in
    CI must not give a green pull request), else the check is skipped (apply: its
    own requests then say it)."""

    values = live.wanted(manifests, addresses)
    if not values:
        return
    try:
        existing = await live.read(client, values)
    except UnauthorizedError as exc:
        raise key_rejected(exc) from exc
    except TransportError as exc:
        if unreachable:
            raise ApiError(f"cannot run the live checks ({' and '.join(live.operations(values))})"
                           f": {exc.message}; check the endpoint (--endpoint, "
                           f"{envvars.ENDPOINT} or the project's environment)") from exc
        skip_live(plan, values, f"endpoint unreachable ({exc.message})")
        return
    except ApiError as exc:
        if unreachable:
            raise ApiError(f"cannot run the live checks: {live.failed(values, exc)}") from exc
        skip_live(plan, values, live.failed(values, exc))
        return
    missing = live.missing(values, existing)
    if missing:
        raise ManifestError([
            Problem(*v.manifest.where(f"spec.{v.ref.field}"),
                    f"{v.message}; create the {v.ref.word} or fix the name")
            for v in missing
        ])
    for ref in live.refs(values):
        count = sum(v.ref == ref for v in values)
        plan.checks.append(Check(ref.check, CheckStatus.PASSED, f"{count} {ref.noun}(s) exist"))


def moved_error(values: list[LiveValue], moved: str) -> str:
    """Why the live checks were not run against an endpoint the state does not record
    (a plan that could not check them is not a green one)."""
    return (f"cannot run the live checks ({' and '.join(live.operations(values))}): {moved}; "
            "nothing is sent to an endpoint the workspace's state does not record: point "
            "the endpoint back, or, if its objects really are there now, pass "
            "--allow-endpoint-change")
