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
    it gave nothing (``error``)."""

    value: Any = None
    error: str | None = None


class Validity(NamedTuple):
    """GetPolicyCodeValidity's answer: ``valid``, the compiled module (``ast``), or why
    the code does not compile, with its line (``error``); ``problems``: every error."""

    valid: bool
    ast: str = ""
    error: str = ""
    problems: tuple[CodeProblem, ...] = ()

    def public(self) -> dict[str, Any]:
        return {"valid": self.valid, "ast": self.ast, "error": self.error}
