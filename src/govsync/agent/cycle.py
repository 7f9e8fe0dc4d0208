"""One environment's cycle: plan it, apply it when it may be, and say its status.

Everything goes through ``commands``: the plan is ``govsync plan``'s, and an
apply is ``commands.apply``, so it passes exactly the checks a person's apply
passes (rules again at apply, the approvals the workspace records, the
governance binding, the workspace lock, a saved plan applied at most once).
The agent never fights a person: a held lock makes the cycle ``Locked``, a
paused environment is planned and never applied, a freeze window only plans.
An environment that requires approvals is applied only from a saved plan that
carries them, found in the folder its ``agent.plans`` names.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from govsync import endpoints, governance, impacts, planfile, policytests, runtime
from govsync.agent import partial
from govsync.agent.applied import Applied
from govsync.agent.message import impact_words
from govsync.agentconfig import AgentSettings, Event
from govsync.api.resource import Offers
from govsync.apply import ChangeStatus
from govsync.commands.applying import apply
from govsync.commands.endpoint import normal_endpoint
from govsync.commands.planning import planned
from govsync.commands.preflight import required
from govsync.commands.sources import ApplyOptions, Manifests, Reviewed, Saved, Source
from govsync.errors import (
    ApprovalError,
    BlockedPlanError,
    ConfigError,
    GovernanceError,
    GovsyncError,
    LockLostError,
    ManifestError,
    PlanError,
    Problem,
    StateLockedError,
)
from govsync.manifests import load as load_manifests
from govsync.manifests.code import check_code
from govsync.manifests.loader import Reader, read_files
from govsync.manifests.manifest import Context, ManifestSet
from govsync.plan import Action, CaseStatus, Plan, Why
from govsync.planfile import SavedPlan
from govsync.planning.impact import Impact
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import LockHolder, exists, now
from govsync.statuses import RecordType, Status, status_of

# The agent's value of a workspace an operator accepted onto a governed endpoint.
ACCEPTED = "accepted"
# The pending changes a cycle's record lists (the plan has them all).
LISTED_CHANGES = 100
# The event each status sends.
STATUS_EVENTS = {
    Status.SYNCED: Event.SYNCED, Status.OUT_OF_SYNC: Event.OUT_OF_SYNC,
    Status.BLOCKED: Event.BLOCKED, Status.UNCERTAIN: Event.UNCERTAIN,
    Status.DRIFTED: Event.DRIFTED,
    Status.LOCKED: Event.LOCKED, Status.PAUSED: Event.PAUSED, Status.ERROR: Event.ERROR,
}


@dataclass(frozen=True)
class Target:
    """An environment as the agent reconciles it: its name (its workspace's, without a
    project environment), the settings that plan and apply it, its ``agent:``."""

    name: str
    settings: Settings
    agent: AgentSettings
    # The agent's checkout (None: the agent reads the project where it is): nothing the
    # agent reads or keeps lies outside it, nor its state inside it.
    root: str | None = None
    # What the environment's endpoint was found to offer, kept from cycle to cycle (the
    # loop hands each round's target the one before): a refresh whose endpoint lacked
    # the reads sends its Gets only after its probe, not each cycle beside it.
    offers: Offers = field(default_factory=Offers, compare=False)
    # Impact reports measured in earlier cycles, kept the same way: a change held back
    # (approvals, a freeze, a pause) is not reported on again every cycle.
    kept: impacts.Kept = field(default_factory=impacts.Kept, compare=False)

    @property
    def workspace(self) -> str:
        return self.settings.workspace


@dataclass
class Cycle:
    """What one cycle found and did."""

    environment: str
    workspace: str
    status: Status
    reason: str
    revision: str | None
    at: str = field(default_factory=now)
    seconds: float = 0.0
    summary: dict[str, int] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    applied: Applied | None = None  # when this cycle applied
    # Objects a refresh found changed outside govsync or missing on the server.
    drifted: int = 0
    held: list[str] = field(default_factory=list)  # held back by a partial apply
    # The status the cycle's plan found, before any apply it made (None: unplanned).
    found: Status | None = None
    # Objects a self-heal put back (changed outside govsync or missing): its trace.
    healed: int = 0
    # Each measured policy's impact, in short (impact_summary), where the environment's
    # ``impact:`` asks for it: in the status, the history and the notifications.
    impact: list[dict[str, Any]] = field(default_factory=list)

    @property
    def pending(self) -> int:
        return sum(n for a, n in self.summary.items()
                   if a not in (Action.NOOP, Action.UNCERTAIN))

    @property
    def uncertain(self) -> int:
        return self.summary.get(Action.UNCERTAIN, 0)

    def events(self) -> list[Event]:
        """What this cycle tells the sinks: the apply's outcome, then the status."""
        found = []
        if self.applied is not None and not self.applied.interrupted:
            found.append(Event.APPLIED if self.applied.ok else Event.FAILED)
        found.append(STATUS_EVENTS[self.status])
        return found

    def record(self) -> dict[str, Any]:
        """The history record (``type: drift``, as the dashboard reads it); equal cycles
        share a ``key`` and are merged into one record by the state."""
        me = LockHolder.me()
        body: dict[str, Any] = {
            "type": RecordType.DRIFT, "environment": self.environment,
            "status": str(self.status), "reason": self.reason, "revision": self.revision,
            "summary": {k: n for k, n in self.summary.items() if n},
            "pending": self.pending, "uncertain": self.uncertain,
            "changes": self.changes,
            "applied": self.applied.as_dict() if self.applied is not None else None,
            "drifted": self.drifted,
            **({"held": self.held} if self.held else {}),
            **({"healed": self.healed} if self.healed else {}),
            **({"impact": self.impact} if self.impact else {}),
        }
        key = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()
        return {**body, "at": self.at, "ok": self.status == Status.SYNCED,
                "user": me.user, "host": me.host, "pid": me.pid, "seconds": self.seconds,
                "cycles": 1, "key": key}

    def as_dict(self) -> dict[str, Any]:
        """The cycle as the JSON API shows it."""
        return {"status": str(self.status), "reason": self.reason, "revision": self.revision,
                "at": self.at, "seconds": round(self.seconds, 3),
                "summary": {k: n for k, n in self.summary.items() if n},
                "pendingChanges": self.pending, "uncertainEntries": self.uncertain,
                "driftedObjects": self.drifted,
                "applied": self.applied.as_dict() if self.applied is not None else None,
                "heldBack": self.held, "impact": self.impact}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], environment: str,
                    workspace: str) -> Cycle | None:
        """A cycle recorded by an agent (the leader's ``cycle`` value); None if unreadable."""
        try:
            summary = {str(k): int(v) for k, v in dict(record.get("summary") or {}).items()}
            return cls(environment, workspace, Status(record["status"]),
                       str(record.get("reason") or ""), record.get("revision"),
                       str(record.get("at") or ""), float(record.get("seconds") or 0.0),
                       summary, list(record.get("changes") or []),
                       Applied.from_dict(record.get("applied")),
                       int(record.get("drifted") or 0),
                       [str(a) for a in record.get("held") or []],
                       healed=int(record.get("healed") or 0),
                       impact=[dict(i) for i in record.get("impact") or []
                               if isinstance(i, dict)])
        except (KeyError, TypeError, ValueError):
            return None


