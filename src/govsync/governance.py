"""A workspace's governance, bound to the workspace, not to the caller's words.

Who may change a workspace, and under which rules, is recorded with the
workspace (as Terraform binds a plan to its state's lineage, and git a
signature to the exact bytes): at its first apply a workspace records

* the environment it belongs to (or none),
* the approvals it requires: how many, and the allowed signers' keys,
* the rules that hold for it (those of the project that match its environment),
* the endpoint it applies to (``endpoints.identity``: one spelling, no credentials), in the
  state that holds the record.

From then on, whatever the command line, the environment variables or the
project file say:

* a run that names another environment (or none, where the project has
  environments) is refused;
* the approvals counted are the recorded ones: a project file that asks for
  fewer, or lists other signers, loosens nothing by itself;
* a project whose governance differs from the recorded one makes that
  difference a change of the plan: shown, part of what approvers sign, and
  applied only with the approvals recorded;
* the rules evaluated at apply, on what will be sent, are the recorded ones
  and the project's;
* a workspace that records nothing yet (a new one: an environment the
  repository adds, or a workspace it renames) whose endpoint another
  workspace of the same state governs (records approvals for) needs that
  workspace's recorded approvals for its first apply (``governors``).

Here too: the rules evaluated on a plan (``check_plan``), whose results become
the plan's checks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from govsync.endpoints import Places
from govsync.errors import ApprovalError, GovernanceError, ManifestError, StateDamagedError
from govsync.manifests.manifest import ManifestSet
from govsync.plan import (
    ENDING,
    Action,
    Check,
    CheckStatus,
    GovernanceChange,
    Plan,
    recorded_shown,
)
from govsync.project import Environment, Project, section
from govsync.state import APPLIED, Snapshot

if TYPE_CHECKING:
    from govsync.approvals import AllowedSigner, Approver
    from govsync.rules import Rule, RuleFindings, Subject

# The approvals' and the rules' modules are those that parse the project file's sections
# (project.section): loaded where a workspace has approvals or rules, not by every plan.

FORMAT = 1


@dataclass(frozen=True)
class Governance:
    """What a workspace requires: its environment, its approvals and its rules."""

    environment: str | None
    required: int = 0
    signers: tuple[str, ...] = ()  # allowed-signers lines (git's format), normalized
    rules: tuple[Rule, ...] = field(default=(), compare=False)
    # The endpoint it applies to, as recorded (None: not recorded); not part of what is
    # compared or signed: a change of endpoint is `--allow-endpoint-change`'s.
    endpoint: str | None = field(default=None, compare=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Governance) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self.digest())

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "environment": self.environment,
            "approvals": {"required": self.required, "allowedSigners": list(self.signers)},
            "rules": [_rule_dict(r) for r in self.rules],
        }

    def stored(self, endpoint: str | None) -> dict[str, Any]:
        """The record the state keeps: ``as_dict`` and the endpoint it binds (identity)."""
        bound = endpoint if endpoint is not None else self.endpoint
        return {**self.as_dict(), **({"endpoint": bound} if bound is not None else {})}

    def digest(self) -> str:
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], workspace: str) -> Governance:
        """The governance a workspace recorded; StateDamagedError when it is malformed."""
        try:
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}")
            environment = data["environment"]
            if environment is not None and not isinstance(environment, str):
                raise ValueError("environment")
            approvals = data["approvals"]
            required = approvals["required"]
            signers = approvals["allowedSigners"]
            if (not isinstance(required, int) or isinstance(required, bool) or required < 0
                    or not isinstance(signers, list)
                    or not all(isinstance(s, str) for s in signers)):
                raise ValueError("approvals")
            rules = tuple(_rule(r, workspace) for r in data["rules"])
            endpoint = data.get("endpoint")
            if endpoint is not None and not isinstance(endpoint, str):
                raise ValueError("endpoint")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateDamagedError(
                f"the governance recorded with workspace {workspace!r} is malformed ({exc}): "
                "restore the state from a backup; nothing was changed") from None
        return cls(environment, required, tuple(signers), rules, endpoint)

    def allowed(self, workspace: str) -> list[AllowedSigner]:
        """The recorded signers, parsed as an allowed-signers file."""
        signers: list[AllowedSigner] = section("approvals").parse_allowed_signers(
            "\n".join(self.signers), f"the allowed signers recorded with workspace {workspace!r}")
        return signers

    def differences(self, before: Governance | None) -> list[str]:
        """What changes from ``before`` to this, one line each, for a person."""
        if before is None:
            return [f"recorded for the first time: {self.summary()}"]
        out: list[str] = []
        if before.environment != self.environment:
            out.append(f"environment {before.environment} -> {self.environment}")
        if before.required != self.required:
            out.append(f"approvals required {before.required} -> {self.required}")
        gone = [s for s in before.signers if s not in self.signers]
        new = [s for s in self.signers if s not in before.signers]
        out += [f"allowed signer removed: {_signer(s)}" for s in gone]
        out += [f"allowed signer added: {_signer(s)}" for s in new]
        old_rules = {r.name: _rule_dict(r) for r in before.rules}
        new_rules = {r.name: _rule_dict(r) for r in self.rules}
        out += [f"rule removed: {n}" for n in sorted(old_rules.keys() - new_rules.keys())]
        out += [f"rule added: {n}" for n in sorted(new_rules.keys() - old_rules.keys())]
        out += [f"rule changed: {n}" for n in sorted(old_rules.keys() & new_rules.keys())
                if old_rules[n] != new_rules[n]]
        return out

    def summary(self) -> str:
        env = f"environment {self.environment}" if self.environment else "no environment"
        approvals = (f"{self.required} approval(s) by {len(self.signers)} allowed signer(s)"
                     if self.required else "no approvals")
        return f"{env}, {approvals}, {len(self.rules)} rule(s)"


def _signer(line: str) -> str:
    """An allowed-signers line as a person names it: principals and the key's type."""
    parts = line.split()
    return f"{parts[0]} ({parts[-2]})" if len(parts) >= 3 else line


