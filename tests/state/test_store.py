"""The StateStore contract, run against every backend (see conftest.py)."""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from statekit import Backend, drop_workspaces, unique_workspace

from govsync.errors import StateError, StateLockedError
from govsync.state import (
    APPLIED,
    PENDING,
    UNCERTAIN,
    Entry,
    EntryStatus,
    LockHolder,
    StateStore,
    open_store,
)

ALICE = LockHolder("alice", "ci-runner-7", 4242, "govsync apply manifests/", "2024-05-01T10:00:00Z")
BOB = LockHolder("bob", "laptop", 1717, "govsync apply .", "2024-05-01T10:00:01Z")


def entry(address: str, status: EntryStatus = APPLIED, **spec: object) -> Entry:
    kind = address.split("/")[0]
    return Entry(address, kind, f"id-{address.lower()}", status, dict(spec) or {"a": 1},
                 {"id": f"id-{address.lower()}", "createdAt": "2024-01-01T00:00:00Z"},
                 "2024-05-01T10:00:00.000000Z")


# -- snapshot ------------------------------------------------------------------------

def test_snapshot_creates_an_empty_workspace(store: StateStore, ws: str) -> None:
    snap = store.snapshot(ws)
    assert (snap.workspace, snap.serial, snap.entries) == (ws, 0, {})
    assert uuid.UUID(snap.lineage)
    assert len(snap.key) == 32


def test_a_read_that_may_not_create_makes_no_workspace(backend: Backend, ws: str) -> None:
    store = backend.open()
    empty = store.snapshot(ws, create=False)
    assert (empty.lineage, empty.serial, empty.entries) == ("", 0, {})
    assert backend.open().snapshot(ws, create=False).lineage == ""  # still not made
    made = store.snapshot(ws)
    assert made.lineage and made.key
    assert backend.open().snapshot(ws, create=False).lineage == made.lineage


def test_lineage_and_key_are_stable_across_calls_and_reopening(
        backend: Backend, store: StateStore, ws: str) -> None:
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


def test_other_stores_see_every_commit(backend: Backend, store: StateStore, ws: str) -> None:
    other = backend.open()
    other.snapshot(ws)
    store.put(ws, entry("Space/a"))
    snap = other.snapshot(ws)
    assert (snap.serial, list(snap.entries)) == (1, ["Space/a"])


