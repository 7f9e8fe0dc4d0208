"""render: a plan as text, JSON and Markdown."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import click
import pytest

from govsync.manifests import ManifestSet
from govsync.plan import Plan, make_plan
from govsync.render.lines import ansi
from govsync.render.markdown import plan_markdown
from govsync.render.planjson import plan_json, plan_json_chunks, plan_public
from govsync.render.text import plan_text
from govsync.state import APPLIED, UNCERTAIN, Entry
from govsync.state.sqlite import SqliteStore
from govsync.values import Resolver

OBJECTS = """
apiVersion: govsync/v1
kind: Hook
metadata: {name: hook_one}
spec: {code: "x", timeoutMs: %(timeout)d}
---
apiVersion: govsync/v1
kind: Space
metadata: {name: space-one}
spec: {description: %(description)s}
---
apiVersion: govsync/v1
kind: Space
metadata: {name: same}
spec: {description: same}
---
apiVersion: govsync/v1
kind: AIProviderIntegration
metadata: {name: ai}
spec: {provider: AI_PROVIDER_VENDORA_ENTERPRISE, keyName: k, apiKey: {fromEnv: AI_KEY}}
"""
FRESH = """
---
apiVersion: govsync/v1
kind: Space
metadata: {name: fresh}
spec: {description: new}
"""
FIRST_SECRET = "first-secret-value-0001"
SECOND_SECRET = "second-secret-value-0002"


def _record(store: SqliteStore, plan: Plan, environ: dict[str, str]) -> None:
    """Record each change of ``plan`` in state as apply would (secrets as fingerprints)."""
    snapshot = store.snapshot("default")
    for change in plan.changes:
        assert change.request is not None
        _, spec, _ = Resolver({}, snapshot.fingerprint, environ).send(change.request)
        store.put("default", Entry(change.address, change.kind, f"id-{change.address}", APPLIED,
                                   spec))


@pytest.fixture
def first(manifests: Callable[[str], ManifestSet], store: SqliteStore) -> Plan:
    """A plan that creates everything, AIProviderIntegration/ai with a secret."""
    text = OBJECTS % {"timeout": 100, "description": "a"}
    return make_plan(manifests(text), store.snapshot("default"), environ={"AI_KEY": FIRST_SECRET})


@pytest.fixture
def mixed(first: Plan, manifests: Callable[[str], ManifestSet], store: SqliteStore) -> Plan:
    """One change of every action: create, update, no-op, blocked, orphan, uncertain."""
    _record(store, first, {"AI_KEY": FIRST_SECRET})
    store.put("default", Entry("Space/gone", "Space", "id-gone", APPLIED, {}))
    store.put("default", Entry("Hook/unsure", "Hook", None, UNCERTAIN, {}))
    text = OBJECTS % {"timeout": 200, "description": "b"} + FRESH
    return make_plan(manifests(text), store.snapshot("default"),
                     environ={"AI_KEY": SECOND_SECRET})


def _heads(text: str) -> list[str]:
    """The first line of each change (the lines that do not start with spaces of detail)."""
    return [line for line in text.splitlines() if re.match(r"^[^ ]? [A-Z]\w+/", line)]


def test_text_marks_each_action_with_its_symbol(mixed: Plan) -> None:
    text = plan_text(mixed)
    assert _heads(text) == [
        "! AIProviderIntegration/ai  (blocked)",
        "~ Hook/hook_one  (update)",
        "+ Space/fresh  (create)",
        "~ Space/space-one  (update)",
        "? Hook/unsure  (uncertain)",
        "- Space/gone  (orphan)",
    ]
    assert "      timeoutMs: 100 -> 200\n" in text
    assert '      description: "a" -> "b"\n' in text
    assert '      description: "new"\n' in text  # a create lists its request
    assert text.endswith("Plan: 1 to create, 2 to update, 1 blocked, 1 orphaned, "
                         "1 uncertain, 1 unchanged.\n")
    assert "Space/same" not in text
    assert "  Space/same  (no-op)" in plan_text(mixed, verbose=True).splitlines()


def test_text_in_color_styles_the_head_line(first: Plan) -> None:
    plain = plan_text(first)
    colored = plan_text(first, color=True)
    assert "\x1b[" not in plain and "\x1b[" in colored
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain


def test_no_changes_says_so(first: Plan, manifests: Callable[[str], ManifestSet],
                            store: SqliteStore) -> None:
    _record(store, first, {"AI_KEY": FIRST_SECRET})
    text = OBJECTS % {"timeout": 100, "description": "a"}
    plan = make_plan(manifests(text), store.snapshot("default"), environ={"AI_KEY": FIRST_SECRET})
    assert plan_text(plan).splitlines() == [
        "No changes. The manifests match the recorded state.",
        "Plan: 0 to create, 0 to update, 0 blocked, 0 orphaned, 0 uncertain, 4 unchanged.",
    ]
    assert "No changes. The manifests match the recorded state." in plan_markdown(plan)


def test_secrets_are_shown_as_sensitive_and_never_as_values(
    first: Plan, mixed: Plan, store: SqliteStore,
) -> None:
    assert "      apiKey: (sensitive)\n" in plan_text(first)
    assert "      apiKey: (sensitive) -> (sensitive)\n" in plan_text(mixed)
    assert "      apiKey: (sensitive) -> (sensitive)\n" in plan_markdown(mixed)
    (ai,) = [c for c in json.loads(plan_json(mixed))["changes"]
             if c["address"] == "AIProviderIntegration/ai"]
    assert ai["diff"] == [{"field": "apiKey", "before": "(sensitive)", "after": "(sensitive)"}]
    fingerprint = store.snapshot("default").fingerprint
    hidden = [FIRST_SECRET, SECOND_SECRET, fingerprint(FIRST_SECRET), fingerprint(SECOND_SECRET)]
    for plan in (first, mixed):
        for shown in (plan_text(plan, verbose=True), plan_markdown(plan),
                      plan_json(plan)):
            assert not [value for value in hidden if value in shown]


def test_json_is_one_line_with_every_change_and_the_summary(mixed: Plan) -> None:
    text = plan_json(mixed)
    assert text.endswith("}\n") and text.count("\n") == 1
    body = json.loads(text)
    assert list(body) == ["formatVersion", "workspace", "lineage", "serial", "changes",
                          "checks", "summary", "refreshed", "drift", "targets", "leftOut",
                          "environment", "governance"]
    assert (body["formatVersion"], body["workspace"]) == ("1.0", "default")
    assert [(c["address"], c["action"]) for c in body["changes"]] == [
        ("AIProviderIntegration/ai", "blocked"), ("Hook/hook_one", "update"),
        ("Space/fresh", "create"), ("Space/same", "no-op"), ("Space/space-one", "update"),
        ("Hook/unsure", "uncertain"), ("Space/gone", "orphan")]
    assert body["summary"] == {"create": 1, "update": 2, "no-op": 1, "blocked": 1,
                               "orphan": 1, "uncertain": 1, "move": 0, "import": 0, "delete": 0,
        "replace": 0, "forget": 0}
    assert all("request" not in c for c in body["changes"])


@pytest.mark.parametrize("copies", [0, 1, 1000, 2501])
def test_json_written_in_chunks_is_the_whole_document(mixed: Plan, copies: int) -> None:
    """Large plans are written a thousand changes at a time: the same bytes as one dump."""
    import dataclasses

    plan = dataclasses.replace(mixed, changes=(mixed.changes * copies)[:copies])
    whole = json.dumps(plan_public(plan), ensure_ascii=False, separators=(",", ":"))
    chunks = list(plan_json_chunks(plan))
    assert "".join(chunks) == whole + "\n"
    assert len(chunks) == 2 + -(-copies // 1000)


def _sections(markdown: str) -> list[str]:
    return re.findall(r"<details><summary><b>(\w+)</b>: ([^<]*)</summary>", markdown)


def _closed(markdown: str) -> bool:
    return (markdown.count("<details>") == markdown.count("</details>")
            and markdown.count("```") % 2 == 0)


def test_markdown_has_the_summary_table_and_a_section_per_kind(mixed: Plan) -> None:
    markdown = plan_markdown(mixed)
    assert markdown.startswith("### govsync plan: workspace `default`\n")
    assert "| 1 | 2 | 1 | 1 | 1 | 1 |" in markdown.splitlines()
    assert "> **1 blocked change(s)**" in markdown
    assert _sections(markdown) == [("AIProviderIntegration", "1 blocked"),
                                   ("Hook", "1 update, 1 uncertain"),
                                   ("Space", "1 create, 1 update, 1 orphan")]
    assert "~ Hook/hook_one (update)\n" in markdown
    assert "Space/same" not in markdown
    assert _closed(markdown)


def test_markdown_within_its_limit_leaves_out_whole_sections(
    manifests: Callable[[str], ManifestSet], store: SqliteStore,
) -> None:
    hooks = "".join(f"""
