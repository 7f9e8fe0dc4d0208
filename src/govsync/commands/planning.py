"""``govsync plan`` (and the dashboard's and the agent's plans); the saved plan it
writes (``plan --out``) and ``show PLAN``'s verification are saving.py's.

A plan takes no lock and writes nothing, except ``plan --out`` of a workspace
never written: the workspace is made for the saved plan's key once the plan
has passed every check.  One ``Workspace`` carries the store through it all.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from govsync import governance, impacts, policytests, runtime
from govsync.api.kinds import POLICY_KIND
from govsync.commands.endpoint import endpoint_change, identity
from govsync.commands.observing import (
    check_live,
    moved_error,
    refreshed,
    refreshing,
    skip_live,
)
from govsync.commands.workspace import (
    Workspace,
    check_secrets_set,
    read_snapshot,
    with_secrets,
)
from govsync.errors import (
    ApiError,
    ManifestError,
    PlanKeyUnavailable,
    Problem,
    StateError,
)
from govsync.governance import Governance
from govsync.live import wanted
from govsync.manifests.manifest import ManifestSet
from govsync.plan import Check, CheckStatus, Observation, Plan, codes_to_check, make_plan
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import LockHolder, Snapshot

if TYPE_CHECKING:
    from govsync import refresh
    from govsync.api.resource import Offers
    from govsync.rules import Rule


@dataclass
class Planned:
    """A plan, with what stands beside it: the errors of the rules (when the caller
    collects them rather than stop at the first), and who holds the workspace lock
    meanwhile (an apply in flight; None: nobody)."""

    plan: Plan
    running: LockHolder | None = None
    rule_errors: list[Problem] = field(default_factory=list)


def plan(manifests: ManifestSet, settings: Settings, *, saving: bool = False,
         read_secrets: bool = True, rule_errors: list[Problem] | None = None,
         workspace: Workspace | None = None, allow_endpoint_change: bool = False,
         impact: impacts.Request | None = None) -> Plan:
    """Diff the manifests against the workspace's state (no lock taken).

    Writes nothing, unless ``saving`` (``plan --out``) a workspace never written
    with credentials that may write: a saved plan is authenticated with the
    workspace's key, so the workspace is made once the plan has passed every
    check (see ``_in_new_workspace``).  With an endpoint, policy owner groups
    are checked live (ListGroups).  GovernanceError when the workspace belongs
    to another environment than the one selected.  With ``rule_errors``, the errors of
    rules are put there and the plan returned all the same (the dashboard shows both).
    ``workspace``: the caller's open state (``plan --out`` then writes through it);
    ``allow_endpoint_change``: the live references are read at the endpoint given
    though the state records another; ``impact``: what of the created or code-changed
    policies' impact to measure (``impacts.requested``), beside the plan's reads."""

    with contextlib.ExitStack() as stack:
        if workspace is None:
            workspace = stack.enter_context(Workspace(settings))
        return _plan(manifests, settings, workspace, saving=saving, read_secrets=read_secrets,
                     rule_errors=rule_errors, allow_endpoint_change=allow_endpoint_change,
                     impact=impact).plan


def planned(manifests: ManifestSet, settings: Settings, offers: Offers | None = None,
            impact: impacts.Request | None = None) -> Planned:
    """The agent's plan: with secrets, the rules' errors collected, the lock's holder.
    ``offers``: what the endpoint was found to offer, kept across the agent's cycles;
    ``impact``: what of the policies' impact to measure (the environment's settings)."""

    errors: list[Problem] = []
    with Workspace(settings) as workspace:
        found = _plan(manifests, settings, workspace, saving=False, read_secrets=True,
                      rule_errors=errors, offers=offers, impact=impact)
    found.rule_errors = errors
    return found


def _plan(manifests: ManifestSet, settings: Settings, workspace: Workspace, *, saving: bool,
          read_secrets: bool, rule_errors: list[Problem] | None,
          allow_endpoint_change: bool = False, offers: Offers | None = None,
          impact: impacts.Request | None = None) -> Planned:
    if read_secrets:
        check_secrets_set(manifests, settings)
    settings = with_secrets(settings, manifests)

    selection = settings.selection
    proposed = governance.of_project(selection.project, selection.environment)
    running, governed = None, {}
    store = workspace.existing()
    if store is not None:
        snapshot = store.snapshot(settings.workspace, responses=refreshing(settings),
                                  create=False)
        running = store.running(settings.workspace)
        if snapshot.governance is None and settings.endpoint:
            governed = store.governed()
    else:
        snapshot = read_snapshot(settings)
    record = governance.recorded(snapshot.governance, settings.workspace)
    governance.check_environment(record, selection.name, settings.workspace, selection.project)
    seen: list[Observation] = [Observation()]
    # Impact measured beside the reads, from what the state shows; finished on the plan.
    measuring = (impacts.start(impact, settings, manifests, snapshot.entries, offers)
                 if impact is not None else None)

    def make(observation: Observation) -> Plan:
        seen[0] = observation
        return make_plan(manifests, snapshot, environ=settings.environ,
                         targets=settings.targets, read_secrets=read_secrets,
                         prune=selection.prune, replace=settings.replace,
                         ignore=selection.ignore_changes, observation=observation)

    result, observed, observation = refreshed(
        settings, snapshot, make, running=running is not None,
        owners=(lambda ids: store.recorded_elsewhere(settings.workspace, ids))
        if store is not None else None, codes=codes_to_check(manifests, snapshot.entries),
        offers=offers)
    result.secrets_read = read_secrets
    tested(result, manifests, snapshot, observed, observation)
    if measuring is not None:
        live = observed.reading.live if observed is not None else {}
        measuring.finish(result, manifests,
                         policytests.recorded_code(result, snapshot.entries, live))
    governed_by(result, record, proposed, selection.name)
    check_rules(result, manifests, governance.rules_to_check(record, proposed),
                selection.name, snapshot, rule_errors)
    if running is not None:

        result.checks.append(Check("lock", CheckStatus.WARNING, (
            f"an apply is running on workspace {settings.workspace!r} ({running}): the creates "
            "it has in flight show as uncertain until it ends; do not settle them with "
            "`govsync state resolve` meanwhile (it is refused while the apply runs)")))
    found = governance.governors(governed, settings.workspace, identity(settings))
    if found:
        result.checks.append(Check("governance", CheckStatus.WARNING, governance.new_on_governed(
            settings.workspace, safe_url(identity(settings) or ""), found)))
    changed = endpoint_change(snapshot, settings)
    if changed:

        result.checks.append(Check("endpoint", CheckStatus.WARNING,
                                   f"{changed}; apply will refuse without --allow-endpoint-change"))
    # With --target, the targeted objects' live references only.
    _check_live(result, manifests, settings, [
        c.address for c in result.changes if c.address in manifests.objects]
        if settings.targets else None,
        moved="" if allow_endpoint_change else changed)
    if saving and read_secrets and not snapshot.lineage and _may_save(workspace):
        result = _in_new_workspace(result, manifests, workspace, seen[0])
    return Planned(result, running)


def tested(plan: Plan, manifests: ManifestSet, snapshot: Snapshot,
           observed: refresh.Observed | None, seen: Observation) -> None:
    """The tests of each created or code-changed policy on its change (contract section
    13), once the plan is decided: the recorded code is the live code where the server
    was read, else the code in state."""
    if not any(c.kind == POLICY_KIND for c in plan.changes):
        return
    live = observed.reading.live if observed is not None else {}
    policytests.annotate(plan, manifests,
                         policytests.recorded_code(plan, snapshot.entries, live), seen)


def _check_live(plan: Plan, manifests: ManifestSet, settings: Settings,
                targeted: list[str] | None, *, moved: str = "") -> None:
    """The live references of ``targeted`` (None: all) checked, on ``plan``.  Not where
    the state was applied against another endpoint (``moved``, ``endpoint_change``):
    nothing is sent to an endpoint the workspace does not record, as the refresh
    reads none (a commit that changes an environment's endpoint would have it sent
    the key)."""
    values = wanted(manifests, targeted)
    if not values:
        return
    if not settings.endpoint:
        skip_live(plan, values, "no endpoint configured (offline plan)")
        return
    if moved:
        raise ApiError(moved_error(values, moved))

    async def check() -> None:
        async with runtime.client(settings, reads=True, max_retries=1) as client:
            await check_live(plan, manifests, client, targeted, unreachable=True)

    runtime.run(check())


def governed_by(plan: Plan, record: Governance | None, proposed: Governance,
                environment: str | None) -> None:
    """The plan's environment, and the governance change it carries (if any)."""

    plan.environment = environment
    plan.governance = governance.change(record, proposed)


