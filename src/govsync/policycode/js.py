"""Hooks: JavaScript modules run by V8 (``mini-racer``), each in a fresh isolate.

Runs in the bounded worker (sandbox.py calls it there).  V8 as mini-racer embeds
it has no module loader, no ``fetch``, ``require``, ``process`` or file system:
a hook reaches nothing outside its arguments.  A module becomes a script whose
lines and columns are the module's own (errors point into the manifest):

* ``export default function hook`` loses its ``export default`` (spaces in its
  place) and ``__hook__ = hook;`` is added after the last line; any other
  ``export default <expression>`` becomes ``__hook__ = <expression>``;
* ``export`` before another declaration becomes spaces;
* the script starts ``"use strict";`` on its first line, as a module is strict
  (columns of line 1 are given back), and the module's body is a function's, called
  once a load: a batch that loads a hook for each case in one isolate gives each load
  fresh module state.

Each run has V8's own limits (its heap, a timeout) inside the worker's budget;
an isolate reserves a terabyte of address space as it starts, so it is made
outside the worker's address-space limit (bounded.reserved) and the caller
watches the worker's resident memory instead.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

from govsync.bounded import reserved
from govsync.paths import MAX_DEPTH, nested_over
from govsync.policycode.model import CodeProblem, HookRun

# py_mini_racer and json are imported where a hook is parsed or run (docs/architecture.md's
# heavy list).

HOOK = "__hook__"
# The module's body runs in a function of its own: loaded again in one isolate (a batch of
# test cases), each load has fresh module state, as a fresh isolate would.
# (validate parses the module unscoped: an unclosed brace is then "Unexpected end of
# input", not a complaint about the wrapper's end.  Both preludes are as long.)
SCOPE = " (function () {"
EPILOGUE = "\n})();"
PRELUDE = f'"use strict"; var {HOOK};' + " " * len(SCOPE)
HEAP_BYTES = 256 * 1024 * 1024  # V8's heap for one hook
LOAD_MS = 1000                  # what a module's own top level may take as it loads

_DEFAULT = re.compile(r"^([ \t]*)export[ \t]+default\b[ \t]*", re.MULTILINE)
_DECLARED = re.compile(r"(?:async[ \t]+)?function\b[ \t]*\*?[ \t]*([A-Za-z_$][\w$]*)"
                       r"|class[ \t]+([A-Za-z_$][\w$]*)")
_EXPORT = re.compile(r"^([ \t]*)export[ \t]+(?=(?:async[ \t]+)?function\b|const\b|let\b|var\b"
                     r"|class\b)", re.MULTILINE)
_IMPORT = re.compile(r"^[ \t]*import\b(?![ \t]*\()", re.MULTILINE)
_WHERE = re.compile(r"<anonymous>:(\d+):")
_FRAME = re.compile(r"<anonymous>:(\d+):(\d+)")


class Script(NamedTuple):
    """A hook module as a script V8 runs, or why it cannot be one."""

    text: str
    problems: tuple[CodeProblem, ...] = ()


def _line_of(code: str, offset: int) -> tuple[int, int]:
    before = code[:offset]
    return before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1


def script(code: str, *, scoped: bool = False) -> Script:
    """The module as a script that leaves its default export in ``__hook__`` (``scoped``:
    its body a function's, for a module loaded again and again in one isolate)."""
    problems: list[CodeProblem] = []
    defaults = list(_DEFAULT.finditer(code))
    for extra in defaults[1:]:
        problems.append(CodeProblem(*_line_of(code, extra.start(0) + len(extra.group(1))),
                                    "JavaScript: a module has one default export"))
    for found in _IMPORT.finditer(code):
        problems.append(CodeProblem(*_line_of(code, found.end() - 6), (
            "JavaScript: import is not available to a hook here: the module must stand "
            "alone (govsync runs it without a module loader)")))
    if not defaults:
        problems.append(CodeProblem(1, 1, (
            "JavaScript: the hook module has no default export: write "
            "`export default function hook(input, env) { ... }`")))
    if problems:
        return Script("", tuple(problems))
    first = defaults[0]
    start, end = first.start(0) + len(first.group(1)), first.end(0)
    after = ""
    declared = _DECLARED.match(code, end)
    if declared:  # a declaration keeps its name in the module's scope
        text = code[:start] + " " * (end - start) + code[end:]
        after = f"\n;{HOOK} = {declared.group(1) or declared.group(2)};"
    else:
        assignment = f"{HOOK} ="
        pad = max(0, end - start - len(assignment) - 1)
        text = code[:start] + assignment + " " * (pad + 1) + code[end:]
    text = _EXPORT.sub(lambda m: m.group(1) + " " * (m.end() - m.start() - len(m.group(1))),
                       text)
    if scoped:
        return Script(PRELUDE[:-len(SCOPE)] + SCOPE + text + after + EPILOGUE)
    return Script(PRELUDE + text + after)


def _place(message: str, code: str | None = None) -> tuple[int, int]:
    """Line and column of a V8 message (``<anonymous>:LINE: ...`` then the line and a
    caret under the place), in the module's own terms (``code``: the module)."""
    where = _WHERE.search(message)
    line = int(where.group(1)) if where else 1
    col = 1
    rows = message.split("\n")
    for row in rows[1:]:
        if "^" in row and set(row.strip()) == {"^"}:
            col = row.index("^") + 1
            break
    if line == 1:
        col = max(1, col - len(PRELUDE))
    if code is not None:
        rows = code.rstrip("\n").split("\n")
        if line > len(rows):  # past the module's end: in the line added after it
            line, col = len(rows), len(rows[-1]) + 1
    return line, col


def _said(message: str) -> str:
    """The error's own words (V8 repeats them after the source line)."""
    rows = [r for r in message.split("\n") if r.strip()]
    head = rows[0] if rows else message
    return _WHERE.sub("", head, count=1).strip() or "failed"


def _thrown_at(stack: str, code: str) -> tuple[int, int]:
    """The line and column in the module where a stack's first frame in it is (0, 0:
    none, such as a value thrown that is not an Error)."""
    found = _FRAME.search(stack)
    if found is None:
        return 0, 0
    line, col = int(found.group(1)), int(found.group(2))
    if line == 1:
        col = max(1, col - len(PRELUDE))
    rows = code.rstrip("\n").split("\n")
    if line > len(rows):
        return 0, 0
    return line, col


def _threw(message: str) -> str:
    said = _said(message).replace("JavaScript rejected promise with reason: ", "")
    if "is not defined" in said and any(w in said for w in ("fetch", "require", "process")):
        said += " (a hook runs here without network, modules or process)"
    return f"the hook threw: {said}"


def _racer() -> Any:
    from py_mini_racer import MiniRacer

    racer = reserved(MiniRacer)
    racer.set_hard_memory_limit(HEAP_BYTES)
    return racer


def check(code: str) -> list[CodeProblem]:
    """Whether ``code`` is a module V8 parses, whose default export is a function."""
    found = script(code)
    if found.problems:
        return list(found.problems)
    return _load(found.text, code)[1]


def _load(text: str, code: str) -> tuple[Any, list[CodeProblem]]:
    """A fresh isolate with the module loaded; its problems (then the isolate is closed)."""
    racer = _racer()
    problems = _loaded(racer, text, code)
    if problems:
        _close(racer)
        return None, problems
    return racer, []


def _loaded(racer: Any, text: str, code: str) -> list[CodeProblem]:
    """The module loaded (again) in ``racer``: its problems."""
    from py_mini_racer import JSEvalException, JSParseException, JSTimeoutException

    try:
        racer.eval(text, timeout=LOAD_MS)
        kind = racer.eval(f"typeof {HOOK}")
    except JSParseException as exc:
        return [CodeProblem(*_place(str(exc), code), f"JavaScript: {_said(str(exc))}")]
    except JSTimeoutException:
        return [CodeProblem(1, 1, f"JavaScript: the module's top level ran for more "
                                  f"than {LOAD_MS} ms as it loaded")]
    except JSEvalException as exc:
        return [CodeProblem(*_place(str(exc), code), (
            f"JavaScript: the module throws as it loads: {_said(str(exc))}"))]
    if kind != "function":
        return [CodeProblem(1, 1, f"JavaScript: the default export is {kind}, not a "
                                  "function: export default function hook(input, env)")]
    return []


def run(code: str, input: Any, env: Mapping[str, str], timeout_ms: int) -> HookRun:
    """The module's default export called with ``(input, env)``, its result awaited, all
    within ``timeout_ms``; the result must be JSON (what the service passes on)."""
    runner = Runner()
    try:
        return runner.run(code, input, env, timeout_ms)
    finally:
        runner.close()


def warm() -> None:
    """V8 started in this process (its first isolate is the slowest to make)."""
    _close(_racer())


class Runner:
    """Hooks run again and again (a batch of test cases): one isolate a module, the
    module loaded anew for each run (fresh module state: its body is a function's),
    the isolate replaced after a run that failed (V8 stopped it, or it threw)."""

    def __init__(self) -> None:
        self._racers: dict[str, Any] = {}

    def run(self, code: str, input: Any, env: Mapping[str, str], timeout_ms: int) -> HookRun:
        found = script(code, scoped=True)
        if found.problems:
            return HookRun(error="; ".join(p.message for p in found.problems))
        racer = self._racers.pop(code, None)
        if racer is None:
            racer = _racer()
        problems = _loaded(racer, found.text, code)
        if problems:
            _close(racer)
            first = problems[0]
            return HookRun(error=f"line {first.line}, column {first.col}: {first.message}")
        ran = _call(racer, code, input, env, timeout_ms)
        if ran.error is None:
            self._racers[code] = racer
        else:
            _close(racer)
        return ran

    def close(self) -> None:
        for racer in self._racers.values():
            _close(racer)
        self._racers.clear()


def _call(racer: Any, code: str, input: Any, env: Mapping[str, str], timeout_ms: int
          ) -> HookRun:
    import json

    from py_mini_racer import JSOOMException, JSTimeoutException

    # What the hook throws is caught in V8, with its stack: the place it threw.  A hook
    # that returns a value, not a promise, is answered without a turn of the event loop.
    done = "{v: r}"
    failed = "{e: String(e), s: String((e && e.stack) || '')}"
    call = (f"(() => {{ let r; try {{ r = {HOOK}({json.dumps(input)}, "
            f"{json.dumps(dict(env))}); }} catch (e) {{ return JSON.stringify({failed}); }} "
            f"if (r && typeof r.then === 'function') {{ return r.then("
            f"(r) => JSON.stringify({done}), (e) => JSON.stringify({failed})); }} "
            f"return JSON.stringify({done}); }})()")
    try:
        answer = racer.eval(call, timeout=timeout_ms)
        # What the hook does after its first await runs outside that timeout, where V8
        # cannot be stopped but with its process: the caller's deadline (the bounded
        # worker's) ends the worker then.
        text = answer.get() if hasattr(answer, "get") else answer
    except JSTimeoutException:
        return HookRun(error=f"the hook did not return within its timeoutMs ({timeout_ms} ms)")
    except JSOOMException:
        return HookRun(error=f"the hook went over {HEAP_BYTES // (1024 * 1024)} MiB of memory")
    except Exception as exc:  # JSEvalException, a rejected promise (JSPromiseError) ...
        return HookRun(error=_threw(str(exc)))
    if text is None or not isinstance(text, str):
        return HookRun(value=None)
    try:
        found = json.loads(text)
    except RecursionError:
        found = None
    if found is None or nested_over(found.get("v")):
        return HookRun(error=f"the hook returned data nested more than {MAX_DEPTH} levels "
                             "deep: return a flatter result")
    if "e" in found:
        line, col = _thrown_at(str(found.get("s", "")), code)
        return HookRun(error=_threw(str(found["e"])), line=line, col=col)
    return HookRun(value=found.get("v"))


def _close(racer: Any) -> None:
    """Close an isolate; a callback V8 still had for a run it stopped finds mini-racer's
    loop closed, and says so on standard error unless told not to."""
    before = sys.unraisablehook
    sys.unraisablehook = lambda _: None
    try:
        racer.close()
    finally:
        sys.unraisablehook = before
