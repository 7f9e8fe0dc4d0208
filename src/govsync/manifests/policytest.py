"""``kind: PolicyTest`` (contract section 13): cases that a Policy's code must decide as
written, run by ``govsync test`` and shown on plans.  A directive: never sent, no
address in plans or state.

```yaml
spec:
  policyRef: warehouse-business-hours      # a Policy of the manifests
  cases:
    - name: analyst on a Saturday is blocked    # unique within the test
      stage: session                            # session | pre_request | post_request
      input: {user: {username: ana}}            # the decision's input
      hooks: {risk_score: {score: 3}}           # a hook's result (others are run)
      data: {oncall_roster: []}                 # data.<key> as loaders would load it
      env: {REGION: eu}                         # the hooks' env (else empty)
      now: "2026-11-28T10:00:00Z"               # what time.now_ns() reads
      expect: {action: block}                   # {}: the stage rule is undefined
```

This module checks a document's shape (``check_spec``, called by directives.py with
the others) and reads its cases back (``cases``); what the references name is
checked by the loader, which knows every manifest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from yaml.nodes import Node

from govsync.manifests import wording
from govsync.manifests.yamlio import locate
from govsync.policycode.stages import ACTIONS, RESERVED_INPUT_KEYS, Stage

KIND = "PolicyTest"
SPEC_KEYS = ("policyRef", "cases")
CASE_KEYS = ("name", "stage", "input", "hooks", "data", "env", "now", "expect")
REQUIRED_CASE_KEYS = ("name", "stage", "expect")
# A test's cases, at most: each is evaluated in the bounded worker.
MAX_CASES = 10_000

Problem = Callable[..., None]  # (path, message, *, key=False)


class Case(NamedTuple):
    """One case, checked: what ``govsync test`` evaluates."""

    name: str
    stage: Stage
    input: dict[str, Any]
    hooks: dict[str, Any]
    data: dict[str, Any]
    env: dict[str, str]
    now: datetime | None
    expect: dict[str, Any]
    at: int  # its place in spec.cases


def check_spec(spec: dict[str, Any], problem: Problem) -> None:
    """Every problem of a PolicyTest's spec (its keys are checked by the caller)."""
    ref = spec.get("policyRef")
    if "policyRef" in spec and (not isinstance(ref, str) or not ref.strip() or "/" in ref):
        problem(("spec", "policyRef"), "spec.policyRef must be the metadata.name of a Policy "
                f"of the manifests, not {wording.a_value(ref)}")
    if "cases" not in spec:
        return
    cases = spec["cases"]
    if not isinstance(cases, list):
        problem(("spec", "cases"), f"spec.cases must be a list of cases, not "
                f"{wording.a_value(cases)}")
        return
    if not cases:
        problem(("spec", "cases"), "spec.cases is empty: add a case (name, stage, input, "
                "expect)")
    if len(cases) > MAX_CASES:
        problem(("spec", "cases"), f"spec.cases holds {len(cases):,} cases: at most "
                f"{MAX_CASES:,} a test; split it")
        return
    seen: dict[str, int] = {}
    for i, case in enumerate(cases):
        _check_case(i, case, seen, problem)


