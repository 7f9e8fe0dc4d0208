"""What checking and evaluating code gives back: plain values that pickle, so that
they cross from the bounded worker (bounded.py) to the caller unchanged.  Named
tuples: a command loads this module as it starts, and a dataclass costs a
millisecond or two to make."""

from __future__ import annotations

from typing import Any, NamedTuple

from govsync.policycode.stages import Role


class Source(NamedTuple):
    """One piece of code to check, and what it is."""

    role: Role
    code: str


class CodeProblem(NamedTuple):
    """One finding inside a piece of code: its line and column there (1-based,
    in characters), and what is wrong.  ``warning``: reported, never fatal."""

    line: int
    col: int
    message: str
    warning: bool = False


class CodeCheck(NamedTuple):
    """What checking one piece of code found (its problems, in the code's own lines) and,
    for a policy, the stage rules it defines."""

    problems: tuple[CodeProblem, ...] = ()
    stages: tuple[str, ...] = ()

    @property
    def errors(self) -> list[CodeProblem]:
        return [p for p in self.problems if not p.warning]


class Evaluation(NamedTuple):
    """A rule evaluated on one input: its ``decision`` (None when the rule is undefined
    for that input), or why it could not be evaluated (``error``)."""

    decision: Any = None
    error: str | None = None

    @property
    def defined(self) -> bool:
        return self.decision is not None


class HookRun(NamedTuple):
    """A hook's default export run on one input: what it returned (``value``), or why
    it gave nothing (``error``; ``line`` and ``col``: where in the module it threw,
    0 where not known)."""

    value: Any = None
    error: str | None = None
    line: int = 0
    col: int = 0


class Validity(NamedTuple):
    """GetPolicyCodeValidity's answer: ``valid``, the compiled module (``ast``), or why
    the code does not compile, with its line (``error``); ``problems``: every error."""

    valid: bool
    ast: str = ""
    error: str = ""
    problems: tuple[CodeProblem, ...] = ()

    def public(self) -> dict[str, Any]:
        return {"valid": self.valid, "ast": self.ast, "error": self.error}


class HookCode(NamedTuple):
    """A hook a batch of cases may run: its module and its ``timeoutMs``."""

    code: str
    timeout_ms: int


class Trial(NamedTuple):
    """One test case to decide (``govsync test``): the stage rule, the input as the
    service passes it without ``hooks``, the hooks' results the case gives, the hooks
    to run on the input (by name, in the batch's table), loaders' data, the hooks'
    env and the time ``time.now_ns()`` reads."""

    stage: str
    input: dict[str, Any]
    hooks: dict[str, Any]
    run: tuple[str, ...]
    data: dict[str, Any]
    env: dict[str, str]
    now_ns: int


class Verdict(NamedTuple):
    """A trial's outcome: the decision of each code asked (in order), or why there is
    none (``error``: a hook that threw or did not return, an engine stopped); ``hook``:
    the hook that failed, and where in its module (``line``, ``col``; 0: not known)."""

    decisions: tuple[Evaluation, ...] = ()
    error: str | None = None
    hook: str | None = None
    line: int = 0
    col: int = 0
