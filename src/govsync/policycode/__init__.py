"""Policy and hook code understood by govsync (contract section 13, policy-code.md).

A Policy's and a Permission's ``code`` are Rego, a Hook's a JavaScript module.
stages.py holds what the service runs as data (stages, allowed actions,
packages); scan.py what can be read of Rego without an engine (cheap: the
loader reads hook uses for the dependency graph); rego.py and js.py the engines
(rego-cpp, V8), which run only in the bounded worker; checks.py validate's
checks; sandbox.py the entries that run them there.  The engines are imported
only inside the worker; the entries (``LAZY``) load when first asked for, so a
command whose manifests hold no code loads neither them nor the worker's module.

    check(sources) -> [CodeCheck]                 validate: compile, parse, stages
    validity(code) -> Validity                    GetPolicyCodeValidity
    evaluate(code, rule, input, hooks=, data=, now=) -> Evaluation
    evaluate_many(code, rule, inputs, data=, now=) -> [Evaluation]
    run_hook(code, input, env=, timeout_ms=) -> HookRun
    decide(codes, trials, hooks) -> [Verdict]     govsync test: a policy's cases, one call
"""

from typing import TYPE_CHECKING

from govsync.lazy import face
from govsync.policycode.scan import Use, data_uses, hook_uses
from govsync.policycode.stages import ACTIONS, PACKAGES, STAGES, Role, Stage

if TYPE_CHECKING:
    from govsync.policycode.checks import (
        MAX_CODE_CHARS,
        draft_hooks,
        unknown_data,
        unknown_hooks,
    )
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
    from govsync.policycode.sandbox import (
        check,
        decide,
        evaluate,
        evaluate_many,
        run_hook,
        validity,
        warm,
    )

LAZY = {
    "CodeCheck": "govsync.policycode.model",
    "CodeProblem": "govsync.policycode.model",
    "Evaluation": "govsync.policycode.model",
    "HookCode": "govsync.policycode.model",
    "HookRun": "govsync.policycode.model",
    "Trial": "govsync.policycode.model",
    "Verdict": "govsync.policycode.model",
    "Source": "govsync.policycode.model",
    "Validity": "govsync.policycode.model",
    "MAX_CODE_CHARS": "govsync.policycode.checks",
    "draft_hooks": "govsync.policycode.checks",
    "unknown_data": "govsync.policycode.checks",
    "unknown_hooks": "govsync.policycode.checks",
    "check": "govsync.policycode.sandbox",
    "decide": "govsync.policycode.sandbox",
    "evaluate": "govsync.policycode.sandbox",
    "evaluate_many": "govsync.policycode.sandbox",
    "run_hook": "govsync.policycode.sandbox",
    "validity": "govsync.policycode.sandbox",
    "warm": "govsync.policycode.sandbox",
}
__getattr__, __dir__ = face(__name__, LAZY)

__all__ = [
    "ACTIONS",
    "MAX_CODE_CHARS",
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
    "check",
    "data_uses",
    "decide",
    "draft_hooks",
    "evaluate",
    "evaluate_many",
    "hook_uses",
    "run_hook",
    "unknown_data",
    "unknown_hooks",
    "validity",
    "warm",
]