---
apiVersion: govsync/v1
kind: Hook
metadata: {{name: hook_{i:02d}}}
spec: {{code: "return {i}"}}
""" for i in range(40))
    spaces = "".join(f"""
---
apiVersion: govsync/v1
kind: Space
metadata: {{name: space-{i}}}
spec: {{description: "fence ``` inside"}}
""" for i in range(2))
    plan = make_plan(manifests(hooks + spaces), store.snapshot("default"), environ={})
    whole = plan_markdown(plan)
    assert [kind for kind, _ in _sections(whole)] == ["Hook", "Space"] and _closed(whole)

    limit = len(whole) // 2
    cut = plan_markdown(plan, limit=limit)
    assert len(cut) <= limit
    # The Hook section is too big and left out whole; the Space section after it still fits.
    assert _sections(cut) == [("Space", "2 create")]
    assert "hook_00" not in cut and _closed(cut)
    assert cut.endswith(f"\n> 40 change(s) not shown (Hook): the comment would exceed "
                        f"{limit:,} characters. Run `govsync plan` to see them all.\n")

    head = whole[:whole.index("<details>")]
    tiny = plan_markdown(plan, limit=len(head) + 200)
    assert _sections(tiny) == [] and len(tiny) <= len(head) + 200
    assert "42 change(s) not shown (Hook, Space)" in tiny


def test_the_colours_are_clicks_without_click() -> None:
    # render/ writes ANSI codes itself (it imports no command-line library); a terminal
    # sees exactly what click.style wrote before.
    for fg in (None, "black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"):
        for bold in (None, True, False):
            assert ansi("x y", fg, bold=bold) == click.style("x y", fg=fg, bold=bold)
