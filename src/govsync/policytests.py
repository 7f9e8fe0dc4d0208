"""Policy tests (contract section 13): the cases of ``kind: PolicyTest`` documents,
decided by the policy's code as ``govsync test`` runs them (``run``), and what a plan
shows of a created or code-changed policy (``annotate``, once the plan is decided).

Each case's input is the decision's input; ``input.hooks`` holds the results the case
gives and, for every other hook the code reads (``input.hooks.<name>``), what that
Hook's JavaScript returns on the input (run sandboxed, within its ``timeoutMs``, with
the case's ``env``); a ``draft`` hook is neither run nor passed, as the service passes
only active ones.  ``time.now_ns()`` reads the case's ``now``.  Every case of one
policy is decided in one call of the bounded worker (``policycode.sandbox.decide``): a hook
that throws or never returns, an engine that crashes or loops is that case's error.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from govsync import policycode
from govsync.api.kinds import HOOK_KIND, POLICY_KIND
from govsync.errors import ConfigError
from govsync.manifests import policytest
from govsync.manifests.code import where
from govsync.manifests.directives import Directive
from govsync.manifests.manifest import Manifest, ManifestSet
from govsync.plan import (
    ENDING,
    Action,
    CaseRun,
    CaseStatus,
    Observation,
    Plan,
    PolicyTests,
    Service,
)
from govsync.policycode import CodeProblem, HookCode, Trial, Verdict, hook_uses

# A hook's timeoutMs where its manifest gives none.
DEFAULT_TIMEOUT_MS = 1000


class Suite(NamedTuple):
    """A PolicyTest and the policy it tests."""

    policy: Manifest
    test: Directive
    cases: list[policytest.Case]


@dataclass(frozen=True)
class Outcome:
    """One case's result, at the case's place."""

    policy: str
    test: str
    case: str
    stage: str
    status: CaseStatus
    decision: Any
    expected: dict[str, Any]
    message: str
    file: str
    line: int
    col: int
    environment: str | None = None

    def public(self) -> dict[str, Any]:
        """An entry of ``govsync test --format json``'s ``tests``."""
        body: dict[str, Any] = {
            "policy": self.policy, "test": self.test, "case": self.case, "stage": self.stage,
            "status": self.status, "decision": self.decision, "expected": self.expected,
            "message": self.message, "file": self.file, "line": self.line,
            "column": self.col}
        if self.environment is not None:
            body["environment"] = self.environment
        return body


@dataclass
class Report:
    """What ``govsync test`` found: every case's outcome, in the order of the tests."""

    outcomes: list[Outcome] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        return {"passed": self._count(CaseStatus.PASSED),
                "failed": self._count(CaseStatus.FAILED),
                "errors": self._count(CaseStatus.ERROR)}

    def _count(self, status: CaseStatus) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def ok(self) -> bool:
        return all(o.status == CaseStatus.PASSED for o in self.outcomes)


def suites(manifests: ManifestSet, targets: Sequence[str] = ()) -> list[Suite]:
    """The PolicyTests of the manifests (``targets``: only those of the policies, or the
    tests, whose address or label matches a pattern; a pattern that matches nothing is a
    ConfigError), in file order."""
    found = [Suite(manifests.objects[f"{POLICY_KIND}/{t.spec['policyRef']}"], t,
                   policytest.cases(t.spec)) for t in manifests.tests]
    if not targets:
        return found
    chosen: list[Suite] = []
    for pattern in targets:
        matched = [s for s in found if fnmatch.fnmatchcase(s.policy.address, pattern)
                   or fnmatch.fnmatchcase(s.test.label, pattern)]
        if not matched and not any(fnmatch.fnmatchcase(a, pattern) for a in manifests.objects):
            raise ConfigError(f"--target {pattern!r} matches no address in the manifests and no "
                              "PolicyTest: give an address (Policy/name), a test "
                              "(PolicyTest/name) or a glob such as Policy/pii-*")
        chosen.extend(s for s in matched if s not in chosen)
    return [s for s in found if s in chosen]


def run(manifests: ManifestSet, *, targets: Sequence[str] = (),
        environment: str | None = None) -> Report:
    """Every case of the manifests' PolicyTests (of ``targets``' policies), decided."""
    report = Report()
    hooks = _hooks(manifests)
    by_policy: dict[str, list[Suite]] = {}
    for suite in suites(manifests, targets):
        by_policy.setdefault(suite.policy.address, []).append(suite)
    groups = list(by_policy.values())
    for decided in _share_out(groups, hooks):
        for suite, case, verdict in decided:
            report.outcomes.append(_outcome(suite, case, verdict, manifests, environment))
    return report


