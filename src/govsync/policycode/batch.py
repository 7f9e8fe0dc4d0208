"""A batch of test cases decided in one call of the bounded worker (``govsync test``, a
plan's tests): each code compiled once, each case's hooks run in V8 (an isolate a hook, the
module loaded anew for each case, the hook's own timeout), then each code's stage rule evaluated on the case.

Runs in the worker (sandbox.decide_all calls it there).  Each case announces its steps
(``case N: hook NAME``, ``case N: decide``) with a deadline of their own: a hook that
never returns after an ``await`` (which V8's timeout does not stop) or an evaluation
that does not end has the worker stopped by the caller, which then knows the case and
the hook, says so for that case, and sends the batch again without it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from govsync.policycode import js, rego
from govsync.policycode.model import Evaluation, HookCode, Trial, Verdict

# What one case's evaluation may take, all codes together (rego-cpp has no limit).
DECIDE_SECONDS = 10.0
# Beyond a hook's timeoutMs: V8's isolate, made for each run, and the answer.
HOOK_MARGIN_SECONDS = 0.5

Step = Callable[..., None]


def step_name(index: int, what: str) -> str:
    return f"case {index}: {what}"


def decide_all(step: Step, codes: Sequence[str], trials: Sequence[Trial],
               hooks: Mapping[str, HookCode], skip: frozenset[int]) -> list[Verdict | None]:
    """The verdict of every trial but those of ``skip`` (None there: decided already)."""
    step("compile")
    deciders = [rego.Decider(code) for code in codes]
    runner = js.Runner()
    if any(trial.run for trial in trials):
        step("start V8")  # its first isolate (0.3 s) is no hook's time
        js.warm()
    try:
        return [None if i in skip else _one(step, i, trial, deciders, hooks, runner)
                for i, trial in enumerate(trials)]
    finally:
        runner.close()
        for decider in deciders:
            decider.close()


def _one(step: Step, index: int, trial: Trial, deciders: Sequence[rego.Decider],
         hooks: Mapping[str, HookCode], runner: js.Runner) -> Verdict:
    results: dict[str, Any] = dict(trial.hooks)
    for name in trial.run:
        hook = hooks[name]
        step(step_name(index, f"hook {name}"),
             seconds=hook.timeout_ms / 1000 + HOOK_MARGIN_SECONDS)
        ran = runner.run(hook.code, trial.input, trial.env, hook.timeout_ms)
        if ran.error is not None:
            return Verdict(error=ran.error, hook=name, line=ran.line, col=ran.col)
        results[name] = ran.value
    step(step_name(index, "decide"), seconds=DECIDE_SECONDS)
    whole = {**trial.input, "hooks": results}
    decisions: list[Evaluation] = [d.decide(trial.stage, whole, trial.data, trial.now_ns)
                                   for d in deciders]
    return Verdict(tuple(decisions))
