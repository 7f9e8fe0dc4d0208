"""The library behind the commands: each command calls one function here.

Everything the CLI does is reachable without click: ``Settings`` carries the
global options, manifests come loaded (``manifests.load``) and saved plans
read (``planfile.read``) by the caller, and ``plan``, ``apply``, ``drift``
and the state commands take them.  An apply runs in one event loop with one
API client, from the live checks to the last change.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from govsync import approvals, audit, envvars, governance, live, planfile, redact, runtime
from govsync.api.catalog import readable_kinds
from govsync.api.kinds import BY_KIND
from govsync.approvals import Approver
from govsync.drift import DriftReport, live_checks, unobservable
from govsync.errors import (
    ApiError,
    ApprovalError,
    BlockedPlanError,
    ConfigError,
    GovernanceError,
    GovsyncError,
    ManifestError,
    PlanError,
    PlanKeyUnavailable,
    Problem,
    StalePlanError,
    StateError,
    StateLockedError,
    TransportError,
    UnauthorizedError,
)
from govsync.governance import Governance
from govsync.live import LiveValue, wanted
from govsync.manifests.model import ManifestSet
from govsync.plan import (
    Action,
    Check,
    CheckStatus,
    Drifted,
    Plan,
    blocked_advice,
    make_plan,
    missing_secrets,
    recorded_at,
    say_unread,
)
from govsync.planfile import SavedPlan, plan_digest, review_digest, reviewed_change
from govsync.redact import url as safe_url
from govsync.rules import Rule, check_sent
from govsync.settings import Settings
from govsync.state import (
    APPLIED,
    PENDING,
    UNCERTAIN,
    Entry,
    LockHolder,
    Snapshot,
    StateStore,
    empty_snapshot,
    exists,
    export,
    now,
)
from govsync.values import KNOWN_AFTER_APPLY, MissingSecret, Resolver

if TYPE_CHECKING:
    from govsync import refresh
    from govsync.api.client import AsyncClient
    from govsync.apply import ApplyResult, Reporter

__all__ = ["Settings", "apply", "drift", "plan", "write_plan"]


def check_secrets_set(manifests: ManifestSet, settings: Settings) -> None:
    """Every secret's variable is set: checked before any state is touched."""

    problems = missing_secrets(manifests, settings.environ)
    if problems:
        raise ManifestError(problems)


def read_snapshot(settings: Settings, *, responses: bool = False) -> Snapshot:
    """The workspace's state for a command that only reads: a state, or a workspace,
    that does not exist yet reads as empty and is not created."""

    if not exists(settings.state):
        return empty_snapshot(settings.workspace)
    with runtime.open_state(settings) as store:
        return store.snapshot(settings.workspace, responses=responses, create=False)


def plan(manifests: ManifestSet, settings: Settings, *, saving: bool = False,
         read_secrets: bool = True, rule_errors: list[Problem] | None = None) -> Plan:
    """Diff the manifests against the workspace's state (no lock taken).

    Writes nothing, unless ``saving`` (``plan --out``) a workspace never written
    with credentials that may write: a saved plan is authenticated with the
    workspace's key, so the workspace is made once the plan has passed every
    check (see ``_in_new_workspace``).  With an endpoint, policy owner groups
    are checked live (ListGroups).  GovernanceError when the workspace belongs
    to another environment than the one selected.  With ``rule_errors``, the errors of
    rules are put there and the plan returned all the same (the dashboard shows both)."""

    if read_secrets:
        check_secrets_set(manifests, settings)

    selection = settings.selection
    proposed = governance.of_project(selection.project, selection.environment)
    running, governed = None, {}
    if exists(settings.state):
        with runtime.open_state(settings) as store:
            snapshot = store.snapshot(settings.workspace, responses=_refreshing(settings),
                                      create=False)
            running = store.running(settings.workspace)
            if snapshot.governance is None and settings.endpoint:
                governed = store.governed()
    else:
        snapshot = read_snapshot(settings)
    record = governance.recorded(snapshot.governance, settings.workspace)
    governance.check_environment(record, selection.name, settings.workspace, selection.project)
    heal = _healing(settings)
    result, _observed = _refreshed(settings, snapshot, lambda missing: make_plan(
        manifests, snapshot, environ=settings.environ, targets=settings.targets,
        read_secrets=read_secrets, missing=missing, prune=settings.selection.prune,
        replace=settings.replace, heal=heal), heal)
    result.secrets_read = read_secrets
    _governed(result, record, proposed, selection.name)
    check_rules(result, manifests, governance.rules_to_check(record, proposed),
                selection.name, snapshot, rule_errors)
    result.running = running
    if running is not None:

        result.checks.append(Check("lock", CheckStatus.WARNING, (
            f"an apply is running on workspace {settings.workspace!r} ({running}): the creates "
            "it has in flight show as uncertain until it ends; do not settle them with "
            "`govsync state resolve` meanwhile (it is refused while the apply runs)")))
    found = governance.governors(governed, settings.workspace, _identity(settings))
    if found:
        result.checks.append(Check("governance", CheckStatus.WARNING, governance.new_on_governed(
            settings.workspace, safe_url(_identity(settings) or ""), found)))
    changed = endpoint_change(snapshot, settings)
    if changed:

        result.checks.append(Check("endpoint", CheckStatus.WARNING,
                                   f"{changed}; apply will refuse without --allow-endpoint-change"))
    # With --target, the targeted objects' live references only.
    targeted = ([c.address for c in result.changes if c.address in manifests.objects]
                if settings.targets else None)
    values = wanted(manifests, targeted)
    if values:
        if settings.endpoint:
            async def check() -> None:
                async with runtime.client(settings, max_retries=1) as client:
                    await check_live(result, manifests, client, targeted, unreachable=True)

            import asyncio  # here, not at the top: offline commands never need it

            asyncio.run(check())
        else:
            _skip_live(result, values, "no endpoint configured (offline plan)")
    if saving and read_secrets and not snapshot.lineage and _may_save(settings):
        result = _in_new_workspace(result, manifests, settings)
    return result


