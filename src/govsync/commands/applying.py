"""``govsync apply`` (and the agent's): one path for the three sources.

    apply(source, settings, options)
      scoped          the source is for this run (preflight.py)
      lock            the workspace lock, held to the end; the state read once
      locked          recorded environment; a saved plan unapplied, authentic
      preflight       the plan made or taken, approvals, rules, secrets: a Preflight
      _send           one client: live checks, confirm, claim the plan, record the
                      governance, the Applier (fenced before each request: a lost
                      lock stops it with LockLostError), the history record

The whole apply runs in one event loop with one API client.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

from govsync import audit, endpoints, runtime
from govsync.api.catalog import readable_kinds
from govsync.apply import Applier, ApplyResult
from govsync.commands.endpoint import endpoint_change, identity
from govsync.commands.observing import check_live, refreshing
from govsync.commands.preflight import Preflight, applied_already, locked, preflight, scoped
from govsync.commands.sources import ApplyOptions, Saved, Source
from govsync.commands.workspace import check_secrets_set
from govsync.errors import ConfigError, GovsyncError, PlanError, StateError
from govsync.plan import Action, Plan
from govsync.planfile import plan_digest
from govsync.scheduling import Throttle
from govsync.settings import Settings
from govsync.state import APPLIED, PENDING, UNCERTAIN, LockHolder, Snapshot, StateStore


def apply(source: Source, settings: Settings,
          options: ApplyOptions = ApplyOptions()) -> tuple[Plan, ApplyResult]:
    """Plan the manifests (or take a saved plan) and apply it under the workspace lock.

    Before anything is sent, with the lock held: the workspace's recorded
    environment, its recorded approvals, and its rules on what would be sent
    (``preflight``).  ``options.confirm`` is shown the plan and returns whether to
    go on; ``options.stopping``, once set, lets the calls in flight end and be
    recorded, and sends nothing more.
    """

    settings = scoped(source, settings)
    if not isinstance(source, Saved):
        check_secrets_set(source.manifests, settings)
    with runtime.open_state(settings) as store, _held(store, settings.workspace,
                                                      LockHolder.me(), options.lock_timeout):
        # The API's answers recorded in state are for `state show`: planning
        # and applying never read them (at 100,000 entries, 0.6 s).
        snapshot = store.snapshot(settings.workspace, responses=not isinstance(source, Saved)
                                  and refreshing(settings))
        record = locked(source, store, snapshot, settings)
        try:
            async def run() -> tuple[Plan, ApplyResult]:
                ready = await preflight(source, store, snapshot, settings, record,
                                        options.offers)
                return await _send(source, ready, store, snapshot, settings, options)

            return runtime.run(run())
        except KeyboardInterrupt:
            raise _interrupted(store, settings, snapshot) from None


@contextlib.contextmanager
def _held(store: StateStore, workspace: str, holder: LockHolder,
          timeout: float) -> Iterator[None]:
    """The workspace lock, taken for ``holder`` and released at the end."""
    store.acquire(workspace, holder, timeout=timeout)
    try:
        yield
    finally:
        store.release(workspace)


async def _send(source: Source, ready: Preflight, store: StateStore, snapshot: Snapshot,
                settings: Settings, options: ApplyOptions) -> tuple[Plan, ApplyResult]:
    """Apply a checked plan: what is sent, recorded as it is answered."""
    plan, record, target = ready.plan, ready.recorded, ready.target
    evidence = source.evidence
    work = plan.work(forget_orphans=options.forget_orphans)
    caught_up = plan.caught_up()
    if not work and plan.governance is None and not caught_up:
        if record is None and snapshot.lineage:
            # A workspace applied before governance was recorded: it records it now.
            store.set_governance(settings.workspace, target.stored(identity(settings)))
        return plan, ApplyResult()
    changed = endpoint_change(snapshot, settings)
    if changed and not options.allow_endpoint_change and work:
        raise ConfigError(f"{changed}: nothing was sent; pass --allow-endpoint-change "
                          "if this state's objects really live at the new endpoint")
    throttle = Throttle(options.parallelism)
    fields = ready.audit
    hashing = None
    # The client is made before anything is shown: no endpoint is an error now.
    async with runtime.client(settings, connections=options.parallelism,
                              on_retry=throttle.on_retry) as client:
        if not isinstance(source, Saved):
            # Owner groups of the policies this apply creates (the field cannot
            # change after create), so an apply with nothing to do sends nothing.
            creates = [c.address for c in plan.changes if c.action == Action.CREATE]
            await check_live(plan, source.manifests, client, creates)
        # The audit's hash of an unsaved plan, whose checks are now all in, is
        # computed on a worker thread while the plan is shown and applied.
        if fields.plan_hash is None:
            import asyncio

            hashing = asyncio.get_running_loop().run_in_executor(None, plan_digest, plan)
        if options.confirm is not None and (work or plan.governance is not None) \
                and not options.confirm(plan):
            raise PlanError("apply cancelled; nothing was changed")
        if evidence is not None:
            claimed = store.claim_plan(settings.workspace, plan.id)
            if claimed is not None:
                raise applied_already(evidence, claimed)
        if ready.records_governance:
            store.set_governance(settings.workspace, target.stored(identity(settings)))
        endpoint = identity(settings)
        # The endpoint is recorded with the first answer it gives: an apply that
        # reached nothing (a wrong --allow-endpoint-change) records nothing.
        # A recorded endpoint written another way is not recorded again.
        record_endpoint = (endpoint if work and endpoint
                           and not endpoints.same(snapshot.endpoint, endpoint) else None)
        applier = Applier(store, snapshot, client, environ=settings.environ, throttle=throttle,
                          reporter=options.reporter, api_key=settings.api_key,
                          endpoint=record_endpoint, stopping=options.stopping,
                          live=ready.observed.reading.live if ready.observed is not None
                          else None, reads=settings.refresh)
        result = await applier.run(plan, work)
        await applier.record_live(caught_up)
        if evidence is not None and work and not result.took_effect:
            # Nothing changed (a refused key, say): the plan is as good as before.
            with contextlib.suppress(StateError):
                store.unclaim_plan(settings.workspace, plan.id)
                if ready.records_governance:
                    store.set_governance(settings.workspace,
                                         record.stored(None) if record is not None else None)
        if hashing is not None:
            fields = dataclasses.replace(fields, plan_hash="sha256:" + await hashing)
    try:
        store.add_history(settings.workspace, audit.record(plan, result, fields.as_dict()))
    except StateError as exc:
        if not result.stopped:
            result.stopped = f"the apply's history was not recorded: {exc}"
    return plan, result


def _interrupted(store: StateStore, settings: Settings, before: Snapshot) -> GovsyncError:
    """What an interrupted apply leaves: how much it applied, and how to settle the rest."""

    try:
        entries = store.snapshot(settings.workspace, responses=False).entries
    except StateError:
        return GovsyncError("interrupted; run `govsync plan` to see what was applied")
    applied = sum(1 for a, e in entries.items() if e.status == APPLIED and (
        a not in before.entries or before.entries[a].id != e.id
        or before.entries[a].read_spec() != e.read_spec()))
    done = f"interrupted after {applied} change(s) were applied and recorded"
    unsure = sorted(a for a, e in entries.items() if e.status in (PENDING, UNCERTAIN))
    if not unsure:
        return GovsyncError(f"{done}; nothing is uncertain: run `govsync plan` to see what "
                            "is left")
    shown = " ".join(unsure[:5]) + (" ..." if len(unsure) > 5 else "")
    unreadable = sorted({entries[a].kind for a in unsure} - set(readable_kinds()))
    look = (f"the API cannot read {', '.join(unreadable)}, so look for them where you can "
            "see them (the service's console or its own logs)" if unreadable
            else "check the server")
    return GovsyncError(
        f"{done}; {len(unsure)} create(s) were sent but not answered and are now uncertain "
        f"({shown}): {look}, then settle each with `govsync state resolve ADDR --id ID`, "
        "or those that do not exist with `govsync state resolve ADDR... --absent`")
