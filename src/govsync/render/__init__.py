"""Plans and drift reports as text, JSON and Markdown: the face of render/.

    lines.py      what the three share: symbols, a field's lines, the summary line, ANSI
    text.py       plan_text, drift_text (a terminal's)
    markdown.py   plan_markdown, drift_markdown (pull-request comments)
    planjson.py   plan_json and its chunks, drift_json (contract section 3)
    documents.py, progress.py, schemas.py, graph.py, linediff.py, html.py, svg.py
                  the other documents, apply's reporters, the JSON Schemas, the graph,
                  line diffs, the plan page and its SVG
"""

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
from govsync.render.text import drift_text, plan_text

__all__ = [
    "MARKDOWN_LIMIT", "OCCASIONAL", "ORDER", "OUTSIDE_NOTE", "OUTSIDE_TITLE", "SYMBOLS",
    "TABLE_ORDER", "Style", "ansi", "created_lines", "drift_headline", "drift_json",
    "drift_markdown", "drift_public", "drift_text", "field_change_lines", "fmt_value",
    "governance_lines", "outside_lines", "plan_json", "plan_json_chunks", "plan_markdown",
    "plan_public", "plan_text", "summary_line",
]
