"""``govsync graph``: the dependency graph as Mermaid or DOT, whole or of a plan."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli

SPACE = "apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: {name}\nspec: {{}}\n"
CONNECTOR = ("apiVersion: govsync/v1\nkind: Connector\nmetadata:\n  name: {name}\n"
             "spec:\n  spaceRef: {space}\n")
HOOK = ("apiVersion: govsync/v1\nkind: Hook\nmetadata:\n  name: {name}\n  dependsOn: [{dep}]\n"
        "spec:\n  code: \"{code}\"\n")


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GOVSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def manifests(code: str = "x", space: str = "analytics") -> None:
    Path("m").mkdir(exist_ok=True)
    Path("m/all.yaml").write_text("---\n".join([
        SPACE.format(name=space),
        CONNECTOR.format(name="prod-eu", space=space),
        HOOK.format(name="risk", dep="Connector/prod-eu", code=code),
    ]), encoding="utf-8")


def test_mermaid_graph_of_the_manifests() -> None:
    manifests()
    assert run("graph", "m").stdout == "\n".join([
        "flowchart LR",
        '  n0["Connector/prod-eu"]',
        '  n1["Hook/risk"]',
        '  n2["Space/analytics"]',
        "  n0 --> n1",
        "  n2 --> n0",
        "",
    ])


def test_dot_graph_quotes_ids() -> None:
    manifests(space='we"ird')
    assert run("graph", "m", "--format", "dot").stdout == "\n".join([
        "digraph govsync {",
        "  rankdir=LR;",
        '  node [shape=box, style="rounded,filled", fillcolor="white"];',
        '  "Connector/prod-eu";',
        '  "Hook/risk";',
        '  "Space/we\\"ird";',
        '  "Connector/prod-eu" -> "Hook/risk";',
        '  "Space/we\\"ird" -> "Connector/prod-eu";',
        "}",
        "",
    ])


def test_mermaid_labels_cannot_break_out_of_their_quotes() -> None:
    manifests(space='a"]; click n0 "#x" <b>`')
    text = run("graph", "m").stdout
    assert '  n2["Space/a#quot;]; click n0 #quot;#35;x#quot; #lt;b#gt;#96;"]' in text
    # One quoted label per node line: no quote but the two that delimit it.
    assert all(line.count('"') == 2 for line in text.splitlines() if "[" in line)


def test_plan_graph_shows_only_the_changes_coloured_by_action() -> None:
    manifests()
    run("apply", "m", "--endpoint", "local", "--auto-approve")
    manifests(code="y")  # Hook/risk: an update
    Path("m/more.yaml").write_text(
        "---\n".join([SPACE.format(name="ml"), HOOK.format(name="ml_risk", dep="Hook/risk",
                                                          code="z")]), encoding="utf-8")
    Path("m/all.yaml").write_text(Path("m/all.yaml").read_text().replace(
        "spec: {}", "spec: {description: changed}"), encoding="utf-8")  # Space: an update

    text = run("graph", "m", "--plan", "--endpoint", "local").stdout
    assert text == "\n".join([
        "flowchart LR",
        '  n0["Hook/ml_risk (create)"]',
        '  n1["Hook/risk (update)"]',
        '  n2["Space/analytics (update)"]',
        '  n3["Space/ml (create)"]',
        "  n1 --> n0",
        "  n2 --> n1",  # through the unchanged Connector/prod-eu
        "  classDef create fill:#dafbe1,stroke:#1a7f37,color:#0f3d1c",
        "  class n0,n3 create",
        "  classDef update fill:#fff8c5,stroke:#9a6700,color:#4d2d00",
        "  class n1,n2 update",
        "",
    ])
    dot = run("graph", "m", "--plan", "--endpoint", "local", "--format", "dot").stdout
    assert ('"Space/analytics" [label="Space/analytics (update)", fillcolor="#fff8c5", '
            'color="#9a6700", fontcolor="#4d2d00"];') in dot


def test_plan_markdown_embeds_the_graph_of_the_changes() -> None:
    manifests()
    result = CliRunner().invoke(cli, ["plan", "m", "--format", "markdown"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "<details><summary><b>Graph</b> of the changes (create green)</summary>" in text
    block = text.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert block.startswith("flowchart LR\n") and "  n2 --> n0\n" in block
    assert text.index("```mermaid") < text.index("```diff")
