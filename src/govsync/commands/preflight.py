"""Everything an apply checks before it sends anything, in one place.

Before the lock (``scoped``): the source is for this run's environment,
workspace and targets.  With the lock held (``locked``): the workspace's
recorded environment; a saved plan not applied yet, authentic and not stale.
Then ``preflight`` makes (or takes) the plan and returns a ``Preflight``: the
plan, the governance the workspace records and will record, the approvers
(signatures over the plan's review digest), the rules checked on exactly what
would be sent, the secrets still those the plan was made with, and the audit
fields of the apply's history record.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from govsync import approvals, audit, governance, planfile
from govsync.approvals import Approver
from govsync.commands.endpoint import identity
from govsync.commands.observing import check_creates, refreshed_async, refused_partial
from govsync.commands.planning import check_rules, governed_by, tested
from govsync.commands.sources import Manifests, Reviewed, Saved, Source
from govsync.commands.workspace import project_file, with_secrets
from govsync.errors import (
    ApprovalError,
    BlockedPlanError,
    ConfigError,
    GovernanceError,
    PlanError,
    PlanKeyUnavailable,
    StalePlanError,
)
from govsync.governance import Governance
from govsync.plan import Action, Plan, codes_to_check, make_plan
from govsync.planfile import SavedPlan, review_digest, reviewed_change
from govsync.redact import url as safe_url
from govsync.render.reasons import blocked_advice, blocked_lines
from govsync.rules import check_sent
from govsync.settings import Settings
from govsync.state import Snapshot, StateStore
from govsync.values import Resolver

if TYPE_CHECKING:
    from govsync import refresh
    from govsync.api.resource import Offers


@dataclass(frozen=True)
class AuditFields:
    """What an apply's history record holds beyond its changes (audit.record)."""

    environment: str | None
    actor: str | None
    approvers: tuple[Approver, ...]
    # A saved plan's own commit (what was reviewed); else the checkout's.
    git: dict[str, Any] | None
    saved_plan: bool
    plan_id: str
    review_digest: str
    # SHA-256 of the saved file's bytes; of an unsaved plan's canonical JSON, once
    # its checks are all in (computed while it is applied).
    plan_hash: str | None = None
    plan_file: str | None = None

    def as_dict(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "environment": self.environment, "actor": self.actor,
            "approvers": [a.as_dict() for a in self.approvers], "git": self.git,
            "savedPlan": self.saved_plan, "planId": self.plan_id,
            "reviewDigest": self.review_digest,
        }
        if self.plan_hash is not None:
            fields["planHash"] = self.plan_hash
        if self.plan_file is not None:
            fields["planFile"] = self.plan_file
        return fields


@dataclass(frozen=True)
class Preflight:
    """What the checks before anything is sent found, and what the apply needs of it."""

    plan: Plan
    # The governance the workspace records (None: never applied), and the one it
    # records after this apply.
    recorded: Governance | None
    target: Governance
    approvers: tuple[Approver, ...]
    audit: AuditFields
    # What the refresh read (None: no refresh, or a saved plan's apply).
    observed: refresh.Observed | None

    @property
    def records_governance(self) -> bool:
        """Whether this apply records the workspace's governance (a change, or a first)."""
        return self.plan.governance is not None or self.recorded is None


def scoped(source: Source, settings: Settings) -> Settings:
    """The settings the apply runs with: ConfigError, GovernanceError or PlanError when
    the source is not for this run (a saved plan with --target, a plan of another
    environment or workspace); a reviewed plan's targets are used.  They know the
    values of the secrets it sends (``with_secrets``): no answer is shown or kept with
    one."""

    match source:
        case Saved(saved):
            settings = with_secrets(settings, plan=saved.plan)
            if settings.targets:
                raise ConfigError(
                    "--target does not apply to a saved plan: it applies exactly the changes "
                    "it holds" + (f" (it was made with --target {' '.join(saved.plan.targets)})"
                                  if saved.plan.targets else "")
                    + "; make a targeted plan with `govsync plan --target ... --out`")
            _same_scope(saved, settings)
        case Reviewed(manifests, reviewed):
            settings = with_secrets(settings, manifests)
            _same_scope(reviewed, settings)
            if settings.targets and sorted(settings.targets) != sorted(reviewed.plan.targets):
                raise ConfigError("--target differs from the reviewed plan's targets: leave it "
                                  "out (the reviewed plan's targets are used)")
            return dataclasses.replace(settings, targets=tuple(reviewed.plan.targets))
        case Manifests(manifests):
            return with_secrets(settings, manifests)
    return settings


def locked(source: Source, store: StateStore, snapshot: Snapshot,
           settings: Settings) -> Governance | None:
    """The first checks under the lock; the governance the workspace records.

    GovernanceError when the workspace belongs to another environment; a saved
    plan applied already, not authentic or stale is refused here."""

    selection = settings.selection
    record = governance.recorded(snapshot.governance, settings.workspace)
    governance.check_environment(record, selection.name, settings.workspace, selection.project)
    if isinstance(source, Saved):
        not_applied(store, settings.workspace, source.saved)
        _authentic(source.saved, store, snapshot, settings.workspace)
    return record


async def preflight(source: Source, store: StateStore, snapshot: Snapshot, settings: Settings,
                    record: Governance | None, offers: Offers | None = None) -> Preflight:
    """The plan to apply, checked (under the lock) before anything is sent (``offers``:
    what the endpoint was found to offer before)."""

    selection = settings.selection
    proposed = governance.of_project(selection.project, selection.environment)
    observed: refresh.Observed | None = None

    def owners(ids: Collection[str]) -> Mapping[str, tuple[str, str]]:
        return store.recorded_elsewhere(settings.workspace, ids)

    match source:
        case Saved(saved):
            plan = saved.plan
            await check_creates(plan, settings, snapshot, owners, offers)
        case Manifests(manifests) | Reviewed(manifests, _):
            plan, observed, seen = await refreshed_async(
                settings, snapshot, lambda observation: make_plan(
                    manifests, snapshot, environ=settings.environ, targets=settings.targets,
                    prune=selection.prune, replace=settings.replace,
                    ignore=selection.ignore_changes, observation=observation), owners=owners,
                codes=codes_to_check(manifests, snapshot.entries), offers=offers)
            refused_partial(observed, "nothing was applied")
            tested(plan, manifests, snapshot, observed, seen)
            governed_by(plan, record, proposed, selection.name)
            check_rules(plan, manifests, governance.rules_to_check(record, proposed),
                        selection.name, snapshot)
            if isinstance(source, Reviewed):
                not_applied(store, settings.workspace, source.reviewed)
                plan.id = source.reviewed.plan.id
                _same_as_reviewed(plan, source.reviewed)
    if plan.blocked():
        blocked = plan.blocked()
        raise BlockedPlanError("\n".join([
            f"the plan has {len(blocked)} blocked change(s):",
            *blocked_lines(blocked),
            f"{blocked_advice(blocked)}; nothing was applied"]))
    target = (Governance.from_dict(plan.governance["to"], settings.workspace)
              if plan.governance else record or proposed)
    # The approvals the workspace recorded; for a workspace never applied, those
    # it is about to record.
    enforced = record if record is not None else target
    evidence = source.evidence
    approvers = _approved(enforced, evidence, plan, settings.workspace,
                          recorded=record is not None)
    if record is None:
        # A new workspace on an endpoint another workspace governs: its approvals too.
        approvers += governance.approved_by_governors(
            governance.governors(store.governed(), settings.workspace, identity(settings)),
            settings.workspace, safe_url(identity(settings) or ""),
            evidence.path if evidence is not None else None,
            approvals.review_message(planfile.review_digest(plan)))
    # The rules again, on exactly what would be sent, for the workspace's environment.
    check_sent(governance.rules_to_check(record, target), enforced.environment,
               evidence.path if evidence is not None else "this apply", plan.work())
    fields = _audit_fields(source, plan, settings, tuple(approvers))
    _secrets_unchanged(plan, snapshot, settings)
    return Preflight(plan, record, target, tuple(approvers), fields, observed)


def _audit_fields(source: Source, plan: Plan, settings: Settings,
                  approvers: tuple[Approver, ...]) -> AuditFields:
    saved = source.saved if isinstance(source, Saved) else None
    git: dict[str, Any] | None
    if saved is not None and saved.plan.git:
        git = saved.plan.git
    else:
        files = source.manifests.files if not isinstance(source, Saved) else ()
        git = audit.git_state(audit.manifests_folder(files, project_file(settings)))
    return AuditFields(
        environment=settings.selection.name, actor=audit.actor(settings.environ),
        approvers=approvers, git=git, saved_plan=saved is not None, plan_id=plan.id,
        review_digest="sha256:" + review_digest(plan),
        plan_hash="sha256:" + saved.file_digest if saved is not None else None,
        plan_file=os.path.basename(saved.path) if saved is not None else None)


def _secrets_unchanged(plan: Plan, snapshot: Snapshot, settings: Settings) -> None:
    """StalePlanError when a secret's variable is not set, or its value is not the one
    the plan was made with (its fingerprint)."""

    resolver = Resolver({}, snapshot.fingerprint, settings.environ)
    for change in plan.work():
        for path, variable, why in resolver.stale_secrets(change.request):
            dotted = ".".join(str(p) for p in path)
            if why == "is not set":
                raise StalePlanError(f"{change.address}: environment variable {variable} "
                                     f"(secret {dotted}) is not set")
            raise StalePlanError(
                f"{change.address}: the value of {variable} (secret {dotted}) changed since "
                "the plan was made: make a new plan and review it")


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


def applied_already(evidence: SavedPlan, when: str) -> PlanError:
    return PlanError(f"{evidence.path} was applied already (at {when}): a saved plan applies "
                     "at most once; make a new plan with `govsync plan --out`; nothing was sent")


def not_applied(store: StateStore, workspace: str, evidence: SavedPlan) -> None:
    """PlanError when the plan was applied already (said before any other difference)."""
    when = store.plan_applied(workspace, evidence.plan.id)
    if when is not None:
        raise applied_already(evidence, when)


def required(plan: Plan, settings: Settings) -> int:
    """How many signed approvals an apply of this workspace needs, as ``preflight``
    counts them: those the workspace records, else those it is about to record."""
    if plan.governance is not None and plan.governance["from"] is not None:
        return Governance.from_dict(plan.governance["from"], plan.workspace).required
    selection = settings.selection
    return governance.of_project(selection.project, selection.environment).required


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
