"""A replace whose every write is stored and then left unanswered (issue 33): the reference
server over real HTTP drops the connection after committing each create, update and
delete.  Apply settles each step by a read, with no human step: the new object's create
by a List of the kind's objects of that name, the dependants' updates by Gets, the old
object's delete by a Get that finds it gone."""

from __future__ import annotations

import contextlib
import random

from refreshkit import Gov, copy_examples, faulty_endpoint

from govsync.server.droppable import DroppableH11Protocol


class EveryWriteDropped(random.Random):
    """The server's fault dice, always landing on "store it, then drop the connection"."""

    def random(self) -> float:
        return 0.9


def dropping(gov: Gov) -> contextlib.AbstractContextManager[Gov]:
    return faulty_endpoint(gov, 1.0, EveryWriteDropped(), http=DroppableH11Protocol)


def test_a_replace_whose_answers_are_all_lost_is_settled_by_reads(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    old = gov.entries()["Space/ml-platform"]["id"]
    with dropping(gov) as flaky:
        run = flaky.run("apply", manifests, "--auto-approve", "--replace", "Space/ml-platform",
                        "--allow-endpoint-change")
    assert run.code == 0, run
    assert "uncertain" not in run.err, run
    entries = gov.entries()
    assert all(e["status"] == "applied" for e in entries.values())
    new = entries["Space/ml-platform"]["id"]
    assert new != old
    spaces = [s for s in gov.objects("Space") if s["name"] == "ml-platform"]
    assert [s["id"] for s in spaces] == [new]  # the new one once, the old one gone
    for address in ("Connector/ml-gateway-us", "Satellite/ai-analytics"):
        kind = address.split("/")[0]
        live = next(o for o in gov.objects(kind) if o["id"] == entries[address]["id"])
        assert live["spaceId"] == new, address
    assert "No changes" in gov.ok("plan", manifests, "--allow-endpoint-change").out


def test_a_native_users_replace_whose_answers_are_lost_is_settled_by_its_scoped_list(
        gov: Gov) -> None:
    """A native user has no name: its new object is found by what identifies it (its
    resource and label, Kind.identity) in its resource's List, not left uncertain."""
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    old = gov.entries()["NativeUser/warehouse-bi"]["id"]
    with dropping(gov) as flaky:
        run = flaky.run("apply", manifests, "--auto-approve", "--replace",
                        "NativeUser/warehouse-bi", "--allow-endpoint-change")
    assert run.code == 0, run
    assert "uncertain" not in run.err, run
    entries = gov.entries()
    assert all(e["status"] == "applied" for e in entries.values())
    new = entries["NativeUser/warehouse-bi"]["id"]
    users = [u for u in gov.objects("NativeUser") if u.get("label") == "BI dashboards"]
    assert new != old and [u["id"] for u in users] == [new]
    assert "No changes" in gov.ok("plan", manifests, "--allow-endpoint-change").out
