"""The dependency graph as Mermaid or Graphviz DOT, whole or only what a plan changes.

An edge ``A --> B`` means A comes first: B references A (``spaceRef``...)
or lists it in ``metadata.dependsOn``, so apply creates A before B.  In a
plan's graph each node is coloured by its action (create green, update
yellow, replace orange, delete dark red, forget light grey, blocked red, orphan
magenta, uncertain cyan); ``LEGEND`` is the order a legend lists them in.

Names are user data: Mermaid node ids are generated (``n0``, ``n1``...) and
labels quoted with Mermaid's entity codes; DOT ids are quoted and escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from govsync.graph import dependencies
from govsync.manifests.manifest import Manifest
from govsync.plan import Action, Plan

# Fill, stroke and text colours per action (GitHub's light palette).
COLOURS: dict[Action, tuple[str, str, str]] = {
    Action.CREATE: ("#dafbe1", "#1a7f37", "#0f3d1c"),
    Action.UPDATE: ("#fff8c5", "#9a6700", "#4d2d00"),
    Action.BLOCKED: ("#ffebe9", "#cf222e", "#82071e"),
    Action.ORPHAN: ("#fbefff", "#8250df", "#3e1f79"),
    Action.UNCERTAIN: ("#ddf4ff", "#0969da", "#0a3069"),
    Action.DELETE: ("#ffebe9", "#a40e26", "#5c0011"),
    Action.REPLACE: ("#fff1e5", "#bc4c00", "#5c2200"),
    Action.FORGET: ("#f6f8fa", "#6e7781", "#24292f"),
    Action.NOOP: ("#f6f8fa", "#8c959f", "#24292f"),
}
FORMATS = ("mermaid", "dot")
# The actions a graph's legend names, in its order (the dashboard's badges: app.css
# styles an ``a-<action>`` class for each, badge and graph node alike).
LEGEND: tuple[Action, ...] = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE,
                              Action.FORGET, Action.BLOCKED, Action.ORPHAN, Action.UNCERTAIN)


@dataclass
class Graph:
    """Addresses (with their plan action, if any) and edges (first, then)."""

    nodes: dict[str, Action | None] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)


def dependency_graph(objects: Mapping[str, Manifest]) -> Graph:
    """Every object and every dependency among them."""
    return Graph(
        dict.fromkeys(sorted(objects)),
        {(dep, address) for address, manifest in objects.items()
         for dep in dependencies(manifest) if dep in objects},
    )


def change_graph(plan: Plan, objects: Mapping[str, Manifest] | None = None) -> Graph:
    """The plan's changes (no-ops left out), coloured by action.

    With the manifests, two changes are linked when one depends on the other,
    directly or through unchanged objects; without them (a saved plan, the
    Markdown comment), by what apply waits for (``Change.after``)."""
    nodes: dict[str, Action | None] = {
        c.address: c.action for c in plan.changes if c.action != Action.NOOP}
    edges: set[tuple[str, str]] = set()
    if objects is None:
        for c in plan.changes:
            if c.address in nodes:
                edges |= {(dep, c.address) for dep in c.after if dep in nodes}
        return Graph(nodes, edges)
    for address in nodes:
        manifest = objects.get(address)
        if manifest is not None:
            edges |= {(dep, address) for dep in _changed_dependencies(manifest, objects, nodes)}
    return Graph(nodes, edges)


def _changed_dependencies(manifest: Manifest, objects: Mapping[str, Manifest],
                          changed: Mapping[str, Action | None]) -> set[str]:
    """The nearest changed objects ``manifest`` depends on, looking through unchanged ones."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = list(dependencies(manifest))
    while todo:
        address = todo.pop()
        if address in seen or address not in objects:
            continue
        seen.add(address)
        if address in changed:
            found.add(address)
        else:
            todo.extend(dependencies(objects[address]))
    return found


def render(graph: Graph, fmt: str) -> str:
    return mermaid(graph) if fmt == "mermaid" else dot(graph)


def _label(address: str, action: Action | None) -> str:
    return address if action is None else f"{address} ({action})"


def _mermaid_text(text: str) -> str:
    """A label inside ``["..."]``: quotes, entity starts, fences and tags as entity codes."""
    return (text.replace("#", "#35;").replace('"', "#quot;").replace("`", "#96;")
            .replace("<", "#lt;").replace(">", "#gt;").replace("\n", " ").replace("\r", " "))


def mermaid(graph: Graph) -> str:
    """A Mermaid ``flowchart LR``, one node per address, classes per action."""
    ids = {address: f"n{i}" for i, address in enumerate(sorted(graph.nodes))}
    lines = ["flowchart LR"]
    for address, node in ids.items():
        lines.append(f'  {node}["{_mermaid_text(_label(address, graph.nodes[address]))}"]')
    for first, then in sorted(graph.edges):
        lines.append(f"  {ids[first]} --> {ids[then]}")
    for action in COLOURS:
        members = [ids[a] for a in ids if graph.nodes[a] == action]
        if members:
            fill, stroke, colour = COLOURS[action]
            name = _class_name(action)
            lines.append(f"  classDef {name} fill:{fill},stroke:{stroke},color:{colour}")
            lines.append(f"  class {','.join(members)} {name}")
    return "\n".join(lines) + "\n"


def _class_name(action: Action) -> str:
    return action.value.replace("-", "")


def _dot_id(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(graph: Graph) -> str:
    """A Graphviz ``digraph``, quoted ids, filled boxes per action."""
    lines = ["digraph govsync {", "  rankdir=LR;",
             '  node [shape=box, style="rounded,filled", fillcolor="white"];']
    for address in sorted(graph.nodes):
        action = graph.nodes[address]
        attrs = ""
        if action is not None:
            fill, stroke, colour = COLOURS[action]
            attrs = (f' [label={_dot_id(_label(address, action))}, fillcolor="{fill}", '
                     f'color="{stroke}", fontcolor="{colour}"]')
        lines.append(f"  {_dot_id(address)}{attrs};")
    for first, then in sorted(graph.edges):
        lines.append(f"  {_dot_id(first)} -> {_dot_id(then)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def legend(actions: Iterable[Action]) -> str:
    """``create green, update yellow...`` for the actions present."""
    names = {Action.CREATE: "green", Action.UPDATE: "yellow", Action.BLOCKED: "red",
             Action.ORPHAN: "magenta", Action.UNCERTAIN: "cyan", Action.DELETE: "dark red",
             Action.REPLACE: "orange", Action.FORGET: "light grey", Action.NOOP: "grey"}
    present = set(actions)
    return ", ".join(f"{a} {names[a]}" for a in COLOURS if a in present)
