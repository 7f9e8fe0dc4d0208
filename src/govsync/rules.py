"""Guardrails: CEL rules from the project file, evaluated on every object.

```yaml
rules:
  - name: prod-policies-protected
    match: {kinds: [Policy], environments: [prod]}     # both optional
    expression: "object.spec.terminationProtection == true"
    message: "policies in prod must have terminationProtection"
    severity: error                                     # error | warning
```

An expression sees three variables:

* ``object``: ``{kind, name, spec}``, the spec as the plan would send it:
  references resolved to the ids in state or ``"(known after apply)"``,
  variables and patches applied, secrets as ``"(sensitive)"``;
* ``change``: ``{action, fields}`` of the object's change (plan only: a rule
  that mentions ``change`` is left to plan by ``validate``), and for a created or
  code-changed policy ``tests`` (``{passed, failed, errors, changed}``: its
  PolicyTests' results, policytests.annotate) and, where the plan measured it,
  ``impact`` (``{known, why, window, source, new, recorded, newTotal, recordedTotal,
  evaluated, examples, skippedLines}``: impacts.py);
* ``env``: the environment's name, or ``""`` without one.

CEL is the language of Kubernetes' ValidatingAdmissionPolicy; the runtime is
the CEL project's own (``cel-expr-python``, a wrapper of cel-cpp), which
type-checks an expression when it is compiled, so an unknown variable or a
result that cannot be a bool is found before any object is looked at.  It is
imported only when a project has rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from govsync import values
from govsync.api.kinds import BY_KIND
from govsync.bounded import BudgetExceeded, prestart, run_bounded
from govsync.errors import GovernanceError, ManifestError
from govsync.manifests.manifest import Manifest, ManifestSet
from govsync.manifests.wording import unknown, unknown_keys
from govsync.ruleeval import (
    VARIABLES,
    Compiled,
    Rule,
    RuleFindings,
    Severity,
    Subject,
    compile_rules,
    evaluate_rules,
)

if TYPE_CHECKING:  # the plan is governance.check_plan's: validate loads neither
    from govsync.plan import Change

RULE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
MAX_EXPRESSION = 4096
MAX_MESSAGE = 500
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# What one command may spend evaluating every rule on every object: a rule that
# builds ever longer strings or lists (``.map(x, x + x)`` chained) is stopped
# here, with its name, instead of taking the machine (and CI) down.
BUDGET_SECONDS = 20.0
BUDGET_BYTES = 1 << 30
RULE_KEYS = ("name", "match", "expression", "message", "severity")
MATCH_KEYS = ("kinds", "environments")
# What the evaluating process imports as it starts (bounded.prestart).
PRELOAD = ("govsync.ruleeval", "cel_expr_python.cel")

__all__ = ["VARIABLES", "Compiled", "Rule", "RuleFindings", "Severity", "Subject",
           "check_manifests", "check_sent", "compile_rules", "evaluate", "parse", "warm"]

# -- reading the project file's `rules:` ----------------------------------------------

Report = Callable[..., None]  # report(where, message, key=False)
Locate = Callable[[tuple[Any, ...]], tuple[int, int]]


def parse(value: Any, file: str, locate: Locate, report: Report,
          environments: Sequence[str]) -> tuple[Rule, ...]:
    """The ``rules:`` list of a project file; every problem goes to ``report``."""

    if value is None:
        return ()
    if not isinstance(value, list):
        report(("rules",), "rules must be a list of rules (name, match, expression, message, "
                           "severity)")
        return ()
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, body in enumerate(value):
        at: tuple[Any, ...] = ("rules", i)
        if not isinstance(body, dict):
            report(at, "a rule is a mapping with name, match, expression, message and severity")
            continue
        bad = unknown_keys(body, at, RULE_KEYS, report)
        name = body.get("name")
        if not isinstance(name, str) or not RULE_NAME.match(name):
            report((*at, "name") if "name" in body else at,
                   "a rule needs a name: letters, digits, '.', '_' and '-'")
            continue
        if name in seen:
            report((*at, "name"), f"rule {name} is defined twice: rule names are unique")
            continue
        seen.add(name)
        expression = body.get("expression")
        if not isinstance(expression, str) or not expression.strip():
            report((*at, "expression") if "expression" in body else at,
                   f"rule {name}: expression must be a CEL expression (a non-empty string)")
            bad = True
        elif len(expression) > MAX_EXPRESSION:
            report((*at, "expression"), f"rule {name}: the expression is longer than "
                   f"{MAX_EXPRESSION} characters: split it into several rules")
            bad = True
        message = body.get("message", f"rule {name} is not satisfied")
        if not isinstance(message, str):
            report((*at, "message"), f"rule {name}: message must be a string")
            bad = True
        elif _CONTROL.search(message) or len(message) > MAX_MESSAGE:
            # A message is printed as one line of output: a newline or a control
            # character in it could fake other lines (a "Plan: 0 to create" of its own).
            report((*at, "message"), f"rule {name}: message must be one line of at most "
                   f"{MAX_MESSAGE} printable characters (no newline or control character)")
            bad = True
        severity = body.get("severity", Severity.ERROR.value)
        if severity not in tuple(Severity):
            report((*at, "severity"), f"rule {name}: severity must be error or warning, "
                                      f"not {severity!r}")
            bad = True
        kinds, envs = _match(body.get("match"), (*at, "match"), name, report,
                             known_kinds=tuple(sorted(BY_KIND)), known_envs=environments)
        if bad or kinds is False or envs is False:
            continue
        line, col = locate((*at, "expression"))
        assert isinstance(expression, str) and isinstance(message, str)
        rules.append(Rule(name, expression, message, Severity(severity),
                          kinds if isinstance(kinds, tuple) else None,
                          envs if isinstance(envs, tuple) else None, file, line, col))
    return tuple(rules)


def warm() -> None:
    """Start the evaluator now: a command that will evaluate rules calls it before it
    reads the manifests, and the evaluation finds it ready.  (Parsing the project file
    does not: most commands that read it evaluate no rule.)"""
    prestart(PRELOAD)


def _match(value: Any, at: tuple[Any, ...], name: str, report: Report, *,
           known_kinds: tuple[str, ...], known_envs: Sequence[str]
           ) -> tuple[tuple[str, ...] | None | bool, tuple[str, ...] | None | bool]:
    """(kinds, environments): None when not given, False when wrong (reported)."""

    if value is None:
        return None, None
    if not isinstance(value, dict):
        report(at, f"rule {name}: match is a mapping with kinds and environments")
        return False, False
    out: list[tuple[str, ...] | None | bool] = []
    unknown_keys(value, at, MATCH_KEYS, report)
    for key, known, what in (("kinds", known_kinds, "kind"),
                             ("environments", tuple(known_envs), "environment")):
        items = value.get(key)
        if items is None:
            out.append(None)
            continue
        if not isinstance(items, list) or not all(isinstance(k, str) for k in items):
            report((*at, key), f"rule {name}: match.{key} must be a list of names")
            out.append(False)
            continue
        wrong = False
        for j, item in enumerate(items):
            if item not in known:
                listed = ", ".join(known) or "none: the project has no environments"
                report((*at, key, j), unknown(f"{what} {item!r} in rule {name}", item, known,
                                              otherwise=f"known: {listed}"))
                wrong = True
        out.append(False if wrong else tuple(items))
    return out[0], out[1]



# -- evaluating -----------------------------------------------------------------------




def object_spec(manifest: Manifest, ids: Mapping[str, str]) -> Any:
    """The spec a rule sees: references as ids (or unknown), secrets hidden."""

    def leaf(hole: Any) -> Any:
        if isinstance(hole, values.Ref):
            return ids.get(hole.address, values.KNOWN_AFTER_APPLY_TEXT)
        return values.SENSITIVE

    return values.fill(manifest.template, manifest.holes, leaf)


def as_change(change: Change) -> dict[str, Any]:
    """A change as a rule's ``change`` variable sees it: a created or code-changed
    policy's with its tests (``change.tests``: passed, failed, errors, changed) and its
    impact where measured (``change.impact``, as in JSON; counts of a created policy's
    recorded code are ``{}``, an unknown evaluated count 0, so that a rule reads them
    without has())."""
    body: dict[str, Any] = {"action": str(change.action), "fields": list(change.fields)}
    if change.tests is not None:
        found = change.tests.as_dict()
        body["tests"] = {key: found[key] for key in ("passed", "failed", "errors", "changed")}
    if change.impact is not None:
        impact = change.impact.as_dict()
        impact["source"] = str(impact["source"])
        for key in ("new", "recorded"):
            impact[key] = impact[key] or {}
        impact["evaluated"] = impact["evaluated"] or 0
        body["impact"] = impact
    return body


def manifest_subjects(manifests: ManifestSet, ids: Mapping[str, str],
                      changes: Mapping[str, dict[str, Any]] | None = None,
                      unchanged: dict[str, Any] | None = None) -> Iterator[Subject]:
    """Every object of the manifests: in validate (``changes`` None) alone, in a plan
    with its change (``as_change``), or ``unchanged`` when the plan leaves it."""

    for address in sorted(manifests.objects):
        manifest = manifests.objects[address]
        change = changes.get(address, unchanged) if changes is not None else None
        yield Subject(address, manifest.kind.name, manifest.name,
                      object_spec(manifest, ids), manifest.where(), change)


def change_subjects(changes: Iterable[Change], where: str) -> Iterator[Subject]:
    """The changes apply sends, as the rules see them: the request itself, ids of
    objects still to be made as ``(known after apply)`` and secrets as
    ``(sensitive)``.  ``where``: what to name in a problem (the plan file)."""

    for change in changes:
        if change.request is None:
            continue
        yield Subject(change.address, change.kind, change.address.split("/", 1)[1],
                      values.shown(change.request), (where, 0, 0),
                      as_change(change))


def evaluate(rules: Sequence[Rule], subjects: Callable[[], Iterable[Subject]],
             environment: str | None, *, planned: bool) -> RuleFindings:
    """Every matching rule on every subject (``planned``: with their changes; else
    validate, which leaves rules that mention ``change`` to plan).

    ManifestError when a rule does not compile.  The evaluation runs within
    ``BUDGET_SECONDS`` and ``BUDGET_BYTES``; a rule that goes over is an error
    naming it."""
    compiled = compile_rules(rules)
    if not compiled:
        return RuleFindings()

    # The subjects are made here and sent: the worker compiles the rules again (a
    # compiled program does not pickle) and evaluates them within the budget.
    try:
        return run_bounded(evaluate_rules, tuple(c.rule for c in compiled), list(subjects()),
                           environment, planned,
                           seconds=BUDGET_SECONDS, memory=BUDGET_BYTES)
    except BudgetExceeded as exc:
        rule = next((c.rule for c in compiled if c.rule.name == exc.last), compiled[0].rule)
        raise ManifestError([rule.problem(
            f"evaluating it went over govsync's budget for rules ({exc.why}): nothing was "
            "sent; simplify the expression (a rule is evaluated once per object, and "
            "should not build ever longer strings or lists)")]) from None


def check_sent(rules: Sequence[Rule], environment: str | None, where: str,
               changes: Sequence[Change]) -> None:
    """Apply: the rules again, on exactly what will be sent (a saved plan's requests,
    or a plan made again); GovernanceError naming each violation."""

    if not rules:
        return
    outcome = evaluate(rules, lambda: change_subjects(changes, where), environment,
                       planned=True)
    if outcome.errors:
        shown = "; ".join(p.message for p in outcome.errors[:5])
        more = f" (and {len(outcome.errors) - 5} more)" if len(outcome.errors) > 5 else ""
        raise GovernanceError(f"the rules of environment {environment or '(none)'} refuse "
                              f"what this apply would send: {shown}{more}; nothing was sent")


def check_manifests(manifests: ManifestSet, rules: Sequence[Rule],
                    environment: str | None) -> RuleFindings:
    """``validate``: the rules without a plan; ManifestError for errors."""
    outcome = evaluate(rules, lambda: manifest_subjects(manifests, {}, None), environment,
                       planned=False)
    if outcome.errors:
        raise ManifestError(outcome.errors)
    return outcome