def _rule_dict(rule: Rule) -> dict[str, Any]:
    return {"name": rule.name, "expression": rule.expression, "message": rule.message,
            "severity": str(rule.severity),
            "kinds": list(rule.kinds) if rule.kinds is not None else None,
            "environments": list(rule.environments) if rule.environments is not None
            else None}


def _rule(data: Mapping[str, Any], workspace: str) -> Rule:
    kinds, envs = data["kinds"], data["environments"]
    for value in (data["name"], data["expression"], data["message"]):
        if not isinstance(value, str):
            raise TypeError("a rule's name, expression and message are strings")
    for value in (kinds, envs):
        if value is not None and not (isinstance(value, list)
                                      and all(isinstance(v, str) for v in value)):
            raise TypeError("a rule's kinds and environments are lists of strings")
    rules = section("rules")
    rule: Rule = rules.Rule(data["name"], data["expression"], data["message"],
                            rules.Severity(data["severity"]),
                            tuple(kinds) if kinds is not None else None,
                            tuple(envs) if envs is not None else None,
                            file=f"(recorded with workspace {workspace})")
    return rule


def of_project(project: Project | None, environment: Environment | None) -> Governance:
    """The governance the project asks for the selected environment (None: none)."""
    name = environment.name if environment is not None else None
    if project is None:
        return Governance(name)
    required, signers = 0, tuple[str, ...]()
    approvals = project.approvals
    if approvals is not None and (approvals.environments is None
                                  or name in approvals.environments):
        required = approvals.required
        signers = tuple(s.line for s in section("approvals").read_allowed_signers(approvals))
    rules = tuple(r for r in project.rules
                  if r.environments is None or (name or "") in r.environments)
    return Governance(name, required, signers, rules)


def recorded(record: Mapping[str, Any] | None, workspace: str) -> Governance | None:
    """What the workspace recorded (None: nothing yet)."""
    return None if record is None else Governance.from_dict(record, workspace)


def check_environment(record: Governance | None, name: str | None, workspace: str,
                      project: Project | None) -> None:
    """GovernanceError unless this run may act on ``workspace`` as environment ``name``."""
    if record is not None:
        if record.environment == name:
            return
        said = f"environment {name}" if name else "no environment (no --env)"
        if record.environment is None:
            raise GovernanceError(
                f"workspace {workspace!r} belongs to no environment (recorded at its first "
                f"apply), and this run names {said}: leave out --env and GOVSYNC_ENV, or use "
                "another workspace; nothing was sent")
        raise GovernanceError(
            f"workspace {workspace!r} belongs to environment {record.environment} (recorded "
            f"at its first apply), and this run names {said}: pass --env "
            f"{record.environment} (check GOVSYNC_ENV and GOVSYNC_WORKSPACE); nothing was sent")
    if name is None and project is not None:
        owners = sorted(n for n, e in project.environments.items()
                        if (e.workspace or n) == workspace)
        if owners:
            raise GovernanceError(
                f"workspace {workspace!r} is environment {owners[0]}'s in {project.file}, and "
                f"this run names no environment: pass --env {owners[0]}; nothing was sent")


class Governor(NamedTuple):
    """A workspace that governs an endpoint: it records approvals for it."""

    workspace: str
    governance: Governance

    def named(self) -> str:
        env = self.governance.environment
        return f"workspace {self.workspace!r}" + (f" (environment {env})" if env else "")


def governors(recorded: Mapping[str, tuple[str | None, Mapping[str, Any]]], workspace: str,
              endpoint: str | None) -> list[Governor]:
    """The other workspaces of a state (``StateStore.governed``) that record approvals
    for ``endpoint``, strictest first: for the endpoint its record binds, or the one
    recorded with the workspace (a record made before the binding; a workspace moved
    with ``--allow-endpoint-change``), where that is the same place as ``endpoint``
    (``endpoints.Places``: the same identity, or the same port on a host that resolves
    to a common address; an open question answers yes)."""
    if not endpoint:
        return []
    held = {name: (column, Governance.from_dict(data, name))
            for name, (column, data) in recorded.items() if name != workspace}
    held = {n: (c, g) for n, (c, g) in held.items() if g.required}
    if not held:
        return []
    places = Places([endpoint, *(e for c, g in held.values() for e in (c, g.endpoint))])
    found = [Governor(name, gov) for name, (column, gov) in held.items()
             if places.same(endpoint, gov.endpoint) or places.same(endpoint, column)]
    return sorted(found, key=lambda g: (-g.governance.required, g.workspace))