def _share_out(groups: Sequence[Sequence[Suite]], hooks: Mapping[str, _Hook]
               ) -> list[list[tuple[Suite, policytest.Case, Verdict]]]:
    """Each policy's cases decided (in the order of ``groups``), the policies shared out
    among the workers, one a core, where there are enough cases to be worth it."""
    from govsync import bounded  # the workers' modules: where cases run
    from govsync.policycode import sandbox

    names = sandbox.workers(sum(len(s.cases) for its in groups for s in its))
    found: list[list[tuple[Suite, policytest.Case, Verdict]]] = [[] for _ in groups]

    def work(k: int) -> None:
        for i in range(k, len(groups), len(names)):
            its = groups[i]
            found[i] = _decide([_code(its[0].policy)], its, hooks, names[k])

    bounded.side_by_side(len(names), work, "policytests")
    return found


def _code(manifest: Manifest) -> str:
    code = manifest.template.get("code")
    return code if isinstance(code, str) else ""


class _Hook(NamedTuple):
    manifest: Manifest
    code: HookCode
    active: bool


def _hooks(manifests: ManifestSet) -> dict[str, _Hook]:
    """Every Hook of the manifests, by name."""
    out = {}
    for manifest in manifests.objects.values():
        if manifest.kind.name != HOOK_KIND:
            continue
        spec = manifest.template
        timeout = spec.get("timeoutMs")
        out[manifest.name] = _Hook(manifest, HookCode(
            str(spec.get("code") or ""),
            timeout if isinstance(timeout, int) and timeout > 0 else DEFAULT_TIMEOUT_MS),
            spec.get("status") != "draft")
    return out


def _trial(case: policytest.Case, reads: Collection[str], hooks: Mapping[str, _Hook],
           clock: int) -> Trial:
    """A case as the worker decides it: the hooks it gives (not drafts), the active hooks
    the code reads that it does not give (run), its data, env and time."""
    given = {name: value for name, value in case.hooks.items()
             if name not in hooks or hooks[name].active}
    run = tuple(sorted(n for n in reads if n not in case.hooks and n in hooks
                       and hooks[n].active))
    now = clock if case.now is None else int(case.now.timestamp()) * 1_000_000_000 + (
        case.now.microsecond * 1000)
    return Trial(case.stage.value, case.input, given, run, case.data, case.env, now)


def _decide(codes: Sequence[str], its: Sequence[Suite], hooks: Mapping[str, _Hook],
            worker: str | None = None) -> list[tuple[Suite, policytest.Case, Verdict]]:
    """Every case of ``its`` (one policy's tests) decided by ``codes``, in one worker call."""
    reads = {u.name for code in codes for u in hook_uses(code)}
    clock = time.time_ns()
    pairs = [(suite, case) for suite in its for case in suite.cases]
    trials = [_trial(case, reads, hooks, clock) for _, case in pairs]
    table = {name: hooks[name].code for name in {n for t in trials for n in t.run}}
    from govsync.policycode import sandbox  # the worker's module: where cases run

    verdicts = (sandbox.decide(list(codes), trials, table, worker=worker or sandbox.WORKER)
                if trials else [])
    return [(s, c, v) for (s, c), v in zip(pairs, verdicts, strict=True)]


def matches(decision: Any, expect: Mapping[str, Any]) -> bool:
    """Whether a decision is what a case expects: every field given equal to the
    decision's; ``{}`` only no decision at all (the stage rule undefined)."""
    if not expect:
        return decision is None
    return isinstance(decision, dict) and all(
        key in decision and decision[key] == value for key, value in expect.items())


def _outcome(suite: Suite, case: policytest.Case, verdict: Verdict, manifests: ManifestSet,
             environment: str | None) -> Outcome:
    file, line, col = suite.test.where(f"cases[{case.at}]")
    status, decision, message = judge(case, verdict, manifests)
    return Outcome(suite.policy.address, suite.test.label, case.name, case.stage.value,
                   status, decision, case.expect, message, file, line, col, environment)