def run(target: Target, *, revision: str | None, paused: Mapping[str, Any] | None,
        frozen: str | None, stopping: threading.Event | None = None,
        read: Reader = read_files) -> Cycle:
    """Plan ``target`` and, when its ``autoApply`` allows and nothing stands in the
    way, apply it; never raises for what an environment may meet (a bad manifest,
    an unreachable endpoint, a held lock): those are its status."""
    started = time.perf_counter()
    cycle = Cycle(target.name, target.workspace, Status.ERROR, "", revision)
    try:
        _run(cycle, target, paused, frozen, stopping, read)
    except ManifestError as exc:
        cycle.status, cycle.reason = Status.ERROR, problems(exc.problems)
    except GovsyncError as exc:
        cycle.status, cycle.reason = Status.ERROR, str(exc)
    cycle.seconds = time.perf_counter() - started
    return cycle


def problems(found: list[Problem]) -> str:
    first = found[0] if found else None
    where = f"{first.file}:{first.line}:{first.col}: " if first and first.file else ""
    return (f"{len(found)} problem(s) in the manifests or the project (`govsync validate` "
            f"lists them); the first: {where}{first.message if first else ''}")


def _plan(cycle: Cycle, manifests: ManifestSet, target: Target) -> Plan:
    # Impact, where the environment asks for it and applies automatically: measured with
    # the plan, before the apply, and said in the status and the notifications (an
    # environment applied by hand is measured by its pull request's plan).
    request = (impacts.requested(target.settings.selection.impact)
               if target.agent.auto_apply else None)
    found = planned(manifests, target.settings, target.offers,
                    request._replace(kept=target.kept) if request is not None else None)
    plan, errors = found.plan, found.rule_errors
    holder = str(found.running) if found.running is not None else ""
    cycle.status, cycle.reason = status_of(plan, len(errors), holder, "")
    if errors:
        cycle.reason += "; " + problems(errors).split("; the first: ", 1)[1]
    cycle.summary = plan.summary()
    cycle.drifted = len(plan.drift)
    cycle.changes = [{"address": c.address, "action": str(c.action), "fields": c.fields[:20]}
                     for c in plan.changes if c.action != Action.NOOP][:LISTED_CHANGES]
    cycle.impact = [impact_summary(c.address, c.impact) for c in plan.changes
                    if c.impact is not None][:LISTED_CHANGES]
    if cycle.impact:
        cycle.reason += f"; impact: {impact_words(cycle.impact)}"
    return plan


