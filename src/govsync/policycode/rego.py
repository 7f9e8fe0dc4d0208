"""Rego, compiled and evaluated by rego-cpp (``regopy``, Microsoft's C++ Rego engine).

Runs in the bounded worker (sandbox.py calls it there): rego-cpp has no time
limit of its own, and a module nested deeply enough crashes it.  What it gives:

* compile errors with a place: byte offsets into the module, turned here into
  the code's line and column (in characters);
* undefined functions (``hooks.ticket_check(...)``) only when a call is
  evaluated, so they are read from the compiled plan instead (OPA's
  intermediate representation, which it writes for a bundle): a call that is
  neither a rule of the module nor a built-in function;
* messages printed on standard output, unless its log level is NONE.

A batch of modules is compiled as one bundle (0.7 ms a module, against 3.6 ms
one by one): each under a package of its own (``govsync7.formal.v2``), since
policies all share ``formal.v2``.  A module that does not compile is left out
and the rest compiled again.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from govsync.bounded import reserved
from govsync.policycode import scan
from govsync.policycode.model import CodeProblem, Evaluation, Validity
from govsync.policycode.stages import DATA_KEY, NOW_KEY

# regopy, json and tempfile are imported where the engine runs (docs/architecture.md's
# heavy list): importing this module costs validate nothing of them.

MODULE = "policy.rego"
_ERROR = re.compile(rb"\(error(?=[\s)])")
_LOCATION = re.compile(rb"\s*(\d+):")
_SPAN = re.compile(rb"\|(\d+)\|(\d+)")
_MESSAGE = re.compile(rb"\(errormsg (\d+):")


class EngineError(NamedTuple):
    """One error of rego-cpp: its module (file name), byte offset, and message."""

    file: str
    offset: int
    message: str


@functools.cache
def _engine() -> Any:
    """rego-cpp's C interface.  Its allocator (snmalloc) reserves 256 GiB of address
    space as the library loads, and fails under the worker's address-space limit: it
    is loaded outside it (bounded.reserved), once a process."""

    def load() -> Any:
        from regopy import rego_shared  # type: ignore[import-untyped]

        rego_shared.rego_free(rego_shared.rego_new())
        return rego_shared

    return reserved(load)


def _new(rego: Any) -> Any:
    """A new interpreter, silenced (it prints its errors on standard output otherwise;
    the process-wide default may be set only once, so each is set on its own)."""
    handle = rego.rego_new()
    rego.rego_set_log_level(handle, rego.LogLevel.NONE)
    return handle


def engine_errors(text: str) -> list[EngineError]:
    """rego-cpp's error sequence (an S-expression with length-prefixed strings)."""
    data = text.encode("utf-8", "replace")
    found: list[EngineError] = []
    for match in _ERROR.finditer(data):
        at = match.end()
        file, offset = "", -1
        location = _LOCATION.match(data, at)
        if location:
            start = location.end()
            end = start + int(location.group(1))
            file = data[start:end].decode("utf-8", "replace")
            span = _SPAN.match(data, end)
            if span:
                offset = int(span.group(1))
        message = _MESSAGE.search(data, at)
        if message is None:
            continue
        start = message.end()
        said = data[start:start + int(message.group(1))].decode("utf-8", "replace")
        if found and found[-1].message == said and found[-1].file == file and not file:
            continue
        found.append(EngineError(file, offset, said))
    if not found and text.strip():
        found.append(EngineError("", -1, " ".join(text.split())[:300]))
    return found


def _place(text: str, offset: int) -> tuple[int, int]:
    """The line and column (1-based, characters) of a byte offset into ``text``."""
    if offset < 0:
        return 1, 1
    before = text.encode("utf-8")[:offset].decode("utf-8", "replace")
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


class _Module(NamedTuple):
    """A module as added to a batch: its text under its own package, and how to take
    that package's prefix off a column of its line."""

    name: str
    text: str
    package: str | None   # the package the module declares
    line: int = 0         # the package clause's line
    col: int = 0          # where the prefix was put
    prefix: str = ""

    def place(self, offset: int) -> tuple[int, int]:
        line, col = _place(self.text, offset)
        if line == self.line and col > self.col:
            col = max(self.col, col - len(self.prefix))
        return line, col



