"""Recorded requests replayed through policies' code (``plan --impact-from``): each code
compiled once, then its stage rule evaluated on every recorded input of that stage, with
``time.now_ns()`` reading the request's recorded time.  Runs in the bounded worker
(impactreplay.py sends it a share of the records).

An input is handed to rego-cpp through its input API, not as JSON text: the engine's
JSON reader is half of an evaluation's time.  Every few hundred inputs the work names
its step with a deadline of its own (``code N: line L``), so that a code whose evaluation
does not end has the worker stopped within that deadline, and the caller knows which code
and which line.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from govsync.policycode import rego
from govsync.policycode.model import Evaluation
from govsync.policycode.stages import NOW_KEY

# Inputs evaluated between two steps (each with the caller's deadline).
CHUNK = 256

Step = Callable[..., None]
# (stage, input, the time time.now_ns() reads, the input's line): one recorded request.
Item = tuple[str, dict[str, Any], int, int]


class Replayed(NamedTuple):
    """One code over one share of the records: why it could not be evaluated at all
    (``error``), else the decisions that exist and are not allow, as (the record's index,
    the decision's action), and how many inputs failed to evaluate (the first's why)."""

    error: str | None = None
    hits: tuple[tuple[int, str], ...] = ()
    failed: int = 0
    first_failure: str = ""


def step_name(codes: Sequence[int], line: int) -> str:
    """The step of a chunk: ``code 0,1: line 257`` (the codes evaluating it)."""
    return f"code {','.join(map(str, codes))}: line {line}"


class Replayer(rego.Decider):
    """A policy's stage rules over many recorded inputs (no loaders' data)."""

    def ready(self) -> bool:
        """Whether the code builds (else ``error`` says why)."""
        if self.error is not None:
            return False
        return bool(self._builds) or self._compiles()

    def defines(self, stage: str) -> bool:
        return stage in self._entries

    def query(self, stage: str, value: Any) -> Evaluation:
        """``stage``'s value for an input built already (``Inputs.build``)."""
        engine = self._rego
        handle, bundle = self._builds.get("{}") or self._build("{}")
        try:
            engine.rego_set_input(handle, value)
            entry = f"{self._package}.{stage}".replace(".", "/")
            return rego._answer(engine, engine.rego_bundle_query_entrypoint(
                handle, bundle, entry))
        except engine.RegoError as exc:
            return Evaluation(error=rego._said(str(exc)))


def build(engine: Any, item: dict[str, Any], now_ns: int) -> Any:
    """An engine input of ``item`` with its time (the caller frees it); ValueError and
    the like where the engine cannot be given it."""
    value = engine.rego_new_input()
    try:
        _add(engine.rego, value, {**item, NOW_KEY: now_ns})
    except BaseException:
        engine.rego_free_input(value)
        raise
    return value


def _add(lib: Any, into: Any, value: Any) -> None:
    """``value`` (parsed JSON) built into an engine input by the C interface's calls
    (regopy's own builder costs three times as much: a wrapper and an ABC check each)."""
    kind = type(value)
    if kind is str:
        status = lib.regoInputString(into, value.encode("utf-8"))
    elif kind is dict:
        for key, item in value.items():
            _add(lib, into, key)
            _add(lib, into, item)
            if lib.regoInputObjectItem(into):
                raise ValueError("the engine refused an object's item")
        status = lib.regoInputObject(into, len(value))
    elif kind is list:
        for item in value:
            _add(lib, into, item)
        status = lib.regoInputArray(into, len(value))
    elif kind is bool:
        status = lib.regoInputBoolean(into, value)
    elif kind is int:
        if not -(1 << 63) <= value < (1 << 63):
            raise OverflowError("a number larger than 64 bits")
        status = lib.regoInputInt(into, value)
    elif kind is float:
        status = lib.regoInputFloat(into, value)
    elif value is None:
        status = lib.regoInputNull(into)
    else:
        raise TypeError(f"a {kind.__name__} is not JSON")
    if status:
        raise ValueError("the engine refused a value")


def action_of(decision: Any) -> str | None:
    """The action a decision counts as (None: allow, not an impact)."""
    if isinstance(decision, dict):
        action = decision.get("action")
        if action == "allow":
            return None
        return action if isinstance(action, str) and action else "(no action)"
    return "(no action)"


def replay(step: Step, codes: Sequence[str], items: Sequence[Item],
           skip: frozenset[int], seconds: float) -> list[Replayed | None]:
    """Every code but those of ``skip`` (None there) over every item, each item's input
    built once for all of them; ``seconds``: what a chunk of CHUNK inputs may take."""
    replayers: dict[int, Replayer] = {}
    out: list[Replayed | None] = [None] * len(codes)
    try:
        for number, code in enumerate(codes):
            if number in skip:
                continue
            step(f"code {number}: compile")
            replayer = replayers[number] = Replayer(code)
            if not replayer.ready():
                out[number] = Replayed(error=replayer.error)
        live = [n for n in replayers if out[n] is None]
        if not live:
            return out
        engine = replayers[live[0]]._rego
        hits: dict[int, list[tuple[int, str]]] = {n: [] for n in live}
        failed = dict.fromkeys(live, 0)
        first = dict.fromkeys(live, "")
        for index, (stage, item, now_ns, line) in enumerate(items):
            if index % CHUNK == 0:
                step(step_name(live, line), seconds=seconds)
            deciding = [n for n in live if replayers[n].defines(stage)]
            if not deciding:
                continue
            try:
                value = build(engine, item, now_ns)
            except (ValueError, TypeError, OverflowError, RecursionError,
                    ctypes.ArgumentError) as exc:
                for n in deciding:
                    failed[n] += 1
                    first[n] = first[n] or (
                        f"line {line}: the input cannot be given to the engine ({exc})")
                continue
            try:
                for n in deciding:
                    found = replayers[n].query(stage, value)
                    if found.error is not None:
                        failed[n] += 1
                        first[n] = first[n] or f"line {line}: {found.error}"
                        continue
                    action = None if found.decision is None else action_of(found.decision)
                    if action is not None:
                        hits[n].append((index, action))
            finally:
                engine.rego_free_input(value)
        for n in live:
            out[n] = Replayed(None, tuple(hits[n]), failed[n], first[n])
        return out
    finally:
        for replayer in replayers.values():
            replayer.close()
