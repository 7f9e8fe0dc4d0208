"""What a new user met (issue 11), each through the command line.

Every test runs in its own temporary directory with no GOVSYNC_ variable
from the developer's shell, against the embedded reference server
(``--endpoint local``) where an endpoint is needed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GOVSYNC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)


def run(*args: str, input: str | None = None) -> Result:  # noqa: A002
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def write(path: str, text: str) -> Path:
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text, encoding="utf-8")
    return file


def hook(name: str, *, depends: str = "", extra: str = "") -> str:
    meta = f"\n  dependsOn: [{depends}]" if depends else ""
    return (f"apiVersion: govsync/v1\nkind: Hook\nmetadata:\n  name: {name}{meta}\n"
            f"spec:\n  code: \"export default function hook() {{ return {{}}; }}\"\n{extra}")


# -- 2. validate reports every error at once --------------------------------------


def test_validate_reports_a_cycle_beside_a_dangling_dependency() -> None:
    write("m/a.yaml", "---\n".join([
        hook("lonely", depends="Hook/nowhere"),
        hook("ping", depends="Hook/pong"),
        hook("pong", depends="Hook/ping"),
    ]))
    result = run("validate", "m")
    assert result.exit_code == 1, result.output
    errors = result.stderr.splitlines()
    assert any(e.startswith("m/a.yaml:5:15: ") and "Hook/nowhere" in e for e in errors), errors
    cycle = [e for e in errors if "dependency cycle" in e]
    assert len(cycle) == 2, errors  # one per member, both reported with the dangling one
    assert "3 errors;" in errors[-1]


def test_validate_checks_the_spec_of_a_document_whose_name_is_invalid() -> None:
    write("m/a.yaml", hook("bad/name", extra="  timeoutMS: 10\n"))
    result = run("validate", "m")
    assert result.exit_code == 1, result.output
    errors = result.stderr.splitlines()
    assert any(e.startswith("m/a.yaml:4:9: ") and "must not contain '/'" in e
               for e in errors), errors
    assert any(e.startswith("m/a.yaml:7:3: ") and "timeoutMS" in e and "timeoutMs" in e
               for e in errors), errors
    assert "2 errors;" in errors[-1]
    # The stand-in name never shows: it is only there to check the spec.
    assert "placeholder" not in result.output


# -- 4. apply reads its confirmation from standard input --------------------------


@pytest.mark.parametrize(("stdin", "applied", "message"), [
    ("yes\n", True, ""),
    ("yes", True, ""),  # no newline at the end of input
    ("no\n", False, "apply cancelled: the answer was 'no', and only 'yes' applies"),
    ("\n", False, "apply cancelled: no answer, and only 'yes' applies"),
    ("", False, "apply cancelled: standard input ended before an answer"),
])
def test_apply_takes_yes_from_standard_input(stdin: str, applied: bool, message: str) -> None:
    write("m/a.yaml", hook("risk"))
    result = run("apply", "m", "--endpoint", "local", input=stdin)
    assert "+ Hook/risk" in result.stdout
    assert "no terminal" not in result.output
    if applied:
        assert result.exit_code == 0, result.output
        assert "Apply: 1 applied" in result.stdout
    else:
        assert result.exit_code == 1, result.output
        assert f"Error: {message}" in result.stderr
        assert "nothing was changed" in result.stderr
        assert "Apply:" not in result.stdout
        listed = run("state", "list")
        assert "Hook/risk" not in listed.stdout


def test_apply_auto_approve_reads_no_input() -> None:
    write("m/a.yaml", hook("risk"))
    result = run("apply", "m", "--endpoint", "local", "--auto-approve", input="no\n")
    assert result.exit_code == 0, result.output
    assert "Apply: 1 applied" in result.stdout


def test_echo_yes_into_a_real_apply_process(tmp_path: Path) -> None:
    """`echo yes | govsync apply manifests/`: a real pipe, not a terminal."""
    write("m/a.yaml", hook("risk"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    proc = subprocess.run([sys.executable, "-m", "govsync", "apply", "m", "--endpoint", "local"],
                          input="yes\n", capture_output=True, text=True, env=env, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Apply: 1 applied" in proc.stdout
    assert "Only 'yes' will be accepted: yes" in proc.stderr


# -- 10. state import says that the id could not be verified ----------------------


def test_state_import_says_the_id_was_not_verified() -> None:
    write("manifests/labels.yaml",
          "apiVersion: govsync/v1\nkind: DataLabel\nmetadata:\n  name: ssn\nspec:\n"
          "  classifierType: regex\n  classifierData: '[0-9]{3}-[0-9]{2}-[0-9]{4}'\n")
    result = run("state", "import", "DataLabel/ssn", "does-not-exist", "manifests/")
    assert result.exit_code == 0, result.output
    # No endpoint here: nothing can read it (tests/refresh/test_state_import.py reads it).
    assert result.stdout == ("Recorded DataLabel/ssn as does-not-exist without verification: "
                             "no endpoint is configured to read it from, check the id "
                             "yourself.\n")
    assert "Imported" not in result.output
    listed = run("state", "list")
    assert "DataLabel/ssn\tdoes-not-exist\tapplied" in listed.stdout


# -- 13. drift says what it compared, first ---------------------------------------


def test_drift_says_first_what_was_compared_and_what_could_not_be() -> None:
    write("m/a.yaml", "---\n".join([
        hook("risk"),
        "apiVersion: govsync/v1\nkind: Space\nmetadata:\n  name: analytics\nspec: {}\n",
    ]))
    assert run("apply", "m", "--endpoint", "local", "--auto-approve").exit_code == 0

    text = run("drift", "m", "--endpoint", "local")
    assert text.exit_code == 0, text.output
    first = text.stdout.splitlines()[0]
    # Hooks and spaces are read from the server (the refresh): nothing is left unread.
    assert first == (
        "In sync as far as govsync can see: the manifests match the recorded state "
        "(2 addresses compared); live checks: groups passed (no policy names a group).")

    report = json.loads(run("drift", "m", "--endpoint", "local", "--format", "json").stdout)
    assert report["headline"] == first
    assert report["compared"] == {"state": 2, "live": ["groups"], "notLive": []}
    assert report["refreshed"] is True and report["drift"] == []

    markdown = run("drift", "m", "--endpoint", "local", "--format", "markdown").stdout
    title, blank, headline = markdown.splitlines()[:3]
    assert title.startswith("### govsync drift") and blank == ""
    assert headline == "**" + first + "**"


def test_drift_first_line_names_a_skipped_live_check() -> None:
    write("m/a.yaml", hook("risk"))
    text = run("drift", "m")
    assert text.exit_code == 2, text.output
    first = text.stdout.splitlines()[0]
    assert first.startswith("Drift: 1 change(s) between the manifests and the recorded state "
                            "(1 address compared), 0 live problem(s); live checks: groups ")
    assert "not readable live, so compared with the recorded state only: 1 kind (Hook)." in first


# -- 3. the README walkthrough and init's next steps, as written -------------------

README = Path(__file__).resolve().parents[2] / "README.md"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def command_lines(text: str) -> list[str]:
    """The commands of a shell snippet: comment lines and end-of-line comments dropped."""
    lines = []
    for line in text.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line).strip()
        if line and not line.startswith("#"):
            lines.append(line)
    return lines


def walkthrough() -> list[str]:
    readme = README.read_text(encoding="utf-8")
    start = readme.index("## A ten-minute walkthrough")
    section = readme[start:readme.index("\n## ", start)]
    return [cmd for lang, body in FENCE.findall(section) if lang == "sh"
            for cmd in command_lines(body)]


def shell(command: str, env: dict[str, str]) -> Result:
    """One line as a shell would run it: `export A=1 B=2`, `[echo yes |] govsync ...`."""
    words = shlex.split(command)
    if words[0] == "export":
        env.update(word.split("=", 1) for word in words[1:])  # type: ignore[misc]
        return CliRunner().invoke(cli, ["--version"])
    stdin = None
    if words[:3] == ["echo", "yes", "|"]:
        stdin, words = "yes\n", words[3:]
    assert words[0] == "govsync", command
    if words[1:3] == ["apply", "manifests/"] and "--auto-approve" not in words:
        stdin = "yes\n"  # the walkthrough answers the question
    target = None
    if len(words) > 2 and words[-2] == ">":
        words, target = words[:-2], words[-1]
    result = CliRunner().invoke(cli, words[1:], input=stdin, env=env, catch_exceptions=False)
    if target is not None:
        Path(target).write_text(result.stdout, encoding="utf-8")
    return result


def run_all(commands: list[str], env: dict[str, str]) -> list[tuple[str, Result]]:
    results = []
    for command in commands:
        result = shell(command, env)
        assert result.exit_code == 0, f"$ {command}\n-> exit {result.exit_code}\n{result.output}"
        results.append((command, result))
    return results


@pytest.mark.parametrize("next_steps_first", [False, True])
def test_readme_walkthrough_and_init_next_steps_work_as_written(next_steps_first: bool) -> None:
    steps = walkthrough()
    assert steps[0] == "govsync init", steps
    assert "govsync plan manifests/" in steps and "govsync apply manifests/" in steps
    env: dict[str, str] = {}
    (_, init), = run_all(steps[:1], env)
    printed = init.stdout.split("Next steps:\n", 1)[1]
    next_steps = [cmd for cmd in command_lines(printed) if cmd.startswith(("govsync", "export"))]
    assert "govsync plan manifests/" in next_steps, printed

    order = [*next_steps, *steps[1:]] if next_steps_first else [*steps[1:], *next_steps]
    results = run_all(order, env)
    output = "\n".join(r.output for _, r in results)
    assert "Plan: 10 to create" in output
    assert output.count("Apply: 10 applied, 0 failed") == 1, output
    graph = Path("plan.dot").read_text(encoding="utf-8")
    assert graph.startswith("digraph govsync {"), graph
    drift = [r for c, r in results if c.startswith("govsync drift")]
    assert drift and "**In sync.**" in drift[0].stdout
    assert "does not exist on the server" not in output and "is not set" not in output


def test_the_walkthroughs_own_manifest_sits_beside_what_init_wrote() -> None:
    """Issue 34: the walkthrough's manifest declared the Space/analytics that init's
    examples declare, so writing it after init was a duplicate address."""
    readme = README.read_text(encoding="utf-8")
    start = readme.index("## A ten-minute walkthrough")
    section = readme[start:readme.index("\n## ", start)]
    own = next(body for lang, body in FENCE.findall(section)
               if lang == "yaml" and body.startswith("# manifests/"))
    assert run("init").exit_code == 0
    write(own.split("\n", 1)[0][2:].strip(), own)
    result = run("validate", "--env", "staging", "manifests/")
    assert result.exit_code == 0, result.output