def _module(index: int, code: str, alone: bool) -> _Module:
    found = scan.package(code)
    if found is None:
        return _Module(f"m{index}.rego", code, None)
    path, first = found
    if alone:
        return _Module(f"m{index}.rego", code, path)
    prefix = f"govsync{index}."
    lines = code.split("\n")
    row = lines[first.line - 1]
    lines[first.line - 1] = row[:first.col - 1] + prefix + row[first.col - 1:]
    return _Module(f"m{index}.rego", "\n".join(lines), path, first.line, first.col, prefix)


def compile_modules(codes: Sequence[str], progress: Callable[[str], None] = lambda _: None,
                    *, calls: bool = True) -> list[list[CodeProblem]]:
    """Compile every module; for each, its errors (in its own lines and columns), and
    (``calls``) its calls of undefined functions."""
    out: list[list[CodeProblem]] = [[] for _ in codes]
    modules = {i: _module(i, code, len(codes) == 1) for i, code in enumerate(codes)}
    for i, module in modules.items():  # rego-cpp takes rules without one; OPA does not
        if module.package is None:
            out[i].append(CodeProblem(1, 1, "Rego: the module declares no package: start it "
                                            "with `package <path>`"))
    pending = [i for i in modules if not out[i]]
    rego = _engine()
    while pending:
        progress(f"compiling {len(pending)} module(s)")
        failed, unplaced = _build(rego, [modules[i] for i in pending])
        if unplaced and len(pending) > 1 and not failed:  # no module named: one at a time
            for i in pending:
                out[i].extend(compile_modules([codes[i]])[0])
            return out
        by_name = {modules[i].name: i for i in pending}
        for name, problems in failed.items():
            out[by_name[name]].extend(_distinct(problems))
        if unplaced and len(pending) == 1:
            out[pending[0]].extend(unplaced)
        if not failed:
            break
        pending = [i for i in pending if modules[i].name not in failed]
    if calls:
        for code, problems in zip(codes, out, strict=True):
            if not problems:
                problems.extend(undefined_functions(code))
    return out


def _build(rego: Any, modules: Sequence[_Module]
           ) -> tuple[dict[str, list[CodeProblem]], list[CodeProblem]]:
    """Add and build ``modules`` in one interpreter: (errors by module name, errors that
    name no module)."""
    handle = _new(rego)
    failed: dict[str, list[CodeProblem]] = {}
    unplaced: list[CodeProblem] = []
    by_name = {m.name: m for m in modules}
    try:
        for module in modules:
            try:
                rego.rego_add_module(handle, module.name, module.text)
            except rego.RegoError as exc:
                failed[module.name] = [_problem(e, by_name.get(e.file, module))
                                       for e in engine_errors(str(exc))]
        if failed:
            return failed, []
        rego.rego_set_query(handle, "x = 1")  # every module compiled, none planned
        try:
            bundle = rego.rego_build(handle)
        except rego.RegoError as exc:
            for error in engine_errors(str(exc)):
                named = by_name.get(error.file)
                if named is None:
                    unplaced.append(CodeProblem(1, 1, f"Rego: {error.message}"))
                else:
                    failed.setdefault(named.name, []).append(_problem(error, named))
            return failed, unplaced
        rego.rego_free_bundle(bundle)
        return failed, unplaced
    finally:
        rego.rego_free(handle)


def _distinct(problems: list[CodeProblem]) -> list[CodeProblem]:
    """Without the echo rego-cpp adds of an error at the module's start (an unclosed
    brace is said at the brace, then again at line 1)."""
    said = {p.message for p in problems if (p.line, p.col) != (1, 1)}
    return [p for p in problems if (p.line, p.col) != (1, 1) or p.message not in said]


def _problem(error: EngineError, module: _Module) -> CodeProblem:
    line, col = module.place(error.offset)
    return CodeProblem(line, col, f"Rego: {error.message}")


def undefined_functions(code: str) -> list[CodeProblem]:
    """Calls of a function that is neither the module's nor a built-in one: rego-cpp
    finds them only when such a call is evaluated; OPA's type checker, as it compiles."""
    found = scan.all_calls(code)
    own = {call.name for call, head in found if head}
    return [CodeProblem(call.line, call.col, (
                f"Rego: undefined function {call.name}"
                + (": a hook's result is input.hooks.<name>, not a function"
                   if call.name.startswith("hooks.") else "")))
            for call, head in found
            if not head and call.name not in own and not _builtin(call.name)]


@functools.lru_cache(maxsize=1024)
def _builtin(name: str) -> bool:
    rego = _engine()
    return bool(rego.rego_is_available_builtin(_asker(), name))


