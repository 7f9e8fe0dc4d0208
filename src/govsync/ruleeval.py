"""The rules' evaluation: what a rule is, what it is evaluated on, and the CEL programs.

The worker process that evaluates the rules within a budget (bounded.py) imports
this module alone, with the CEL runtime: it needs neither the manifests nor the
API's kinds, so the worker is ready a few milliseconds after it starts.  The
project file's ``rules:`` and the subjects of validate, plan and apply are
rules.py's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from govsync.errors import ManifestError, Problem

VARIABLES = ("object", "change", "env")


class Severity(StrEnum):
    """What a rule's violation does: an error stops validate, plan and apply."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Rule:
    """One rule of the project file, with the place of its expression there."""

    name: str
    expression: str
    message: str
    severity: Severity = Severity.ERROR
    kinds: tuple[str, ...] | None = None
    environments: tuple[str, ...] | None = None
    file: str = ""
    line: int = 1
    col: int = 1

    def matches(self, kind: str, environment: str | None) -> bool:
        if self.kinds is not None and kind not in self.kinds:
            return False
        return self.environments is None or (environment or "") in self.environments

    def problem(self, message: str) -> Problem:
        """A problem at the rule's expression in the project file."""
        return Problem(self.file, self.line, self.col, f"rule {self.name}: {message}")


# -- compiling ------------------------------------------------------------------------


@dataclass
class Compiled:
    """A rule with its CEL program (and whether ``validate`` can run it)."""

    rule: Rule
    program: Any
    # Compiled without ``change``: None when the rule needs a plan's change.
    without_change: Any = None


_UNDECLARED = re.compile(r"undeclared reference to '([^']*)'")
_AT = re.compile(r"<input>:(-?\d+):(-?\d+): ")


def _cel_message(exc: BaseException) -> str:
    """The first line of a CEL error, without its internal prefixes."""
    text = str(exc)
    first = next((ln for ln in text.splitlines() if "ERROR: " in ln), text.splitlines()[0]
                 if text else type(exc).__name__)
    first = first.split("ERROR: ", 1)[-1]
    where = _AT.search(first)
    first = _AT.sub("", first).replace(" (in container '')", "").strip()
    if where and int(where.group(1)) > 0:  # CEL says -1:-1 for no place (too deep)
        first += f" (line {where.group(1)}, column {where.group(2)} of the expression)"
    return first


def _environment(with_change: bool) -> Any:
    from cel_expr_python import cel  # type: ignore[import-untyped]

    data = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    variables = {"object": data, "env": cel.Type.STRING}
    if with_change:
        variables["change"] = data
    return cel.NewEnv(variables=variables)


def compile_rules(rules: Sequence[Rule]) -> list[Compiled]:
    """Compile (and type-check) every rule; ManifestError naming each that fails."""
    if not rules:
        return []
    from cel_expr_python import cel

    full, partial = _environment(True), _environment(False)
    compiled: list[Compiled] = []
    problems: list[Problem] = []
    for rule in rules:
        try:
            program = full.compile(rule.expression)
        except (RuntimeError, ValueError) as exc:
            message = _cel_message(exc)
            undeclared = _UNDECLARED.search(message)
            if undeclared:
                name = undeclared.group(1).split(".")[0]
                problems.append(rule.problem(
                    f"unknown variable {name!r} in the expression: a rule can use "
                    f"{', '.join(VARIABLES)} ({message})"))
            else:
                problems.append(rule.problem(f"the expression does not compile: {message}"))
            continue
        result = program.return_type()
        if result != cel.Type.BOOL and result != cel.Type.DYN:
            problems.append(rule.problem(
                f"the expression gives {_a(result.name().lower())}, not a bool: write a "
                "condition that is true when the object is acceptable"))
            continue
        try:
            without = partial.compile(rule.expression)
        except (RuntimeError, ValueError):
            without = None  # it mentions `change`: plan only
        compiled.append(Compiled(rule, program, without))
    if problems:
        raise ManifestError(problems)
    return compiled


@dataclass
class RuleFindings:
    """What the rules found: errors stop the command, warnings are reported."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    # Per rule: how many objects it was evaluated on, and its violations.
    evaluated: dict[str, int] = field(default_factory=dict)
    violations: dict[str, list[tuple[str, Problem]]] = field(default_factory=dict)
    # Rules validate left to plan (they mention `change`).
    plan_only: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Subject:
    """What a rule is evaluated on: one object as the plan would send it."""

    address: str
    kind: str
    name: str
    spec: Any
    where: tuple[str, int, int]
    # {action, fields} of its change (as_change); None in validate (no plan).  In a
    # plan every subject has one: an object left unchanged, the plan's no-op.
    change: dict[str, Any] | None = None


def evaluate_rules(progress: Callable[[str], None], rules: tuple[Rule, ...],
              items: list[Subject], environment: str | None, planned: bool) -> RuleFindings:
    """In the worker process (bounded.py): every rule on every subject (``planned``: with
    their changes; else validate's, which leaves rules that mention ``change`` to plan)."""
    from cel_expr_python import cel

    outcome = RuleFindings()
    for item in compile_rules(rules):
        rule = item.rule
        program = item.program
        if not planned:
            if item.without_change is None:
                outcome.plan_only.append(rule.name)
                continue
            program = item.without_change
        if rule.environments is not None and (environment or "") not in rule.environments:
            continue  # not a rule of this environment: no check to report
        progress(rule.name)
        count = 0
        for subject in items:
            if not rule.matches(subject.kind, environment):
                continue
            count += 1
            data: dict[str, Any] = {
                "object": {"kind": subject.kind, "name": subject.name, "spec": subject.spec},
                "env": environment or "",
            }
            if planned:
                data["change"] = subject.change
            try:
                value = program.eval(data=data)
                kind = value.type()
                result = value.value()
            except (RuntimeError, ValueError, TypeError) as exc:
                kind, result = cel.Type.ERROR, _cel_message(exc)
            address = subject.address
            if kind == cel.Type.ERROR:
                outcome.errors.append(Problem(*subject.where, (
                    f"rule {rule.name} ({rule.file}:{rule.line}): evaluation failed on "
                    f"{address}: {result}; test optional fields with has(object.spec.x)")))
                continue
            if kind != cel.Type.BOOL:
                outcome.errors.append(Problem(*subject.where, (
                    f"rule {rule.name} ({rule.file}:{rule.line}): the expression gave "
                    f"{_a(kind.name().lower())} on {address}, not a bool")))
                continue
            if result is True:
                continue
            problem = Problem(*subject.where, f"rule {rule.name}: {rule.message} ({address})")
            outcome.violations.setdefault(rule.name, []).append((address, problem))
            if rule.severity == Severity.ERROR:
                outcome.errors.append(problem)
            else:
                outcome.warnings.append(
                    Problem(problem.file, problem.line, problem.col,
                            f"warning: {problem.message}"))
        outcome.evaluated[rule.name] = count
    return outcome


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun
