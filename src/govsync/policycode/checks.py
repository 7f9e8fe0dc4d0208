"""The checks of ``validate`` on code (contract section 13), in the bounded worker:
each Policy's and Permission's Rego compiled (rego.py), each Hook's module parsed
and loaded (js.py), and what can be seen without running it (scan.py): a policy
defines a stage rule, each literal ``action`` is one its stage allows (stages.py).
Which hooks and data keys a policy's code names is checked against the manifests
by the caller (``unknown_hooks``, ``unknown_data``): they are the manifests' facts.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from govsync.policycode import js, rego, scan
from govsync.policycode.model import CodeCheck, CodeProblem, Source
from govsync.policycode.stages import ACTIONS, PACKAGES, Role, Stage

# Code longer than this is not given to an engine: the service's own limit is not
# published, and a manifest file holds at most 10 MiB.
MAX_CODE_CHARS = 1024 * 1024


def too_large(code: str) -> CodeProblem | None:
    if len(code) <= MAX_CODE_CHARS:
        return None
    return CodeProblem(1, 1, f"the code is {len(code) / (1024 * 1024):.1f} MiB: govsync "
                             f"checks and runs code of at most "
                             f"{MAX_CODE_CHARS // (1024 * 1024)} MiB")


def check_sources(progress: Callable[[str], None], sources: Sequence[Source],
                  keys: Collection[str] | None = None, drafts: Collection[str] = ()
                  ) -> list[CodeCheck]:
    """Every source checked (in the worker): its problems, and a policy's stage rules;
    where ``keys`` are given, a policy's ``data.<key>`` that none names is a warning,
    and so is its ``input.hooks.<name>`` of a hook in ``drafts``."""
    problems: list[list[CodeProblem]] = [[] for _ in sources]
    for i, source in enumerate(sources):
        large = too_large(source.code)
        if large is not None:
            problems[i].append(large)
    rego_at = [i for i, s in enumerate(sources) if s.role is not Role.HOOK and not problems[i]]
    if rego_at:
        compiled = rego.compile_modules([sources[i].code for i in rego_at], progress,
                                        calls=False)
        for i, found in zip(rego_at, compiled, strict=True):
            problems[i].extend(found)
    # One step for the rest (each step is a record the caller reads: not one a source).
    progress(f"checking {len(sources)} source(s)")
    out: list[CodeCheck] = []
    for i, source in enumerate(sources):
        stages: tuple[str, ...] = ()
        if source.role is Role.HOOK:
            if not problems[i]:
                problems[i].extend(js.check(source.code))
        elif not problems[i]:
            problems[i].extend(rego.undefined_functions(source.code))
            found, stages = rego_findings(source)
            problems[i].extend(found)
            if source.role is Role.POLICY and not any(not p.warning for p in problems[i]):
                if keys is not None:
                    problems[i].extend(unknown_data(source.code, keys))
                problems[i].extend(draft_hooks(source.code, drafts))
        out.append(CodeCheck(tuple(sorted(problems[i])), stages))
    return out


def rego_findings(source: Source) -> tuple[list[CodeProblem], tuple[str, ...]]:
    """What can be seen in Rego that compiles: its package, and a policy's stages."""
    found: list[CodeProblem] = []
    package = scan.package(source.code)
    if package is None:  # said by rego.compile_modules
        return [], ()
    expected = PACKAGES[source.role]
    if package[0] != expected:
        found.append(CodeProblem(package[1].line, package[1].col, (
            f"Rego: package {package[0]}: the service evaluates a {source.role}'s code in "
            f"package {expected}"), warning=True))
    if source.role is not Role.POLICY:
        return found, ()
    heads = scan.heads(source.code)
    stages = tuple(sorted({h.stage.value for h in heads}))
    if not stages:
        names = ", ".join(s.value for s in Stage)
        found.append(CodeProblem(package[1].line, package[1].col, (
            f"the policy defines none of the stage rules {names}: the service would never "
            "apply it (a stage rule's value is a decision such as {\"action\": \"block\"})")))
    for head in heads:
        allowed = ACTIONS[head.stage.value]
        if head.action is not None and head.action not in allowed:
            found.append(CodeProblem(head.action_line, head.action_col, (
                f"action {head.action!r} is not one the {head.stage.value} stage allows "
                f"({', '.join(allowed)})")))
    return found, stages


def unknown_hooks(code: str, hooks: Collection[str]) -> list[CodeProblem]:
    """Each ``input.hooks.<name>`` that names no hook of ``hooks`` (an error)."""
    return [CodeProblem(u.line, u.col, f"input.hooks.{u.name} names Hook/{u.name}, which no "
                                       "manifest defines")
            for u in scan.hook_uses(code) if u.name not in hooks]


def unknown_data(code: str, keys: Collection[str]) -> list[CodeProblem]:
    """Each ``data.<key>`` that no policy data loader loads (a warning: data may come from
    elsewhere)."""
    return [CodeProblem(u.line, u.col, f"data.{u.name}: no PolicyDataLoader of the manifests "
                                       f"has key {u.name}", warning=True)
            for u in scan.data_uses(code) if u.name not in keys]


def draft_hooks(code: str, drafts: Collection[str]) -> list[CodeProblem]:
    """Each ``input.hooks.<name>`` of a hook whose status is draft (a warning: the service
    passes only active hooks' results, so the policy reads nothing there)."""
    return [CodeProblem(u.line, u.col, (
                f"input.hooks.{u.name}: Hook/{u.name} is a draft, and the service passes "
                "only active hooks' results: it is undefined here until the hook is active"),
                warning=True)
            for u in scan.hook_uses(code) if u.name in drafts]
