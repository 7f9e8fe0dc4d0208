"""The dependency graph as SVG, laid out in Python: layers by dependency depth; and
small bar charts (a policy's impact over its window, ``bar_chart``).

An object's layer is the length of the longest chain of objects it depends on,
so every edge points right, from what comes first to what depends on it.  A
layer with more objects than fit in one column wraps into several, so that
10,000 objects make a picture about as wide as it is tall.  Within a layer,
objects are ordered by the mean position of what they depend on (one
barycentre pass, which untangles most edges), then by address.

The SVG is drawn once, by the server; the page's script only pans, zooms,
selects and searches (``ui/static/app.js``).  All edges are one ``<path>``,
so that panning 10,000 objects redraws two elements' worth of structure, not
20,000.  The graph's data for the script (addresses, actions, edges) travels in
a JSON block beside it.
"""

from __future__ import annotations

import graphlib
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from govsync.render.graph import Graph

NODE_WIDTH = 240
NODE_HEIGHT = 26
COLUMN = NODE_WIDTH + 80
ROW = NODE_HEIGHT + 10
MARGIN = 20
# Room above the first row for each layer's heading ("depth 2").
HEADING = 24
# A label is 12 px monospace (app.css, g.nodes text): 0.6 em a character, from 8 px
# inside the box's left edge to as far inside its right one.
LABEL_PAD = 8
CHAR_PX = 12 * 0.6
# Characters of an address that fit in a node (the whole address is its tooltip).
LABEL_CHARS = int((NODE_WIDTH - 2 * LABEL_PAD) / CHAR_PX)
# Width over height that wrapped layers aim at.
ASPECT = 1.6


@dataclass(frozen=True)
class Layout:
    """Where each address is drawn (its box's top-left corner) and the picture's size."""

    order: list[str]
    x: dict[str, int]
    y: dict[str, int]
    width: int
    height: int
    # The x of each layer's first column (its heading's place).
    starts: list[int]


def layers(graph: Graph) -> list[list[str]]:
    """Addresses by depth: each after every address it depends on (the edges' first)."""
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    before: dict[str, list[str]] = {a: [] for a in graph.nodes}
    for first, then in graph.edges:
        if first in before and then in before:
            before[then].append(first)
    for address, deps in before.items():
        sorter.add(address, *deps)
    depth: dict[str, int] = {}
    try:
        for address in sorter.static_order():
            depth[address] = 1 + max((depth[d] for d in before[address]), default=-1)
    except graphlib.CycleError:  # not from validated manifests; drawn flat all the same
        depth = dict.fromkeys(graph.nodes, 0)
    out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for address in sorted(depth):
        out[depth[address]].append(address)
    # One barycentre pass, left to right: near what they depend on.
    place: dict[str, float] = {a: i for i, a in enumerate(out[0])} if out else {}
    for layer in out[1:]:
        layer.sort(key=lambda a: (sum(place[d] for d in before[a]) / max(len(before[a]), 1),
                                  a))
        place.update((a, i) for i, a in enumerate(layer))
    return out


