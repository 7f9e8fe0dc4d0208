"""``govsync validate`` checks code (contract section 13): every error inside a Policy's,
Permission's or Hook's code at FILE:LINE:COL of the manifest, beside every other error
of the run; input.hooks.<name> is an edge and a dangling one an error at its use;
data.<key> without a loader a warning; bad input (code too large, an engine that
crashes) an error at its place, never a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from govsync.cli import cli

POLICY = """\
apiVersion: govsync/v1
kind: Policy
metadata:
  name: {name}
spec:
  userEmail: carol@northwind.example
  code: |
{code}
"""

HOOK = """\
apiVersion: govsync/v1
kind: Hook
metadata:
  name: {name}
spec:
  status: {status}
  timeoutMs: 500
  code: |
{code}
"""

LOADER = """\
apiVersion: govsync/v1
kind: PolicyDataLoader
metadata:
  name: roster
spec:
  key: oncall_roster
  workerRuntime: python3.11
  workerSchedule: "0 */6 * * *"
  workerCode: "def main(): return {}"
"""

GOOD = """\
package formal.v2

import future.keywords.if

session := {"action": "block"} if {
  input.hooks.risk.score > 80
}
"""

JS = "export default function hook(input, env) {\n  return {score: 1};\n}\n"


def indented(code: str, by: int = 4) -> str:
    return "\n".join((" " * by + row) if row else row for row in code.rstrip("\n").split("\n"))


def policy(name: str, code: str) -> str:
    return POLICY.format(name=name, code=indented(code))


def hook(name: str, code: str = JS, status: str = "active") -> str:
    return HOOK.format(name=name, status=status, code=indented(code))


def write(folder: Path, *documents: str, file: str = "m.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / file).write_text("---\n".join(documents), encoding="utf-8")
    return folder


def validate(*args: str) -> Result:
    return CliRunner().invoke(cli, ["validate", *args])


def lines(result: Result) -> list[str]:
    return [row for row in result.output.splitlines()
            if row and not row[0].isdigit() and "valid." not in row]


def at(folder: Path, text: str, nth: int = 0, after: int = 0) -> str:
    """``FILE:LINE:COL`` of the nth line of ``folder/m.yaml`` holding ``text``, at it
    (``after``: so many characters further)."""
    file = folder / "m.yaml"
    found = [(i + 1, row.index(text) + 1)
             for i, row in enumerate(file.read_text(encoding="utf-8").split("\n"))
             if text in row]
    line, col = found[nth]
    return f"{file}:{line}:{col + after}"


def test_valid_code_validates(tmp_path: Path) -> None:
    result = validate(str(write(tmp_path, hook("risk"), policy("p", GOOD))))
    assert result.exit_code == 0, result.output
    assert "2 objects in 1 file: valid." in result.output


def test_a_syntax_error_is_at_its_line_and_column_in_the_manifest(tmp_path: Path) -> None:
    code = GOOD.replace('{"action": "block"} if', '{"action": "block" if')
    folder = write(tmp_path, hook("risk"), policy("p", code))
    result = validate(str(folder))
    assert result.exit_code == 1 and "Traceback" not in result.output
    # The brace left open, on the code's line 5: the file's line after `code: |` + 4.
    brace = at(folder, '{"action"')
    assert lines(result) == [f"{brace}: Rego: this is unclosed"]


def test_calling_a_hook_as_a_function_is_an_undefined_function(tmp_path: Path) -> None:
    code = GOOD.replace("input.hooks.risk.score > 80", "hooks.risk(input).score > 80")
    folder = write(tmp_path, hook("risk"), policy("p", code))
    result = validate(str(folder))
    assert result.exit_code == 1
    assert lines(result) == [f"{at(folder, 'hooks.risk(')}: Rego: undefined function "
                             "hooks.risk: a hook's result is input.hooks.<name>, not a function"]


def test_no_stage_rule_and_a_wrong_action_are_errors(tmp_path: Path) -> None:
    none = "package formal.v2\n\nimport future.keywords.if\n\nallow if input.x\n"
    wrong = GOOD.replace('"block"', '"mask"')
    folder = write(tmp_path, hook("risk"), policy("none", none), policy("wrong", wrong))
    result = validate(str(folder))
    assert result.exit_code == 1
    mask = at(folder, '"mask"')
    assert lines(result) == [
        f"{at(folder, 'formal.v2')}: the policy defines none of the stage rules session, "
        "pre_request, post_request: the service would never apply it (a stage rule's value "
        'is a decision such as {"action": "block"})',
        f"{mask}: action 'mask' is not one the session stage allows "
        "(allow, block, mfa)"]


def test_an_unknown_hook_is_an_error_at_its_use_and_a_known_one_an_edge(
        tmp_path: Path) -> None:
    code = GOOD.replace("input.hooks.risk.score", "input.hooks.risky.score")
    folder = write(tmp_path, hook("risk"), policy("p", code))
    for command in ("validate", "plan"):
        result = CliRunner().invoke(cli, [command, str(folder), "--endpoint", "local"]
                                    if command == "plan" else [command, str(folder)])
        assert result.exit_code == 1
        assert f"{at(folder, 'risky')}: input.hooks.risky names Hook/risky, which no manifest " \
               "defines: did you mean Hook/risk?" in result.output
    # Known, the hook comes first: in plan order, and in the graph's edges.
    folder = write(tmp_path / "ok", policy("p", GOOD), hook("risk"))
    graph = CliRunner().invoke(cli, ["graph", str(folder), "--format", "dot"])
    assert graph.exit_code == 0, graph.output
    assert '"Hook/risk" -> "Policy/p"' in graph.output


def test_data_without_a_loader_and_a_draft_hook_are_warnings(tmp_path: Path) -> None:
    code = GOOD.replace("input.hooks.risk.score > 80",
                        "input.hooks.risk.score > 80\n  not data.oncall_roster[input.user.email]"
                        "\n  data.vip[input.user.email]")
    folder = write(tmp_path, hook("risk", status="draft"), LOADER, policy("p", code))
    result = validate(str(folder), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["valid"] is True and document["errors"] == []
    warnings = [f"{w['file']}:{w['line']}:{w['column']}: {w['message']}"
                for w in document["warnings"]]
    assert warnings == [
        f"{at(folder, 'risk.score')}: "
        "warning: input.hooks.risk: Hook/risk is a draft, and the service passes only active "
        "hooks' results: it is undefined here until the hook is active",
        f"{at(folder, 'vip')}: warning: data.vip: no PolicyDataLoader of the manifests has "
        "key vip"]
    text = validate(str(folder))
    assert text.exit_code == 0 and "data.vip" in text.output


def test_hook_code_is_a_javascript_module_with_a_default_export(tmp_path: Path) -> None:
    folder = write(tmp_path,
                   hook("python", "def handler(event):\n    return 1\n"),
                   hook("broken", "export default function hook(input) {\n  return {a: 1\n}\n"),
                   hook("number", "export default 42\n"))
    result = validate(str(folder))
    assert result.exit_code == 1
    assert lines(result) == [
        f"{at(folder, 'def handler')}: JavaScript: the hook module has no default export: "
        "write `export default function hook(input, env) { ... }`",
        f"{at(folder, '}', after=1)}: JavaScript: SyntaxError: Unexpected end of input",
        f"{at(folder, 'export default 42')}: JavaScript: the default export is number, not a "
        "function: export default function hook(input, env)"]


def test_code_errors_come_with_every_other_error_of_the_run(tmp_path: Path) -> None:
    bad_hook = hook("risk").replace("timeoutMs: 500", "timeoutMs: 120000")
    code = GOOD.replace("> 80", "> ")
    folder = write(tmp_path, bad_hook, policy("p", code), hook("other", "export default function hook() {\n  let x = ;\n}\n"))
    result = validate(str(folder))
    assert result.exit_code == 1
    found = lines(result)
    assert len(found) == 3, found
    assert found[0].startswith(f"{at(folder, '120000')}: spec.timeoutMs")
    assert found[1].startswith(f"{at(folder, 'input.hooks')[:-2]}")
    assert found[2] == f"{at(folder, '= ;', after=2)}: JavaScript: SyntaxError: Unexpected " \
                       "token ';'"


def test_code_that_is_not_a_block_scalar_is_pointed_at_with_its_own_line(
        tmp_path: Path) -> None:
    document = ("apiVersion: govsync/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n"
                "  userEmail: carol@northwind.example\n"
                '  code: "package formal.v2\\nsession := {\\"action\\": \\"mfa\\"\\n"\n')
    result = validate(str(write(tmp_path, document)))
    assert result.exit_code == 1
    [error] = lines(result)
    assert error.endswith(":6:9: Rego: this is unclosed (line 2, column 12 of spec.code)")


def test_code_over_the_apis_request_limit_never_reaches_an_engine(tmp_path: Path) -> None:
    code = GOOD + "# " + "x" * (1100 * 1024) + "\n"
    folder = write(tmp_path, hook("risk"), policy("p", code))
    started = time.monotonic()
    result = validate(str(folder))
    assert result.exit_code == 1 and time.monotonic() - started < 10
    [error] = lines(result)
    assert "over the API's 1 MiB limit" in error


def test_an_engine_crash_is_that_policys_error_and_the_others_are_still_checked(
        tmp_path: Path) -> None:
    """rego-cpp overflows its stack on a term nested 100,000 deep (a crash of its
    process): the worker dies, that policy gets the error, the rest are checked."""
    deep = "package formal.v2\n\nsession := " + "[" * 100_000 + "]" * 100_000 + "\n"
    wrong = GOOD.replace('"block"', '"rewrite"')
    folder = write(tmp_path, hook("risk"), policy("deep", deep), policy("wrong", wrong))
    started = time.monotonic()
    result = validate(str(folder))
    assert time.monotonic() - started < 30
    assert result.exit_code == 1 and "Traceback" not in result.output
    errors = lines(result)
    assert len(errors) == 2, errors
    assert errors[0].startswith(f"{at(folder, 'package formal.v2')}: the Rego engine was "
                                "stopped: it crashed or went over govsync's budget")
    rewrite = at(folder, '"rewrite"')
    assert errors[1].startswith(f"{rewrite}: action 'rewrite'")


def test_every_environment_is_checked_and_names_its_errors(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = ("apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n"
               "environments:\n  staging: {}\n  prod: {}\n")
    (tmp_path / "govsync.yaml").write_text(project)
    write(tmp_path / "manifests", hook("risk"), policy("p", GOOD.replace("> 80", "> ")))
    monkeypatch.chdir(tmp_path)
    result = validate("--format", "json")
    assert result.exit_code == 1
    [error] = json.loads(result.output)["errors"]
    assert error["message"].startswith("(environments prod, staging) Rego:")
