"""Markdown plans are pull-request comments: bounded, summary first, and
honest about what they leave out."""

from __future__ import annotations

import json
from pathlib import Path

from plan_helpers import Gov

LIMIT = 60_000
HOOKS = 10_000


def write_hooks(root: Path, files: int = 4) -> None:
    root.mkdir()
    per_file = HOOKS // files
    for f in range(files):
        docs = [
            "apiVersion: govsync/v1\nkind: Hook\nmetadata:\n"
            f"  name: hook_{i:05d}\nspec:\n  code: 'def handler(event): return {i}'\n"
            "  timeoutMs: 1000\n"
            for i in range(f * per_file, (f + 1) * per_file)
        ]
        (root / f"hooks-{f}.yaml").write_text("---\n".join(docs), encoding="utf-8")


def write_spaces(root: Path) -> None:
    (root / "spaces.yaml").write_text("---\n".join(
        f"apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: {name}\n"
        f"spec:\n  description: The {name} space.\n"
        for name in ("alpha", "beta", "gamma")
    ), encoding="utf-8")


def test_markdown_of_10000_changes_stays_under_the_limit(gov: Gov, workdir: Path) -> None:
    manifests = workdir / "m"
    write_hooks(manifests)
    write_spaces(manifests)

    text = gov.run("plan", manifests, "--format", "markdown").stdout
    assert len(text) < LIMIT
    lines = text.splitlines()
    # The whole summary table, first.
    assert lines[:5] == [
        "### govsync plan: workspace `default`",
        "",
        "| create | update | blocked | orphan | uncertain | unchanged |",
        "|---:|---:|---:|---:|---:|---:|",
        "| 10003 | 0 | 0 | 0 | 0 | 0 |",
    ]
    # What fits is shown whole; what does not is named, with its count.
    assert "<details><summary><b>Space</b>: 3 create</summary>" in lines
    for name in ("alpha", "beta", "gamma"):
        assert f"+ Space/{name} (create)" in lines
    assert "<details><summary><b>Hook</b>" not in text
    assert ("> The graph of the changes is left out: the comment would exceed 60,000 "
            "characters. Run `govsync graph --plan` to see it.") in lines
    assert lines[-1] == (
        f"> {HOOKS} change(s) not shown (Hook): the comment would exceed 60,000 characters. "
        "Run `govsync plan` to see them all.")
    # Every fence that opens is closed.
    assert (text.count("```diff"), text.count("```\n")) == (1, 1)

    # The JSON plan, in contrast, has all of them.
    plan = json.loads(gov.run("plan", manifests, "--format", "json").stdout)
    assert len(plan["changes"]) == HOOKS + 3
    assert plan["summary"]["create"] == HOOKS + 3


def test_markdown_of_a_small_plan_is_complete(gov: Gov, workdir: Path) -> None:
    manifests = workdir / "m"
    manifests.mkdir()
    write_spaces(manifests)

    text = gov.run("plan", manifests, "--format", "markdown").stdout
    assert "not shown" not in text
    assert text == "\n".join([
        "### govsync plan: workspace `default`",
        "",
        "| create | update | blocked | orphan | uncertain | unchanged |",
        "|---:|---:|---:|---:|---:|---:|",
        "| 3 | 0 | 0 | 0 | 0 | 0 |",
        "",
        "<details><summary><b>Graph</b> of the changes (create green)</summary>",
        "",
        "```mermaid",
        "flowchart LR",
        '  n0["Space/alpha (create)"]',
        '  n1["Space/beta (create)"]',
        '  n2["Space/gamma (create)"]',
        "  classDef create fill:#dafbe1,stroke:#1a7f37,color:#0f3d1c",
        "  class n0,n1,n2 create",
        "```",
        "",
        "</details>",
        "",
        "<details><summary><b>Space</b>: 3 create</summary>",
        "",
        "```diff",
        "+ Space/alpha (create)",
        '      description: "The alpha space."',
        '      name: "alpha"',
        "      terminationProtection: false",
        "+ Space/beta (create)",
        '      description: "The beta space."',
        '      name: "beta"',
        "      terminationProtection: false",
        "+ Space/gamma (create)",
        '      description: "The gamma space."',
        '      name: "gamma"',
        "      terminationProtection: false",
        "```",
        "",
        "</details>",
        "",
        "",
    ])


FENCE_BREAKER = 'x\n```\n\n**No changes. Safe to merge.**\n\n```diff\ny'


