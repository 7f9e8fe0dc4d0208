"""A manifest's code (a Policy's, Permission's or Hook's ``spec.code``): where its
lines are in the file, and validate's checks of it with their places there.

A block scalar's content starts on the line after its ``code: |`` indicator, each
line indented alike: line L, column C of the code is the file's line (first
content line + L - 1), column (indent + C).  Code written otherwise (one quoted
line, a folded scalar, a variable, a patch's value) is pointed at where its value
starts, and the message says the line and column within the code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from yaml.nodes import MappingNode, Node, ScalarNode

from govsync import policycode
from govsync.api.kinds import HOOK_KIND
from govsync.errors import Problem
from govsync.manifests.manifest import Manifest, document_root
from govsync.manifests.yamlio import read_text
from govsync.policycode import CodeProblem, hook_uses

FIELD = "code"


class Placed(NamedTuple):
    """How the code's lines map onto the file: exactly (``exact``), or only its start."""

    file: str
    line: int     # the file's line of the code's line 1
    col: int      # the file's column of the code's column 1, less 1
    exact: bool


def placed(manifest: Manifest) -> Placed:
    """Where ``spec.code`` of ``manifest`` lies in its file."""
    file, line, col = manifest.where(f"spec.{FIELD}")
    if manifest.patched and FIELD in manifest.patched:
        return Placed(file, line, col - 1, False)
    code = manifest.template.get(FIELD)
    root = document_root(manifest.source, manifest.file, manifest.index)
    node = _node(root, ("spec", FIELD)) if root is not None else None
    if not isinstance(node, ScalarNode) or node.value != code or not isinstance(code, str):
        return Placed(file, line, col - 1, False)
    if node.style == "|":
        return Placed(file, node.start_mark.line + 2, _indent(manifest, node), True)
    if "\n" not in code and node.start_mark.line == node.end_mark.line:
        quoted = 1 if node.style in ("'", '"') else 0
        return Placed(file, line, col - 1 + quoted, node.style != '"')
    return Placed(file, line, col - 1, False)


def _node(root: Node, path: tuple[str, ...]) -> Node | None:
    node: Node | None = root
    for step in path:
        if not isinstance(node, MappingNode):
            return None
        node = next((v for k, v in node.value
                     if isinstance(k, ScalarNode) and k.value == step), None)
    return node


def _indent(manifest: Manifest, node: ScalarNode) -> int:
    """A literal block's indentation: its first content line's, where it has text."""
    text, _ = read_text(manifest.source, manifest.file)
    rows = (text or "").split("\n")
    for row in rows[node.start_mark.line + 1:node.end_mark.line + 1]:
        if row.strip():
            return len(row) - len(row.lstrip(" "))
    return node.start_mark.column


def where(manifest: Manifest, found: CodeProblem) -> Problem:
    """A finding inside ``manifest``'s code, as a problem at its place in the file."""
    at = placed(manifest)
    if at.exact:
        return Problem(at.file, at.line + found.line - 1, at.col + found.col, found.message)
    return Problem(at.file, at.line, at.col + 1,
                   f"{found.message} (line {found.line}, column {found.col} of spec.code)")


def hook_problems(manifest: Manifest, address: str, message: str) -> list[Problem]:
    """A problem at each ``input.hooks.<name>`` of ``manifest``'s code that names
    ``address`` (``Hook/<name>``): ``message`` follows the use as written."""
    code = manifest.template.get(FIELD)
    if not isinstance(code, str):
        return []
    name = address.split("/", 1)[1]
    return [where(manifest, policycode.CodeProblem(u.line, u.col,
                                                   f"input.hooks.{name} {message}"))
            for u in hook_uses(code) if u.name == name]


def check_code(objects: Mapping[str, Manifest]) -> tuple[list[Problem], list[Problem]]:
    """validate's checks of every manifest's code, in the bounded worker: (errors,
    warnings), each at its place in its file."""
    coded = [(m, m.template[FIELD]) for m in objects.values()
             if m.kind.code is not None and isinstance(m.template.get(FIELD), str)]
    if not coded:
        return [], []
    keys = {str(m.template[m.kind.loads]) for m in objects.values()
            if m.kind.loads and isinstance(m.template.get(m.kind.loads), str)}
    drafts = {m.name for m in objects.values()
              if m.kind.name == HOOK_KIND and m.template.get("status") == "draft"}
    # The worker's module loads here, for manifests with code only.
    from govsync.policycode import sandbox

    reports = sandbox.check([policycode.Source(m.kind.code, code)
                             for m, code in coded if m.kind.code],
                            keys=keys, drafts=drafts)
    errors: list[Problem] = []
    warnings: list[Problem] = []
    for (manifest, _), report in zip(coded, reports, strict=True):
        for problem in report.problems:
            (warnings if problem.warning else errors).append(where(manifest, problem))
    return errors, [Problem(p.file, p.line, p.col, f"warning: {p.message}") for p in warnings]
