"""Refresh (contract section 12): plan, apply and drift read every recorded object from
the server; what changed outside govsync, and what is missing, is shown and counted."""

from __future__ import annotations

from typing import Any

import pytest
from refreshkit import Gov, console_edit, copy_examples, write

from govsync.api.kinds import KINDS
from govsync.refresh.reader import readable

# Every kind the API can read that has a field to change (a blocked user is only its id).
READABLE = [k.name for k in KINDS if readable(k) and k.fields != ("id",)]


def applied(gov: Gov) -> str:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    return str(manifests)


def drift_json(gov: Gov, manifests: str, code: int) -> dict[str, Any]:
    run = gov.ok("drift", manifests, "--format", "json", code=code)
    return run.json()


def recorded_of(gov: Gov, kind: str) -> dict[str, Any]:
    return next(e for e in gov.entries().values() if e["kind"] == kind)


def test_no_false_drift_right_after_apply(gov: Gov) -> None:
    manifests = applied(gov)
    report = drift_json(gov, manifests, 0)
    assert report["drift"] == [] and report["refreshed"] is True
    # Every kind the API reads was read: only those without a read are compared
    # with the recorded state alone.
    assert report["unobservable"] == sorted(k.name for k in KINDS if not readable(k))
    plan = gov.ok("plan", manifests, "--detailed-exitcode")
    assert "No changes" in plan.out and "Objects changed outside govsync" not in plan.out
    assert "Check refresh: passed" in plan.out  # the kinds no read exists for, named
    assert "ResourceAlias" in plan.out


@pytest.mark.parametrize("kind", READABLE)
def test_outside_change_of_every_readable_kind(sqlite_gov: Gov, kind: str) -> None:
    # Each kind on SQLite: what a kind's read finds does not depend on the backend
    # (the console edit below runs on both).
    gov = sqlite_gov
    manifests = applied(gov)
    entry = recorded_of(gov, kind)
    field = console_edit(gov, kind, entry["id"])
    report = gov.run("drift", manifests, "--format", "json").json()
    (found,) = report["drift"]
    assert found["address"] == entry["address"] and found["kind"] == "changed"
    assert field in found["fields"] or any(field.startswith(f + ".") for f in found["fields"])
    run = gov.run("plan", manifests, "--format", "json")
    plan = run.json()
    (outside,) = [c for c in plan["changes"] if c.get("outside")]
    assert outside["address"] == entry["address"]
    text = gov.run("plan", manifests).out
    assert text.index("Objects changed outside govsync") < text.index("Plan:")
    assert f"~ {entry['address']}  (changed outside govsync)" in text
    top = field.split(".")[0]
    # Contract 12, amended: a field the manifest names is put back by any apply, its
    # diff from the live value; one no update carries is blocked (--replace); one the
    # manifest does not name (at the API's default) keeps what the console set.
    if outside["action"] == "update":
        assert outside["why"] == {"why": "outside"}, outside
        assert top in {f.split(".")[0].split("[")[0] for f in outside["fields"]}
        gov.ok("apply", manifests, "--auto-approve")
        assert drift_json(gov, manifests, 0)["drift"] == []
    elif outside["action"] == "blocked":
        assert run.code == 1 and outside["why"]["why"] == "cannot-update", outside
        assert top in outside["why"]["fields"]
        assert f"--replace {entry['address']}" in outside["reason"]
    else:
        assert outside["action"] == "no-op", outside
        assert run.code == 0 and plan["summary"]["no-op"] == len(plan["changes"])


def test_console_edit_through_the_api_shows_in_plan_and_drift(gov: Gov) -> None:
    """The issue's case: an allowlisted host added to a hook in the console."""
    manifests = applied(gov)
    hook = next(o for o in gov.objects("Hook") if o["name"] == "risk_score")
    gov.call("UpdateHook", {"hook": {**{k: v for k, v in hook.items()
                                         if k not in ("createdAt", "updatedAt")},
                                     "allowlistedNetworkHosts": [
                                         *hook["allowlistedNetworkHosts"], "exfil.example.net"]}})
    run = gov.ok("drift", manifests, code=2)
    assert "~ Hook/risk_score  (changed outside govsync)" in run.out
    assert "exfil.example.net" in run.out
    # The manifest names the hook's hosts: the plan puts them back, from the live value.
    plan = gov.ok("plan", manifests, "--detailed-exitcode", "--format", "json", code=2).json()
    (change,) = [c for c in plan["changes"] if c["action"] != "no-op"]
    assert change["address"] == "Hook/risk_score" and change["why"] == {"why": "outside"}
    (diff,) = change["diff"]
    assert diff["field"] == "allowlistedNetworkHosts[1]" and diff["before"] == \
        "exfil.example.net" and diff["after"] is None
    markdown = gov.ok("plan", manifests, "--format", "markdown").out
    assert "#### Objects changed outside govsync" in markdown
    assert markdown.index("Objects changed outside govsync") < markdown.index("Hook/risk_score")
    gov.ok("apply", manifests, "--auto-approve")
    hook = next(o for o in gov.objects("Hook") if o["name"] == "risk_score")
    assert "exfil.example.net" not in hook["allowlistedNetworkHosts"]
    gov.ok("drift", manifests, code=0)


def test_missing_object_is_planned_as_a_create(gov: Gov) -> None:
    manifests = applied(gov)
    entry = recorded_of(gov, "DataLabel")
    gov.call("DeleteDataLabel", {"id": entry["id"]})
    report = drift_json(gov, manifests, 2)
    assert report["drift"][0]["address"] == entry["address"]
    assert report["drift"][0]["kind"] == "missing"
    plan = gov.ok("plan", manifests, "--format", "json").json()
    (create,) = [c for c in plan["changes"] if c["action"] == "create"]
    assert create["address"] == entry["address"] and "missing on the server" in create["reason"]
    assert plan["summary"]["create"] == 1
    gov.ok("apply", manifests, "--auto-approve")
    assert drift_json(gov, manifests, 0)["drift"] == []
    names = [o["name"] for o in gov.objects("DataLabel")]
    assert sorted(names) == sorted(set(names))  # recreated once


def test_ignore_changes_and_refresh_false(gov: Gov) -> None:
    manifests = applied(gov)
    entry = recorded_of(gov, "Space")
    console_edit(gov, "Space", entry["id"])  # its description
    write(gov.folder, "govsync.yaml", """\
        apiVersion: govsync/v1
        kind: Project
        ignoreChanges:
          Space: [description]
        """)
    assert drift_json(gov, manifests, 0)["drift"] == []
    (gov.folder / "govsync.yaml").unlink()
    assert drift_json(gov, manifests, 2)["drift"][0]["fields"] == ["description"]
    run = gov.ok("drift", manifests, "--refresh=false", "--format", "json", code=0)
    assert run.json()["refreshed"] is False and run.json()["drift"] == []


def test_ignore_changes_errors_name_their_place(sqlite_gov: Gov) -> None:
    write(sqlite_gov.folder, "govsync.yaml", """\
        apiVersion: govsync/v1
        kind: Project
        ignoreChanges:
          Hok: [description]
          Space: description
        """)
    write(sqlite_gov.folder, "m/space.yaml", """\
        apiVersion: govsync/v1
        kind: Space
        metadata: {name: s}
        spec: {description: d}
        """)
    run = sqlite_gov.run("validate", "m")
    assert run.code == 1
    assert "govsync.yaml:4:3: ignoreChanges: unknown kind 'Hok' (did you mean Hook?)" in \
        run.out + run.err
    assert "govsync.yaml:5:" in run.out + run.err