def new_on_governed(workspace: str, endpoint: str, found: Sequence[Governor]) -> str:
    """What a plan and a refusal say of a new workspace on a governed endpoint."""
    first = found[0]
    return (f"workspace {workspace!r} records no governance yet, and its endpoint {endpoint} "
            f"is governed by {first.named()}, which requires {first.governance.required} "
            "signed approval(s): its first apply needs them, by the allowed signers recorded "
            f"with {first.workspace!r}")


def approved_by_governors(found: Sequence[Governor], workspace: str, endpoint: str,
                          plan_path: str | None, message: bytes) -> list[Approver]:
    """The approvers of a new workspace's first apply on a governed endpoint: each
    governor's recorded approvals (ApprovalError, naming it, when too few)."""
    approvers: list[Approver] = []
    for governor in found:
        held = governor.governance
        if plan_path is None:
            raise ApprovalError(
                f"{new_on_governed(workspace, endpoint, found)}: apply a saved plan approved "
                f"by {held.required} of them (`govsync plan --out plan.json`, `govsync "
                "approve plan.json --key KEY`), or give this environment another endpoint; "
                "nothing was sent")
        approvers += section("approvals").check(
            plan_path, message, held.allowed(governor.workspace), held.required,
            f"{governor.named()}, whose endpoint {endpoint} new workspace {workspace!r} "
            "applies to", f"the allowed signers recorded with {governor.workspace!r}")
    return approvers


def change(record: Governance | None, proposed: Governance) -> GovernanceChange | None:
    """The plan's governance change ({from, to}), or None when nothing changes.

    A workspace that recorded nothing yet (new, or applied by a govsync before
    this record existed) records the project's governance at its first apply:
    that is not a change of the plan."""
    if record is None or record == proposed:
        return None
    return {"from": record.as_dict(), "to": proposed.as_dict()}


def rules_to_check(record: Governance | None, proposed: Governance) -> tuple[Rule, ...]:
    """The project's rules, and each recorded rule the project changed or dropped
    (it holds until a change that removes it has been applied)."""
    mine = {_key(r) for r in proposed.rules}
    kept = tuple(r for r in (record.rules if record is not None else ())
                 if _key(r) not in mine)
    names = {r.name for r in proposed.rules}
    renamed = tuple(
        section("rules").Rule(f"{r.name}.recorded" if r.name in names else r.name, r.expression, r.message,
             r.severity, r.kinds, r.environments, r.file, r.line, r.col)
        for r in kept)
    return (*proposed.rules, *renamed)


def _key(rule: Rule) -> str:
    return json.dumps(_rule_dict(rule), sort_keys=True)


def check_plan(plan: Plan, manifests: ManifestSet, rules: Sequence[Rule],
               environment: str | None, snapshot: Snapshot) -> None:
    """Evaluate rules on a plan: ManifestError for errors; the results (passes and
    warnings) become the plan's checks."""

    if not rules:
        return
    evaluating = section("rules")
    ids = {a: e.id for a, e in snapshot.entries.items() if e.status == APPLIED and e.id}
    changes = {c.address: evaluating.as_change(c) for c in plan.changes}
    unchanged = {"action": str(Action.NOOP), "fields": []}
    # Deletes and forgets have no manifest: the rules see the object as state records it.
    ending = [c for c in plan.changes if c.action in ENDING and c.address in snapshot.entries]

    def subjects() -> Iterator[Subject]:
        yield from evaluating.manifest_subjects(manifests, ids, changes, unchanged)
        for c in ending:
            yield evaluating.Subject(
                c.address, c.kind, c.address.split("/", 1)[1],
                recorded_shown(snapshot.entries[c.address]),
                (manifests.files[0] if manifests.files else "state", 0, 0),
                evaluating.as_change(c))

    outcome = evaluating.evaluate(rules, subjects, environment, planned=True)
    if outcome.errors:
        raise ManifestError(outcome.errors)
    plan.checks.extend(rule_checks(outcome, rules))


def rule_checks(outcome: RuleFindings, rules: Sequence[Rule]) -> list[Check]:
    """One check per rule that passed, one per violation of a warning rule."""

    out: list[Check] = []
    for rule in rules:
        if rule.name not in outcome.evaluated:
            continue
        found = outcome.violations.get(rule.name, [])
        if not found:
            n = outcome.evaluated[rule.name]
            out.append(Check(f"rule {rule.name}", CheckStatus.PASSED,
                             f"{n} object{'s' if n != 1 else ''} checked" if n
                             else "no object of its kinds"))
        status = (CheckStatus.FAILED if rule.severity == section("rules").Severity.ERROR
                  else CheckStatus.WARNING)
        for address, problem in found:
            out.append(Check(f"rule {rule.name}", status,
                             f"{address} at {problem.file}:{problem.line}:{problem.col}: "
                             f"{rule.message}"))
    return out