def impact_summary(address: str, impact: Impact) -> dict[str, Any]:
    """A policy's impact as the agent's status and notifications carry it."""
    return {"address": address, "known": impact.known, "why": impact.why,
            "window": impact.window, "source": str(impact.source),
            "newTotal": impact.total(impact.new),
            "recordedTotal": impact.total(impact.recorded) if impact.recorded is not None
            else None, "evaluated": impact.evaluated}




def _run(cycle: Cycle, target: Target, paused: Mapping[str, Any] | None, frozen: str | None,
         stopping: threading.Event | None, read: Reader) -> None:
    settings = target.settings
    selection = settings.selection
    _confined(target)
    found, accepted = _governors(target)
    if not accepted:
        cycle.status, cycle.reason = Status.BLOCKED, _unaccepted(target, found)
        return
    manifests = load_manifests(selection.paths(()), read=read,
                               context=Context(selection.variables(), selection.name))
    plan = _plan(cycle, manifests, target)
    cycle.found = cycle.status
    # OutOfSync: the git change is applied, and what changed outside govsync is put back
    # with it (contract 12, amended).  Drifted (only outside changes): what is missing is
    # made again; what changed is put back only with selfHeal.
    appliable = (cycle.status in (Status.OUT_OF_SYNC, Status.UNCERTAIN)
                 or (cycle.status == Status.DRIFTED and (selection.self_heal or any(
                     c.why is not None and c.why.why == Why.MISSING for c in plan.changes)))
                 ) and bool(plan.work() or plan.governance is not None)
    held = bool(target.agent.partial_apply and cycle.status == Status.BLOCKED
                and plan.blocked())  # the rest applied, what is blocked held back
    # Git now says what the console set, and nothing else drifted: recorded, nothing sent.
    caught_up = {c.address for c in plan.caught_up()}
    recording = bool(caught_up) and cycle.status == Status.DRIFTED and not plan.work() \
        and {d.address for d in plan.drift} <= caught_up
    appliable = appliable or held or recording
    if paused is not None:
        cycle.status, cycle.reason = Status.PAUSED, (
            f"paused by {paused.get('by', 'someone')} at {paused.get('at', '?')}: "
            f"{paused.get('reason', '')}; {cycle.reason}")
        return
    if not appliable or not target.agent.auto_apply:
        return
    if frozen is not None:
        cycle.reason += f"; not applied: in the freeze window {frozen!r}"
        return
    if stopping is not None and stopping.is_set():
        return
    failing = _code_failing(manifests, plan) or _tests_failing(manifests, target.name)
    if failing:
        cycle.status, cycle.reason = Status.BLOCKED, f"not applied: {failing}; {cycle.reason}"
        return
    drifted = cycle.drifted if cycle.found == Status.DRIFTED else 0
    if required(plan, settings) or found:
        _apply_approved(cycle, target, manifests, stopping, found)
    elif held:
        apply_rest(cycle, target, manifests, plan, stopping)
    else:
        _apply(cycle, target, manifests, None, stopping)
    if drifted and cycle.applied is not None and cycle.applied.ok:
        cycle.healed = drifted  # a self-heal: only outside changes were applied