def _governed(plan: Plan, record: Governance | None, proposed: Governance,
              environment: str | None) -> None:
    """The plan's environment, and the governance change it carries (if any)."""

    plan.environment = environment
    plan.governance = governance.change(record, proposed)


def _may_save(settings: Settings) -> bool:
    """Whether these credentials may read (or make) the workspace's plan key."""

    try:
        with runtime.open_state(settings) as store:
            store.plan_key(settings.workspace)
    except PlanKeyUnavailable:
        return False
    return True


def _in_new_workspace(planned: Plan, manifests: ManifestSet, settings: Settings) -> Plan:
    """``plan --out`` of a workspace never written: the workspace (and the state file)
    made now that the plan has passed every check, so a plan that fails leaves no
    state behind; then planned again, since the fingerprints of the secrets a
    saved plan carries are made with the workspace's key."""

    with runtime.open_state(settings) as store:
        snapshot = store.snapshot(settings.workspace, responses=False)
    if snapshot.serial or snapshot.entries:
        raise StateError("the state changed while the plan was made: run `govsync plan` again")
    again = make_plan(manifests, snapshot, environ=settings.environ, targets=settings.targets,
                      prune=settings.selection.prune, replace=settings.replace)
    again.checks, again.environment, again.governance = (
        planned.checks, planned.environment, planned.governance)
    again.drift, again.refreshed = planned.drift, planned.refreshed
    # The creates the refresh found existing stay blocked.
    found = {c.address: c for c in planned.changes if c.action == Action.BLOCKED}
    for change in again.changes:
        if change.action == Action.CREATE and change.address in found:
            change.action, change.id, change.reason = (
                Action.BLOCKED, found[change.address].id, found[change.address].reason)
            change.request, change.operation = None, None
    return again


def _refreshing(settings: Settings) -> bool:
    """Whether this run reads the recorded objects from the server (contract section 12)."""
    return settings.refresh and bool(settings.endpoint)


def _refreshed(settings: Settings, snapshot: Snapshot, make: Callable[[frozenset[str]], Plan],
               heal: dict[str, Drifted] | None = None) -> tuple[Plan, refresh.Observed | None]:
    """The plan ``make`` makes, after a refresh where this run reads the server."""
    if not _refreshing(settings):
        return _unread(make(frozenset()), settings), None
    import asyncio

    return asyncio.run(_refreshed_async(settings, snapshot, make, heal))


def _unread(plan: Plan, settings: Settings) -> Plan:
    """A plan made without a refresh says what its updates send."""
    say_unread(plan, "--refresh=false" if settings.endpoint else "no endpoint")
    return plan


def _healing(settings: Settings) -> dict[str, Drifted] | None:
    """Where ``selfHeal: true``: the dict a refresh fills with what changed outside
    govsync, for the plan to undo it (None: drift is reported, never reverted)."""
    return {} if settings.selection.self_heal else None


async def _refreshed_async(settings: Settings, snapshot: Snapshot,
                           make: Callable[[frozenset[str]], Plan],
                           heal: dict[str, Drifted] | None = None,
                           ) -> tuple[Plan, refresh.Observed | None]:
    """Read every recorded object, then plan (missing objects as creates, creates of
    objects that exist unrecorded blocked).  Not where the state belongs to another
    endpoint, whose ids would all look missing here."""
    if not _refreshing(settings):
        return _unread(make(frozenset()), settings), None
    from govsync import refresh  # with asyncio: offline commands never load it

    if snapshot.entries and endpoint_change(snapshot, settings):
        plan = make(frozenset())
        refresh.skipped(plan, "the state was applied against another endpoint")
        return plan, None
    try:
        async with runtime.client(settings, lanes=refresh.LANES) as client:
            return await refresh.refreshed(client, snapshot.entries, make,
                                           settings.selection.ignore_changes,
                                           heal if heal is not None else None)
    except UnauthorizedError as exc:
        raise _key_rejected(exc) from exc


async def _check_creates(plan: Plan, settings: Settings, snapshot: Snapshot) -> None:
    """A saved plan's creates, at apply time: none of an object that now exists on the
    server unrecorded (BlockedPlanError follows; nothing is sent)."""
    if not _refreshing(settings) or not any(c.action == Action.CREATE for c in plan.changes):
        return
    from govsync import refresh

    try:
        async with runtime.client(settings) as client:
            reading = await refresh.block_existing(client, plan, snapshot.entries)
    except UnauthorizedError as exc:
        raise _key_rejected(exc) from exc
    if not reading.complete:
        raise ApiError(f"cannot check that the plan's creates do not exist on the server yet: "
                       f"{reading.summary()}; nothing was applied")