def layout(graph: Graph) -> Layout:
    stacked = layers(graph)
    count = len(graph.nodes)
    # Rows per column for a picture ASPECT times as wide as tall; at least the
    # tallest layer up to that, so small graphs keep one column per layer.
    rows = max(8, math.ceil(math.sqrt(count * COLUMN / (ASPECT * ROW))))
    x: dict[str, int] = {}
    y: dict[str, int] = {}
    order: list[str] = []
    column = 0
    tallest = 0
    starts = []
    for layer in stacked:
        starts.append(MARGIN + column * COLUMN)
        for i, address in enumerate(layer):
            x[address] = MARGIN + (column + i // rows) * COLUMN
            y[address] = MARGIN + HEADING + (i % rows) * ROW
            order.append(address)
        column += max(1, math.ceil(len(layer) / rows))
        tallest = max(tallest, min(len(layer), rows))
    return Layout(order, x, y, MARGIN * 2 + max(column, 1) * COLUMN - 80,
                  MARGIN * 2 + HEADING + max(tallest, 1) * ROW - 10, starts)


def _action(graph: Graph, address: str) -> str:
    action = graph.nodes[address]
    return action.value if action is not None else ""


def _label(address: str) -> str:
    return address if len(address) <= LABEL_CHARS else address[:LABEL_CHARS - 1] + "\u2026"


def graph_svg(graph: Graph, *, node_url: str = "", selected: str | None = None) -> str:
    """The graph as an ``<svg>`` (inside a figure with its data for the script).

    ``node_url``: each node links to it with ``node=ADDRESS`` (the page that says what
    the node depends on and what depends on it); without it, nodes are not links."""
    drawn = layout(graph)
    index = {a: i for i, a in enumerate(drawn.order)}
    half = NODE_HEIGHT // 2
    path = []
    edges = []
    for first, then in sorted(graph.edges):
        if first not in index or then not in index:
            continue
        x1, y1 = drawn.x[first] + NODE_WIDTH, drawn.y[first] + half
        x2, y2 = drawn.x[then], drawn.y[then] + half
        bend = max(30, (x2 - x1) // 2)
        path.append(f"M{x1} {y1}C{x1 + bend} {y1} {x2 - bend} {y2} {x2} {y2}")
        edges.append([index[first], index[then]])
    nodes = []
    for address in drawn.order:
        action = graph.nodes[address]
        cls = f"n a-{action.value}" if action is not None else "n"
        if address == selected:
            cls += " selected"
        x, y = drawn.x[address], drawn.y[address]
        label = _label(address)
        # A tooltip only where the label is cut: one element fewer per object to parse.
        tip = f"<title>{html.escape(address)}</title>" if label != address else ""
        body = (f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="4"/>'
                f'<text x="{x + LABEL_PAD}" y="{y + half + 4}">{html.escape(label)}</text>{tip}')
        if node_url:
            link = html.escape(f"{node_url}{'&' if '?' in node_url else '?'}node="
                               f"{quote(address, safe='')}")
            nodes.append(f'<a class="{cls}" href="{link}" tabindex="-1" data-i="{index[address]}">'
                         f"{body}</a>")
        else:
            nodes.append(f'<g class="{cls}" data-i="{index[address]}">{body}</g>')
    data = {"nodes": [[a, _action(graph, a), drawn.x[a], drawn.y[a]] for a in drawn.order],
            "edges": edges, "width": NODE_WIDTH, "height": NODE_HEIGHT}
    text = script_json(data)
    count = len(drawn.order)
    # With links to its nodes it is a group of them, not one image (whose parts a
    # screen reader never reaches: axe's nested-interactive).
    role = "group" if node_url else "img"
    headings = "".join(f'<text class="layer" x="{x}" y="{MARGIN + 12}">depth {i}</text>'
                       for i, x in enumerate(drawn.starts))
    return (
        f'<figure class="graph" data-count="{count}" data-node-url="{html.escape(node_url)}" '
        f'data-selected="{html.escape(selected or "")}">'
        f'<div class="graph-frame" tabindex="0" aria-label="Dependency graph of {count} '
        'objects: arrow keys pan, plus and minus zoom, 0 fits">'
        f'<svg class="graph-svg" viewBox="0 0 {drawn.width} {drawn.height}" '
        f'width="100%" height="100%" role="{role}" aria-label="Dependency graph of {count} '
        'objects, each after what it depends on" xmlns="http://www.w3.org/2000/svg">'
        f'<g class="viewport">{headings}<path class="edges" d="{"".join(path)}"/>'
        '<path class="edges-lit" d=""/>'
        f'<g class="nodes">{"".join(nodes)}</g></g></svg></div>'
        f'<script type="application/json" class="graph-data">{text}</script>'
        "<figcaption>An arrow goes from what comes first to what depends on it. "
        "Drag to pan, scroll to zoom; select an object to see what it depends on and "
        "what depends on it.</figcaption></figure>"
    )


def script_json(value: object) -> str:
    """JSON inside a ``<script type="application/json">``: nothing in it ends the tag."""
    return (json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


# -- bar charts ----------------------------------------------------------------------------

# The plot's height, the room left of it (the scale) and below it (the labels).
PLOT_HEIGHT = 120
AXIS = 44
FOOT = 22
# Width of one group of bars: narrow for many (a series over time), wide for few.
SLOT_MIN, SLOT_MAX, PLOT_WIDTH = 8, 96, 480
# A label's character is about this wide (11 px, app.css): a group's label is cut to
# its slot.  A category's label may have two lines ("session\nblock").
LABEL_PX = 6


@dataclass(frozen=True)
class Bars:
    """A bar chart: one group of bars for each of ``labels``, one bar in each group for
    each series (``series``: (name, values), as many values as labels).  ``time``: the
    labels are RFC 3339 times (a series over a window), of which only the first and the
    last are written under the plot; else each is written under its group, in at most
    two lines."""

    title: str
    labels: Sequence[str]
    series: tuple[tuple[str, Sequence[int]], ...]
    time: bool = False


def _when(label: str, dates_only: bool) -> str:
    return label[:10] if dates_only else label[5:16].replace("T", " ")


def bar_chart(bars: Bars) -> str:
    """The chart as a ``<figure>``: an ``<svg role="img">`` named by ``title`` (every
    bar's value is also its tooltip) and a legend in HTML.  Colours come from app.css
    (``.chart .series-0``, ``.series-1``); the numbers are in a table beside it on the page."""
    groups = len(bars.labels)
    count = max(len(bars.series), 1)
    slot = max(SLOT_MIN, min(SLOT_MAX, PLOT_WIDTH // max(groups, 1)))
    width = AXIS + groups * slot + 8
    top = max((v for _, values in bars.series for v in values), default=0)
    scale = PLOT_HEIGHT / max(top, 1)
    base = 8 + PLOT_HEIGHT
    foot = FOOT if bars.time else FOOT + 13
    bar = max(2, (slot - 2) // count)
    rects = []
    for k, (name, values) in enumerate(bars.series):
        for g, value in enumerate(values):
            if value <= 0:
                continue
            h = max(1, round(value * scale))
            x = AXIS + g * slot + 1 + k * bar
            tip = html.escape(f"{' '.join(bars.labels[g].split())}: {name} {value:,}")
            rects.append(f'<rect class="series-{k}" x="{x}" y="{base - h}" width="{bar - 1}" '
                         f'height="{h}"><title>{tip}</title></rect>')
    texts = [f'<text x="{AXIS - 6}" y="{8 + 4}" text-anchor="end">{top:,}</text>',
             f'<text x="{AXIS - 6}" y="{base + 4}" text-anchor="end">0</text>']
    if bars.time and groups:
        dates_only = all(label[10:19] in ("", "T00:00:00") for label in bars.labels)
        first, last = bars.labels[0], bars.labels[-1]
        texts.append(f'<text x="{AXIS}" y="{base + 16}">{html.escape(_when(first, dates_only))}'
                     "</text>")
        if groups > 1:
            texts.append(f'<text x="{AXIS + groups * slot}" y="{base + 16}" '
                         f'text-anchor="end">{html.escape(_when(last, dates_only))}</text>')
    else:
        chars = max(3, slot // LABEL_PX)
        for g, label in enumerate(bars.labels):
            for j, line in enumerate(label.split("\n")[:2]):
                cut = line if len(line) <= chars else line[:chars - 1] + "\u2026"
                texts.append(f'<text x="{AXIS + g * slot + slot // 2}" y="{base + 16 + 13 * j}" '
                             f'text-anchor="middle">{html.escape(cut)}</text>')
    legend = " ".join(f'<span class="key"><span class="swatch series-{k}" aria-hidden="true">'
                      f"</span>{html.escape(name)}</span>"
                      for k, (name, _) in enumerate(bars.series))
    return (f'<figure class="chart"><svg viewBox="0 0 {width} {base + foot}" '
            f'width="{width}" height="{base + foot}" role="img" '
            f'aria-label="{html.escape(bars.title)}" xmlns="http://www.w3.org/2000/svg">'
            f'<line class="axis" x1="{AXIS}" y1="{base}" x2="{AXIS + groups * slot}" '
            f'y2="{base}"/><line class="grid" x1="{AXIS}" y1="8" x2="{AXIS + groups * slot}" '
            f'y2="8"/><g class="bars">{"".join(rects)}</g><g class="labels">'
            f'{"".join(texts)}</g></svg><figcaption>{legend}</figcaption></figure>')
