"""What the loader reads of Rego without an engine (policycode.hook_uses, data_uses):
every use where it is written, none inside a comment or a string."""

from __future__ import annotations

from govsync.policycode import Use, data_uses, hook_uses

CODE = '''package formal.v2

import future.keywords.if
# input.hooks.commented is a comment
session := {"action": "block", "reason": "input.hooks.quoted"} if {
  input.hooks.risk.score > 80
  input["hooks"]["ticket"].approved
  data.roster[input.user.email]
  data.formal.v2.helper          # the module's own rules: not a loader's data
}
'''


def test_uses_are_found_where_they_are_written() -> None:
    assert hook_uses(CODE) == [Use("risk", 6, 15), Use("ticket", 7, 18)]
    assert data_uses(CODE) == [Use("roster", 8, 8)]


def test_a_raw_string_over_several_lines_hides_what_it_holds() -> None:
    code = CODE.replace("# input.hooks.commented is a comment",
                        "note := `a raw string\n  input.hooks.inside\n`")
    assert [u.name for u in hook_uses(code)] == ["risk", "ticket"]
    assert hook_uses(code)[0] == Use("risk", 8, 15)


def test_an_import_of_input_hooks_names_them_otherwise() -> None:
    code = CODE.replace("import future.keywords.if",
                        "import future.keywords.if\nimport input.hooks as h")
    code = code.replace("input.hooks.risk.score", "h.risk.score")
    assert [u.name for u in hook_uses(code)] == ["risk", "ticket"]
    assert hook_uses("package p\nimport input.hooks\nx := hooks.a\n") == [Use("a", 3, 12)]
    assert data_uses("package p\nimport data.roster\n") == [Use("roster", 2, 13)]


def test_code_without_hooks_is_not_tokenized_for_them() -> None:
    assert hook_uses("package formal.v2\nsession := {\"action\": \"allow\"}\n") == []