@functools.cache
def _asker() -> Any:
    """The interpreter that answers which functions are built in (kept: it holds nothing)."""
    return _new(_engine())


def compiled_plan(code: str) -> str:
    """The compiled module as text: rego-cpp's plan of its stage rules (OPA's
    intermediate representation, JSON), the ``ast`` a stored policy holds."""
    import json
    import tempfile

    rego = _engine()
    handle = _new(rego)
    try:
        rego.rego_add_module(handle, MODULE, code)
        found = scan.package(code)
        stages = {h.stage.value for h in scan.heads(code)}
        if found is None or not stages:
            rego.rego_set_query(handle, "x = 1")
        else:
            for stage in sorted(stages):
                rego.rego_add_entrypoint(handle, f"{found[0]}.{stage}".replace(".", "/"))
        bundle = rego.rego_build(handle)
        try:
            with tempfile.TemporaryDirectory(prefix="govsync-rego-") as folder:
                rego.rego_bundle_save(handle, folder, bundle)
                with open(os.path.join(folder, "plan.json"), encoding="utf-8") as fh:
                    plan = json.load(fh)
        finally:
            rego.rego_free_bundle(bundle)
    finally:
        rego.rego_free(handle)
    return json.dumps(plan, sort_keys=True, separators=(",", ":"))


def validity(code: str) -> Validity:
    """GetPolicyCodeValidity: whether ``code`` compiles, its compiled module, its error."""
    problems = compile_modules([code])[0]
    if problems:
        first = problems[0]
        return Validity(False, "", f"line {first.line}, column {first.col}: {first.message}",
                        tuple(problems))
    return Validity(True, compiled_plan(code))


def evaluate(code: str, stage: str, inputs: Sequence[Any], data: Mapping[str, Any],
             now_ns: int | None, progress: Callable[[str], None] = lambda _: None,
             ) -> list[Evaluation]:
    """``stage``'s rule of ``code`` on each input, compiled once."""
    import json

    found = scan.package(code)
    if found is None:
        return [Evaluation(error="the module declares no package")] * len(inputs)
    problems = compile_modules([code])[0]
    if problems:
        first = problems[0]
        error = f"the code does not compile: line {first.line}, column {first.col}: " \
                f"{first.message}"
        return [Evaluation(error=error)] * len(inputs)
    rego = _engine()
    handle = _new(rego)
    entry = f"{found[0]}.{stage}".replace(".", "/")
    try:
        text = scan.fixed_now(code) if now_ns is not None else code
        rego.rego_add_module(handle, MODULE, text)
        base = dict(data)
        if now_ns is not None:
            base[scan.NOW_DATA.split(".", 1)[1]] = now_ns
        rego.rego_add_data_json(handle, json.dumps(base))
        rego.rego_add_entrypoint(handle, entry)
        bundle = rego.rego_build(handle)
        try:
            progress(f"evaluating {len(inputs)} input(s)")  # one step: each is a record
            out = []
            for item in inputs:
                rego.rego_set_input_term(handle, json.dumps(item))
                out.append(_answer(rego, rego.rego_bundle_query_entrypoint(
                    handle, bundle, entry)))
            return out
        finally:
            rego.rego_free_bundle(bundle)
    except rego.RegoError as exc:
        return [Evaluation(error=_said(str(exc)))] * len(inputs)
    finally:
        rego.rego_free(handle)


def _answer(rego: Any, output: Any) -> Evaluation:
    """An entrypoint's output: its value, undefined, or an error inside it."""
    import json

    try:
        text = rego.rego_output_string(output)
        if not rego.rego_output_ok(output):
            return Evaluation(error=_said(text))
    finally:
        rego.rego_free_output(output)
    if text.strip() == "undefined":
        return Evaluation()
    try:
        value = json.loads(text)
    except ValueError:
        return Evaluation(error=_said(text))
    results = value if isinstance(value, list) else [value]
    found = [r.get("expressions", [None])[0] for r in results if isinstance(r, dict)]
    found = [f for f in found if f is not None]
    if not found:
        return Evaluation()
    decision = found[0]
    if isinstance(decision, dict) and set(decision) == {"result"}:
        decision = decision["result"]
    return Evaluation(decision=decision)


def _said(text: str) -> str:
    errors = engine_errors(text)
    return "; ".join(f"Rego: {e.message}" for e in errors) or "Rego: evaluation failed"


