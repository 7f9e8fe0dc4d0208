"""Guardrail rules with the real CEL runtime: the project's ``rules:``, compiling,
evaluating on subjects (validate, plan, apply), the budget, and what apply sends."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from govsync import governance, rules
from govsync.errors import GovernanceError, ManifestError, Problem
from govsync.manifests import ManifestSet
from govsync.plan import Action, Change, Check, CheckStatus, make_plan
from govsync.rules import Rule, Severity, Subject
from govsync.state import Snapshot
from govsync.values import PlannedSecret, Ref

ENVIRONMENTS = ["prod", "staging"]


def parse(value: Any, environments: list[str] = ENVIRONMENTS
          ) -> tuple[tuple[Rule, ...], list[tuple[tuple[Any, ...], str]]]:
    reported: list[tuple[tuple[Any, ...], str]] = []

    def report(where: tuple[Any, ...], message: str, key: bool = False) -> None:
        reported.append((where, message))

    # each rule's expression at line 10 + its index, column 17
    found = rules.parse(value, "govsync.yaml", lambda at: (10 + at[1], 17), report,
                        environments)
    return found, reported


# -- the project's rules: ---------------------------------------------------------------


def test_a_rule_with_every_field() -> None:
    found, reported = parse([
        {"name": "first", "expression": "true"},
        {"name": "r.1_x-Y", "match": {"kinds": ["Hook", "Space"], "environments": ["prod"]},
         "expression": "object.name != ''", "message": "named", "severity": "warning"},
    ])
    assert reported == []
    assert found == (
        Rule("first", "true", "rule first is not satisfied", Severity.ERROR, None, None,
             "govsync.yaml", 10, 17),
        Rule("r.1_x-Y", "object.name != ''", "named", Severity.WARNING, ("Hook", "Space"),
             ("prod",), "govsync.yaml", 11, 17),
    )
    assert parse(None) == ((), [])


def test_the_longest_expression_and_message_are_accepted() -> None:
    found, reported = parse([{"name": "a", "expression": "true" + " " * 4092,
                              "message": "m" * 500}])
    assert reported == [] and len(found) == 1


ONE = {"name": "a", "expression": "true"}
WRONG: list[tuple[Any, tuple[Any, ...], str]] = [
    ("all", ("rules",), "rules must be a list of rules (name, match, expression, message, "
                        "severity)"),
    ([42], ("rules", 0), "a rule is a mapping with name, match, expression, message and "
                         "severity"),
    ([{"expression": "true"}], ("rules", 0), "a rule needs a name: letters, digits, '.', '_' "
                                             "and '-'"),
    ([{"name": "has space", "expression": "true"}], ("rules", 0, "name"), "a rule needs a name"),
    ([{"name": "-dash", "expression": "true"}], ("rules", 0, "name"), "a rule needs a name"),
    ([{"name": "x" * 101, "expression": "true"}], ("rules", 0, "name"), "a rule needs a name"),
    ([ONE, ONE], ("rules", 1, "name"), "rule a is defined twice: rule names are unique"),
    ([{"name": "a"}], ("rules", 0), "rule a: expression must be a CEL expression (a non-empty "
                                    "string)"),
    ([{"name": "a", "expression": "  "}], ("rules", 0, "expression"), "rule a: expression must"),
    ([{"name": "a", "expression": 1}], ("rules", 0, "expression"), "rule a: expression must"),
    ([{"name": "a", "expression": "true" + " " * 4093}], ("rules", 0, "expression"),
     "rule a: the expression is longer than 4096 characters: split it into several rules"),
    ([{**ONE, "message": 5}], ("rules", 0, "message"), "rule a: message must be a string"),
    ([{**ONE, "message": "ok\nPlan: 0 to create"}], ("rules", 0, "message"),
     "rule a: message must be one line of at most 500 printable characters (no newline or "
     "control character)"),
    ([{**ONE, "message": "ok\rfaked"}], ("rules", 0, "message"), "rule a: message must be one"),
    ([{**ONE, "message": "\x1b[31mred"}], ("rules", 0, "message"), "rule a: message must be one"),
    ([{**ONE, "message": "abc\u202edcba"}], ("rules", 0, "message"), "rule a: message must be"),
    ([{**ONE, "message": "ok\u2028faked"}], ("rules", 0, "message"), "rule a: message must be"),
    ([{**ONE, "message": "m" * 501}], ("rules", 0, "message"), "rule a: message must be one"),
    ([{**ONE, "severity": "fatal"}], ("rules", 0, "severity"),
     "rule a: severity must be error or warning, not 'fatal'"),
    ([{**ONE, "match": "Hook"}], ("rules", 0, "match"),
     "rule a: match is a mapping with kinds and environments"),
    ([{**ONE, "match": {"kinds": "Hook"}}], ("rules", 0, "match", "kinds"),
     "rule a: match.kinds must be a list of names"),
    ([{**ONE, "match": {"environments": [1]}}], ("rules", 0, "match", "environments"),
     "rule a: match.environments must be a list of names"),
    ([{**ONE, "match": {"kinds": ["Hook", "Hok"]}}], ("rules", 0, "match", "kinds", 1),
     "unknown kind 'Hok' in rule a: did you mean 'Hook'?"),
    ([{**ONE, "match": {"environments": ["prd"]}}], ("rules", 0, "match", "environments", 0),
     "unknown environment 'prd' in rule a: did you mean 'prod'?"),
    ([{**ONE, "match": {"environments": ["qa"]}}], ("rules", 0, "match", "environments", 0),
     "unknown environment 'qa' in rule a: known: prod, staging"),
    ([{**ONE, "severty": "error"}], ("rules", 0, "severty"),
     "unknown field rules[0].severty: did you mean 'severity'?"),
    ([{**ONE, "match": {"kind": ["Hook"]}}], ("rules", 0, "match", "kind"),
     "unknown field rules[0].match.kind: did you mean 'kinds'?"),
]


@pytest.mark.parametrize(("value", "where", "message"), WRONG)
def test_every_wrong_shape_is_reported_at_its_place(value: Any, where: tuple[Any, ...],
                                                    message: str) -> None:
    _found, reported = parse(value)
    assert len(reported) == 1, reported
    assert reported[0][0] == where
    assert reported[0][1].startswith(message), reported[0][1]


def test_an_environment_in_a_project_without_environments() -> None:
    found, reported = parse([{**ONE, "match": {"environments": ["prod"]}}], environments=[])
    assert found == ()
    assert reported == [(("rules", 0, "match", "environments", 0), "unknown environment 'prod' "
                         "in rule a: known: none: the project has no environments")]


def test_every_wrong_rule_is_reported_and_the_right_ones_kept() -> None:
    found, reported = parse([
        {"name": "good", "expression": "true"},
        {"name": "a", "expression": "true", "severity": "loud"},
        {"name": "b", "expression": "", "message": "two\nlines"},
        {"name": "also-good", "expression": "false", "match": {"kinds": ["Space"]}},
    ])
    assert [r.name for r in found] == ["good", "also-good"]
    assert [where for where, _ in reported] == [("rules", 1, "severity"),
                                                ("rules", 2, "expression"),
                                                ("rules", 2, "message")]


def test_matching_by_kind_and_environment() -> None:
    anywhere = Rule("a", "true", "m")
    assert anywhere.matches("Hook", None) and anywhere.matches("Space", "prod")
    hooks_in_prod = Rule("b", "true", "m", kinds=("Hook",), environments=("prod",))
    assert hooks_in_prod.matches("Hook", "prod")
    assert not hooks_in_prod.matches("Space", "prod")
    assert not hooks_in_prod.matches("Hook", "staging")
    assert not hooks_in_prod.matches("Hook", None)


# -- compiling ----------------------------------------------------------------------------


def compile_one(expression: str) -> str:
    with pytest.raises(ManifestError) as info:
        rules.compile_rules([Rule("r1", expression, "m", file="p.yaml", line=3, col=5)])
    assert len(info.value.problems) == 1
    return str(info.value)


def test_compile_errors_are_worded_at_the_rule() -> None:
    syntax = compile_one("object.spec.x ==")
    assert syntax.startswith("p.yaml:3:5: rule r1: the expression does not compile: Syntax "
                             "error: "), syntax
    assert syntax.endswith(" of the expression)") and "\n" not in syntax
    unknown = compile_one("objet.spec.x == 1")
    assert unknown.startswith("p.yaml:3:5: rule r1: unknown variable 'objet' in the expression: "
                              "a rule can use object, change, env (undeclared reference to "
                              "'objet"), unknown
    assert compile_one("1 + 1") == ("p.yaml:3:5: rule r1: the expression gives an int, not a "
                                    "bool: write a condition that is true when the object is "
                                    "acceptable")
    assert compile_one("'yes'") == ("p.yaml:3:5: rule r1: the expression gives a string, not "
                                    "a bool: write a condition that is true when the object "
                                    "is acceptable")
    # a field of the object may be anything: only evaluation can tell (see below)
    assert len(rules.compile_rules([Rule("dyn", "object.name", "m")])) == 1


def test_an_expression_too_deep_to_parse_has_no_place_of_cels_own() -> None:
    deep = compile_one("1" + " + 1" * 5000)
    assert deep == ("p.yaml:3:5: rule r1: the expression does not compile: Exceeded max "
                    "recursion depth of 32 when parsing."), deep


def test_every_rule_that_does_not_compile_is_named() -> None:
    with pytest.raises(ManifestError) as info:
        rules.compile_rules([Rule("ok", "true", "m"), Rule("x", "1", "m", file="a.yaml", line=2),
                             Rule("y", "nope", "m", file="a.yaml", line=5)])
    assert [(p.file, p.line, p.message.split(":")[0]) for p in info.value.problems] == [
        ("a.yaml", 2, "rule x"), ("a.yaml", 5, "rule y")]


def test_a_rule_that_mentions_change_is_for_plan_only() -> None:
    assert rules.compile_rules([]) == []
    compiled = rules.compile_rules([Rule("a", "object.name != ''", "m"),
                                    Rule("b", "change.action == 'create'", "m")])
    assert compiled[0].without_change is not None
    assert compiled[1].without_change is None


# -- evaluating ---------------------------------------------------------------------------


def subject(address: str, spec: Any, line: int, change: dict[str, Any] | None = None
            ) -> Subject:
    kind, name = address.split("/")
    return Subject(address, kind, name, spec, ("m.yaml", line, 1), change)


SUBJECTS = [
    subject("Hook/fast", {"timeoutMs": 100}, 4),
    subject("Hook/slow", {"timeoutMs": 9000}, 9),
    subject("Space/s", {"description": "d"}, 14),
]
SHORT = Rule("short", "object.spec.timeoutMs <= 5000", "hooks time out within 5 s",
             kinds=("Hook",), file="p.yaml", line=2, col=3)
WARN = Rule("very-short", "object.spec.timeoutMs <= 50", "hooks should be quick",
            Severity.WARNING, kinds=("Hook",), environments=("prod",), file="p.yaml", line=5)
STAGING = Rule("staging-only", "false", "never", environments=("staging",))
PLAN_ONLY = Rule("creates-only", "change.action in ['create', 'no-op']", "only creates")
NOOP = {"action": str(Action.NOOP), "fields": []}


def test_errors_and_warnings() -> None:
    outcome = rules.evaluate([SHORT, WARN, STAGING], lambda: SUBJECTS, "prod", planned=False)
    assert outcome.errors == [Problem("m.yaml", 9, 1, "rule short: hooks time out within 5 s "
                                                      "(Hook/slow)")]
    assert outcome.warnings == [
        Problem("m.yaml", 4, 1, "warning: rule very-short: hooks should be quick (Hook/fast)"),
        Problem("m.yaml", 9, 1, "warning: rule very-short: hooks should be quick (Hook/slow)")]
    # staging-only is not a rule of prod: not evaluated, no check
    assert outcome.evaluated == {"short": 2, "very-short": 2}
    assert outcome.plan_only == []


def test_rules_of_another_environment_or_none() -> None:
    outcome = rules.evaluate([SHORT, WARN, STAGING], lambda: SUBJECTS, None, planned=False)
    assert outcome.evaluated == {"short": 2}
    assert outcome.warnings == []
    staging = rules.evaluate([STAGING], lambda: SUBJECTS, "staging", planned=False)
    assert [p.message for p in staging.errors] == [
        "rule staging-only: never (Hook/fast)", "rule staging-only: never (Hook/slow)",
        "rule staging-only: never (Space/s)"]


def test_validate_leaves_rules_on_the_change_to_plan() -> None:
    validated = rules.evaluate([PLAN_ONLY, SHORT], lambda: SUBJECTS, None, planned=False)
    assert validated.plan_only == ["creates-only"]
    assert "creates-only" not in validated.evaluated
    with_changes = [subject("Hook/fast", {"timeoutMs": 1}, 4, {"action": "update",
                                                               "fields": ["timeoutMs"]}),
                    subject("Hook/new", {"timeoutMs": 1}, 8, {"action": "create",
                                                              "fields": []}),
                    subject("Hook/same", {"timeoutMs": 1}, 12, NOOP)]
    planned = rules.evaluate([PLAN_ONLY], lambda: with_changes, None, planned=True)
    assert planned.plan_only == []
    assert planned.evaluated == {"creates-only": 3}
    assert [p.message for p in planned.errors] == ["rule creates-only: only creates (Hook/fast)"]


def test_an_evaluation_that_fails_is_an_error_with_a_hint() -> None:
    missing = Rule("missing", "object.spec.nope == 1", "m", kinds=("Space",), file="p.yaml",
                   line=7)
    outcome = rules.evaluate([missing], lambda: SUBJECTS, None, planned=False)
    (problem,) = outcome.errors
    assert (problem.file, problem.line) == ("m.yaml", 14)
    assert problem.message.startswith("rule missing (p.yaml:7): evaluation failed on Space/s: ")
    assert problem.message.endswith("; test optional fields with has(object.spec.x)")
    assert "nope" in problem.message


def test_a_result_that_is_not_a_bool_at_run_time() -> None:
    dynamic = Rule("dyn", "object.spec.timeoutMs", "m", kinds=("Hook",), file="p.yaml", line=3)
    outcome = rules.evaluate([dynamic], lambda: SUBJECTS, None, planned=False)
    assert [p.message for p in outcome.errors] == [
        "rule dyn (p.yaml:3): the expression gave an int on Hook/fast, not a bool",
        "rule dyn (p.yaml:3): the expression gave an int on Hook/slow, not a bool"]


def test_variables_a_rule_sees() -> None:
    seen = Rule("sees", "object.kind == 'Space' && object.name == 's' && "
                        "object.spec.description == 'd' && env == 'prod' && "
                        "change.action == 'no-op' && change.fields == []", "m",
                kinds=("Space",))
    unchanged = [replace(s, change=NOOP) for s in SUBJECTS]
    assert rules.evaluate([seen], lambda: unchanged, "prod", planned=True).errors == []
    assert len(rules.evaluate([seen], lambda: unchanged, "staging", planned=True).errors) == 1
    no_env = Rule("no-env", "env == ''", "m", kinds=("Space",))
    assert rules.evaluate([no_env], lambda: SUBJECTS, None, planned=False).errors == []


def test_checks_one_per_passing_rule_and_per_warning() -> None:
    empty = Rule("spaces", "true", "m", kinds=("Space",))
    outcome = rules.evaluate([WARN, empty, SHORT], lambda: SUBJECTS[:1], "prod", planned=False)
    assert outcome.errors == []
    assert governance.rule_checks(outcome, [WARN, empty, SHORT, STAGING]) == [
        Check("rule very-short", CheckStatus.WARNING,
              "Hook/fast at m.yaml:4:1: hooks should be quick"),
        Check("rule spaces", CheckStatus.PASSED, "no object of its kinds"),
        Check("rule short", CheckStatus.PASSED, "1 object checked"),
    ]
    two = rules.evaluate([SHORT], lambda: [SUBJECTS[0], SUBJECTS[0]], None, planned=False)
    assert governance.rule_checks(two, [SHORT]) == [
        Check("rule short", CheckStatus.PASSED, "2 objects checked")]


def test_rules_are_evaluated_while_other_threads_run() -> None:
    # The agent evaluates with its web server's and notifiers' threads running, and the
    # dashboard from several requests at once: a thread holds a lock all along, others
    # evaluate at the same time, and each gets its own answer.
    held, stop = threading.Lock(), threading.Event()
    answers: dict[int, list[int]] = {}

    def holds() -> None:
        with held:
            stop.wait(60)

    def evaluates(index: int) -> None:
        for _ in range(3):
            outcome = rules.evaluate([SHORT, WARN], lambda: SUBJECTS[index:], "prod",
                                     planned=False)
            answers.setdefault(index, []).append(len(outcome.errors) + len(outcome.warnings))

    holder = threading.Thread(target=holds)
    holder.start()
    workers = [threading.Thread(target=evaluates, args=(i,)) for i in range(3)]
    try:
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join(60)
        assert held.locked()
    finally:
        stop.set()
        holder.join()
    # 0: fast (a warning) and slow (an error and a warning); 1: slow; 2: a Space only
    assert answers == {0: [3, 3, 3], 1: [2, 2, 2], 2: [0, 0, 0]}


def test_a_rule_over_the_budget_is_named_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "BUDGET_BYTES", 64 * 1024 * 1024)
    monkeypatch.setattr(rules, "BUDGET_SECONDS", 10.0)
    explodes = Rule("explodes", "['a']" + ".map(x, x + x)" * 28 + ".size() > 0", "m",
                    file="govsync.yaml", line=7, col=17)
    started = time.monotonic()
    with pytest.raises(ManifestError) as info:
        rules.evaluate([SHORT, explodes, WARN], lambda: SUBJECTS, "prod", planned=False)
    assert time.monotonic() - started < 5
    assert info.value.problems == [Problem(
        "govsync.yaml", 7, 17, "rule explodes: evaluating it went over govsync's budget for "
        "rules (more than 64 MiB of memory): nothing was sent; simplify the expression (a "
        "rule is evaluated once per object, and should not build ever longer strings or "
        "lists)")]


# -- what apply sends -------------------------------------------------------------------


def hook(name: str, **request: Any) -> Change:
    return Change(f"Hook/{name}", Action.CREATE, "Hook", request={"name": name, **request},
                  operation="CreateHook")


CHANGES = [
    hook("h", spaceId=Ref("Space/s"), token=PlannedSecret("TOKEN", "fp"), nested=[
        {"id": Ref("Space/t")}]),
    Change("Space/s", Action.NOOP, "Space"),
    Change("Space/gone", Action.ORPHAN, "Space", id="sp-1"),
]


def test_change_subjects_show_what_is_sent() -> None:
    assert list(rules.change_subjects(CHANGES, "plan.json")) == [
        Subject("Hook/h", "Hook", "h", {"name": "h", "spaceId": "(known after apply)",
                                        "token": "(sensitive)",
                                        "nested": [{"id": "(known after apply)"}]},
                ("plan.json", 0, 0), {"action": "create", "fields": []})]


def test_check_sent_passes_what_the_rules_allow() -> None:
    shown = Rule("shown", "object.spec.spaceId == '(known after apply)' && "
                          "object.spec.token == '(sensitive)' && object.name == 'h' && "
                          "change.action == 'create' && env == 'prod'", "m")
    rules.check_sent([shown], "prod", "plan.json", CHANGES)  # no GovernanceError
    rules.check_sent([], "prod", "plan.json", CHANGES)


def test_check_sent_refuses_and_names_each_violation() -> None:
    no_hooks = Rule("no-hooks", "object.kind != 'Hook'", "no hooks in prod",
                    environments=("prod",))
    with pytest.raises(GovernanceError) as info:
        rules.check_sent([no_hooks], "prod", "plan.json", CHANGES)
    assert str(info.value) == ("the rules of environment prod refuse what this apply would "
                               "send: rule no-hooks: no hooks in prod (Hook/h); nothing was sent")
    rules.check_sent([no_hooks], "staging", "plan.json", CHANGES)  # not a rule of staging
    anywhere = Rule("no-hooks", "object.kind != 'Hook'", "no hooks")
    many = [hook(f"h{i}") for i in range(7)]
    with pytest.raises(GovernanceError) as info:
        rules.check_sent([anywhere], None, "plan.json", many)
    assert str(info.value) == (
        "the rules of environment (none) refuse what this apply would send: "
        + "; ".join(f"rule no-hooks: no hooks (Hook/h{i})" for i in range(5))
        + " (and 2 more); nothing was sent")


# -- manifests: validate and plan ---------------------------------------------------------


OBJECTS = """
apiVersion: govsync/v1
kind: Connector
metadata: {name: conn-one}
spec: {terminationProtection: false}
---
apiVersion: govsync/v1
kind: ConnectorAIProvider
metadata: {name: conn-one-ai}
spec:
  connectorRef: conn-one
  config: {providerB: {x: 1}}
