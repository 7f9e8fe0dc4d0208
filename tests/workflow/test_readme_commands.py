"""The README's two commands are the ones CI runs, word for word.

The commands are read from README.md (the first two ``sh`` code blocks after
the title).  ``.ci/run``, which CI runs on a clean clone of main, runs both:
the second (install the test dependencies, run the suite) in that clone, and
the first (install and run the demo) in a clean clone of its own.  Running
them from inside the suite (as this module did until issue 31's test loop)
cost the suite a minute and a half of its five: two installs of every
dependency, and the suite collected a second time inside itself.  The demo
itself also runs here, from an installed wheel (test_packaging).
"""

from __future__ import annotations

import re
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]  # where README.md and pyproject.toml are
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def readme_commands(readme: str, n: int = 2) -> list[str]:
    """The first ``n`` ```sh blocks after the README's title, in order."""
    title = re.search(r"^# \S.*$", readme, re.M)
    assert title, "README.md has no title line"
    blocks = [body.strip() for lang, body in FENCE.findall(readme[title.end():])
              if lang == "sh"]
    assert len(blocks) >= n, f"README.md has {len(blocks)} sh code block(s), expected {n}"
    return blocks[:n]


def ci_lines() -> list[str]:
    """``.ci/run``'s commands, comments and blank lines left out."""
    text = (PROJECT / ".ci" / "run").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_readme_names_the_two_commands() -> None:
    install_and_demo, install_and_test = readme_commands(
        (PROJECT / "README.md").read_text(encoding="utf-8"))
    assert "examples/demo.sh" in install_and_demo
    assert "pytest" in install_and_test
    assert "\n" not in install_and_demo and "\n" not in install_and_test


def test_ci_runs_the_test_command_in_its_clone_and_the_demo_in_a_clean_clone() -> None:
    install_and_demo, install_and_test = readme_commands(
        (PROJECT / "README.md").read_text(encoding="utf-8"))
    lines = ci_lines()
    # The test command as a line of its own, in the checkout CI cloned.
    assert install_and_test in lines, "\n".join(lines)
    # The demo, word for word, in a subshell that enters a clone made just before.
    [demo] = [i for i, line in enumerate(lines) if install_and_demo in line]
    subshell = re.fullmatch(r'\(cd "(\$\w+/clone)" && (.*)\)', lines[demo])
    assert subshell and subshell.group(2) == install_and_demo, lines[demo]
    clone = subshell.group(1)
    assert any(re.fullmatch(rf'git clone -q \. "{re.escape(clone)}"', line)
               for line in lines[:demo]), lines[:demo]
