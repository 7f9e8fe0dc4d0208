"""Plans and drift reports as text, JSON and Markdown, and the other documents.

Each name is imported from the module that holds it, so a plan shown as text
loads neither the Markdown nor the graphs:

    lines.py      what the three share: symbols, a field's lines, the summary line, ANSI
    text.py       plan_text, drift_text (a terminal's)
    markdown.py   plan_markdown, drift_markdown (pull-request comments)
    planjson.py   plan_json and its chunks, drift_json (contract section 3)
    reasons.py    a change's typed reason in words, and the advice for blocked changes
    documents.py, progress.py, schemas.py, graph.py, linediff.py, html.py, svg.py
                  the other documents, apply's reporters, the JSON Schemas, the graph,
                  line diffs, the plan page and its SVG
    impactview.py a policy's impact in the comment and on the plan page
"""
