"""Plans and drift reports as text, JSON and Markdown: the face of render/.

    lines.py      what the three share: symbols, a field's lines, the summary line, ANSI
    text.py       plan_text, drift_text (a terminal's)
    markdown.py   plan_markdown, drift_markdown (pull-request comments)
    planjson.py   plan_json and its chunks, drift_json (contract section 3)
    reasons.py    a change's typed reason in words, and the advice for blocked changes
    documents.py, progress.py, schemas.py, graph.py, linediff.py, html.py, svg.py
                  the other documents, apply's reporters, the JSON Schemas, the graph,
                  line diffs, the plan page and its SVG
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from govsync import lazy

# Each name and the module that holds it, imported when first asked for (PEP 562): a
# plan shown as text loads neither the Markdown nor the graphs (issue 31).  Read by
# docs/architecture.md's test as the face's imports.
LAZY = {
    "OCCASIONAL": "govsync.render.lines",
    "ORDER": "govsync.render.lines",
    "OUTSIDE_NOTE": "govsync.render.lines",
    "OUTSIDE_TITLE": "govsync.render.lines",
    "SYMBOLS": "govsync.render.lines",
    "TABLE_ORDER": "govsync.render.lines",
    "Style": "govsync.render.lines",
    "ansi": "govsync.render.lines",
    "created_lines": "govsync.render.lines",
    "drift_headline": "govsync.render.lines",
    "field_change_lines": "govsync.render.lines",
    "fmt_value": "govsync.render.lines",
    "governance_lines": "govsync.render.lines",
    "outside_lines": "govsync.render.lines",
    "summary_line": "govsync.render.lines",
    "field_lines": "govsync.render.linediff",
    "lines_of": "govsync.render.linediff",
    "MARKDOWN_LIMIT": "govsync.render.markdown",
    "drift_markdown": "govsync.render.markdown",
    "plan_markdown": "govsync.render.markdown",
    "drift_json": "govsync.render.planjson",
    "drift_public": "govsync.render.planjson",
    "plan_json": "govsync.render.planjson",
    "plan_json_chunks": "govsync.render.planjson",
    "plan_public": "govsync.render.planjson",
    "blocked_advice": "govsync.render.reasons",
    "blocked_lines": "govsync.render.reasons",
    "reason_words": "govsync.render.reasons",
    "drift_text": "govsync.render.text",
    "plan_text": "govsync.render.text",
}

if TYPE_CHECKING:
    from govsync.render.linediff import field_lines, lines_of
    from govsync.render.lines import (
        OCCASIONAL,
        ORDER,
        OUTSIDE_NOTE,
        OUTSIDE_TITLE,
        SYMBOLS,
        TABLE_ORDER,
        Style,
        ansi,
        created_lines,
        drift_headline,
        field_change_lines,
        fmt_value,
        governance_lines,
        outside_lines,
        summary_line,
    )
    from govsync.render.markdown import MARKDOWN_LIMIT, drift_markdown, plan_markdown
    from govsync.render.planjson import (
        drift_json,
        drift_public,
        plan_json,
        plan_json_chunks,
        plan_public,
    )
    from govsync.render.reasons import blocked_advice, blocked_lines, reason_words
    from govsync.render.text import drift_text, plan_text


__getattr__, __dir__ = lazy.face(__name__, LAZY)


__all__ = [
    "MARKDOWN_LIMIT", "OCCASIONAL", "ORDER", "OUTSIDE_NOTE", "OUTSIDE_TITLE", "SYMBOLS",
    "TABLE_ORDER", "Style", "ansi", "blocked_advice", "blocked_lines", "created_lines", "drift_headline", "drift_json",
    "drift_markdown", "drift_public", "drift_text", "field_change_lines", "field_lines",
    "fmt_value", "governance_lines", "lines_of", "outside_lines", "plan_json", "plan_json_chunks", "plan_markdown",
    "plan_public", "plan_text", "reason_words", "summary_line",
]
