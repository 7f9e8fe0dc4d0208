"""render/svg.py: the graph laid out by depth, drawn as SVG."""

from __future__ import annotations

import re

from govsync.plan import Action
from govsync.render.graph import Graph
from govsync.render.svg import COLUMN, graph_svg, layers, layout


def chain(n: int) -> Graph:
    nodes = {f"Hook/h{i}": None for i in range(n)}
    return Graph(nodes, {(f"Hook/h{i}", f"Hook/h{i + 1}") for i in range(n - 1)})


def test_each_object_comes_after_what_it_depends_on() -> None:
    graph = Graph({"Space/a": None, "Connector/b": Action.CREATE, "Hook/c": None,
                   "ConnectorAIProvider/d": None},
                  {("Space/a", "Connector/b"), ("Connector/b", "ConnectorAIProvider/d")})
    assert layers(graph) == [["Hook/c", "Space/a"], ["Connector/b"], ["ConnectorAIProvider/d"]]
    drawn = layout(graph)
    for first, then in graph.edges:
        assert drawn.x[first] < drawn.x[then]


def test_10000_objects_wrap_into_columns_about_as_wide_as_tall() -> None:
    graph = Graph({f"Hook/h{i:05d}": None for i in range(10_000)}, set())
    drawn = layout(graph)
    assert 0.8 < drawn.width / drawn.height < 3, (drawn.width, drawn.height)
    assert len(set(drawn.x.values())) == (drawn.width + 80 - 40) // COLUMN


def test_names_are_escaped_and_edges_are_one_path() -> None:
    graph = Graph({"Hook/<b>x</b>": Action.UPDATE, "Policy/p&q": None},
                  {("Hook/<b>x</b>", "Policy/p&q")})
    svg = graph_svg(graph, node_url="/g", selected="Policy/p&q")
    assert "<b>" not in svg and "&lt;b&gt;x&lt;/b&gt;" in svg
    assert svg.count('<path class="edges"') == 1
    assert 'href="/g?node=Policy%2Fp%26q"' in svg
    assert 'data-selected="Policy/p&amp;q"' in svg
    data = re.search(r'<script type="application/json" class="graph-data">(.*?)</script>', svg)
    assert data and "<" not in data.group(1) and "\\u003cb\\u003e" in data.group(1)
    assert len(chain(30).edges) == 29 and graph_svg(chain(30)).count("<g class=\"n\"") == 30