def _refused_partial(observed: refresh.Observed | None, doing: str) -> None:
    """ApiError when some recorded objects could not be read: never act on a partial
    picture."""
    if observed is None or observed.reading.complete:
        return
    raise ApiError(f"{observed.reading.summary()}; {doing}: run again once the server "
                   "answers (or --refresh=false to compare with the recorded state only)")


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


def write_plan(plan: Plan, settings: Settings, path: str,
               manifests: ManifestSet | None = None) -> str:
    """Save ``plan`` for ``govsync apply FILE``, authenticated with the workspace's plan
    key, with the git commit of the manifests it was made from (for the audit).

    Returns '' when it is authenticated, else why it is saved for review only
    (``apply --reviewed``): made without secrets, or by credentials that may not
    read the key (a read-only role)."""

    plan.state = recorded_state(settings.state)
    plan.git = audit.git_state(audit.manifests_folder(
        manifests.files if manifests is not None else (), _project_file(settings)))
    key: bytes | None = None
    if exists(settings.state):
        with runtime.open_state(settings) as store:
            snapshot = store.snapshot(settings.workspace, responses=False, create=False)
            if snapshot.lineage != plan.lineage or snapshot.serial != plan.serial:
                raise StateError("the state changed while the plan was made: run `govsync "
                                 "plan` again")
            plan.state_digest = snapshot.content_digest()
            if snapshot.lineage and plan.secrets_read:
                with contextlib.suppress(PlanKeyUnavailable):
                    key = store.plan_key(settings.workspace)
    planfile.write(plan, path, key)
    if key is not None:
        return ""
    return ("it was made without reading secrets" if not plan.secrets_read
            else "these credentials may not read the workspace's plan key")


def recorded_state(state: str) -> str:
    """The state as a saved plan records it: a file's absolute path, a URL masked."""
    return redact.url(state) if "://" in state else os.path.abspath(state)


def inspect_saved(saved: SavedPlan, settings: Settings) -> tuple[str, Governance | None]:
    """For ``show``: whether the plan verifies against its workspace's state (in words),
    and the governance that workspace records (None: none, or not readable)."""

    workspace = saved.plan.workspace
    if not exists(settings.state):
        return f"not checked: there is no state at {safe_url(settings.state)}", None
    try:
        with runtime.open_state(settings) as store:
            snapshot = store.snapshot(workspace, responses=False, create=False)
            record = governance.recorded(snapshot.governance, workspace)
            if not saved.authenticated:
                return saved.verification(b""), record
            try:
                key = store.plan_key(workspace, create=False)
            except PlanKeyUnavailable as exc:
                return f"not checked: {exc}", record
    except StateError as exc:
        return f"not checked: {exc}", None
    text = saved.verification(key)
    if saved.plan.serial != snapshot.serial and (
            saved.plan.state_digest != snapshot.content_digest()):
        text += (f"; stale: the state changed since it was made (serial {saved.plan.serial} "
                 f"-> {snapshot.serial}), so apply will refuse it")
    return text, record


def normal_endpoint(endpoint: str) -> str:
    """The endpoint as the state records and compares it: no credentials in it."""

    return redact.identity(endpoint)


def _identity(settings: Settings) -> str | None:
    """The configured endpoint as governance binds it (None: no endpoint)."""
    return normal_endpoint(settings.endpoint) if settings.endpoint else None


def endpoint_change(snapshot: Snapshot, settings: Settings) -> str:
    """Why ``settings``' endpoint is not the one the state was applied against ('' if it is)."""
    if not snapshot.endpoint or not settings.endpoint:
        return ""
    if normal_endpoint(settings.endpoint) == snapshot.endpoint:
        return ""

    return (f"workspace {snapshot.workspace!r} was applied against {safe_url(snapshot.endpoint)}"
            f", not {safe_url(normal_endpoint(settings.endpoint))}: its ids may not exist there")


def _key_rejected(exc: UnauthorizedError) -> ConfigError:
    """A live read refused for the key: the key, not the check, is what to fix."""
    # The client's message names the environment, the endpoint and the variable read.
    return ConfigError(f"the API rejected the key ({exc.status}): {exc.message}")


def _skip_live(plan: Plan, values: list[LiveValue], why: str) -> None:

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
        raise _key_rejected(exc) from exc
    except TransportError as exc:
        if unreachable:
            raise ApiError(f"cannot run the live checks ({' and '.join(live.operations(values))})"
                           f": {exc.message}; check the endpoint (--endpoint, "
                           f"{envvars.ENDPOINT} or the project's environment)") from exc
        _skip_live(plan, values, f"endpoint unreachable ({exc.message})")
        return
    except ApiError as exc:
        if unreachable:
            raise ApiError(f"cannot run the live checks: {live.failed(values, exc)}") from exc
        _skip_live(plan, values, live.failed(values, exc))
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


