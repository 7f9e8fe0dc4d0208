"""Outside changes and ignored fields (contract section 12, amended; issue 43): an update's
diff starts from the live value; an ignoreChanges field is never diffed, never changed,
and an update carries its live value; an import's diff goes from the server to the
manifest; a plan made without reading the server says so."""

from __future__ import annotations

from typing import Any

from refreshkit import Gov, copy_examples, write


def risk(gov: Gov) -> dict[str, Any]:
    return next(h for h in gov.objects("Hook") if h["name"] == "risk_score")


def console(gov: Gov, **fields: Any) -> None:
    hook = risk(gov)
    gov.call("UpdateHook", {"hook": {**{k: v for k, v in hook.items()
                                        if k not in ("createdAt", "updatedAt")}, **fields}})


def hook_change(gov: Gov, *args: str, code: int = 0) -> dict[str, Any]:
    run = gov.run("plan", *args, "--format", "json")
    assert run.code == code, run
    return next(c for c in run.json()["changes"] if c["address"] == "Hook/risk_score")


def test_an_update_diff_starts_from_the_live_value(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    console(gov, timeoutMs=100)
    hooks = manifests / "hooks.yaml"
    hooks.write_text(hooks.read_text().replace("timeoutMs: 1500", "timeoutMs: 7000", 1))
    change = hook_change(gov, str(manifests))
    assert change["action"] == "update" and "why" not in change, change  # a git change
    assert change["diff"] == [{"field": "timeoutMs", "before": 100, "after": 7000}]
    assert [o["field"] for o in change["outside"]] == ["timeoutMs"]
    text = gov.ok("plan", str(manifests)).out
    assert "timeoutMs: 100 -> 7000" in text


def test_an_ignored_field_is_never_diffed_and_never_changed(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    write(gov.folder, "govsync.yaml", f"""\
        apiVersion: govsync/v1
        kind: Project
        paths: [{manifests}]
        ignoreChanges:
          Hook: [description]
        """)
    gov.ok("apply", "--auto-approve")
    console(gov, description="edited in the console", timeoutMs=100)
    change = hook_change(gov)
    assert change["action"] == "update" and change["fields"] == ["timeoutMs"], change
    assert change["kept"] == ["description"]
    gov.ok("plan", "--out", "p.json")
    shown = gov.ok("show", "p.json").out
    assert "hook.description: (kept: the value the server holds; ignoreChanges)" in shown
    gov.ok("apply", "--auto-approve")
    assert risk(gov)["description"] == "edited in the console"
    assert risk(gov)["timeoutMs"] == 1500
    # A git edit of an ignored field is not applied either.
    hooks = manifests / "hooks.yaml"
    hooks.write_text(hooks.read_text().replace(
        "description: Scores a session", "description: Rates a session", 1))
    assert hook_change(gov)["action"] == "no-op"
    gov.ok("apply", "--auto-approve")
    assert risk(gov)["description"] == "edited in the console"


def test_an_import_diff_goes_from_the_server_to_the_manifest(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    space = next(e for a, e in gov.entries().items() if a == "Space/analytics")
    gov.ok("state", "forget", "Space/analytics")
    gov.call("UpdateSpaceV2", {"space": {**next(
        s for s in gov.objects("Space") if s["id"] == space["id"]),
        "description": "edited in the console"}})
    write(manifests, "import.yaml", f"""\
        apiVersion: govsync/v1
        kind: Import
        metadata: {{name: take-analytics}}
        spec: {{to: Space/analytics, id: {space["id"]}}}
        """)
    run = gov.run("plan", str(manifests), "--format", "json")
    change = next(c for c in run.json()["changes"] if c["address"] == "Space/analytics")
    assert change["action"] == "import", change
    (diff,) = change["diff"]
    assert diff["field"] == "description" and diff["before"] == "edited in the console"
    assert diff["after"] != "edited in the console"
    assert "then sets description as the manifest says" in change["reason"]


def test_a_plan_without_reading_the_server_says_so(gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    text = gov.ok("plan", str(manifests), "--refresh=false").out
    assert "Check refresh: skipped (the server was not read (--refresh=false)" in text
    drift = gov.run("drift", str(manifests), "--refresh=false", "--format", "json").json()
    # Only the kinds no read of the API finds are unobservable, not every kind.
    assert drift["unobservable"] == ["ResourceAlias", "SessionTermination"]


def test_a_console_value_copied_into_git_is_recorded_not_sent(gov: Gov) -> None:
    """Issue 43, finding 8: the manifest now says what the console set (the state still
    holds the old value): the plan has nothing to send, and apply records the live value
    without a request, so the outside change is settled (drift exits 0 after)."""
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    console(gov, timeoutMs=100)
    updated = risk(gov)["updatedAt"]
    hooks = manifests / "hooks.yaml"
    hooks.write_text(hooks.read_text().replace("timeoutMs: 1500", "timeoutMs: 100", 1))
    change = hook_change(gov, str(manifests), "--detailed-exitcode")
    assert change["action"] == "no-op", change
    text = gov.ok("plan", str(manifests)).out
    assert ("No changes to send. The manifests now match what changed outside govsync; "
            "apply records it: Hook/risk_score.") in text, text
    gov.ok("plan", str(manifests), "--out", "p.json")  # a saved plan carries it
    applied = gov.ok("apply", "p.json")
    assert "Recorded 1 object(s) as the server holds them" in applied.out, applied
    assert risk(gov)["updatedAt"] == updated  # nothing was sent
    entry = gov.entries()["Hook/risk_score"]
    assert entry["spec"]["timeoutMs"] == 100, entry
    assert gov.ok("drift", str(manifests)).code == 0
    again = gov.ok("plan", str(manifests))
    assert "No changes. The manifests match the recorded state." in again.out, again
    # Applied at once (not a saved plan): the object as read is recorded.
    console(gov, timeoutMs=200)
    hooks.write_text(hooks.read_text().replace("timeoutMs: 100", "timeoutMs: 200", 1))
    assert "Recorded 1 object(s)" in gov.ok("apply", str(manifests), "--auto-approve").out
    assert gov.entries()["Hook/risk_score"]["response"]["timeoutMs"] == 200
    assert gov.ok("drift", str(manifests)).code == 0