def test_a_name_cannot_close_the_markdown_code_fence(gov: Gov, workdir: Path) -> None:
    """A name with a line break is refused; one with a fence stays inside the block."""
    manifests = workdir / "m"
    manifests.mkdir()
    space = manifests / "space.yaml"
    space.write_text(
        "apiVersion: govsync/v1\nkind: Space\nmetadata:\n"
        f"  name: {json.dumps(FENCE_BREAKER)}\nspec:\n  description: harmless\n",
        encoding="utf-8")
    refused = gov.run("validate", manifests, code=1)
    assert "space.yaml:4:9: metadata.name must not contain U+" in refused.stderr

    space.write_text(
        "apiVersion: govsync/v1\nkind: Space\nmetadata:\n"
        "  name: x```y\nspec:\n  description: \"```\\n**merge me**\"\n",
        encoding="utf-8")
    text = gov.run("plan", manifests, "--format", "markdown").stdout
    fences = [line for line in text.splitlines() if line.lstrip().startswith("```")]
    assert fences == ["```mermaid", "```", "```diff", "```"]
    assert '["Space/x#96;#96;#96;y (create)"]' in text  # the graph's label, as entity codes
    # The multi-line description is shown as its lines, each inside the diff block
    # behind its tag: a line of user text never starts a line of the comment.
    block = text.split("```diff\n", 1)[1].split("\n```\n", 1)[0]
    assert "+        **merge me**" in block.splitlines()
    assert "**merge me**" not in text.replace(block, "")


def blocked_users(n: int, pad: int) -> str:
    docs = [
        f"apiVersion: govsync/v1\nkind: BlockedUser\nmetadata:\n  name: bulk-{i:05d}\n"
        f"spec:\n  id: usr-bulk-{i:05d}\n"
        for i in range(n)
    ]
    docs.append("apiVersion: govsync/v1\nkind: BlockedUser\nmetadata:\n  name: pad\n"
                f"spec:\n  id: usr-{'p' * pad}\n")
    return "---\n".join(docs)


def balanced(text: str) -> bool:
    """Every <details> closed, every code fence closed, within the limit."""
    fences = [line for line in text.splitlines() if line.startswith("```")]
    return (len(text) <= LIMIT and text.count("<details>") == text.count("</details>")
            and fences == ["```diff", "```"] * text.count("<details>"))


def test_truncated_markdown_keeps_its_sections_closed(gov: Gov, manifests: Path) -> None:
    """The examples plus enough blocked users that their section (the third
    kind, alphabetically) fills the comment and every later kind is left out.

    How full the comment gets depends on the exact sizes, so the library
    renders a few sizes first (one padded id); the command line then renders
    the fullest of them that breaks, if any does."""
    import dataclasses

    from govsync.commands.planning import plan
    from govsync.manifests import load
    from govsync.render.markdown import plan_markdown
    from govsync.settings import Settings

    bulk = manifests / "bulk.yaml"
    bulk.write_text(blocked_users(1500, 0), encoding="utf-8")
    full = plan(load([str(manifests)]), Settings())

    def markdown(n: int, pad: int) -> str:
        changes = []
        for c in full.changes:
            if c.address.startswith("BlockedUser/bulk-") and int(c.address[-5:]) >= n:
                continue
            if c.address == "BlockedUser/pad":
                c = dataclasses.replace(c, request={"id": "usr-" + "p" * pad})
            changes.append(c)
        return plan_markdown(dataclasses.replace(full, changes=changes))

    def shown(n: int, pad: int) -> bool:
        return "<details><summary><b>BlockedUser</b>" in markdown(n, pad)

    fullest = []
    for pad in (0, 16, 32, 48):
        lo, hi = 0, 1500  # the largest n whose section is still shown
        assert shown(lo, pad) and not shown(hi, pad)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if shown(mid, pad) else (lo, mid)
        fullest.append((lo, pad))
    n, pad = next(((n, p) for n, p in fullest if not balanced(markdown(n, p))), fullest[0])
    bulk.write_text(blocked_users(n, pad), encoding="utf-8")

    text = gov.run("plan", manifests, "--format", "markdown").stdout
    assert text == markdown(n, pad)
    assert f"| {60 + n} | 0 | 0 | 0 | 0 | 0 |" in text
    assert "change(s) not shown (Connector, ConnectorAIProvider, " in text
    assert balanced(text)