class Decider:
    """A module's stage rules, for many decisions (a batch of test cases): compiled once,
    built once for each distinct ``data`` (rego-cpp takes data as it builds, 10 ms a
    build); a case's time is read from its input (``scan.NOW_INPUT``), so that cases at
    different times share one build.  The caller frees it (``close``)."""

    def __init__(self, code: str) -> None:
        self._rego = _engine()
        self._builds: dict[str, tuple[Any, Any]] = {}
        self.error: str | None = None
        found = scan.package(code)
        self._package = found[0] if found is not None else ""
        if found is None:
            self.error = "the module declares no package"
            return
        self._code = code
        text = scan.fixed_now(code, scan.NOW_INPUT)
        # Loaders' data is a case's own: read from its input where every use is written
        # ``data.<key>`` (one build for every case), else built in for each distinct data.
        moved = _data_from_input(text)
        self._text = moved if moved is not None else text
        self._data_in_input = moved is not None
        self._entries = {h.stage.value for h in scan.heads(code)}

    def decide(self, stage: str, item: Mapping[str, Any], data: Mapping[str, Any],
               now_ns: int) -> Evaluation:
        """``stage``'s value for one input (None: undefined), at ``now_ns``."""
        import json

        if self.error is not None:
            return Evaluation(error=self.error)
        if not self._builds and not self._compiles():
            return Evaluation(error=self.error)
        if stage not in self._entries:  # a rule the module does not define: undefined
            return Evaluation()
        key = "{}" if self._data_in_input else json.dumps(data, sort_keys=True)
        rego = self._rego
        extra = {DATA_KEY: dict(data)} if self._data_in_input else {}
        try:
            handle, bundle = self._builds.get(key) or self._build(key)
            rego.rego_set_input_term(handle, json.dumps({**item, NOW_KEY: now_ns,
                                                         **extra}))
            entry = f"{self._package}.{stage}".replace(".", "/")
            return _answer(rego, rego.rego_bundle_query_entrypoint(handle, bundle, entry))
        except rego.RegoError as exc:
            return Evaluation(error=_said(str(exc)))

    def _compiles(self) -> bool:
        """Whether the module builds (its first build is kept); else ``error`` says why,
        with its place in the code as written (the engine's errors, and calls of
        undefined functions, which rego-cpp finds only when one is evaluated)."""
        problems = undefined_functions(self._code)
        if not problems:
            try:
                self._build("{}")
                return True
            except self._rego.RegoError:
                problems = compile_modules([self._code])[0]
        first = problems[0] if problems else CodeProblem(1, 1, "Rego: the module does not build")
        self.error = (f"the code does not compile: line {first.line}, column {first.col}: "
                      f"{first.message}")
        return False

    def _build(self, key: str) -> tuple[Any, Any]:
        rego = self._rego
        handle = _new(rego)
        try:
            rego.rego_add_module(handle, MODULE, self._text)
            rego.rego_add_data_json(handle, key)
            for stage in sorted(self._entries):
                rego.rego_add_entrypoint(handle, f"{self._package}.{stage}".replace(".", "/"))
            bundle = rego.rego_build(handle)
        except BaseException:
            rego.rego_free(handle)
            raise
        self._builds[key] = (handle, bundle)
        return handle, bundle

    def close(self) -> None:
        for handle, bundle in self._builds.values():
            self._rego.rego_free_bundle(bundle)
            self._rego.rego_free(handle)
        self._builds.clear()


_DATA_IMPORT = re.compile(r"^[ \t]*import[ \t]+data\b", re.MULTILINE)


def _data_from_input(code: str) -> str | None:
    """The module with each ``data.<key>`` (a loader's data, not the module's own rules)
    reading ``input.__data.<key>``; None where a use is written otherwise (an import of
    data, ``data["key"]``), so that the data is built in instead."""
    uses = scan.data_uses(code)
    if not uses:
        return code
    if _DATA_IMPORT.search(code):
        return None
    lines = code.split("\n")
    for use in sorted(uses, key=lambda u: (u.line, u.col), reverse=True):
        row = lines[use.line - 1]
        start = use.col - 1 - len("data.")
        if start < 0 or row[start:use.col - 1] != "data.":
            return None
        lines[use.line - 1] = row[:start] + f"input.{DATA_KEY}." + row[use.col - 1:]
    return "\n".join(lines)
