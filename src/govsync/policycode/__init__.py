"""Policy and hook code understood by govsync (contract section 13, policy-code.md).

A Policy's and a Permission's ``code`` are Rego, a Hook's a JavaScript module.
stages.py holds what the service runs as data (stages, allowed actions,
packages); scan.py what can be read of Rego without an engine (cheap: the
loader reads hook uses for the dependency graph); rego.py and js.py the engines
(rego-cpp, V8), which run only in the bounded worker; checks.py validate's
checks; sandbox.py the entries that run them there.  The engines are imported
only inside the worker; the entries are sandbox.py's, imported by what runs code, so
a command whose manifests hold no code loads neither them nor the worker's module.

    sandbox.check(sources) -> [CodeCheck]                 validate: compile, parse, stages
    validity(code) -> Validity                    GetPolicyCodeValidity
    evaluate(code, rule, input, hooks=, data=, now=) -> Evaluation
    evaluate_many(code, rule, inputs, data=, now=) -> [Evaluation]
    evaluate_staged(code, [(stage, input)], worker=) -> [Evaluation]   impact reports
    run_hook(code, input, env=, timeout_ms=) -> HookRun
    decide(codes, trials, hooks) -> [Verdict]     govsync test: a policy's cases, one call
"""

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
from govsync.policycode.scan import Use, data_uses, hook_uses
from govsync.policycode.stages import ACTIONS, PACKAGES, STAGES, Role, Stage

# The entries that run code (check, decide, evaluate, evaluate_many, evaluate_staged, run_hook,
# validity, warm) are sandbox.py's, and validate's checks (MAX_CODE_CHARS,
# draft_hooks, unknown_data, unknown_hooks) checks.py's: imported from there by what
# runs code, so a command whose manifests hold none loads neither.
__all__ = [
    "ACTIONS",
    "PACKAGES",
    "STAGES",
    "CodeCheck",
    "CodeProblem",
    "Evaluation",
    "HookCode",
    "HookRun",
    "Role",
    "Source",
    "Stage",
    "Trial",
    "Use",
    "Validity",
    "Verdict",
    "data_uses",
    "hook_uses",
]