def apply(
    source: ManifestSet | SavedPlan,
    settings: Settings,
    *,
    reviewed: SavedPlan | None = None,
    confirm: Callable[[Plan], bool] | None = None,
    parallelism: int = 32,
    forget_orphans: bool = False,
    lock_timeout: float = 0.0,
    reporter: Reporter | None = None,
    allow_endpoint_change: bool = False,
    stopping: threading.Event | None = None,
) -> tuple[Plan, ApplyResult]:
    """Plan the manifests (or take a saved plan) and apply it under the workspace lock.

    ``reviewed``: a plan made for review (a pull request's), which the plan made
    now from the manifests must equal, change for change, before anything is
    sent (``apply --reviewed``); its approvals then count for this plan.
    ``confirm`` is shown the plan and returns whether to go on (None: go on).
    Before anything is sent, with the lock held: the workspace's recorded
    environment, its recorded approvals, and its rules on what would be sent.
    ``stopping``, once set (by another thread), lets the calls in flight end and be
    recorded, and sends nothing more (the agent on SIGTERM).
    """

    saved = source if isinstance(source, SavedPlan) else None
    selection = settings.selection
    evidence = saved or reviewed
    if saved is not None and settings.targets:
        raise ConfigError(
            "--target does not apply to a saved plan: it applies exactly the changes it holds"
            + (f" (it was made with --target {' '.join(saved.plan.targets)})"
               if saved.plan.targets else "")
            + "; make a targeted plan with `govsync plan --target ... --out`")
    if evidence is not None:
        _same_scope(evidence, settings)
    if reviewed is not None:
        if settings.targets and sorted(settings.targets) != sorted(reviewed.plan.targets):
            raise ConfigError("--target differs from the reviewed plan's targets: leave it "
                              "out (the reviewed plan's targets are used)")
        settings = dataclasses.replace(settings, targets=tuple(reviewed.plan.targets))
    proposed = governance.of_project(selection.project, selection.environment)
    if saved is None:
        assert not isinstance(source, SavedPlan)
        check_secrets_set(source, settings)
    with runtime.open_state(settings) as store:
        store.acquire(settings.workspace, LockHolder.me(), timeout=lock_timeout)
        try:
            # The API's answers recorded in state are for `state show`: planning
            # and applying never read them (at 100,000 entries, 0.6 s).
            snapshot = store.snapshot(settings.workspace,
                                      responses=saved is None and _refreshing(settings))
            record = governance.recorded(snapshot.governance, settings.workspace)
            governance.check_environment(record, selection.name, settings.workspace,
                                         selection.project)
            if saved is not None:
                _not_applied(store, settings.workspace, saved)
                _authentic(saved, store, snapshot, settings.workspace)
            try:
                import asyncio

                return asyncio.run(_apply(
                    source, store, snapshot, settings, record=record, proposed=proposed,
                    evidence=evidence, reviewed=reviewed is not None, confirm=confirm,
                    parallelism=parallelism, forget_orphans=forget_orphans, reporter=reporter,
                    allow_endpoint_change=allow_endpoint_change, stopping=stopping))
            except KeyboardInterrupt:
                raise _interrupted(store, settings, snapshot) from None
        finally:
            store.release(settings.workspace)


def _same_scope(evidence: SavedPlan, settings: Settings) -> None:
    """A saved (or reviewed) plan is for this run's environment and workspace."""

    plan, name = evidence.plan, settings.selection.name
    if plan.environment != name:
        flag = f"--env {plan.environment}" if plan.environment else "no --env"
        said = f"environment {name}" if name else "no environment"
        raise GovernanceError(
            f"{evidence.path} is a plan for "
            f"{'environment ' + plan.environment if plan.environment else 'no environment'}, "
            f"and this run names {said}: run it with {flag} (check GOVSYNC_ENV); nothing "
            "was sent")
    if plan.workspace != settings.workspace:
        raise PlanError(
            f"{evidence.path} is a plan for workspace {plan.workspace!r}, not "
            f"{settings.workspace!r}: "
            + (f"run it with --env {name}" if name else f"pass --workspace {plan.workspace}")
            + "; nothing was sent")


def _authentic(saved: SavedPlan, store: StateStore, snapshot: Snapshot, workspace: str) -> None:
    """A saved plan made by ``plan --out`` for this state, and not stale."""

    if saved.authenticated:
        try:
            key = store.plan_key(workspace)
        except PlanKeyUnavailable as exc:
            raise PlanError(f"cannot check {saved.path}: {exc}; apply with the credentials "
                            "that may write the state") from exc
    else:
        key = b""
    saved.verify(key, snapshot.lineage)
    # Writes that cancelled out (an apply refused before it changed anything)
    # bump the serial but leave the plan valid.
    if saved.plan.serial != snapshot.serial and (
            saved.plan.state_digest != snapshot.content_digest()):
        raise StalePlanError(
            f"the state changed since the plan was made (serial {saved.plan.serial} -> "
            f"{snapshot.serial}): make a new plan with `govsync plan --out` and review it")


