"""render/linediff.py: the lines of a multi-line string that change, as git shows them."""

from __future__ import annotations

from govsync.plan import FieldChange
from govsync.render.linediff import Line, Tag, diff, field_lines, lines_of, multiline
from govsync.render.lines import created_lines, field_change_lines

CODE = "".join(f"line {i}\n" for i in range(1, 21))


def test_single_line_values_are_not_line_diffs() -> None:
    assert field_lines("a", "b") is None
    assert field_lines(1, None) is None
    assert field_change_lines(FieldChange("timeoutMs", 1500, 2500)) == [
        "      timeoutMs: 1500 -> 2500"]
    assert created_lines("description", "one line") == ['      description: "one line"']


def test_a_change_in_the_middle_shows_three_lines_of_context_and_a_hunk_header() -> None:
    after = CODE.replace("line 10\n", "line ten\n")
    assert diff(CODE, after) == [
        Line(Tag.HUNK, "@@ -7,7 +7,7 @@"),
        *(Line(Tag.SAME, f"line {i}") for i in (7, 8, 9)),
        Line(Tag.REMOVED, "line 10"), Line(Tag.ADDED, "line ten"),
        *(Line(Tag.SAME, f"line {i}") for i in (11, 12, 13)),
    ]


def test_two_distant_changes_are_two_hunks_and_a_short_string_is_shown_whole() -> None:
    after = CODE.replace("line 2\n", "line two\n").replace("line 19\n", "line nineteen\n")
    hunks = [line.text for line in diff(CODE, after) if line.tag == Tag.HUNK]
    assert hunks == ["@@ -1,5 +1,5 @@", "@@ -16,5 +16,5 @@"]
    assert diff("a\nb\n", "a\nc\n") == [Line(Tag.SAME, "a"), Line(Tag.REMOVED, "b"),
                                        Line(Tag.ADDED, "c")]


def test_a_missing_final_line_break_is_said_and_control_characters_are_escaped() -> None:
    assert diff("a\nb\n", "a\nb") == [
        Line(Tag.SAME, "a"), Line(Tag.REMOVED, "b"), Line(Tag.ADDED, "b"),
        Line(Tag.NO_NEWLINE, "No newline at end of file")]
    assert lines_of("x\x1b[2J\ny\n") == [Line(Tag.ADDED, "x\\x1b[2J"), Line(Tag.ADDED, "y")]
    assert multiline("a\r\nb") and not multiline("(sensitive)") and not multiline(None)


def test_a_multi_line_field_that_appears_names_the_other_side() -> None:
    lines = field_change_lines(FieldChange("code", None, "a\nb\n"))
    assert lines == ["      code: null -> (lines below)", "        +a", "        +b"]
    markdown = field_change_lines(FieldChange("code", "```\n", "x\n"), markdown=True)
    assert markdown == ["      code:", "-        `\u200b``", "+        x"]