def _code_failing(manifests: ManifestSet, plan: Plan) -> str:
    """Before an automatic apply that sends code, validate's checks of the manifests'
    code (contract section 13): a commit may not take live what `govsync validate`
    refuses (a CI job would have stopped it; the agent is its own CI).  Why the apply
    waits ('' : nothing sent has code, or the code compiles)."""
    objects = manifests.objects
    if not any(c.address in objects and objects[c.address].kind.code is not None
               for c in plan.work()):
        return ""
    errors, _ = check_code(objects)
    if not errors:
        return ""
    first = errors[0]
    return (f"{len(errors)} error(s) in policy or hook code (`govsync validate` lists "
            f"them); the first: {first.file}:{first.line}:{first.col}: {first.message}")


def _tests_failing(manifests: ManifestSet, environment: str | None) -> str:
    """Before an automatic apply, the environment's policy tests (contract section 13):
    why the apply waits ('' : every case passes)."""
    if not manifests.tests:
        return ""
    report = policytests.run(manifests, environment=environment)
    if report.ok:
        return ""
    s = report.summary()
    first = next(o for o in report.outcomes if o.status != CaseStatus.PASSED)
    return (f"{s['failed']} policy test case(s) fail and {s['errors']} err (`govsync test` "
            f"lists them); the first: {first.file}:{first.line}:{first.col}: {first.test} "
            f"{first.case!r}: {first.message}")


def _confined(target: Target) -> None:
    """ConfigError, naming the path, for what the repository may not make the agent
    read: manifests, an allowed-signers file or the plans folder outside the
    checkout (an absolute or ``../`` path, a symbolic link leading out).  (A state
    a commit could replace the loop refuses before opening it:
    ``files.exposed_state``.)"""
    if target.root is None:
        return
    refused = target.settings.selection.outside(target.root, (target.agent.plans,))
    if refused:
        raise ConfigError(f"environment {target.name}: {refused}")


def _governors(target: Target) -> tuple[list[governance.Governor], bool]:
    """The workspaces that govern the endpoint of a new workspace (one that records no
    governance yet; none for any other), and whether the agent may take it up: not
    when it is new on a governed endpoint and no operator accepted it there
    (``govsync agent accept``)."""
    settings = target.settings
    endpoint = normal_endpoint(settings.endpoint) if settings.endpoint else None
    if endpoint is None or not exists(settings.state):
        return [], True
    with runtime.open_state(settings) as store:
        recorded = store.governed()  # one read of the records, no entries
        if target.workspace in recorded:
            return [], True
        found = governance.governors(recorded, target.workspace, endpoint)
        accepted = store.agent(target.workspace).get(ACCEPTED) if found else None
    return found, not found or (isinstance(accepted, dict)
                                and isinstance(accepted.get("endpoint"), str)
                                and endpoints.same(accepted["endpoint"], endpoint))


def _unaccepted(target: Target, found: list[governance.Governor]) -> str:
    endpoint = safe_url(normal_endpoint(target.settings.endpoint or ""))
    return (f"not planned: environment {target.name} is new (workspace {target.workspace!r} "
            f"records no governance) on endpoint {endpoint}, which {found[0].named()} "
            "governs: a commit may not add or rename an environment onto a governed "
            "endpoint; an operator accepts it with `govsync agent accept "
            f"{target.name} --reason TEXT`, and its first apply then needs the approvals "
            f"recorded with {found[0].workspace!r}")


def _apply_approved(cycle: Cycle, target: Target, manifests: ManifestSet,
                    stopping: threading.Event | None,
                    governors: list[governance.Governor]) -> None:
    """Apply from an approved saved plan of the ``plans`` folder, if one verifies."""
    folder = target.agent.plans
    needs = (f"{governors[0].named()} governs its endpoint" if governors
             else f"workspace {target.workspace!r} requires signed approvals")
    why = f"waiting for approvals: {needs}, so it is applied only from an approved saved plan"
    if folder is None:
        cycle.reason += f"; {why}: name their folder in agent.plans"
        return
    found = sorted(glob.glob(os.path.join(folder, "*.json")), key=os.path.getmtime,
                   reverse=True)
    refusals = []
    for path in found:
        try:
            saved = planfile.read(path)
        except PlanError as exc:
            refusals.append(str(exc))
            continue
        if (saved.plan.environment != target.settings.selection.name
                or saved.plan.workspace != target.workspace):
            continue
        try:
            if _apply(cycle, target, manifests, saved, stopping):
                return
        except (ApprovalError, GovernanceError, PlanError) as exc:
            refusals.append(f"{os.path.basename(path)}: {exc}")
    shown = f" ({'; '.join(refusals[:3])})" if refusals else ""
    cycle.status = Status.OUT_OF_SYNC
    cycle.reason += f"; {why}, and {folder} holds none that applies{shown}"


