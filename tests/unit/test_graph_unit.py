"""graph: dependency order with ties by address, and cycles named with their members."""

from __future__ import annotations

import pytest

from govsync import graph
from govsync.api.kinds import BY_KIND
from govsync.errors import GraphError
from govsync.manifests.manifest import Manifest


def manifest(address: str, line: int, *, refs: dict[str, str] | None = None,
             depends_on: list[str] | None = None) -> Manifest:
    """A manifest at ``objects.yaml:LINE``; each reference field and each dependsOn
    entry sits on the lines below it, in the order given."""
    kind, name = address.split("/")
    fields = [f"spec.{f}" for f in refs or {}] + [
        f"metadata.dependsOn.{i}" for i in range(len(depends_on or []))]
    return Manifest(
        kind=BY_KIND[kind], name=name, file="objects.yaml", line=line, col=1, template={},
        refs=list((refs or {}).items()), depends_on=list(depends_on or []),
        positions={f: (line + 1 + i, 5) for i, f in enumerate(fields)})


def objects(*manifests: Manifest) -> dict[str, Manifest]:
    return {m.address: m for m in manifests}


def test_order_puts_dependencies_first_and_ties_by_address() -> None:
    given = [
        manifest("Connector/c", 1, refs={"spaceRef": "Space/b"}),
        manifest("Space/b", 10),
        manifest("ConnectorAIProvider/c-ai", 20, refs={"connectorRef": "Connector/c"}),
        manifest("Space/a", 30),
        manifest("Connector/a", 40, depends_on=["Hook/z"]),
        manifest("Hook/z", 50),
    ]
    expected = ["Hook/z", "Space/a", "Space/b",  # nothing to wait for
                "Connector/a", "Connector/c",   # wait for Hook/z, Space/b
                "ConnectorAIProvider/c-ai"]     # waits for Connector/c
    assert graph.order(objects(*given)) == expected
    assert graph.order(objects(*reversed(given))) == expected
    assert graph.order_or_cycles(objects(*given)) == (expected, [])
    assert graph.depth(objects(*given)) == 3


def test_dependencies_outside_the_objects_are_left_out() -> None:
    given = objects(manifest("Connector/c", 1, refs={"spaceRef": "Space/elsewhere"}),
                    manifest("Space/b", 10, depends_on=["Hook/elsewhere"]))
    assert graph.order(given) == ["Connector/c", "Space/b"]
    assert graph.cycle_problems(given) == []


def test_a_cycle_is_reported_once_per_member_at_the_field_that_closes_it() -> None:
    given = objects(
        manifest("Hook/c", 20, depends_on=["Hook/a"]),
        manifest("Hook/a", 1, depends_on=["Space/free", "Hook/b"]),
        manifest("Hook/b", 10, depends_on=["Hook/c"]),
        manifest("Space/free", 30),
    )
    order, problems = graph.order_or_cycles(given)
    assert order == []
    cycle = ("dependency cycle: Hook/a (objects.yaml:1) -> Hook/b (objects.yaml:10) -> "
             "Hook/c (objects.yaml:20) -> Hook/a (A -> B: A depends on B)")
    assert [str(p) for p in problems] == [
        f"objects.yaml:3:5: {cycle}; here metadata.dependsOn of Hook/a names Hook/b: "
        "remove one dependency of the cycle to break it",
        f"objects.yaml:11:5: {cycle}; here metadata.dependsOn of Hook/b names Hook/c: "
        "remove one dependency of the cycle to break it",
        f"objects.yaml:21:5: {cycle}; here metadata.dependsOn of Hook/c names Hook/a: "
        "remove one dependency of the cycle to break it",
    ]
    with pytest.raises(GraphError) as caught:
        graph.order(given)
    assert caught.value.problems == problems


def test_every_cycle_is_reported_with_only_its_members() -> None:
    given = objects(
        manifest("Space/loop", 1, depends_on=["Space/loop"]),
        manifest("Connector/x", 10, refs={"spaceRef": "Space/y"}),
        manifest("Space/y", 20, depends_on=["Connector/x"]),
        manifest("Hook/outside", 30, depends_on=["Space/y"]),
    )
    problems = graph.cycle_problems(given)
    assert [(p.line, p.message.split(";")[0]) for p in problems] == [
        (11, "dependency cycle: Connector/x (objects.yaml:10) -> Space/y (objects.yaml:20) "
             "-> Connector/x (A -> B: A depends on B)"),
        (21, "dependency cycle: Connector/x (objects.yaml:10) -> Space/y (objects.yaml:20) "
             "-> Connector/x (A -> B: A depends on B)"),
        (2, "dependency cycle: Space/loop (objects.yaml:1) -> Space/loop "
            "(A -> B: A depends on B)"),
    ]
    assert "here spec.spaceRef of Connector/x names Space/y" in problems[0].message
    assert not [p for p in problems if "Hook/outside" in p.message]