async def _apply(
    source: ManifestSet | SavedPlan,
    store: StateStore,
    snapshot: Snapshot,
    settings: Settings,
    *,
    record: Governance | None,
    proposed: Governance,
    evidence: SavedPlan | None,
    reviewed: bool,
    confirm: Callable[[Plan], bool] | None,
    parallelism: int,
    forget_orphans: bool,
    reporter: Reporter | None,
    allow_endpoint_change: bool,
    stopping: threading.Event | None = None,
) -> tuple[Plan, ApplyResult]:
    from govsync.apply import Applier, ApplyResult, Throttle

    name = settings.selection.name
    observed: refresh.Observed | None = None
    if isinstance(source, SavedPlan):
        the_plan, manifests = source.plan, None
        await _check_creates(the_plan, settings, snapshot)
    else:
        heal = _healing(settings)
        the_plan, observed = await _refreshed_async(
            settings, snapshot, lambda missing: make_plan(
                source, snapshot, environ=settings.environ, targets=settings.targets,
                missing=missing, prune=settings.selection.prune, replace=settings.replace,
                heal=heal), heal)
        _refused_partial(observed, "nothing was applied")
        manifests = source
        _governed(the_plan, record, proposed, name)
        check_rules(the_plan, source, governance.rules_to_check(record, proposed), name, snapshot)
        if evidence is not None and reviewed:
            _not_applied(store, settings.workspace, evidence)
            the_plan.id = evidence.plan.id
            _same_as_reviewed(the_plan, evidence)
    if the_plan.blocked():
        raise BlockedPlanError(
            f"the plan has {len(the_plan.blocked())} blocked change(s) the API cannot "
            f"make: {blocked_advice(the_plan.blocked())}; nothing was applied")
    target = (governance.Governance.from_dict(the_plan.governance["to"], settings.workspace)
              if the_plan.governance else record or proposed)
    # The approvals the workspace recorded; for a workspace never applied, those
    # it is about to record.
    enforced = record if record is not None else target
    approvers = _approved(enforced, evidence, the_plan, settings.workspace,
                          recorded=record is not None)
    if record is None:
        # A new workspace on an endpoint another workspace governs: its approvals too.
        approvers += governance.approved_by_governors(
            governance.governors(store.governed(), settings.workspace, _identity(settings)),
            settings.workspace, safe_url(_identity(settings) or ""),
            evidence.path if evidence is not None else None,
            approvals.review_message(planfile.review_digest(the_plan)))
    # The rules again, on exactly what would be sent, for the workspace's environment.
    check_sent(governance.rules_to_check(record, target), enforced.environment,
               evidence.path if evidence is not None else "this apply", the_plan.work())
    saved = source if isinstance(source, SavedPlan) else None
    audit_fields: dict[str, Any] = {
        "environment": name,
        "actor": audit.actor(settings.environ),
        "approvers": [a.as_dict() for a in approvers],
        # A saved plan's own commit (what was reviewed); else the checkout's.
        "git": (saved.plan.git if saved is not None and saved.plan.git else audit.git_state(
            audit.manifests_folder(manifests.files if manifests else (),
                                   _project_file(settings)))),
        "savedPlan": saved is not None,
        "planId": the_plan.id,
        "reviewDigest": _review_digest(the_plan),
    }
    if saved is not None:
        audit_fields["planHash"] = "sha256:" + saved.file_digest
        audit_fields["planFile"] = os.path.basename(saved.path)
    resolver = Resolver({}, snapshot.fingerprint, settings.environ)
    for change in the_plan.work():
        for path, variable, why in resolver.stale_secrets(change.request):
            dotted = ".".join(str(p) for p in path)
            if why == "is not set":
                raise StalePlanError(f"{change.address}: environment variable {variable} "
                                     f"(secret {dotted}) is not set")
            raise StalePlanError(
                f"{change.address}: the value of {variable} (secret {dotted}) changed since "
                "the plan was made: make a new plan and review it")
    work = the_plan.work(forget_orphans=forget_orphans)
    if not work and the_plan.governance is None:
        if record is None and snapshot.lineage:
            # A workspace applied before governance was recorded: it records it now.
            store.set_governance(settings.workspace, target.stored(_identity(settings)))
        return the_plan, ApplyResult()
    changed = endpoint_change(snapshot, settings)
    if changed and not allow_endpoint_change and work:
        raise ConfigError(f"{changed}: nothing was sent; pass --allow-endpoint-change "
                          "if this state's objects really live at the new endpoint")
    throttle = Throttle(parallelism)
    hashing = None
    # The client is made before anything is shown: no endpoint is an error now.
    async with runtime.client(settings, on_retry=throttle.on_retry, lanes=parallelism) as client:
        if manifests is not None:
            # Owner groups of the policies this apply creates (the field cannot
            # change after create), so an apply with nothing to do sends nothing.
            creates = [c.address for c in the_plan.changes if c.action == Action.CREATE]
            await check_live(the_plan, manifests, client, creates)
        # The audit's hash of an unsaved plan, whose checks are now all in, is
        # computed on a worker thread while the plan is shown and applied.
        if "planHash" not in audit_fields:
            import asyncio


            hashing = asyncio.get_running_loop().run_in_executor(None, plan_digest, the_plan)
        if confirm is not None and not confirm(the_plan):
            raise PlanError("apply cancelled; nothing was changed")
        if evidence is not None:
            claimed = store.claim_plan(settings.workspace, the_plan.id)
            if claimed is not None:
                raise _applied_already(evidence, claimed)
        if the_plan.governance is not None or record is None:
            store.set_governance(settings.workspace, target.stored(_identity(settings)))
        endpoint = _identity(settings)
        # The endpoint is recorded with the first answer it gives: an apply that
        # reached nothing (a wrong --allow-endpoint-change) records nothing.
        record_endpoint = (endpoint if work and endpoint and snapshot.endpoint != endpoint
                           else None)
        applier = Applier(store, snapshot, client, environ=settings.environ, throttle=throttle,
                          reporter=reporter, api_key=settings.api_key,
                          endpoint=record_endpoint, stopping=stopping,
                          live=observed.reading.live if observed is not None else None,
                          reads=settings.refresh)
        result = await applier.run(the_plan, work)
        if evidence is not None and work and not result.took_effect:
            # Nothing changed (a refused key, say): the plan is as good as before.
            with contextlib.suppress(StateError):
                store.unclaim_plan(settings.workspace, the_plan.id)
                if the_plan.governance is not None or record is None:
                    store.set_governance(settings.workspace,
                                         record.stored(None) if record is not None else None)
        if hashing is not None:
            audit_fields = {**audit_fields, "planHash": "sha256:" + await hashing}
    try:
        store.add_history(settings.workspace, audit.record(the_plan, result, audit_fields))
    except StateError as exc:
        if not result.stopped:
            result.stopped = f"the apply's history was not recorded: {exc}"
    return the_plan, result