def _may_save(workspace: Workspace) -> bool:
    """Whether these credentials may read (or make) the workspace's plan key."""

    try:
        workspace.store().plan_key(workspace.settings.workspace)
    except PlanKeyUnavailable:
        return False
    return True


def _in_new_workspace(planned: Plan, manifests: ManifestSet, workspace: Workspace,
                      seen: Observation) -> Plan:
    """``plan --out`` of a workspace never written: the workspace (and the state file)
    made now that the plan has passed every check, so a plan that fails leaves no
    state behind; then planned again from what the server showed, since the
    fingerprints of the secrets a saved plan carries are made with the workspace's
    key."""

    settings = workspace.settings
    snapshot = workspace.store().snapshot(settings.workspace, responses=False)
    if snapshot.serial or snapshot.entries:
        raise StateError("the state changed while the plan was made: run `govsync plan` again")
    again = make_plan(manifests, snapshot, environ=settings.environ, targets=settings.targets,
                      prune=settings.selection.prune, replace=settings.replace,
                      ignore=settings.selection.ignore_changes, observation=seen)
    again.checks, again.environment, again.governance = (
        planned.checks, planned.environment, planned.governance)
    again.drift, again.refreshed = planned.drift, planned.refreshed
    tests = {c.address: (c.tests, c.impact) for c in planned.changes}
    for change in again.changes:
        change.tests, change.impact = tests.get(change.address, (None, None))
    return again


def check_rules(plan: Plan, manifests: ManifestSet, rules: tuple[Rule, ...],
                environment: str | None, snapshot: Snapshot,
                errors: list[Problem] | None = None) -> None:
    """Rules (guardrails) on the manifests: ManifestError for an error (or, given
    ``errors``, the errors put there); results as checks."""
    if not rules:
        return  # (without importing the rules engine)

    try:
        governance.check_plan(plan, manifests, rules, environment, snapshot)
    except ManifestError as exc:
        if errors is None:
            raise
        errors.extend(exc.problems)
