"""make_plan, field_diff and rendering on built objects."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from govsync import planfile
from govsync.api.kinds import BY_KIND
from govsync.errors import ManifestError
from govsync.manifests import ManifestSet
from govsync.plan import Action, field_diff, make_plan
from govsync.render.markdown import plan_markdown
from govsync.render.text import plan_text
from govsync.state import APPLIED, UNCERTAIN, Entry, Snapshot
from govsync.state.sqlite import SqliteStore

HOOK = """
apiVersion: govsync/v1
kind: Hook
metadata: {name: hook_one}
spec: {code: "def handler(e):\\n  return 1\\n", timeoutMs: %d}
"""
SPACE = """
---
apiVersion: govsync/v1
kind: Space
metadata: {name: space-one}
spec: {description: %s}
"""
# Free-form user data that looks like the old markers (issue 8, defect 1).
LOOKALIKE = """
---
apiVersion: govsync/v1
kind: Connector
metadata: {name: conn-one}
spec: {terminationProtection: false}
---
apiVersion: govsync/v1
kind: ConnectorAIProvider
metadata: {name: conn-one-ai}
spec:
  connectorRef: conn-one
  config:
    providerB: {secretish: {"$secret": "x"}, refish: {"$ref": "x"}}
"""


def test_actions_against_state(manifests: Callable[[str], ManifestSet], store: SqliteStore) -> None:
    first = make_plan(manifests(HOOK % 100 + SPACE % "a"), store.snapshot("default"), environ={})
    assert [(c.address, c.action) for c in first.changes] == [
        ("Hook/hook_one", Action.CREATE), ("Space/space-one", Action.CREATE)]
    for change in first.changes:
        assert change.request is not None
        store.put("default", Entry(change.address, change.kind, f"id-{change.address}", APPLIED,
                                   change.request))
    store.put("default", Entry("Space/gone", "Space", "id-g", APPLIED, {}))
    store.put("default", Entry("Hook/unsure", "Hook", None, UNCERTAIN, {}))
    plan = make_plan(manifests(HOOK % 200 + SPACE % "b"), store.snapshot("default"), environ={})
    actions = {c.address: c.action for c in plan.changes}
    assert actions == {"Hook/hook_one": Action.UPDATE, "Space/space-one": Action.UPDATE,
                       "Space/gone": Action.ORPHAN, "Hook/unsure": Action.UNCERTAIN}
    hook = next(c for c in plan.changes if c.address == "Hook/hook_one")
    assert hook.fields == ("timeoutMs",) and hook.operation == "UpdateHook"
    space = next(c for c in plan.changes if c.address == "Space/space-one")
    assert space.operation == "UpdateSpaceV2"  # contract section 12: every field
    assert plan.summary() == {"create": 0, "update": 2, "no-op": 0, "blocked": 0, "orphan": 1,
                              "uncertain": 1, "move": 0, "import": 0, "delete": 0,
        "replace": 0, "forget": 0}
    assert [c.address for c in plan.work()] == ["Hook/hook_one", "Space/space-one"]
    assert [c.address for c in plan.work(forget_orphans=True)] == [
        "Hook/hook_one", "Space/space-one", "Space/gone"]


def test_a_missing_secret_is_a_problem_at_its_place(manifests: Callable[[str], ManifestSet],
                                                    snapshot: Snapshot) -> None:
    text = """
    apiVersion: govsync/v1
    kind: AIProviderIntegration
    metadata: {name: ai}
    spec: {provider: AI_PROVIDER_VENDORA_ENTERPRISE, apiKey: {fromEnv: NOT_SET_ANYWHERE}}
    """
    with pytest.raises(ManifestError) as info:
        make_plan(manifests(text), snapshot, environ={})
    (problem,) = info.value.problems
    assert problem.line == 5 and "NOT_SET_ANYWHERE" in problem.message


def test_field_diff_masks_secrets_at_and_below_their_paths() -> None:
    kind = BY_KIND["LogIntegration"]
    before = {"name": "a", "logStoreB": {"apiKey": "fp1", "host": "h1"}}
    after = {"name": "a", "logStoreB": {"apiKey": "fp2", "host": "h2"}}
    diff = {d.path: (d.before, d.after) for d in field_diff(kind, before, after)}
    assert diff == {"logStoreB.apiKey": ("(sensitive)", "(sensitive)"),
                    "logStoreB.host": ("h1", "h2")}
    gone = field_diff(kind, before, {"name": "a"})
    assert gone[0].before == {"apiKey": "(sensitive)", "host": "h1"}


def test_user_data_that_looks_like_a_marker_is_shown_and_sent_as_written(
        manifests: Callable[[str], ManifestSet], snapshot: Snapshot, tmp_path) -> None:
    plan = make_plan(manifests(LOOKALIKE), snapshot, environ={})
    text = plan_text(plan)
    assert '"secretish": {"$secret": "x"}' in text
    assert '"refish": {"$ref": "x"}' in text
    assert "(sensitive)" not in text
    assert plan_markdown(plan).count("(known after apply)") == 1  # connectorId only
    # through a saved plan, too
    path = tmp_path / "p.json"
    planfile.write(plan, str(path), b"k" * 32)
    again = planfile.read(str(path)).plan
    ai = next(c for c in again.changes if c.address == "ConnectorAIProvider/conn-one-ai")
    assert ai.request is not None
    assert ai.request["config"]["providerB"] == {"secretish": {"$secret": "x"},
                                                 "refish": {"$ref": "x"}}


def test_a_plan_s_repr_counts_its_changes(manifests: Callable[[str], ManifestSet],
                                          store: SqliteStore) -> None:
    # asyncio.run formats its task's result (apply's plan) when it restores the
    # SIGINT handler: a repr of every change cost 13 ms per 1,000 changes.
    plan = make_plan(manifests(HOOK % 100 + SPACE % "a"), store.snapshot("default"), environ={})
    assert repr(plan) == "Plan(workspace='default', serial=0, 2 changes: 2 create)"
    assert "hook_one" not in repr(plan)
