"""The example organisation applied end to end against ``govsync serve``."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from applykit import (
    EXAMPLE_MANIFESTS,
    EXAMPLE_SEED,
    Govsync,
    Server,
    Wanted,
    check_consistent,
    closed_url,
    duplicates,
    edit_spec,
    write_hooks,
)

from govsync.api.kinds import SEEDED_KINDS
from govsync.manifests.loader import load
from testkit import examples, until

EXAMPLE = examples()
N = EXAMPLE.objects  # the example organisation's objects


def copy_examples(tmp_path: Path) -> Path:
    target = tmp_path / "manifests"
    shutil.copytree(EXAMPLE_MANIFESTS, target)
    return target


def reports_done(server: Server) -> dict[str, Any]:
    """The server's objects once no impact report is running (a report's status is the one
    thing the server changes by itself: running, then completed or failed)."""
    until(lambda: all(r["status"] != "running"
                      for r in server.objects().get("PolicyReport", [])),
          "every impact report finished", timeout=60)
    return server.objects()


def test_examples_apply_to_an_empty_server(govsync: Govsync, server: Server, tmp_path: Path) -> None:
    manifests = copy_examples(tmp_path)
    wanted = Wanted.load(manifests)
    seed = yaml.safe_load(EXAMPLE_SEED.read_text())
    before = server.objects()
    assert all(not objs for kind, objs in before.items() if kind not in SEEDED_KINDS)

    first = govsync.run("apply", str(manifests), "--auto-approve")
    assert first.code == 0, first
    assert f"Apply: {N} applied, 0 failed, 0 skipped, 0 uncertain" in first.out

    # The server holds exactly the manifests' objects, beyond the seeded ones.
    objects = reports_done(server)
    created = Counter({k: len(v) for k, v in objects.items()
                       if k not in SEEDED_KINDS and v})
    expected = Counter({k: n for k, n in wanted.counts().items() if k not in SEEDED_KINDS})
    assert created == expected
    assert len(objects["ConnectorListenerLink"]) == len(seed["connectorListenerLinks"])
    assert len(objects["SidecarResourceLink"]) == len(seed["sidecarResourceLinks"])
    assert duplicates(objects, wanted) == []
    # Adopted links carry terminationProtection as declared; the others keep the seed's.
    adopted = {m.template["id"]: m.template.get("terminationProtection", False)
               for m in load([str(manifests)]).objects.values()
               if m.kind.name in ("ConnectorListenerLink", "SidecarResourceLink")}
    assert len(adopted) == 4
    for kind, seed_key in (("ConnectorListenerLink", "connectorListenerLinks"),
                           ("SidecarResourceLink", "sidecarResourceLinks")):
        seeded = {s["id"]: s.get("terminationProtection", False) for s in seed[seed_key]}
        for link in objects[kind]:
            assert link["terminationProtection"] is adopted.get(link["id"], seeded[link["id"]]), link
    check_consistent(govsync, server, wanted, settled=True)

    plan = govsync.run("plan", str(manifests), "--detailed-exitcode")
    assert plan.code == 0, plan
    assert "No changes" in plan.out

    # Nothing to send: the second apply succeeds against a port nobody listens on.
    second = govsync.run("apply", str(manifests), "--auto-approve", env={"GOVSYNC_ENDPOINT": closed_url()})
    assert second.code == 0, second
    assert "No changes. Nothing to apply." in second.out
    assert server.objects() == objects

    # A hook change is exactly one UpdateHook of that hook.
    serial = govsync.serial()
    hook_id = govsync.entries()["Hook/risk_score"]["id"]
    edit_spec(manifests / "hooks.yaml", "Hook", "risk_score", timeoutMs=2500)
    plan = govsync.run("plan", str(manifests), "--detailed-exitcode")
    assert plan.code == 2, plan
    assert "~ Hook/risk_score" in plan.out and "timeoutMs: 1500 -> 2500" in plan.out
    update = govsync.run("apply", str(manifests), "--auto-approve")
    assert update.code == 0, update
    assert "Apply: 1 applied, 0 failed" in update.out and "(1 requests in " in update.out
    after = server.objects()
    assert len(after["Hook"]) == len(objects["Hook"])
    (old,) = [h for h in objects["Hook"] if h["id"] == hook_id]
    (new,) = [h for h in after["Hook"] if h["id"] == hook_id]
    assert new["timeoutMs"] == 2500 and new["updatedAt"] > old["updatedAt"]
    assert new["createdAt"] == old["createdAt"]
    assert {k: v for k, v in after.items() if k != "Hook"} == \
        {k: v for k, v in objects.items() if k != "Hook"}
    assert [h for h in after["Hook"] if h["id"] != hook_id] == \
        [h for h in objects["Hook"] if h["id"] != hook_id]
    assert govsync.serial() == serial + 1

    # A satellite's type cannot change (UpdateSatelliteV2 cannot): blocked, exit 1,
    # nothing sent.
    edit_spec(manifests / "satellites.yaml", "Satellite", "discovery-analytics",
              satelliteType="ai")
    serial = govsync.serial()
    plan = govsync.run("plan", str(manifests))
    assert plan.code == 1, plan
    assert "! Satellite/discovery-analytics" in plan.out and "blocked" in plan.out
    blocked = govsync.run("apply", str(manifests), "--auto-approve",
                          env={"GOVSYNC_ENDPOINT": closed_url()})
    assert blocked.code == 1, blocked
    assert "blocked" in blocked.err and "nothing was applied" in blocked.err
    blocked = govsync.run("apply", str(manifests), "--auto-approve")
    assert blocked.code == 1, blocked
    assert server.objects() == after
    assert govsync.serial() == serial


def test_apply_reports_what_it_leaves_alone(govsync: Govsync, server: Server,
                                            tmp_path: Path) -> None:
    """Orphans and uncertain entries are reported by apply, not hidden behind "No changes"."""
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"keep_{i}" for i in range(3)))
    assert govsync.run("apply", str(manifests), "--auto-approve").code == 0
    write_hooks(manifests, (f"keep_{i}" for i in range(2)))

    orphaned = govsync.run("apply", str(manifests), "--auto-approve")
    assert orphaned.code == 0, orphaned
    assert "No changes" not in orphaned.out
    assert "- Hook/keep_2  (orphan)" in orphaned.out and "--forget-orphans" in orphaned.out
    forgot = govsync.run("apply", str(manifests), "--auto-approve", "--forget-orphans")
    assert forgot.code == 0, forgot
    assert "1 forgotten" in forgot.out and "(0 requests in " in forgot.out
    assert "Hook/keep_2" not in govsync.entries()
    assert len(server.objects()["Hook"]) == 3  # the API cannot delete it

    # An entry left uncertain (moved in with import-all, as a crash leaves it).
    export = govsync.export()
    for entry in export["entries"]:
        if entry["address"] == "Hook/keep_0":
            entry.update(status="uncertain", id=None, response=None)
    (tmp_path / "edited.json").write_text(json.dumps(export))
    assert govsync.invoke("state", "import-all", str(tmp_path / "edited.json")).code == 0
    # Without reading the server nothing settles it: apply says so, and sends nothing.
    unsure = govsync.run("apply", str(manifests), "--auto-approve", "--refresh=false")
    assert "No changes" not in unsure.out, unsure
    assert "? Hook/keep_0  (uncertain)" in unsure.out
    assert "govsync state resolve Hook/keep_0" in unsure.out
    assert len(server.objects()["Hook"]) == 3  # never sent again
    # Reading it, a List by name finds it: recorded, never created again.
    settled = govsync.run("apply", str(manifests), "--auto-approve")
    assert settled.code == 0 and "< Hook/keep_0  (import)" in settled.out, settled
    assert govsync.entries()["Hook/keep_0"]["status"] == "applied"
    assert len(server.objects()["Hook"]) == 3
