"""The dependency graph of manifests.

An edge ``A -> B`` means A must exist before B: B references A by name
(``spaceRef``...) or lists it in ``metadata.dependsOn``.

Ordering uses the standard library's ``graphlib``: importing networkx takes
0.18 s, a third of planning 10,000 objects (BENCHMARKS.md), so networkx is
imported only where its algorithms earn it: to find and explain cycles, and
for graph analysis (depth) in tools.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from govsync.errors import GraphError, Problem

if TYPE_CHECKING:
    # (Not at run time: importing manifests/ runs its face, whose loader imports this.)
    import networkx as nx

    from govsync.manifests.manifest import Manifest



def dependencies(manifest: Manifest) -> Iterable[str]:
    for _, address in manifest.refs:
        yield address
    yield from manifest.uses
    yield from manifest.depends_on


def build(objects: Mapping[str, Manifest]) -> nx.DiGraph[str]:
    """The graph over ``objects``; edges to addresses outside it are left out."""
    import networkx as nx

    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from(objects)
    graph.add_edges_from(
        (dep, address)
        for address, manifest in objects.items()
        for dep in dependencies(manifest)
        if dep in objects
    )
    return graph


def cycle_problems(objects: Mapping[str, Manifest]) -> list[Problem]:
    """One problem per member of each dependency cycle, naming the whole cycle.

    Each member's problem points at its reference or dependsOn entry that
    closes the cycle, the line to change to break it.
    """
    import networkx as nx

    graph = build(objects)
    if nx.is_directed_acyclic_graph(graph):
        return []
    problems: list[Problem] = []
    for component in sorted(
        (sorted(c) for c in nx.strongly_connected_components(graph)
         if len(c) > 1 or graph.has_edge(next(iter(c)), next(iter(c)))),
    ):
        cycle = _cycle_in(graph.subgraph(component), component[0])
        members = [objects[a] for a in cycle]
        shown = " -> ".join(
            [f"{m.address} ({m.file}:{m.line})" for m in members] + [members[0].address]
        )
        for i, m in enumerate(members):
            needed = members[(i + 1) % len(members)].address
            field, (line, col) = _edge(m, needed)
            problems.append(Problem(
                m.file, line, col,
                f"dependency cycle: {shown} (A -> B: A depends on B); here {field} of "
                f"{m.address} names {needed}: remove one dependency of the cycle to break it",
            ))
    return problems


def _edge(manifest: Manifest, address: str) -> tuple[str, tuple[int, int]]:
    """The field of ``manifest`` that makes it depend on ``address``, and its place."""
    for ref_field, target in manifest.refs:
        if target == address:
            return f"spec.{ref_field}", manifest.where(f"spec.{ref_field}")[1:]
    for i, target in enumerate(manifest.depends_on):
        if target == address:
            return "metadata.dependsOn", manifest.where(f"metadata.dependsOn.{i}")[1:]
    if address in manifest.uses:
        return "spec.code", manifest.where("spec.code")[1:]
    return "a dependency", (manifest.line, manifest.col)  # pragma: no cover


def _cycle_in(graph: nx.DiGraph[str], start: str) -> list[str]:
    """The members of a cycle through ``start``, each depending on the next."""
    import networkx as nx

    edges = nx.find_cycle(graph, source=start)
    # An edge u -> v means v depends on u: reversed, each depends on the next.
    cycle = [v for _, v in reversed(edges)]
    first = cycle.index(min(cycle))  # start at the smallest address: stable output
    return cycle[first:] + cycle[:first]


def order_or_cycles(objects: Mapping[str, Manifest]) -> tuple[list[str], list[Problem]]:
    """Addresses in dependency order, or the cycles that prevent one.

    Objects come level by level (all whose dependencies are met), each level
    sorted by address, so the order is stable whatever the files' order.
    """

    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for address, manifest in objects.items():
        sorter.add(address, *(d for d in dependencies(manifest) if d in objects))
    try:
        sorter.prepare()
    except graphlib.CycleError:
        return [], cycle_problems(objects)
    out: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        out.extend(ready)
        sorter.done(*ready)
    return out, []


def order(objects: Mapping[str, Manifest]) -> list[str]:
    """Addresses in dependency order (see order_or_cycles)."""
    addresses, cycles = order_or_cycles(objects)
    if cycles:
        raise GraphError(cycles)
    return addresses


def depth(objects: Mapping[str, Manifest]) -> int:
    """Number of levels in the graph (longest path in nodes)."""
    import networkx as nx

    graph = build(objects)
    return nx.dag_longest_path_length(graph) + 1 if graph else 0
