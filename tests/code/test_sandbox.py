"""The engines run as guests (policycode.sandbox): Rego or JavaScript that loops,
crashes its engine, eats memory or asks for the network is that call's error, and
govsync (this process) goes on: the next call works."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from govsync import policycode
from govsync.policycode import sandbox

ALLOW = 'package formal.v2\n\nimport future.keywords.if\n\nsession := {"action": "allow"} if true\n'


def still_works() -> None:
    assert sandbox.evaluate(ALLOW, "session", {}).decision == {"action": "allow"}


def test_a_rego_evaluation_that_never_ends_is_stopped_at_its_deadline() -> None:
    endless = ('package formal.v2\n\nimport future.keywords.in\n\n'
               'session := {"action": "allow", "n": count([x | some x in '
               'numbers.range(1, 100000000000)])}\n')
    started = time.monotonic()
    found = sandbox.evaluate(endless, "session", {}, seconds=2)
    assert time.monotonic() - started < 10
    assert found.decision is None and found.error is not None
    assert found.error.startswith("the Rego engine was stopped: it crashed or went over")
    still_works()


def test_a_crash_of_the_rego_engine_is_an_answer() -> None:
    deep = "package formal.v2\n\nsession := " + "[" * 100_000 + "]" * 100_000 + "\n"
    validity = sandbox.validity(deep)
    assert validity.valid is False and validity.ast == ""
    assert validity.error.startswith("the Rego engine was stopped")
    still_works()


def test_code_of_100_mb_is_refused_before_any_engine_sees_it() -> None:
    huge = ALLOW + "#" * (100 * 1024 * 1024)
    started = time.monotonic()
    assert sandbox.validity(huge).error == ("the code is 100.0 MiB: govsync checks and "
                                               "runs code of at most 1 MiB")
    assert sandbox.evaluate(huge, "session", {}).error is not None
    assert sandbox.run_hook(huge, {}).error is not None
    assert time.monotonic() - started < 5


def test_validity_gives_the_error_with_its_line_or_the_compiled_module() -> None:
    bad = sandbox.validity('package formal.v2\n\nsession := {"action": "allow"\n')
    assert bad.valid is False and bad.error == "line 3, column 12: Rego: this is unclosed"
    good = sandbox.validity(ALLOW)
    assert good.valid and good.error == "" and '"formal/v2/session"' in good.ast


def test_one_module_evaluates_over_many_inputs() -> None:
    code = ('package formal.v2\n\nimport future.keywords.if\n\n'
            'pre_request := {"action": "block"} if input.n % 2 == 1\n')
    started = time.monotonic()
    found = sandbox.evaluate_many(code, "pre_request", [{"n": n} for n in range(2000)])
    assert time.monotonic() - started < 10
    assert [f.decision for f in found[:3]] == [None, {"action": "block"}, None]
    assert sum(f.defined for f in found) == 1000 and not any(f.error for f in found)


def test_a_runtime_error_of_one_input_is_that_inputs() -> None:
    code = ('package formal.v2\n\nimport future.keywords.if\n\n'
            'session := {"action": "block", "n": to_number(input.n)} if true\n')
    found = sandbox.evaluate_many(code, "session", [{"n": "7"}, {"n": "seven"}])
    assert found[0].decision == {"action": "block", "n": 7}
    assert found[1].decision is None


def test_hooks_run_with_their_input_and_env() -> None:
    code = ("export default async function hook(input, env) {\n"
            "  return {user: input.user, region: env.REGION ?? null};\n}\n")
    run = sandbox.run_hook(code, {"user": "ana"}, env={"REGION": "eu"}, timeout_ms=1000)
    assert run.error is None and run.value == {"user": "ana", "region": "eu"}
    assert sandbox.run_hook(code, {"user": "ana"}).value == {"user": "ana", "region": None}


def test_a_hook_that_never_returns_is_stopped_after_its_timeout() -> None:
    for code in ("export default function hook() { while (true) {} }",
                 "export default async function hook() { await null; while (true) {} }",
                 "export default function hook() { return new Promise(() => {}) }"):
        started = time.monotonic()
        run = sandbox.run_hook(code, {}, timeout_ms=300)
        assert time.monotonic() - started < 10
        assert run.error == "the hook did not return within its timeoutMs (300 ms)", code
    still_works()


def test_a_hook_that_eats_memory_is_stopped() -> None:
    heap = ("export default function hook() {\n  const a = [];\n"
            "  while (true) a.push(new Array(1e6).fill(1.5));\n}\n")
    assert sandbox.run_hook(heap, {}, timeout_ms=20000).error == (
        "the hook went over 256 MiB of memory")
    still_works()


def test_a_hook_that_eats_memory_outside_the_heap_is_stopped() -> None:
    # Array buffers live outside V8's heap: the worker's resident size is watched.
    buffers = ("export default function hook() {\n  const kept = [];\n"
               "  for (;;) { const b = new Uint8Array(1e8); b.fill(1); kept.push(b); }\n}\n")
    run = sandbox.run_hook(buffers, {}, timeout_ms=20000)
    assert run.error is not None and "MiB" in run.error, run.error
    still_works()


def test_a_hook_has_no_network_modules_or_process() -> None:
    for call in ("fetch('http://127.0.0.1/')", "require('fs')", "process.env"):
        code = f"export default async function hook() {{ return await {call}; }}"
        run = sandbox.run_hook(code, {}, timeout_ms=1000)
        assert run.error is not None and "is not defined" in run.error, run.error
        assert "without network, modules or process" in run.error
    imports = sandbox.run_hook("import fs from 'fs';\nexport default function h() {}", {})
    assert imports.error is not None and "import is not available" in imports.error


def test_the_engines_print_nothing_of_their_own(tmp_path: Path) -> None:
    """rego-cpp prints its errors on standard output unless silenced: validate's
    output is govsync's lines only."""
    (tmp_path / "m.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n"
        "  userEmail: carol@northwind.example\n  code: |\n    package formal.v2\n"
        '    session := {"action": "allow"\n')
    done = subprocess.run([sys.executable, "-m", "govsync", "validate", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{tmp_path / 'm.yaml'}:8:16: Rego: this is unclosed",
        "1 error; nothing was sent and the state is untouched."]


def test_a_check_of_one_source_that_crashes_its_engine_is_that_sources_error() -> None:
    deep = "package formal.v2\n\nsession := " + "[" * 100_000 + "]" * 100_000 + "\n"
    [found] = sandbox.check([policycode.Source(policycode.Role.POLICY, deep)])
    [problem] = found.errors
    assert problem.message.startswith("the Rego engine was stopped")
    still_works()


def test_a_large_batch_is_shared_out_and_comes_back_in_order() -> None:
    """Above 250 sources a share, the batch runs in one worker a core, side by side."""
    sources = [policycode.Source(policycode.Role.POLICY, ALLOW.replace('"allow"', f'"{a}"'))
               for a in ("allow", "mask") * 300]
    found = sandbox.check(sources)
    assert len(found) == 600
    assert [bool(c.errors) for c in found] == [False, True] * 300
    assert all("'mask' is not one the session stage allows" in c.errors[0].message
               for c in found[1::2])