---
apiVersion: govsync/v1
kind: AIProviderIntegration
metadata: {name: ai}
spec: {provider: AI_PROVIDER_VENDORA_ENTERPRISE, apiKey: {fromEnv: AI_KEY}}
"""


def test_manifest_subjects_resolve_ids_and_hide_secrets(
        manifests: Callable[[str], ManifestSet]) -> None:
    loaded = manifests(OBJECTS)
    found = {s.address: s for s in rules.manifest_subjects(loaded, {}, None)}
    assert list(found) == ["AIProviderIntegration/ai", "Connector/conn-one",
                           "ConnectorAIProvider/conn-one-ai"]
    assert found["AIProviderIntegration/ai"].spec["apiKey"] == "(sensitive)"
    assert found["ConnectorAIProvider/conn-one-ai"].spec["connectorId"] == "(known after apply)"
    assert found["Connector/conn-one"].change is None
    known = {s.address: s for s in rules.manifest_subjects(
        loaded, {"Connector/conn-one": "c-1"}, {}, NOOP)}
    assert known["ConnectorAIProvider/conn-one-ai"].spec["connectorId"] == "c-1"
    # Not among the plan's changes: the plan's no-op.
    assert known["Connector/conn-one"].change == {"action": "no-op", "fields": []}
    assert known["Connector/conn-one"].where[0].endswith("objects.yaml")


def test_check_manifests_and_check_plan(manifests: Callable[[str], ManifestSet],
                                        snapshot: Snapshot) -> None:
    loaded = manifests(OBJECTS)
    protected = Rule("protected", "object.spec.terminationProtection == true",
                     "connectors are protected", kinds=("Connector",))
    with pytest.raises(ManifestError, match=r"objects.yaml:\d+:\d+: rule protected: connectors "
                                            r"are protected \(Connector/conn-one\)"):
        rules.check_manifests(loaded, [protected], None)
    creates = Rule("creates", "change.action == 'create'", "m", kinds=("Connector",))
    validated = rules.check_manifests(loaded, [creates], None)
    assert validated.plan_only == ["creates"]
    plan = make_plan(loaded, snapshot, environ={"AI_KEY": "k"})
    governance.check_plan(plan, loaded, [creates], None, snapshot)
    assert plan.checks[-1] == Check("rule creates", CheckStatus.PASSED, "1 object checked")
    with pytest.raises(ManifestError, match="rule protected"):
        governance.check_plan(plan, loaded, [protected], None, snapshot)