def _applied_already(evidence: SavedPlan, when: str) -> PlanError:
    return PlanError(f"{evidence.path} was applied already (at {when}): a saved plan applies "
                     "at most once; make a new plan with `govsync plan --out`; nothing was sent")


def _not_applied(store: StateStore, workspace: str, evidence: SavedPlan) -> None:
    """PlanError when the plan was applied already (said before any other difference)."""
    when = store.plan_applied(workspace, evidence.plan.id)
    if when is not None:
        raise _applied_already(evidence, when)


def _review_digest(plan: Plan) -> str:

    return "sha256:" + review_digest(plan)


def _approved(enforced: Governance, evidence: SavedPlan | None, plan: Plan, workspace: str,
              *, recorded: bool) -> list[Approver]:
    """The approvers the workspace requires (ApprovalError if too few): signatures over
    the plan's review digest by distinct allowed signers."""

    if enforced.required == 0:
        return []
    scope = f"workspace {workspace!r}" + (f" (environment {enforced.environment})"
                                          if enforced.environment else "")
    source = (f"the allowed signers recorded with workspace {workspace!r}" if recorded
              else "the project's allowedSigners")
    n = enforced.required
    if evidence is None:
        env = f" --env {enforced.environment}" if enforced.environment else ""
        raise ApprovalError(
            f"{scope} requires {n} signed approval(s): apply a saved, approved plan: "
            f"`govsync plan{env} --out plan.json`, then `govsync approve plan.json --key KEY` "
            f"by {n} allowed signer(s), then `govsync apply{env} plan.json`; nothing was sent")
    message = approvals.review_message(planfile.review_digest(plan))
    return approvals.check(evidence.path, message, enforced.allowed(workspace), n, scope,
                           source)


def _same_as_reviewed(plan: Plan, reviewed: SavedPlan) -> None:
    """GovernanceError, with the difference, unless ``plan`` does exactly what the
    reviewed plan showed."""

    if review_digest(plan) == review_digest(reviewed.plan):
        return
    mine = {c.address: reviewed_change(c) for c in plan.changes if c.action != Action.NOOP}
    theirs = {c.address: reviewed_change(c) for c in reviewed.plan.changes
              if c.action != Action.NOOP}
    lines = [f"{a} ({mine[a]['action']}) is new" for a in sorted(mine.keys() - theirs.keys())]
    lines += [f"{a} ({theirs[a]['action']}) is gone" for a in sorted(theirs.keys() - mine.keys())]
    for address in sorted(mine.keys() & theirs.keys()):
        if mine[address] != theirs[address]:
            fields = sorted(k for k in mine[address] if mine[address][k] != theirs[address][k])
            if "request" in fields:
                fields.remove("request")
                fields += [f"request.{p}" for p in _differing(mine[address]["request"],
                                                               theirs[address]["request"])]
            lines.append(f"{address} differs in {', '.join(fields)}")
    if ((plan.governance["to"] if plan.governance else None)
            != (reviewed.plan.governance["to"] if reviewed.plan.governance else None)):
        lines.append("the governance change differs")
    if not lines:
        lines.append("its targets or environment differ")
    shown = "; ".join(lines[:10]) + (f"; and {len(lines) - 10} more" if len(lines) > 10 else "")
    raise GovernanceError(
        f"the plan made now differs from the reviewed {reviewed.path}: {shown}; nothing was "
        "sent: the manifests or the state changed since the review, so review a new plan")


