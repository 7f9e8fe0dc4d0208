"""A multi-line string field (a Hook's ``code``) is shown as a line diff, as ``git diff``
shows it: in the terminal, in the pull-request comment, in drift and in ``show``."""

from __future__ import annotations

from pathlib import Path

from plan_helpers import LOCAL, Gov, edit

# examples/manifests/hooks.yaml, Hook/risk_score: lines 2 to 8 of its code, around
# the one character changed (v1 -> v2).
DIFF = [
    "        @@ -2,7 +2,7 @@",
    "         // for the session's user.",
    "         export default async function hook(input, env) {",
    "             const res = await fetch(",
    '        -        "https://risk.northwind.internal/v1/score",',
    '        +        "https://risk.northwind.internal/v2/score",',
    "                 {",
    '                     method: "POST",',
    '                     headers: {"Authorization": `Bearer ${env.RISK_API_TOKEN}`, '
    '"X-Region": env.RISK_API_REGION},',
]


def test_one_character_changed_in_a_hooks_code_is_a_two_line_diff(gov: Gov,
                                                                   applied: Path) -> None:
    edit(applied / "hooks.yaml", "risk.northwind.internal/v1/score",
         "risk.northwind.internal/v2/score")

    text = gov.run("plan", applied, *LOCAL).stdout.splitlines()
    at = text.index("~ Hook/risk_score  (update)")
    assert text[at + 1:at + 2 + len(DIFF)] == ["      code:", *DIFF]
    assert sum(1 for line in text if line.startswith("        -")) == 1
    assert sum(1 for line in text if line.startswith("        +")) == 1

    markdown = gov.run("plan", applied, *LOCAL, "--format", "markdown").stdout.splitlines()
    at = markdown.index("~ Hook/risk_score (update)")
    # Inside the ```diff block each line's first column is its tag: GitHub colours it.
    assert markdown[at + 1:at + 2 + len(DIFF)] == [
        "      code:",
        "         @@ -2,7 +2,7 @@",
        *(line[8] + line[:8] + line[9:] for line in DIFF[1:])]
    assert markdown[at + 6:at + 8] == [
        '-                "https://risk.northwind.internal/v1/score",',
        '+                "https://risk.northwind.internal/v2/score",']

    drift = gov.run("drift", applied, code=2).stdout.splitlines()
    at = drift.index("~ Hook/risk_score  (update)")
    assert drift[at + 1:at + 2 + len(DIFF)] == ["      code:", *DIFF]


def test_a_created_hook_shows_its_code_as_lines(gov: Gov, manifests: Path) -> None:
    text = gov.run("plan", manifests).stdout.splitlines()
    at = text.index("+ Hook/mask_pii  (create)")
    code = text.index("      code:", at)
    assert text[code + 1:code + 4] == [
        "        +// input.hooks.mask_pii: {columns}, the paths of the row's columns whose values",
        "        +// look like e-mail addresses or IBANs (Policy/mask-pii-in-results masks them).",
        "        +const EMAIL = /[\\w.+-]+@[\\w-]+\\.[\\w.]+/;"]
    assert not any('"// input.hooks.mask_pii' in line for line in text)
    # Single-line values are as they always were.
    assert "      timeoutMs: 800" in text
    assert ('      description: "Finds the columns of a result row that hold e-mail addresses '
            'or IBANs."') in text


def test_show_lists_the_requests_code_as_lines(gov: Gov, applied: Path) -> None:
    edit(applied / "hooks.yaml", "risk.northwind.internal/v1/score",
         "risk.northwind.internal/v2/score")
    gov.run("plan", applied, "--out", "plan.json")
    text = gov.run("show", "plan.json").stdout.splitlines()
    at = text.index("~ Hook/risk_score  (update)")
    assert text[at + 1:at + 2 + len(DIFF)] == ["      code:", *DIFF]
    sent = text.index("      hook.code:")
    assert text[sent + 5] == '        +        "https://risk.northwind.internal/v2/score",'