def _check_case(i: int, case: Any, seen: dict[str, int], problem: Problem) -> None:
    at = ("spec", "cases", i)
    label = f"spec.cases[{i}]"
    if not isinstance(case, dict):
        problem(at, f"{label} must be a mapping (name, stage, input, expect), not "
                f"{wording.a_value(case)}")
        return
    wording.unknown_keys(case, at, CASE_KEYS, problem,
                         otherwise=f"a case holds {', '.join(CASE_KEYS)}")
    for key in REQUIRED_CASE_KEYS:
        if key not in case:
            problem(at, f"{label} has no {key}: every case has a name, a stage and an expect")
    name = case.get("name")
    if "name" in case:
        if not isinstance(name, str) or not name.strip():
            problem((*at, "name"), f"{label}.name must be a text, not {wording.a_value(name)}")
        elif name in seen:
            problem((*at, "name"), f"{label}.name {name!r} is also the name of "
                    f"spec.cases[{seen[name]}]: a case's name is unique within its test")
        else:
            seen[name] = i
    stage = case.get("stage")
    stages = [s.value for s in Stage]
    if "stage" in case and stage not in stages:
        problem((*at, "stage"), wording.unknown(
            f"{label}.stage", str(stage), stages, otherwise=f"a stage is one of "
            f"{', '.join(stages)}"))
    for key in ("input", "hooks", "data", "expect"):
        if key in case and not isinstance(case[key], dict):
            what = {"input": "the decision's input (input.user, input.resource ...)",
                    "hooks": "hook name -> the result it gives",
                    "data": "data key -> what its loader loads",
                    "expect": "the decision's fields to match; {} for no decision"}[key]
            problem((*at, key), f"{label}.{key} must be a mapping ({what}), not "
                    f"{wording.a_value(case[key])}")
    given = case["input"] if isinstance(case.get("input"), dict) else {}
    if "hooks" in given:
        problem((*at, "input", "hooks"), f"{label}.input.hooks: give hooks' results in "
                f"{label}.hooks (each hook not given there is run)", key=True)
    for key in RESERVED_INPUT_KEYS:
        if key in given:
            problem((*at, "input", key), f"{label}.input.{key} is govsync's own key (the "
                    f"case's time is {label}.now, its loaders' data {label}.data)", key=True)
    env = case.get("env")
    if "env" in case and (not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        problem((*at, "env"), f"{label}.env must map variable names to texts (what the hooks "
                f"read as env), not {wording.a_value(env)}")
    if "now" in case and parse_now(case["now"]) is None:
        problem((*at, "now"), f"{label}.now must be a time with its offset, such as "
                f"\"2026-11-28T10:00:00Z\", not {wording.a_value(case['now'])}")
    expect = case.get("expect")
    if isinstance(expect, dict) and stage in ACTIONS and "action" in expect:
        action = expect["action"]
        if action not in ACTIONS[stage]:
            problem((*at, "expect", "action"), wording.unknown(
                f"{label}.expect.action at stage {stage}", str(action), ACTIONS[stage],
                otherwise=f"{stage} decides {', '.join(ACTIONS[stage])}"))


def parse_now(value: Any) -> datetime | None:
    """A case's ``now``: an RFC 3339 time with its offset (``Z`` or ``+01:00``)."""
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    try:
        found = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return found if found.tzinfo is not None else None


def places(root: Node, spec: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Where each case and each of its fields is written: ``cases[3]``, ``cases[3].input``."""
    found: dict[str, tuple[int, int]] = {}
    cases = spec.get("cases")
    if not isinstance(cases, list):
        return found
    for i, case in enumerate(cases):
        found[f"cases[{i}]"] = locate(root, ("spec", "cases", i))
        if isinstance(case, dict):
            for key in case:
                found[f"cases[{i}].{key}"] = locate(root, ("spec", "cases", i, key))
            if isinstance(case.get("hooks"), dict):
                for hook in case["hooks"]:
                    found[f"cases[{i}].hooks.{hook}"] = locate(
                        root, ("spec", "cases", i, "hooks", hook), key=True)
    return found


def cases(spec: Mapping[str, Any]) -> list[Case]:
    """The cases of a checked spec."""
    out = []
    for i, case in enumerate(spec["cases"]):
        out.append(Case(str(case["name"]), Stage(case["stage"]), dict(case.get("input") or {}),
                        dict(case.get("hooks") or {}), dict(case.get("data") or {}),
                        {str(k): str(v) for k, v in (case.get("env") or {}).items()},
                        parse_now(case["now"]) if "now" in case else None,
                        dict(case["expect"]), i))
    return out