def test_workspaces_are_isolated(backend: Backend, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    store.put(prod, entry("Space/a"))
    store.put(prod, entry("Space/b"))
    snap = store.snapshot(staging)
    assert (snap.serial, snap.entries) == (0, {})
    assert store.snapshot(prod).lineage != snap.lineage
    assert store.remove(staging, "Space/a") == 1
    assert list(store.snapshot(prod).entries) == ["Space/a", "Space/b"]


def test_concurrent_writers_never_share_a_serial(backend: Backend, ws: str) -> None:
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


# -- fingerprints ---------------------------------------------------------------------

def test_fingerprint_is_stable_per_workspace_and_differs_across(
        backend: Backend, store: StateStore) -> None:
    prod, staging = backend.workspace(), backend.workspace()
    fp = store.snapshot(prod).fingerprint("s3cret")
    assert fp.startswith("hmac-sha256:")
    assert "s3cret" not in fp
    assert store.snapshot(prod).fingerprint("s3cret") == fp
    assert backend.open().snapshot(prod).fingerprint("s3cret") == fp
    assert store.snapshot(prod).fingerprint("other") != fp
    assert store.snapshot(staging).fingerprint("s3cret") != fp


# -- replace_all ----------------------------------------------------------------------

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


# -- history -----------------------------------------------------------

def test_history_newest_first(backend: Backend, store: StateStore, ws: str) -> None:
    store.snapshot(ws)
    for i in range(3):
        store.add_history(ws, {"n": i, "ok": True, "changes": [{"address": "Space/a"}]})
    assert [r["n"] for r in store.history(ws)] == [2, 1, 0]
    assert [r["n"] for r in store.history(ws, limit=2)] == [2, 1]
    assert store.history(ws)[0] == {"n": 2, "ok": True, "changes": [{"address": "Space/a"}]}
    assert store.history(backend.workspace()) == []
    assert store.snapshot(ws).serial == 0  # history is not state


# -- lock -----------------------------------------------------------------------------

def test_a_second_store_fails_at_once_naming_the_holder(
        backend: Backend, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    other = backend.open()
    started = time.monotonic()
    with pytest.raises(StateLockedError) as caught:
        other.acquire(ws, BOB)
    assert time.monotonic() - started < 2
    message = str(caught.value)
    assert "alice" in message and "ci-runner-7" in message and "4242" in message
    assert ws in message
    assert caught.value.holder["pid"] == 4242
    assert other.holder(ws) == ALICE


def test_acquire_is_reentrant_for_the_same_store(store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    store.acquire(ws, BOB)
    assert store.holder(ws) == ALICE


def test_release_frees_the_lock(backend: Backend, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    store.release(ws)
    assert store.holder(ws) is None
    other = backend.open()
    other.acquire(ws, BOB)
    assert store.holder(ws) == BOB
    store.release(ws)  # not held by this store: nothing happens
    assert store.holder(ws) == BOB


def test_closing_the_store_releases_its_locks(backend: Backend, ws: str) -> None:
    first = backend.open()
    first.acquire(ws, ALICE)
    first.close()
    backend.stores.remove(first)
    backend.open().acquire(ws, BOB, timeout=5)


def test_waiting_succeeds_when_the_holder_releases_in_time(
        backend: Backend, store: StateStore, ws: str) -> None:
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


def test_waiting_gives_up_after_the_timeout(backend: Backend, store: StateStore, ws: str) -> None:
    store.acquire(ws, ALICE)
    started = time.monotonic()
    with pytest.raises(StateLockedError, match="alice"):
        backend.open().acquire(ws, BOB, timeout=0.6)
    assert 0.6 <= time.monotonic() - started < 5


def test_workspaces_lock_independently(backend: Backend, store: StateStore) -> None:
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
time.sleep(300)
"""


def test_a_lock_held_by_a_killed_process_is_released(
        backend: Backend, store: StateStore, ws: str) -> None:
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


# -- errors ---------------------------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("template", [
    "postgresql://govsync:Hunter2-s3cret@127.0.0.1:{port}/state",
    "postgres://govsync@127.0.0.1:{port}/state?password=Hunter2-s3cret&sslmode=disable",
])
def test_postgres_connection_failure_is_a_state_error_without_the_password(
        template: str) -> None:
    pytest.importorskip("psycopg")
    with pytest.raises(StateError) as caught:
        open_store(template.format(port=closed_port()))
    message = str(caught.value)
    assert "Hunter2-s3cret" not in message
    assert "127.0.0.1" in message and "Check that the server is running" in message
    assert caught.value.__cause__ is not None


def test_sqlite_open_failure_is_a_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StateError):
        open_store(str(blocker / "state.db"))


# -- PostgreSQL only ----------------------------------------------------------------

def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    host = parts.hostname or "127.0.0.1"
    netloc = f"{user}:{password}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.postgres
def test_postgres_store_url_and_errors_hide_the_password(postgres_url: str) -> None:
    from govsync.state.postgres import PostgresStore

    url = with_password(postgres_url, "Hunter2-s3cret")
    with PostgresStore(url) as store:  # trust auth in tests: any password works
        assert "Hunter2-s3cret" not in store.url
        assert store.url.count("***") == 1
    missing = urlsplit(url)._replace(path=f"/no_such_db_{uuid.uuid4().hex[:8]}")
    with pytest.raises(StateError) as caught:
        PostgresStore(urlunsplit(missing))
    assert "Hunter2-s3cret" not in str(caught.value)
    assert "does not exist" in str(caught.value)


@pytest.mark.postgres
def test_postgres_lost_connection_is_a_state_error(postgres_url: str) -> None:
    import psycopg

    from govsync.state.postgres import PostgresStore

    ws = unique_workspace()
    store = PostgresStore(postgres_url)
    try:
        store.snapshot(ws)
        pid = store.db.info.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(StateError, match="cannot read workspace"):
            store.snapshot(ws)
    finally:
        store.close()
        drop_workspaces(postgres_url, [ws])


@pytest.mark.postgres
def test_postgres_lock_message_names_the_session(postgres_url: str) -> None:
    from govsync.state.postgres import PostgresStore

    ws = unique_workspace()
    first, second = PostgresStore(postgres_url), PostgresStore(postgres_url)
    try:
        first.acquire(ws, ALICE)
        pid = first.lock_backend_pid(ws)
        assert pid is not None and pid != first.db.info.backend_pid  # its own session
        with pytest.raises(StateLockedError, match=f"pg_terminate_backend\\({pid}\\)"):
            second.acquire(ws, BOB)
        first.release(ws)
        assert first.lock_backend_pid(ws) is None
    finally:
        first.close()
        second.close()
        drop_workspaces(postgres_url, [ws])


# Each process waits for the same start time, then opens the store (creating
# the tables) and writes once.
CREATE_TABLES = """
import sys, time
from govsync.state import Entry
from govsync.state.postgres import PostgresStore
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
with PostgresStore(sys.argv[1]) as store:
    store.snapshot("concurrent")
    store.put("concurrent", Entry("Space/a", "Space", None, "applied"))
print("ok", flush=True)
"""


@pytest.mark.postgres
def test_postgres_creates_its_tables_concurrently(postgres_url: str,
                                                  pg_schema: tuple[str, str]) -> None:
    import psycopg

    url, schema = pg_schema
    start = str(time.time() + 2.0)
    children = [subprocess.Popen([sys.executable, "-c", CREATE_TABLES, url, start],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True) for _ in range(6)]
    results = [child.communicate(timeout=60) for child in children]
    for child, (out, err) in zip(children, results, strict=True):
        assert child.returncode == 0 and out.strip() == "ok", err
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        tables = {r[0] for r in admin.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,))}
        assert tables == {"govsync_workspaces", "govsync_objects", "govsync_locks",
                          "govsync_history", "govsync_applied_plans", "govsync_plan_keys",
                          "govsync_agent", "govsync_lock_rows"}
        serial = admin.execute(f"SELECT serial FROM {schema}.govsync_workspaces").fetchall()
    assert serial == [(6,)]


@pytest.mark.postgres
def test_postgres_column_types(postgres_url: str) -> None:
    import psycopg

    from govsync.state.postgres import PostgresStore

    PostgresStore(postgres_url).close()  # tables exist
    with psycopg.connect(postgres_url) as conn:
        types: dict[str, str] = dict(conn.execute(
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name LIKE 'govsync_%'").fetchall())
    assert types["govsync_objects.spec"] == "jsonb"
    assert types["govsync_objects.response"] == "jsonb"
    assert types["govsync_history.record"] == "jsonb"
    assert types["govsync_workspaces.fingerprint_key"] == "bytea"
    assert types["govsync_workspaces.serial"] == "bigint"
    assert {"govsync_history.id", "govsync_history.workspace", "govsync_history.at"} <= set(types)
