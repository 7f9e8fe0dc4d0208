"""A replace killed with SIGKILL (issue 41, finding 4): while the new object's create is
in flight, and after the new one is recorded but before the old one's delete has been
answered.  A replace records its intent first (the old object as deposed, the create as
pending, in one write), so the next plan finds both: it settles the create by a read
and deletes the old one.  Afterwards the object exists once, under the id state
records; the old one is gone from the server and from state.  A real apply process, a
real server (answers after 400 ms), SQLite and PostgreSQL state."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import KEY, Govsync, Server, doc, write_docs

from testkit import in_flight, until

pytestmark = pytest.mark.slow

LATENCY_MS = 400


def deposed(gov: Govsync) -> list[str]:
    return [a for a in gov.entries() if "/deposed/" in a]


def hooks_named(server: Server, name: str) -> list[str]:
    return [h["id"] for h in server.objects().get("Hook", []) if h["name"] == name]


@pytest.mark.parametrize("moment", ["create in flight", "delete in flight"])
def test_a_replace_killed_leaves_nothing_a_later_run_does_not_see(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        state_url: str, tmp_path: Path, moment: str) -> None:
    manifests = tmp_path / "m"
    write_docs(manifests / "hooks.yaml", [
        doc("Hook", "swapped", {"code": "export default function hook() { return 1 }"})])
    server = serve("--latency-ms", str(LATENCY_MS))
    gov = make_govsync(state_url, server.url)
    assert gov.invoke("apply", str(manifests), "--auto-approve").code == 0
    old = gov.entries()["Hook/swapped"]["id"]

    apply = gov.popen("apply", str(manifests), "--auto-approve", "--replace", "Hook/swapped")
    if moment == "create in flight":
        until(lambda: bool(deposed(gov)) and in_flight(server.url, KEY) > 0,
              "the replacement's create sent")
    else:
        until(lambda: gov.entries().get("Hook/swapped", {}).get("id") not in (None, old)
              and in_flight(server.url, KEY) > 0, "the old one's delete sent")
    assert apply.kill() == -signal.SIGKILL, apply.result()
    until(lambda: in_flight(server.url, KEY) == 0, "the calls in flight answered")

    # What the kill left is recorded: the old object as deposed.
    assert deposed(gov) == [f"Hook/swapped/deposed/{old}"]
    plan = gov.plan_json(str(manifests))
    actions = {c["address"]: c["action"] for c in plan["changes"]}
    if moment == "create in flight":
        # The create's outcome was unknown: a List by name settles it.  Found, the new
        # one is recorded; not found (the kill came before the server took it), it is
        # created.  Never a third.
        made = [i for i in hooks_named(server, "swapped") if i != old]
        change = next(c for c in plan["changes"] if c["address"] == "Hook/swapped")
        assert (change["action"], change["id"]) == (
            ("import", made[0]) if made else ("create", None)), (change, made)
    assert actions[f"Hook/swapped/deposed/{old}"] in ("delete", "forget"), actions
    # A second --replace sees the leftover too: it is not made a third time.
    run = gov.invoke("apply", str(manifests), "--auto-approve")
    assert run.code == 0, run

    entries = gov.entries()
    assert list(entries) == ["Hook/swapped"], entries
    live = hooks_named(server, "swapped")
    assert live == [entries["Hook/swapped"]["id"]] and old not in live  # once, the new one
    assert gov.invoke("plan", str(manifests), "--detailed-exitcode").code == 0