def _apply(cycle: Cycle, target: Target, manifests: ManifestSet, saved: SavedPlan | None,
           stopping: threading.Event | None) -> bool:
    """Apply (the manifests, or an approved saved plan); the status as a plan after it
    finds it.  Whether it applied.  A saved plan's refusal (approvals, staleness) is
    raised for the caller to try the next one."""
    settings = target.settings
    # An approved plan the workspace's key authenticates is applied as saved; one made
    # for review only (without secrets) holds a plan made now to its changes.
    source: Source = (
        Manifests(manifests) if saved is None
        else Saved(saved) if saved.authenticated
        else Reviewed(manifests, saved))
    try:
        _, result = apply(source, settings, ApplyOptions(
            stopping=stopping, offers=target.offers))
    except StateLockedError as exc:
        cycle.status, cycle.reason = Status.LOCKED, f"not applied: {exc}"
        return False
    except (BlockedPlanError, ManifestError) as exc:
        text = problems(exc.problems) if isinstance(exc, ManifestError) else str(exc)
        cycle.status, cycle.reason = Status.BLOCKED, f"not applied: {text}"
        return False
    except ApprovalError as exc:
        if saved is not None:
            raise
        cycle.status, cycle.reason = Status.OUT_OF_SYNC, f"waiting for approvals: {exc}"
        return False
    except (LockLostError, PlanError) as exc:
        if saved is not None and not isinstance(exc, LockLostError):
            raise
        cycle.status, cycle.reason = Status.ERROR, f"apply failed: {exc}"
        cycle.applied = Applied(now(), False, str(exc))
        return True
    interrupted = bool(stopping is not None and stopping.is_set() and result.stopped)
    cycle.applied = Applied(
        now(), result.ok, result.stopped, {k: n for k, n in result.summary().items() if n},
        os.path.basename(saved.path) if saved is not None else None, interrupted)
    if not result.requests and result.ok and not result.outcomes:
        cycle.applied = None  # nothing was sent (the workspace recorded its governance)
    failed = [o for o in result.outcomes if o.status == ChangeStatus.FAILED]
    after = Cycle(cycle.environment, cycle.workspace, Status.ERROR, "", cycle.revision)
    _plan(after, manifests, target)
    cycle.status, cycle.reason = after.status, after.reason
    cycle.summary, cycle.changes = after.summary, after.changes
    if interrupted:
        cycle.reason = f"the apply was stopped (the agent is stopping); {cycle.reason}"
    elif not result.ok:
        why = result.stopped or (f"{failed[0].address}: {failed[0].error}" if failed else "")
        cycle.status, cycle.reason = Status.ERROR, (
            f"the apply failed ({len(failed)} change(s) failed): {why}; {after.reason}")
    return True


def apply_rest(cycle: Cycle, target: Target, manifests: ManifestSet, plan: Plan,
               stopping: threading.Event | None) -> None:
    """A partial apply (partial.py): every change but the held-back ones, as
    ``apply --target`` with their addresses; the status is then the whole plan's
    (``Blocked`` while a blocked change remains), and the reason and ``held`` list
    what waits."""
    cycle.held = partial.held_back(plan, manifests)
    shown = partial.said(cycle.held, len(plan.blocked()))
    rest = [c.address for c in plan.work() if c.address not in set(cycle.held)]
    if not rest:
        cycle.reason += f"; {shown}; nothing else to apply"
        return
    settings = dataclasses.replace(target.settings, targets=tuple(rest))
    _apply(cycle, dataclasses.replace(target, settings=settings), manifests, None, stopping)
    if cycle.applied is None or cycle.status == Status.LOCKED:
        cycle.reason += f"; {shown}"
        return
    failed = "" if cycle.applied.ok else cycle.reason
    after = Cycle(cycle.environment, cycle.workspace, Status.ERROR, "", cycle.revision)
    _plan(after, manifests, target)  # the whole environment's
    cycle.summary, cycle.changes = after.summary, after.changes
    cycle.status = Status.ERROR if failed else after.status
    cycle.reason = f"{failed or after.reason}; applied the rest, {shown}"