def judge(case: policytest.Case, verdict: Verdict, manifests: ManifestSet,
          index: int = 0) -> tuple[CaseStatus, Any, str]:
    """(status, the decision of code ``index``, why) of one case."""
    if verdict.error is not None:
        return CaseStatus.ERROR, None, _hook_error(verdict, manifests)
    evaluation = verdict.decisions[index]
    if evaluation.error is not None:
        return CaseStatus.ERROR, None, evaluation.error
    if matches(evaluation.decision, case.expect):
        return CaseStatus.PASSED, evaluation.decision, ""
    if evaluation.decision is None:
        got = f"no decision ({case.stage.value} is undefined for this input)"
    else:
        got = _short(evaluation.decision)
    wanted = ("no decision" if not case.expect else _short(case.expect))
    return CaseStatus.FAILED, evaluation.decision, f"expected {wanted}, got {got}"


def _hook_error(verdict: Verdict, manifests: ManifestSet) -> str:
    """A hook's failure, at its place in the hook's manifest where it is known."""
    message = verdict.error or "failed"
    if verdict.hook is None:
        return message
    manifest = manifests.objects.get(f"{HOOK_KIND}/{verdict.hook}")
    if manifest is None:
        return f"{HOOK_KIND}/{verdict.hook}: {message}"
    if verdict.line:
        at = where(manifest, CodeProblem(verdict.line, verdict.col, ""))
    else:
        at = where(manifest, CodeProblem(1, 1, ""))
    return f"{HOOK_KIND}/{verdict.hook} ({at.file}:{at.line}:{at.col}): {message}"


def _short(value: Any, limit: int = 300) -> str:
    import json

    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit - 1] + "…"


# -- a plan's tests -----------------------------------------------------------------


def annotate(plan: Plan, manifests: ManifestSet, recorded: Mapping[str, str],
             seen: Observation) -> None:
    """The tests of every created or code-changed policy of ``plan`` put on its change
    (``change.tests``): each case decided by the new code and, for a changed policy, by
    the recorded code (``recorded``: address -> code, the live code where the server was
    read, else the code in state), on the same input, hooks run once; whether the new
    code compiles offline, and what the service said of it (``seen``)."""
    changes = [c for c in plan.changes if c.kind == POLICY_KIND
               and c.action not in (*ENDING, Action.ORPHAN, Action.UNCERTAIN)
               and c.address in manifests.objects
               and _code(manifests.objects[c.address]) != recorded.get(c.address)]
    if not changes:
        return
    hooks = _hooks(manifests)
    by_policy: dict[str, list[Suite]] = {}
    for suite in suites(manifests):
        by_policy.setdefault(suite.policy.address, []).append(suite)
    codes = [_code(manifests.objects[c.address]) for c in changes]
    from govsync.policycode import sandbox  # the worker's module: where code is

    checked = sandbox.check([policycode.Source(policycode.Role.POLICY, code)
                                for code in codes])
    for change, code, report in zip(changes, codes, checked, strict=True):
        before = recorded.get(change.address)
        runs = []
        for suite, case, verdict in _decide(
                [code] if before is None else [code, before],
                by_policy.get(change.address, []), hooks):
            status, after, message = judge(case, verdict, manifests)
            was = (None if before is None or verdict.error is not None
                   else judge(case, verdict, manifests, 1)[1])
            runs.append(CaseRun(suite.test.label, case.name, case.stage.value, status,
                                message, was, after))
        errors = report.errors
        compiles = (f"line {errors[0].line}, column {errors[0].col}: {errors[0].message}"
                    if errors else "")
        change.tests = PolicyTests(tuple(runs), before is not None, compiles,
                                   _service(change.address, seen))


def _service(address: str, seen: Observation) -> Service:
    if address in seen.invalid_code:
        return Service.INVALID
    if address in seen.valid_code:
        return Service.VALID
    return Service.UNKNOWN


def recorded_code(plan: Plan, entries: Mapping[str, Any],
                  live: Mapping[str, Mapping[str, Any] | None]) -> dict[str, str]:
    """Each planned policy's recorded code: the live code where the server was read, else
    the code in state (``entries``: the state's entries, by address)."""
    out: dict[str, str] = {}
    for change in plan.changes:
        if change.kind != POLICY_KIND:
            continue
        found = live.get(change.address)
        if found is None:
            entry = entries.get(change.moved_from or change.address)
            found = entry.read_spec() if entry is not None else None
        code = found.get("code") if found else None
        if isinstance(code, str):
            out[change.address] = code
    return out
