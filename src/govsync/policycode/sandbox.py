"""Every entry into the engines, each run as a guest in the bounded worker
(bounded.py): a fresh process with a deadline, an address-space limit and a
watch on its resident memory.  An engine that crashes, loops or eats memory ends
that process, never govsync's; what it was doing is reported as an error of that
code, and the next call starts another worker.

These are the functions validate, ``govsync test``, the reference server and
later impact reports call; they take and give plain values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from govsync import bounded
from govsync.bounded import BudgetExceeded, prestart, run_bounded
from govsync.policycode import batch, checks, js, rego
from govsync.policycode.checks import too_large
from govsync.policycode.model import (
    CodeCheck,
    CodeProblem,
    Evaluation,
    HookCode,
    HookRun,
    Source,
    Trial,
    Validity,
    Verdict,
)
from govsync.policycode.stages import Role, Stage

if TYPE_CHECKING:
    from datetime import datetime

T = TypeVar("T")
_RULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# What one call may spend: compiling a batch, or evaluating one module over its inputs.
BUDGET_SECONDS = 30.0
BUDGET_BYTES = 1 << 30
# Beyond a hook's own timeoutMs: the worker's start and V8's (a cold start is 0.3 s).
HOOK_MARGIN_SECONDS = 3.0
# A worker's share of a large batch to check: below it, another worker's start (0.15 s)
# costs more than it saves.
SHARE = 250
# The engines' own worker process: rego-cpp's allocator, loaded, breaks the CEL runtime
# the rules' worker loads after it (a SIGBUS under the address-space limit).
WORKER = "code"
# What the worker imports as it starts (bounded.prestart): the checks, and each engine
# the code to come needs (the Rego engine's library, 50 ms; V8's, 140 ms).
PRELOAD = ("govsync.policycode.checks",)
ENGINES = {Role.POLICY: "regopy.rego_shared", Role.PERMISSION: "regopy.rego_shared",
           Role.HOOK: "py_mini_racer"}


def warm(roles: Collection[Role] = tuple(Role), count: int = 1) -> None:
    """Start the workers ``check`` will use for ``count`` sources now, if they are not
    running, loading the engines of ``roles``: the next call finds them ready.
    Validate calls it as soon as it knows what code it has."""
    preload = (*PRELOAD, *dict.fromkeys(ENGINES[role] for role in roles))
    for name in workers(count):
        prestart(preload, worker=name)


def _bounded(work: Callable[..., T], *args: Any, seconds: float = BUDGET_SECONDS,
             worker: str = WORKER) -> T:
    return run_bounded(work, *args, seconds=seconds, memory=BUDGET_BYTES, worker=worker)


def _stopped(engine: str, exc: BudgetExceeded) -> str:
    return (f"the {engine} engine was stopped: it crashed or went over govsync's budget "
            f"({exc.why})")


def check(sources: Sequence[Source], *, keys: Collection[str] | None = None,
          drafts: Collection[str] = ()) -> list[CodeCheck]:
    """Every source checked (``validate``): Rego compiled, hooks parsed and loaded, the
    stage rules and literal actions of policies; one CodeCheck per source.  ``keys``:
    the data keys loaders load (a policy's other ``data.<key>`` is a warning, not
    checked when None); ``drafts``: the hooks that are drafts (a policy reading one is a
    warning).  A large batch is shared out among workers, one a core (``bounded.shares``),
    run side by side."""
    context = (None if keys is None else sorted(keys), sorted(drafts))
    shares = bounded.shares(sources, SHARE)
    names = workers(len(sources))
    found: list[list[CodeCheck]] = [[] for _ in shares]

    def run(i: int) -> None:
        found[i] = _check_share(shares[i], names[i], context)

    bounded.side_by_side(len(shares), run, "policycode")
    return [c for share in found for c in share]


def _check_share(sources: list[Source], worker: str, context: tuple[Any, ...]
                 ) -> list[CodeCheck]:
    """One worker's share; when it goes over, each source again alone, so that the one
    that crashed or looped is named."""
    if not sources:
        return []
    try:
        return _bounded(checks.check_sources, sources, *context, worker=worker)
    except BudgetExceeded as exc:
        if len(sources) == 1:
            return [CodeCheck((CodeProblem(1, 1, _stopped(sources[0].role.language, exc)),))]
    out = []
    for source in sources:
        try:
            out.extend(_bounded(checks.check_sources, [source], *context, worker=worker))
        except BudgetExceeded as exc:
            out.append(CodeCheck((CodeProblem(1, 1, _stopped(source.role.language, exc)),)))
    return out


def validity(code: str) -> Validity:
    """GetPolicyCodeValidity's answer for ``code``: valid, the compiled module, or the
    first error with its line."""
    large = too_large(code)
    if large is not None:
        return Validity(False, "", large.message, (large,))
    try:
        return _bounded(_validity, code)
    except BudgetExceeded as exc:
        message = _stopped("Rego", exc)
        return Validity(False, "", message, (CodeProblem(1, 1, message),))


def _validity(progress: Callable[[str], None], code: str) -> Validity:
    return rego.validity(code)


def evaluate(code: str, rule: Stage | str, input: Mapping[str, Any], *,
             hooks: Mapping[str, Any] | None = None, data: Mapping[str, Any] | None = None,
             now: datetime | None = None, seconds: float = BUDGET_SECONDS) -> Evaluation:
    """The decision of ``code``'s ``rule`` for one request (a policy's stage, or any
    rule: a permission's ``allow``): ``input`` as the service passes it, ``hooks`` the hooks' results (``input.hooks``), ``data`` what
    loaders load (``data.<key>``), ``now`` what ``time.now_ns()`` reads (the clock when
    None).  The decision is None where the rule is undefined for that input."""
    whole = dict(input)
    if hooks is not None:
        whole["hooks"] = dict(hooks)
    return evaluate_many(code, rule, [whole], data=data, now=now, seconds=seconds)[0]


def evaluate_many(code: str, rule: Stage | str, inputs: Sequence[Mapping[str, Any]], *,
                  data: Mapping[str, Any] | None = None, now: datetime | None = None,
                  seconds: float = BUDGET_SECONDS) -> list[Evaluation]:
    """``rule``'s value for each input (hooks' results already in ``input.hooks``),
    the module compiled once in the worker: for impact reports over logged requests.
    Where the worker goes over ``seconds`` or memory, every input gets that error."""
    large = too_large(code)
    if large is not None:
        return [Evaluation(error=large.message)] * len(inputs)
    if not _RULE.match(str(rule)):
        return [Evaluation(error=f"{rule!r} is not a rule's name")] * len(inputs)
    now_ns = None if now is None else int(now.timestamp()) * 1_000_000_000 + (
        now.microsecond * 1000)
    try:
        return _bounded(_evaluate, code, str(rule), [dict(i) for i in inputs],
                        dict(data or {}), now_ns, seconds=seconds)
    except BudgetExceeded as exc:
        return [Evaluation(error=_stopped("Rego", exc))] * len(inputs)


def _evaluate(progress: Callable[[str], None], code: str, stage: str, inputs: list[Any],
              data: dict[str, Any], now_ns: int | None) -> list[Evaluation]:
    return rego.evaluate(code, stage, inputs, data, now_ns, progress)


def evaluate_staged(code: str, items: Sequence[tuple[str, Mapping[str, Any]]], *,
                    seconds: float = BUDGET_SECONDS, worker: str = WORKER
                    ) -> list[Evaluation]:
    """Each ``(stage, input)`` of ``items`` decided by ``code``'s rule of that stage, in
    one call of the worker named ``worker``, the module compiled once a stage: an impact
    report over logged requests of every stage.  Where the worker goes over ``seconds``
    or memory (code that loops), every item gets that error."""
    large = too_large(code)
    if large is not None:
        return [Evaluation(error=large.message)] * len(items)
    if not all(_RULE.match(str(stage)) for stage, _ in items):
        return [Evaluation(error="a stage is not a rule's name")] * len(items)
    try:
        return _bounded(_evaluate_staged, code, [(str(s), dict(i)) for s, i in items],
                        seconds=seconds, worker=worker)
    except BudgetExceeded as exc:
        return [Evaluation(error=_stopped("Rego", exc))] * len(items)


def _evaluate_staged(progress: Callable[[str], None], code: str,
                     items: list[tuple[str, dict[str, Any]]]) -> list[Evaluation]:
    out: list[Evaluation] = [Evaluation()] * len(items)
    for stage in dict.fromkeys(s for s, _ in items):
        at = [i for i, (s, _) in enumerate(items) if s == stage]
        found = rego.evaluate(code, stage, [items[i][1] for i in at], {}, None, progress)
        for i, evaluation in zip(at, found, strict=True):
            out[i] = evaluation
    return out


def workers(count: int) -> list[str]:
    """The workers to share ``count`` pieces of work among: at least SHARE each, at most
    one a core (the names ``check`` uses; ``decide``'s ``worker``)."""
    return bounded.workers(WORKER, count, SHARE)


def decide(codes: Sequence[str], trials: Sequence[Trial], hooks: Mapping[str, HookCode],
           *, worker: str = WORKER) -> list[Verdict]:
    """Every trial (a test case) decided by each of ``codes`` (a policy's new code, and
    the recorded one), its hooks run (``hooks``: each one's module and timeoutMs), in one
    call of the worker: the codes compiled once, each case's hooks in V8 within their
    timeouts.  A case whose hook throws, never returns or eats memory, or whose
    evaluation does not end, gets its error; the others are decided all the same."""
    if not trials:
        return []
    large = next((p for p in map(too_large, codes) if p is not None), None)
    if large is not None:
        return [Verdict(error=large.message)] * len(trials)
    failed: dict[int, Verdict] = {}
    for name, hook in hooks.items():
        problem = too_large(hook.code)
        if problem is not None:
            for i, trial in enumerate(trials):
                if name in trial.run:
                    failed.setdefault(i, Verdict(error=f"the hook {name}: {problem.message}",
                                                 hook=name))
    seconds = BUDGET_SECONDS + len(trials) * batch.DECIDE_SECONDS + sum(
        hooks[n].timeout_ms / 1000 + batch.HOOK_MARGIN_SECONDS for t in trials for n in t.run)
    while len(failed) < len(trials):
        try:
            got = _bounded(_decide, list(codes), list(trials), dict(hooks),
                           frozenset(failed), seconds=seconds, worker=worker)
        except BudgetExceeded as exc:
            index, what = _case_step(exc.last)
            if index is None or index in failed:  # compiling, or no case to name: all
                error = _stopped("Rego", exc)
                return [failed.get(i) or Verdict(error=error) for i in range(len(trials))]
            failed[index] = _failed(what, exc, hooks)
            continue
        return [failed.get(i) or got[i] or Verdict(error="not decided")
                for i in range(len(trials))]
    return [failed[i] for i in range(len(trials))]


def _case_step(last: str) -> tuple[int | None, str]:
    """(the case, what it was doing) of a step ``case N: WHAT``."""
    head, _, what = last.partition(": ")
    number = head.removeprefix("case ")
    return (int(number), what) if head.startswith("case ") and number.isdigit() else (None, "")


def _failed(what: str, exc: BudgetExceeded, hooks: Mapping[str, HookCode]) -> Verdict:
    """A case's verdict when the worker was stopped in it."""
    if what.startswith("hook "):
        name = what.removeprefix("hook ")
        hook = hooks.get(name)
        if hook is not None and exc.why.startswith("more than") and exc.why.endswith(" s"):
            return Verdict(error=f"the hook {name} did not return within its timeoutMs "
                                 f"({hook.timeout_ms} ms)", hook=name)
        return Verdict(error=f"the hook {name}: {_stopped('JavaScript', exc)}", hook=name)
    return Verdict(error=_stopped("Rego", exc))


def _decide(progress: Callable[..., None], codes: list[str], trials: list[Trial],
            hooks: dict[str, HookCode], skip: frozenset[int]) -> list[Verdict | None]:
    return batch.decide_all(progress, codes, trials, hooks, skip)


def run_hook(code: str, input: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
             timeout_ms: int = 1000) -> HookRun:
    """A hook's default export called with ``(input, env)`` and awaited, with no network,
    modules or file system, stopped after ``timeout_ms``: what it returned, or why not."""
    large = too_large(code)
    if large is not None:
        return HookRun(error=large.message)
    try:
        return _bounded(_run_hook, code, dict(input), dict(env or {}), timeout_ms,
                        seconds=timeout_ms / 1000 + HOOK_MARGIN_SECONDS)
    except BudgetExceeded as exc:
        if exc.why.startswith("more than") and exc.why.endswith(" s"):
            return HookRun(error=f"the hook did not return within its timeoutMs "
                                 f"({timeout_ms} ms)")
        return HookRun(error=_stopped("JavaScript", exc))


def _run_hook(progress: Callable[[str], None], code: str, input: dict[str, Any],
              env: dict[str, str], timeout_ms: int) -> HookRun:
    return js.run(code, input, env, timeout_ms)