def _differing(a: Any, b: Any, at: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (the first level that differs)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(a.keys() | b.keys()):
            path = f"{at}.{key}" if at else str(key)
            if a.get(key) != b.get(key):
                out += _differing(a.get(key), b.get(key), path) if key in a and key in b \
                    else [path]
        return out
    return [at or "(all)"]


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


def _project_file(settings: Settings) -> str | None:
    project = settings.selection.project
    return project.file if project is not None else None


def audit_export(settings: Settings, *, since: str | None, fmt: str) -> str:
    """``govsync audit export``: the workspace's apply records."""

    if not exists(settings.state):
        return audit.export([], settings.workspace, since=since, fmt=fmt)
    with runtime.open_state(settings) as store:
        history = store.history(settings.workspace, 1_000_000_000)
    return audit.export(history, settings.workspace, since=since, fmt=fmt)


def drift(manifests: ManifestSet, settings: Settings, *,
          read_secrets: bool = True) -> DriftReport:
    """The scheduled check: manifests against state, and live checks where a read exists.

    With an endpoint configured, an unreachable API is an error (exit 1): a
    drift job must not report "in sync" when it could not look.
    """

    if read_secrets:
        check_secrets_set(manifests, settings)
    snapshot = read_snapshot(settings, responses=_refreshing(settings))
    the_plan, observed = _refreshed(settings, snapshot, lambda missing: make_plan(
        manifests, snapshot, environ=settings.environ, targets=settings.targets,
        read_secrets=read_secrets, missing=missing, prune=settings.selection.prune,
        replace=settings.replace))
    _refused_partial(observed, "drift cannot say what it could not read")
    values = live.wanted(manifests)
    existing: dict[str, set[str]] | None = None
    skipped = f"no endpoint configured ({envvars.ENDPOINT} / --endpoint)"
    if settings.endpoint:
        async def read() -> dict[str, set[str]]:
            async with runtime.client(settings, max_retries=1) as client:
                return await live.read(client, values)

        try:
            import asyncio

            existing = asyncio.run(read())
        except UnauthorizedError as exc:
            raise _key_rejected(exc) from exc
        except TransportError as exc:
            raise ApiError(f"cannot run the live checks: endpoint unreachable ({exc.message})"
                           ) from exc
        except ApiError as exc:
            raise ApiError(f"cannot run the live checks: {live.failed(values, exc)}") from exc
    checks = live_checks(values, existing, skipped)
    return DriftReport(the_plan, checks, unobservable(
        manifests, observed.reading.read_kinds() if observed else ()))


# -- state commands -------------------------------------------------------------


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[StateStore]:
    """The state store with the workspace lock held."""

    with runtime.open_state(settings) as store:
        store.acquire(settings.workspace, LockHolder.me())
        try:
            yield store
        finally:
            store.release(settings.workspace)


def state_entry(settings: Settings, address: str) -> Entry:

    with runtime.open_state(settings) as store:
        entry = store.snapshot(settings.workspace).entries.get(address)
    if entry is None:
        raise StateError(f"{address} is not in the state of workspace {settings.workspace!r} "
                         "(`govsync state list` shows what is)")
    return entry


def state_forget(settings: Settings, addresses: list[str]) -> list[Entry]:
    """Drop entries (all of them, or none when one is not in state); the objects stay on
    the server."""
    with _locked(settings) as store:
        entries = store.snapshot(settings.workspace, responses=False).entries
        missing = [a for a in addresses if a not in entries]
        if missing:
            raise StateError(f"{missing[0]} is not in the state of workspace "
                             f"{settings.workspace!r} (`govsync state list` shows what is); "
                             "nothing was forgotten")
        found = [entries[a] for a in dict.fromkeys(addresses)]
        for entry in found:
            store.remove(settings.workspace, entry.address)
    return found


def state_resolve(settings: Settings, addresses: list[str], object_id: str | None
                  ) -> list[Entry]:
    """Settle uncertain creates: one exists with ``object_id``, or (None) none of them does.

    Refused while an apply holds the workspace (its creates in flight look
    uncertain until they are answered)."""

    if object_id is not None and len(addresses) != 1:
        raise ConfigError("--id settles one address at a time: give one address with --id ID")
    with _locked(settings) as store:
        entries = store.snapshot(settings.workspace).entries
        settled = []
        for address in addresses:
            entry = entries.get(address)
            if entry is None or entry.status not in (PENDING, UNCERTAIN):
                raise StateError(f"{address} is not uncertain in workspace "
                                 f"{settings.workspace!r}; nothing to resolve (nothing was changed)")
            settled.append(entry)
        if object_id is not None:
            _one_address(entries, settled[0].kind, object_id, settled[0].address)
        for entry in settled:
            if object_id is None:
                store.remove(settings.workspace, entry.address)
            else:
                entry.id, entry.status, entry.updated_at = object_id, APPLIED, now()
                store.put(settings.workspace, entry)
        return settled


def _one_address(entries: Mapping[str, Entry], kind: str, object_id: str,
                 address: str) -> None:
    """StateError when ``object_id`` is recorded at another address: one object, one
    address (an update sent to one would change the other's object too)."""

    holder = recorded_at(entries, kind, object_id)
    if holder is not None and holder != address:
        raise StateError(
            f"id {object_id} is already recorded at {holder}: one object has one address; "
            f"to re-address it run `govsync state mv {holder} {address}`; nothing was changed")


def state_move(settings: Settings, old: str, new: str) -> Entry:
    """Re-address an entry at once, without calling the API (as a Moved document does)."""

    kinds = {a.split("/", 1)[0] for a in (old, new) if "/" in a}
    if any(a.count("/") != 1 or not a.split("/")[1] for a in (old, new)) or not kinds <= set(
            BY_KIND):
        raise ConfigError(f"state mv {old} {new}: give two addresses Kind/name of known kinds")
    if len(kinds) != 1:
        raise ConfigError(f"cannot move {old} to {new}: a move keeps the kind")
    kind = BY_KIND[kinds.pop()]
    if kind.named and old.split("/", 1)[1] != new.split("/", 1)[1]:
        raise ConfigError(
            f"cannot move {old} to {new}: the name of a {kind.name} is its API name, and the API "
            "cannot rename; keep the old address, or create a new object under the new name")
    with _locked(settings) as store:
        entry = store.snapshot(settings.workspace, responses=False).entries.get(old)
        if entry is None:
            raise StateError(f"{old} is not in the state of workspace {settings.workspace!r}")
        store.rename(settings.workspace, old, new)
        entry.address = new
        return entry


def state_import(settings: Settings, address: str, object_id: str,
                 manifests: ManifestSet) -> tuple[Entry, str]:
    """Adopt an object that exists on the server: the manifest's spec becomes its baseline.
    Returns the entry and how its id was checked ("verified by GetHook", or why it could
    not be read); StateError where the server has no such object."""

    manifest = manifests.objects.get(address)
    if manifest is None:
        raise StateError(f"no manifest under {', '.join(manifests.files) or 'the paths given'} "
                         f"defines {address}")
    with _locked(settings) as store:
        snapshot = store.snapshot(settings.workspace)
        if address in snapshot.entries:
            raise StateError(f"{address} is already in state (id {snapshot.entries[address].id}); "
                             "`govsync state forget` it first to import another id")
        _one_address(snapshot.entries, manifest.kind.name, object_id, address)
        ids = {a: e.id for a, e in snapshot.entries.items() if e.status == APPLIED and e.id}
        try:
            _request, spec = Resolver(ids, snapshot.fingerprint, settings.environ).plan(
                manifest.template, manifest.holes)
        except MissingSecret:
            make_plan(manifests, snapshot, environ=settings.environ)  # raises with its place
            raise
        unknown = [k for k, v in spec.items() if v is KNOWN_AFTER_APPLY]
        if unknown:
            raise StateError(f"{address} references objects not in state ({', '.join(unknown)}): "
                             "import or apply them first")
        verified = _verify_id(settings, address, object_id, spec)
        entry = Entry(address, manifest.kind.name, object_id, APPLIED, spec, None, now())
        store.put(settings.workspace, entry)
        return entry, verified


def _verify_id(settings: Settings, address: str, object_id: str,
               spec: Mapping[str, Any]) -> str:
    """How ``object_id`` was checked: "verified by <the read that found it>", or why it
    was not read."""
    if not settings.endpoint:
        return "no endpoint is configured to read it from"
    import asyncio  # here, not at the top: offline commands never need it

    from govsync import refresh

    kind = BY_KIND[address.split("/", 1)[0]]

    async def verify() -> str | None:
        async with runtime.client(settings) as client:
            return await refresh.verify_id(client, kind, address, object_id, spec)

    try:
        read = asyncio.run(verify())
    except UnauthorizedError as exc:
        raise _key_rejected(exc) from exc
    return f"verified by {read}" if read else refresh.unread_reason(kind)


def state_export(settings: Settings) -> dict[str, Any]:
    """The workspace as JSON (backup, or moving between SQLite and PostgreSQL)."""

    if not exists(settings.state):
        raise StateError(f"there is no state at {safe_url(settings.state)} to export")
    with runtime.open_state(settings) as store:
        return export.document(store.snapshot(settings.workspace))


def state_import_all(settings: Settings, data: Mapping[str, Any]) -> int:
    """Load an export into the workspace, replacing its entries; returns the new serial."""

    entries, lineage, key = export.read(data)
    with _locked(settings) as store:
        return store.replace_all(settings.workspace, entries, lineage, key)


def state_readonly_role(settings: Settings, role: str) -> list[str]:
    """The SQL that makes ``role`` the state's read-only role (PostgreSQL only)."""
    from govsync.state.postgres import PostgresStore

    with runtime.open_state(settings) as store:
        if not isinstance(store, PostgresStore):
            raise ConfigError(
                f"{safe_url(settings.state)} is a SQLite file: it has no roles. Readers of "
                "a file may read all of it, so give them a copy of the state (its plan key, "
                "<file>.plan-key, is a file of its own that only its owner may read); for a "
                "shared state with a read-only role use postgresql://")
        return [_role_exists(role), *store.readonly_grants(role)]


def _role_exists(role: str) -> str:
    """A first statement that stops the script (``psql -v ON_ERROR_STOP=1``, or any
    client that stops at an error) when ``role`` does not exist yet: one line, so the
    script runs statement by statement."""
    name = "'" + role.replace("'", "''") + "'"
    create = '"' + role.replace('"', '""') + '"'
    message = (f"role {role} does not exist: CREATE ROLE {create} LOGIN PASSWORD '...' "
               "first, then run these statements again").replace("'", "''").replace("%", "%%")
    tag = "$govsync_role_check$"
    if tag in role:
        raise ConfigError(f"role name {role!r}: it may not contain {tag}")
    return (f"DO {tag} BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = {name}) THEN "
            f"RAISE EXCEPTION '{message}'; END IF; END {tag};")


def state_unlock(settings: Settings) -> tuple[Any, bool]:
    """Clear the recorded lock holder; (who held it, whether the lock is now free).

    The lock itself (flock, or PostgreSQL's session advisory lock) belongs to
    the holding process and ends with it; if that process still runs, the
    workspace stays locked until it exits."""

    with runtime.open_state(settings) as store:
        holder = store.holder(settings.workspace)
        try:  # taking the lock replaces a leftover record; releasing it clears ours
            store.acquire(settings.workspace, LockHolder.me(), timeout=0)
        except StateLockedError:
            return holder, False  # alive: its record stays, so others still see who
        store.release(settings.workspace)
        return holder, True


def state_history(settings: Settings, limit: int = 20) -> list[dict[str, Any]]:

    if not exists(settings.state):
        return []
    with runtime.open_state(settings) as store:
        return store.history(settings.workspace, limit)
