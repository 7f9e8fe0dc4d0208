"""The state contract: what every backend's store must do, as one suite of tests.

As Terraform's ``statemgr/testing.go`` is run by every state manager, this
module is run by every backend: ``test_contract.py`` imports its tests, and
conftest.py's ``backend`` fixture gives each of them a ``Harness`` on SQLite
and on PostgreSQL.  A new backend implements ``govsync.state.Backend``, a
``Harness`` (how the suite opens stores and breaks things the backend's own
way: a lock lost, a table dropped, a reader's credentials) and runs the same
tests.  What only one backend has (SQLite's file checks and backup,
PostgreSQL's sessions and schema) is tested in test_sqlite.py and
test_postgres.py.

The suite covers contract section 7 and 9 as the store keeps them:

* records: lineage, serial, entries, history, endpoint, governance, plan
  claims, the agent's records, ids recorded by another workspace;
* atomic writes: ``put_many`` is seen whole or not at all;
* the lock: one holder, named when refused, released with its process;
* fencing: a lost lock (or leadership) refuses every write and changes nothing;
* integrity: a damaged state is an error naming the problem, never a new one;
* plan keys: a reader of the state can neither read the key nor find it;
* leadership: one agent leads a workspace, a take-over is recorded.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest

from govsync.errors import (
    LockLostError,
    PlanKeyUnavailable,
    StateDamagedError,
    StateError,
    StateLockedError,
)
from govsync.state import (
    APPLIED,
    PENDING,
    UNCERTAIN,
    Entry,
    EntryStatus,
    LockHolder,
    StateStore,
)
from govsync.state.export import document


class Harness(ABC):
    """One backend's state database, as the suite uses it: open as many stores on it as
    a test needs, and break what the backend's own failures break."""

    name: str
    url: str
    lost_lock: str
    """What a LockLostError says of a lock that ``lose`` ended."""
    objects_table: str
    """How a message names the objects table."""
    racers: int = 8
    """How many processes race for one lock."""

    def __init__(self) -> None:
        self.stores: list[StateStore] = []

    @abstractmethod
    def connect(self) -> StateStore:
        """A new store on this database."""

    def open(self) -> StateStore:
        store = self.connect()
        self.stores.append(store)
        return store

    def workspace(self) -> str:
        """A workspace name no other test uses."""
        return f"test-{uuid.uuid4().hex[:12]}"

    def close(self) -> None:
        for store in self.stores:
            store.close()

    @abstractmethod
    def execute(self, template: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run a statement of the shared SQL (``{T}``: the table prefix) as the database's
        owner, behind the stores' backs: its rows."""

    @abstractmethod
    def lose(self, store: StateStore, workspace: str, *, leader: bool = False) -> None:
        """End the lock (``leader``: the leadership) ``store`` holds, behind its back, as
        the backend's own failures do (SQLite: its lock file removed; PostgreSQL: its
        session terminated)."""

    @abstractmethod
    def steal(self, first: StateStore, second: StateStore, workspace: str) -> None:
        """Make ``second`` take the lock while ``first``'s still looks alive where it is
        checked: only the epoch tells ``first`` it lost it."""

    @abstractmethod
    def fresh(self) -> AbstractContextManager[Harness]:
        """A database of its own, for a test that damages it or reads it as a reader."""

    @abstractmethod
    def reader(self) -> StateStore:
        """A store with only what a reader of the state has (PostgreSQL: the read-only
        role made with `govsync state readonly-role`; SQLite: a copy of the file)."""

    @abstractmethod
    def readable(self) -> bytes:
        """Everything a reader of the state can read, as bytes."""

    @abstractmethod
    def history_times(self, workspace: str) -> list[str]:
        """The time column of the workspace's history rows, newest first, as UTC text
        (``2025-01-01T00:00:00.000000Z``): what no read of a store shows."""


ALICE = LockHolder("alice", "ci-runner-7", 4242, "govsync apply manifests/", "2024-05-01T10:00:00Z")
BOB = LockHolder("bob", "laptop", 1717, "govsync apply .", "2024-05-01T10:00:01Z")


def entry(address: str, status: EntryStatus = APPLIED, **spec: object) -> Entry:
    kind = address.split("/")[0]
    return Entry(address, kind, f"id-{address.lower()}", status, dict(spec) or {"a": 1},
                 {"id": f"id-{address.lower()}", "createdAt": "2024-01-01T00:00:00Z"},
                 "2024-05-01T10:00:00.000000Z")


def intent(address: str) -> Entry:
    return Entry(address, address.split("/")[0], None, PENDING, {"a": 1}, None, "")


# -- snapshots, lineage and serial ------------------------------------------------------

def test_snapshot_creates_an_empty_workspace(store: StateStore, ws: str) -> None:
    snap = store.snapshot(ws)
    assert (snap.workspace, snap.serial, snap.entries) == (ws, 0, {})
    assert uuid.UUID(snap.lineage)
    assert len(snap.key) == 32


def test_a_read_that_may_not_create_makes_no_workspace(backend: Harness, ws: str) -> None:
    store = backend.open()
    empty = store.snapshot(ws, create=False)
    assert (empty.lineage, empty.serial, empty.entries) == ("", 0, {})
    assert backend.open().snapshot(ws, create=False).lineage == ""  # still not made
    made = store.snapshot(ws)
    assert made.lineage and made.key
    assert backend.open().snapshot(ws, create=False).lineage == made.lineage


def test_lineage_and_key_are_stable_across_calls_and_reopening(
        backend: Harness, store: StateStore, ws: str) -> None:
    first = store.snapshot(ws)
    again = store.snapshot(ws)
    reopened = backend.open().snapshot(ws)
    assert (again.lineage, again.key) == (first.lineage, first.key)
    assert (reopened.lineage, reopened.key, reopened.serial) == (first.lineage, first.key, 0)


def test_put_and_remove_bump_the_serial_by_exactly_one(store: StateStore, ws: str) -> None:
    assert store.snapshot(ws).serial == 0
    assert store.put(ws, entry("Space/a")) == 1
    assert store.put(ws, entry("Space/b")) == 2
    assert store.put(ws, entry("Space/a", UNCERTAIN)) == 3  # replacing counts too
    assert store.remove(ws, "Space/b") == 4
    snap = store.snapshot(ws)
    assert snap.serial == 4
    assert list(snap.entries) == ["Space/a"]


def test_put_many_is_one_write_and_the_last_entry_of_an_address_holds(
        store: StateStore, ws: str) -> None:
    assert store.put(ws, entry("Space/a")) == 1
    assert store.put_many(ws, [entry("Space/a", UNCERTAIN), entry("Space/b"), entry("Space/c"),
                               entry("Space/b", PENDING)]) == 2
    snap = store.snapshot(ws)  # its integrity check counts the entries as well
    assert snap.serial == 2 and list(snap.entries) == ["Space/a", "Space/b", "Space/c"]
    assert (snap.entries["Space/a"].status, snap.entries["Space/b"].status) == (UNCERTAIN, PENDING)
    assert store.put_many(ws, []) == 3 and len(store.snapshot(ws).entries) == 3


def test_put_many_is_seen_whole_or_not_at_all(backend: Harness, ws: str) -> None:
    """A reader reading while batches of 25 entries are written sees whole batches,
    each with its own serial: never a part of one."""
    writer, reader = backend.open(), backend.open()
    writer.snapshot(ws)
    done = threading.Event()
    seen: list[tuple[int, int]] = []

    def read() -> None:
        while not done.is_set():
            snap = reader.snapshot(ws, responses=False)
            seen.append((snap.serial, len(snap.entries)))

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for batch in range(12):
            writer.put_many(ws, [entry(f"Space/b{batch:02}-{i:02}") for i in range(25)])
    finally:
        done.set()
        thread.join()
    assert seen and all(count == 25 * serial for serial, count in seen), seen
    assert writer.snapshot(ws).serial == 12


def test_an_unknown_status_is_never_written(store: StateStore, ws: str) -> None:
    bad = Entry("Space/a", "Space", "1", "exploded", {})  # type: ignore[arg-type]
    with pytest.raises(StateError, match="unknown entry status 'exploded'"):
        store.put(ws, bad)
    with pytest.raises(StateError, match="unknown entry status 'exploded'"):
        store.replace_all(ws, [bad], None, None)
    assert store.snapshot(ws).entries == {}
    store.put(ws, Entry("Space/a", "Space", "1", APPLIED, {}))
    assert store.snapshot(ws).entries["Space/a"].status is EntryStatus.APPLIED


def test_writes_create_the_workspace_too(store: StateStore, ws: str) -> None:
    assert store.put(ws, entry("Space/a")) == 1
    assert store.snapshot(ws).serial == 1


def test_entries_round_trip(store: StateStore, ws: str) -> None:
    written = [
        Entry("Hook/risk", "Hook", "hook-1", APPLIED,
              {"name": "risk", "enabled": True, "weight": 0.25, "count": 3, "none": None,
               "tags": ["a", "é", "日本"], "nested": {"z": 1, "a": [{"b": False}]}},
              {"id": "hook-1", "createdAt": "2024-01-01T00:00:00.000000000Z"},
              "2024-05-01T10:00:00.123456Z"),
        Entry("Policy/p", "Policy", None, PENDING, {"name": "p"}, None, "2024-05-01T10:00:01Z"),
        Entry("Space/s", "Space", None, UNCERTAIN, None, None, "2024-05-01T10:00:02Z"),
        Entry("Form/f", "Form", "form-1", APPLIED, {}, {}, "2024-05-01T10:00:03Z"),
    ]
    for e in written:
        store.put(ws, e)
    entries = store.snapshot(ws).entries
    assert entries == {e.address: e for e in written}
    assert list(entries) == sorted(entries)


def test_a_read_for_planning_leaves_out_answers_and_times(store: StateStore, ws: str) -> None:
    """``responses=False``: the same entries without the API's answers and the write
    times; specs, ids and statuses whole.  An entry read either way, written back,
    keeps its spec."""
    spec = {"name": "risk", "tags": ["é", {"n": 1}], "weight": 0.25, "none": None}
    store.put(ws, Entry("Hook/risk", "Hook", "hook-1", APPLIED, spec, {"id": "hook-1"},
                        "2024-05-01T10:00:00Z"))
    store.put(ws, Entry("Space/s", "Space", None, PENDING, None, None, "2024-05-01T10:00:02Z"))
    planning = store.snapshot(ws, responses=False).entries
    assert planning == {
        "Hook/risk": Entry("Hook/risk", "Hook", "hook-1", APPLIED, spec, None, ""),
        "Space/s": Entry("Space/s", "Space", None, PENDING, None, None, ""),
    }
    hook = planning["Hook/risk"]
    assert hook.read_spec() == spec
    assert hook.spec == spec and hook.spec is hook.spec  # kept once read as .spec
    full = store.snapshot(ws).entries["Hook/risk"]
    full.status = APPLIED
    store.put(ws, full)
    again = store.snapshot(ws).entries["Hook/risk"]
    assert (again.spec, again.response, again.updated_at) == (
        spec, {"id": "hook-1"}, "2024-05-01T10:00:00Z")


def test_a_written_entry_without_a_time_gets_one(store: StateStore, ws: str) -> None:
    store.put(ws, Entry("Space/a", "Space", "s-1", APPLIED, {}, None))
    assert store.snapshot(ws).entries["Space/a"].updated_at.startswith("20")


def test_other_stores_see_every_commit(backend: Harness, store: StateStore, ws: str) -> None:
    other = backend.open()
    other.snapshot(ws)
    store.put(ws, entry("Space/a"))
    snap = other.snapshot(ws)
    assert (snap.serial, list(snap.entries)) == (1, ["Space/a"])


def test_workspaces_are_isolated(backend: Harness, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    store.put(prod, entry("Space/a"))
    store.put(prod, entry("Space/b"))
    snap = store.snapshot(staging)
    assert (snap.serial, snap.entries) == (0, {})
    assert store.snapshot(prod).lineage != snap.lineage
    assert store.remove(staging, "Space/a") == 1
    assert list(store.snapshot(prod).entries) == ["Space/a", "Space/b"]


def test_concurrent_writers_never_share_a_serial(backend: Harness, ws: str) -> None:
    backend.open().snapshot(ws)
    stores = [backend.open() for _ in range(3)]
    serials: list[int] = []

    def write(store: StateStore, n: int) -> None:
        for i in range(15):
            serials.append(store.put(ws, entry(f"Space/w{n}-{i}")))

    threads = [threading.Thread(target=write, args=(s, n)) for n, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(serials) == list(range(1, 46))
    snap = stores[0].snapshot(ws)
    assert (snap.serial, len(snap.entries)) == (45, 45)


def test_fingerprint_is_stable_per_workspace_and_differs_across(
        backend: Harness, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    fp = store.snapshot(prod).fingerprint("s3cret")
    assert fp.startswith("hmac-sha256:")
    assert "s3cret" not in fp
    assert store.snapshot(prod).fingerprint("s3cret") == fp
    assert backend.open().snapshot(prod).fingerprint("s3cret") == fp
    assert store.snapshot(prod).fingerprint("other") != fp
    assert store.snapshot(staging).fingerprint("s3cret") != fp


def test_rename_moves_one_entry_and_refuses_what_is_not_there(store: StateStore,
                                                              ws: str) -> None:
    store.put_many(ws, [entry("Space/a"), entry("Space/b")])
    assert store.rename(ws, "Space/a", "Space/c") == 2
    assert list(store.snapshot(ws).entries) == ["Space/b", "Space/c"]
    with pytest.raises(StateError, match="Space/b is already in state"):
        store.rename(ws, "Space/c", "Space/b")
    with pytest.raises(StateError, match="Space/a is not in state"):
        store.rename(ws, "Space/a", "Space/d")
    assert store.snapshot(ws).serial == 2  # a refused move writes nothing


def test_replace_all_with_lineage_and_key(store: StateStore, ws: str) -> None:
    store.put(ws, entry("Space/old"))
    lineage, key = str(uuid.uuid4()), bytes(range(32))
    new = [entry("Space/a"), entry("Hook/b", PENDING, x=[1, 2])]
    assert store.replace_all(ws, new, lineage, key) == 2
    snap = store.snapshot(ws)
    assert (snap.lineage, snap.key, snap.serial) == (lineage, key, 2)
    assert snap.entries == {e.address: e for e in new}


def test_replace_all_keeps_lineage_and_key_when_not_given(store: StateStore, ws: str) -> None:
    before = store.snapshot(ws)
    store.put(ws, entry("Space/old"))
    assert store.replace_all(ws, [], None, None) == 2
    snap = store.snapshot(ws)
    assert (snap.lineage, snap.key, snap.entries) == (before.lineage, before.key, {})


def test_ids_another_workspace_records(backend: Harness, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    # Addresses (and so ids) of this test's own: a shared database holds other tests'.
    a, b, c = (f"Space/{prod}-{x}" for x in "abc")
    store.put_many(prod, [entry(a), entry(b)])
    store.put(staging, entry(c))
    ids = [entry(a).id, entry(c).id, "id-nowhere", *(f"id-{prod}-{i}" for i in range(1200))]
    assert store.recorded_elsewhere(staging, ids) == {entry(a).id: (prod, a)}
    assert store.recorded_elsewhere(prod, ids) == {entry(c).id: (staging, c)}
    assert store.recorded_elsewhere(prod, []) == {}


# -- records that are not entries: the serial stays --------------------------------------

def test_history_newest_first(backend: Harness, store: StateStore, ws: str) -> None:
    store.snapshot(ws)
    for i in range(3):
        store.add_history(ws, {"n": i, "ok": True, "changes": [{"address": "Space/a"}]})
    assert [r["n"] for r in store.history(ws)] == [2, 1, 0]
    assert [r["n"] for r in store.history(ws, limit=2)] == [2, 1]
    assert store.history(ws)[0] == {"n": 2, "ok": True, "changes": [{"address": "Space/a"}]}
    assert store.history(backend.workspace()) == []
    assert store.snapshot(ws).serial == 0  # history is not state


def test_the_endpoint_is_recorded_per_workspace(backend: Harness) -> None:
    store, ws, other = backend.open(), backend.workspace(), backend.workspace()
    assert store.snapshot(ws).endpoint is None
    store.put(ws, Entry("Space/a", "Space", "1", APPLIED, {}))
    store.set_endpoint(ws, "https://governance.example.com")
    snap = backend.open().snapshot(ws)
    assert snap.endpoint == "https://governance.example.com"
    assert snap.serial == 1  # not an entry: a saved plan stays valid
    assert store.snapshot(other).endpoint is None
    store.set_endpoint(ws, "local")
    assert store.snapshot(ws, responses=False).endpoint == "local"


def test_the_governance_record_and_who_governs(backend: Harness, store: StateStore) -> None:
    ws = backend.workspace()
    record = {"environment": "prod", "approvals": {"required": 2}}
    store.set_endpoint(ws, "https://api.example")
    store.set_governance(ws, record)
    assert backend.open().snapshot(ws).governance == record
    assert backend.open().governed()[ws] == ("https://api.example", record)
    assert store.snapshot(ws).serial == 0
    assert store.history(ws) == []  # govsync's own write: no record of a tampering
    store.set_governance(ws, None)
    assert ws not in store.governed() and store.snapshot(ws).governance is None


def test_a_change_of_governance_outside_govsync_is_recorded(backend: Harness) -> None:
    store, ws = backend.open(), backend.workspace()
    store.set_governance(ws, {"approvals": {"required": 2}})
    backend.execute("UPDATE {T}workspaces SET governance = ? WHERE name = ?",
                    ('{"approvals": {"required": 0}}', ws))
    (record,) = store.history(ws)
    assert record["type"] == "governance-changed" and record["ok"] is False
    assert record["before"] == {"approvals": {"required": 2}}
    assert record["after"] == {"approvals": {"required": 0}}


def test_a_saved_plan_is_claimed_once(store: StateStore, ws: str) -> None:
    assert store.plan_applied(ws, "plan-1") is None
    assert store.claim_plan(ws, "plan-1") is None
    when = store.plan_applied(ws, "plan-1")
    assert when and store.claim_plan(ws, "plan-1") == when
    store.unclaim_plan(ws, "plan-1")  # nothing took effect: it may be applied again
    assert store.plan_applied(ws, "plan-1") is None and store.claim_plan(ws, "plan-1") is None
    assert store.snapshot(ws).serial == 0


# -- the lock -----------------------------------------------------------------------

def test_a_second_store_fails_at_once_naming_the_holder(
        backend: Harness, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    other = backend.open()
    started = time.monotonic()
    with pytest.raises(StateLockedError) as caught:
        other.acquire(ws, BOB)
    assert time.monotonic() - started < 2
    message = str(caught.value)
    assert "alice" in message and "ci-runner-7" in message and "4242" in message
    assert ws in message and "--lock-timeout" in message
    assert caught.value.holder["pid"] == 4242
    assert other.holder(ws) == ALICE
    assert other.running(ws) == ALICE and store.running(ws) is None  # its own: none


def test_acquire_is_reentrant_for_the_same_store(store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    store.acquire(ws, BOB)
    assert store.holder(ws) == ALICE


def test_release_frees_the_lock(backend: Harness, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    store.release(ws)
    assert store.holder(ws) is None and store.running(ws) is None
    other = backend.open()
    other.acquire(ws, BOB)
    assert store.holder(ws) == BOB
    store.release(ws)  # not held by this store: nothing happens
    assert store.holder(ws) == BOB


def test_closing_the_store_releases_its_locks(backend: Harness, ws: str) -> None:
    first = backend.open()
    first.acquire(ws, ALICE)
    first.close()
    backend.stores.remove(first)
    backend.open().acquire(ws, BOB, timeout=5)


def test_waiting_succeeds_when_the_holder_releases_in_time(
        backend: Harness, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    other = backend.open()
    timer = threading.Timer(0.5, store.release, args=(ws,))
    timer.start()
    started = time.monotonic()
    try:
        other.acquire(ws, BOB, timeout=15)
    finally:
        timer.join()
    assert time.monotonic() - started >= 0.4
    assert other.holder(ws) == BOB


def test_waiting_gives_up_after_the_timeout(backend: Harness, store: StateStore,
                                            ws: str) -> None:
    store.acquire(ws, ALICE)
    started = time.monotonic()
    with pytest.raises(StateLockedError, match="alice"):
        backend.open().acquire(ws, BOB, timeout=0.6)
    assert 0.6 <= time.monotonic() - started < 5


def test_workspaces_lock_independently(backend: Harness, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    other = backend.open()
    store.acquire(prod, ALICE)
    other.acquire(staging, BOB)
    assert (store.holder(prod), store.holder(staging)) == (ALICE, BOB)
    with pytest.raises(StateLockedError):
        store.acquire(staging, ALICE)
    with pytest.raises(StateLockedError):
        other.acquire(prod, BOB)


HOLD_LOCK = """
import sys, time
from govsync.state import LockHolder, open_store
store = open_store(sys.argv[1])
store.acquire(sys.argv[2], LockHolder.me())
print("locked", flush=True)
time.sleep(300)  # the point: the lock held until the test kills this process
"""


def test_a_lock_held_by_a_killed_process_is_released(
        backend: Harness, store: StateStore, ws: str) -> None:
    store.snapshot(ws)
    child = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, backend.url, ws],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 60)
        line = child.stdout.readline() if ready else ""
        assert line.strip() == "locked", child.stderr.read() if child.stderr else ""
        with pytest.raises(StateLockedError) as caught:
            store.acquire(ws, ALICE)
        assert caught.value.holder["pid"] == child.pid
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        for pipe in (child.stdout, child.stderr):
            if pipe:
                pipe.close()
    store.acquire(ws, ALICE, timeout=15)  # the leftover holder row is replaced
    assert store.holder(ws) == ALICE


RACER = """
import sys, time
from govsync.errors import StateLockedError
from govsync.state import LockHolder, open_store
url, ws, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = open_store(url)
time.sleep(max(0.0, start - time.time()))  # the point: every racer starts at one moment
try:
    store.acquire(ws, LockHolder.me())
except StateLockedError as exc:
    print("LOST", exc, flush=True)
else:
    print("WON", flush=True)
    time.sleep(0.3)  # the point: held a while, so that the racers lose to a holder
    store.release(ws)
store.close()
"""


def test_every_loser_of_a_lock_race_names_the_holder(backend: Harness, ws: str) -> None:
    """Processes race for one workspace, twice: each loser's message names a holder."""
    backend.open().snapshot(ws)
    losers: list[str] = []
    winners = 0
    for _ in range(2):
        start = str(time.time() + 3.0)
        racers = [subprocess.Popen([sys.executable, "-c", RACER, backend.url, ws, start],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(backend.racers)]
        for racer in racers:
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            if out.startswith("WON"):
                winners += 1
            else:
                assert out.startswith("LOST"), (out, err)
                losers.append(out)
    assert winners >= 2
    unnamed = [line for line in losers if "another process" in line or " pid " not in line]
    assert not unnamed, f"{len(unnamed)} of {len(losers)} losers named nobody: {unnamed[:3]}"


# -- fencing (contract section 7) ----------------------------------------------------------

WRITES: dict[str, Callable[[StateStore, str], object]] = {
    "put": lambda s, ws: s.put(ws, intent("Space/late")),
    "put_many": lambda s, ws: s.put_many(ws, [intent("Space/late"), intent("Space/kept")]),
    "remove": lambda s, ws: s.remove(ws, "Space/kept"),
    "rename": lambda s, ws: s.rename(ws, "Space/kept", "Space/moved"),
    "replace_all": lambda s, ws: s.replace_all(ws, [intent("Space/late")], None, None),
    "add_history": lambda s, ws: s.add_history(ws, {"late": True}),
    "set_endpoint": lambda s, ws: s.set_endpoint(ws, "https://late.example"),
    "set_governance": lambda s, ws: s.set_governance(ws, {"late": True}),
    "claim_plan": lambda s, ws: s.claim_plan(ws, "late-plan"),
    "set_agent": lambda s, ws: s.set_agent(ws, "pause", {"late": True}),
}


def assert_refused_and_unchanged(store: StateStore, observer: StateStore, ws: str,
                                 expect: str, *, lost: str = "the lock on workspace") -> None:
    """Every kind of write of ``store`` raises LockLostError and changes nothing, and so
    does its fence (which may know only that the lock ended)."""
    before = observer.snapshot(ws)
    history, agent = observer.history(ws), observer.agent(ws)
    with pytest.raises(LockLostError, match=lost):
        store.fence(ws)
    for name, write in WRITES.items():
        with pytest.raises(LockLostError) as caught:
            write(store, ws)
        message = str(caught.value)
        assert lost in message and repr(ws) in message, (name, message)
        assert expect in message, (name, message)
    after = observer.snapshot(ws)
    assert (after.serial, after.entries, after.endpoint, after.governance) == (
        before.serial, before.entries, before.endpoint, before.governance)
    assert observer.history(ws) == history and observer.agent(ws) == agent
    assert observer.plan_applied(ws, "late-plan") is None


def test_writes_under_a_held_lock_pass_the_fence(backend: Harness, ws: str) -> None:
    store = backend.open()
    epoch = store.acquire(ws, ALICE)
    assert store.acquire(ws, BOB) == epoch  # re-entrant: same epoch
    store.put(ws, intent("Space/kept"))
    store.set_endpoint(ws, "https://api.example")
    store.add_history(ws, {"ok": True})
    store.fence(ws)
    assert store.snapshot(ws).endpoint == "https://api.example"
    store.release(ws)
    other = backend.open()
    assert other.acquire(ws, BOB) > epoch  # every acquire bumps the epoch


def test_a_lost_lock_refuses_every_write(backend: Harness, ws: str) -> None:
    store = backend.open()
    store.acquire(ws, ALICE)
    store.put(ws, intent("Space/kept"))
    backend.lose(store, ws)
    assert_refused_and_unchanged(store, backend.open(), ws, backend.lost_lock)


def test_a_lost_lock_then_taken_by_another(backend: Harness, ws: str) -> None:
    first, second = backend.open(), backend.open()
    first.acquire(ws, ALICE)
    first.put(ws, intent("Space/kept"))
    backend.lose(first, ws)
    second.acquire(ws, BOB, timeout=10)
    assert_refused_and_unchanged(first, second, ws, "taken by bob@laptop pid 1717")
    # The loser's release leaves the new holder alone.
    first.release(ws)
    assert second.holder(ws) == BOB
    with pytest.raises(StateLockedError, match="bob"):
        backend.open().acquire(ws, ALICE)
    second.put(ws, intent("Space/by-bob"))
    assert set(second.snapshot(ws).entries) == {"Space/kept", "Space/by-bob"}


def test_a_lost_lock_is_never_silently_retaken(backend: Harness, ws: str) -> None:
    store = backend.open()
    epoch = store.acquire(ws, ALICE)
    store.put(ws, intent("Space/kept"))
    backend.lose(store, ws)
    # Asking again does not quietly take the lock anew.
    assert store.acquire(ws, ALICE) == epoch
    with pytest.raises(LockLostError):
        store.put(ws, intent("Space/late"))
    # The lock is free for others meanwhile, and the store can lock another workspace.
    backend.open().acquire(ws, BOB, timeout=10)
    other_ws = backend.workspace()
    store.acquire(other_ws, ALICE)
    store.put(other_ws, intent("Space/elsewhere"))


def test_a_newer_epoch_refuses_the_old_holders_writes(backend: Harness, ws: str) -> None:
    first, second = backend.open(), backend.open()
    old = first.acquire(ws, ALICE)
    first.put(ws, intent("Space/kept"))
    backend.steal(first, second, ws)
    assert second.acquire(ws, BOB) > old
    assert_refused_and_unchanged(first, second, ws, "taken by bob@laptop pid 1717")
    first.release(ws)
    assert second.holder(ws) == BOB


def test_writes_without_the_lock_are_not_fenced(store: StateStore, ws: str) -> None:
    """Stores that never took the lock (plan, tests, tools) write as before."""
    store.put(ws, intent("Space/a"))
    store.put(ws, Entry("Space/a", "Space", "s-1", APPLIED, {"a": 1}, None, ""))
    store.fence(ws)  # holding nothing: nothing to check
    assert store.snapshot(ws).entries["Space/a"].status == APPLIED


# -- integrity (contract section 7): damaged, never new ------------------------------------

def written(backend: Harness, store: StateStore) -> str:
    ws = backend.workspace()
    for name in "abc":
        store.put(ws, Entry(f"Space/{name}", "Space", name, APPLIED, {"n": name}))
    return ws


@pytest.mark.parametrize(("damage", "expected"), [
    ("DELETE FROM {T}objects WHERE workspace = ? AND address = 'Space/b'",
     "it records 3 entries but {objects} holds 2"),
    ("UPDATE {T}objects SET spec = '[1]' WHERE workspace = ? AND address = 'Space/b'",
     "entry 'Space/b': its spec is a JSON list, not an object"),
    ("UPDATE {T}objects SET status = 'exploded' WHERE workspace = ? AND address = 'Space/c'",
     "entry 'Space/c' has the unknown status 'exploded'"),
    ("UPDATE {T}workspaces SET lineage = '' WHERE name = ?", "its lineage is ''"),
])
def test_a_damaged_workspace_is_an_error_and_left_alone(backend: Harness, damage: str,
                                                        expected: str) -> None:
    ws = written(backend, backend.open())
    backend.execute(damage, (ws,))
    with pytest.raises(StateDamagedError) as caught:
        backend.open().snapshot(ws)
    message = str(caught.value)
    assert expected.format(objects=backend.objects_table) in message
    assert repr(ws) in message and "\n" not in message
    assert backend.execute("SELECT count(*) FROM {T}objects WHERE workspace = ?",
                           (ws,))[0][0] == (2 if "DELETE" in damage else 3)


def test_a_table_missing_is_an_error_never_a_new_state(backend: Harness) -> None:
    with backend.fresh() as own:
        ws = written(own, own.open())
        own.close()
        own.execute("DROP TABLE {T}objects")
        with pytest.raises(StateDamagedError, match="objects"):
            own.open().snapshot(ws)
        assert not own.execute("SELECT 1 FROM {T}workspaces WHERE name = 'nobody'")
        with pytest.raises(Exception, match="objects"):  # not made again, empty
            own.execute("SELECT count(*) FROM {T}objects")


def test_a_large_state_is_read_whole(backend: Harness, store: StateStore, ws: str) -> None:
    """12,345 entries read whole (the rows taken as the database yields them), for
    planning too, and damage near the end named."""
    entries = [Entry(f"Space/s{i:05}", "Space", f"id-{i}", APPLIED,
                     {"name": f"s{i}", "tags": [i, {"n": "é"}]}, {"id": f"id-{i}"}, "t")
               for i in range(12_345)]
    store.replace_all(ws, entries, None, None)
    read = backend.open().snapshot(ws).entries
    assert list(read) == [e.address for e in entries]
    assert list(read.values()) == entries
    planning = backend.open().snapshot(ws, responses=False).entries
    assert planning["Space/s12344"].read_spec() == {"name": "s12344", "tags": [12344, {"n": "é"}]}
    backend.execute("UPDATE {T}objects SET spec = '\"x\"' WHERE workspace = ?"
                    " AND address = 'Space/s11000'", (ws,))
    with pytest.raises(StateDamagedError, match="entry 'Space/s11000': its spec is a JSON str"):
        backend.open().snapshot(ws)


# -- plan keys (contract section 7): readers cannot read them --------------------------------

def test_the_plan_key_is_made_once_and_kept_from_readers(backend: Harness) -> None:
    with backend.fresh() as own:
        writer, ws = own.open(), own.workspace()
        with pytest.raises(PlanKeyUnavailable):
            writer.plan_key(ws, create=False)  # none yet
        key = writer.plan_key(ws)
        assert len(key) == 32 and writer.plan_key(ws) == key == own.open().plan_key(ws)
        writer.put(ws, entry("Space/a"))
        writer.set_governance(ws, {"approvals": {"required": 1}})
        snap = writer.snapshot(ws)
        reader = own.reader()
        assert reader.snapshot(ws, create=False).entries == snap.entries  # it reads ...
        with pytest.raises(PlanKeyUnavailable):
            reader.plan_key(ws, create=False)  # ... but never the key
        exported = repr(document(snap)).encode()
        for where in (own.readable(), exported):
            assert key not in where and key.hex().encode() not in where


# -- the agent's records and leadership (contract section 9) ---------------------------------

def cycle(status: str, key: str, at: str) -> dict[str, object]:
    return {"type": "drift", "status": status, "key": key, "at": at}


def test_agent_values_are_recorded_replaced_and_removed(backend: Harness, ws: str) -> None:
    store = backend.open()
    assert store.agent(ws) == {}
    store.set_agent(ws, "pause", {"reason": "incident 42", "by": "ana"})
    store.set_agent(ws, "notifications", {"hook": {"revision": "abc"}})
    other = backend.open()
    assert other.agent(ws) == {"pause": {"reason": "incident 42", "by": "ana"},
                               "notifications": {"hook": {"revision": "abc"}}}
    before = other.snapshot(ws).serial
    store.set_agent(ws, "pause", None)
    assert other.agent(ws) == {"notifications": {"hook": {"revision": "abc"}}}
    assert other.snapshot(ws).serial == before  # not an entry: the serial stays


def test_equal_cycles_are_one_history_record(backend: Harness, ws: str) -> None:
    store = backend.open()
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:00:00.000000Z"))
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:01:00.000000Z"))
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:02:00.000000Z"))
    history = store.history(ws)
    assert len(history) == 1
    assert history[0]["cycles"] == 3
    assert history[0]["since"] == "2025-01-01T00:00:00.000000Z"
    assert history[0]["at"] == "2025-01-01T00:02:00.000000Z"
    store.add_cycle(ws, cycle("OutOfSync", "k2", "2025-01-01T00:03:00.000000Z"))
    store.add_history(ws, {"at": "2025-01-01T00:04:00.000000Z", "ok": True})
    store.add_cycle(ws, cycle("OutOfSync", "k2", "2025-01-01T00:05:00.000000Z"))
    history = store.history(ws)
    assert [r.get("status") for r in history] == ["OutOfSync", None, "OutOfSync", "Synced"]
    assert backend.open().agent(ws)["cycle"]["at"] == "2025-01-01T00:05:00.000000Z"


def test_a_cycle_is_kept_at_its_own_time(backend: Harness, ws: str) -> None:
    """The history's time of a cycle is the record's ``at``, appended or merged: every
    backend alike (PostgreSQL once kept the time of the write instead)."""
    store = backend.open()
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:00:00.000000Z"))
    assert backend.history_times(ws) == ["2025-01-01T00:00:00.000000Z"]
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:01:00.000000Z"))
    assert backend.history_times(ws) == ["2025-01-01T00:01:00.000000Z"]
    store.add_cycle(ws, cycle("OutOfSync", "k2", "2025-01-02T00:00:00.000000Z"))
    assert backend.history_times(ws) == ["2025-01-02T00:00:00.000000Z",
                                         "2025-01-01T00:01:00.000000Z"]


def test_one_leader_at_a_time_and_a_take_over_is_recorded(backend: Harness, ws: str) -> None:
    first, second = backend.open(), backend.open()
    me = LockHolder.me()
    assert first.lead(ws, me) == 1
    assert first.lead(ws, me) == 1  # again: the same epoch
    assert second.lead(ws, me) is None
    assert first.leads(ws) and not second.leads(ws)
    first.set_agent(ws, "cycle", {"status": "Synced"})
    first.fence(ws)
    first.close()  # as when its process dies: the leadership ends with it
    assert second.lead(ws, me) == 2
    leader = second.agent(ws)["leader"]
    assert leader["epoch"] == 2 and leader["previous"]["pid"] == me.pid
    assert leader["tookOver"] is True
    second.resign(ws)
    assert not second.leads(ws)


def test_a_store_that_lost_its_leadership_records_nothing(backend: Harness, ws: str) -> None:
    first, second = backend.open(), backend.open()
    assert first.lead(ws, LockHolder.me()) == 1
    first.put(ws, intent("Space/kept"))
    # Taken over while the first still believes it leads (its lock given back
    # behind its back, as a lost PostgreSQL session or a removed lock file does).
    backend.lose(first, ws, leader=True)
    assert second.lead(ws, LockHolder.me()) == 2
    assert not first.leads(ws)
    assert_refused_and_unchanged(first, second, ws, "another agent took it over",
                                 lost="this agent no longer leads")
    with pytest.raises(LockLostError):
        first.add_cycle(ws, cycle("Synced", "k", "2025-01-01T00:00:00.000000Z"))
    assert "cycle" not in second.agent(ws)


def test_a_leadership_lost_and_not_taken_over_records_nothing(backend: Harness,
                                                               ws: str) -> None:
    store = backend.open()
    assert store.lead(ws, LockHolder.me()) == 1
    store.put(ws, intent("Space/kept"))
    backend.lose(store, ws, leader=True)
    assert not store.leads(ws)
    assert_refused_and_unchanged(store, backend.open(), ws, "",
                                 lost="this agent no longer leads")
    assert backend.open().lead(ws, LockHolder.me()) == 2


__all__ = sorted(name for name in dir() if name.startswith("test_"))
