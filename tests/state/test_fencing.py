"""Fencing (contract section 7): a store that lost its workspace lock writes nothing.

Every write of a store holding the lock checks, atomically with the write,
that its lock epoch is still the workspace's and that the lock itself is
still alive (SQLite: the flocked file is still the lock file; PostgreSQL:
the lock session still holds the advisory lock).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from statekit import Backend, drop_workspaces, unique_workspace

from govsync.errors import LockLostError, StateLockedError
from govsync.state import APPLIED, PENDING, Entry, LockHolder, StateStore

ALICE = LockHolder("alice", "ci-runner-7", 4242, "govsync apply manifests/", "2024-05-01T10:00:00Z")
BOB = LockHolder("bob", "laptop", 1717, "govsync apply .", "2024-05-01T10:00:01Z")


def entry(address: str) -> Entry:
    return Entry(address, address.split("/")[0], None, PENDING, {"a": 1}, None, "")


WRITES: dict[str, Callable[[StateStore, str], object]] = {
    "put": lambda s, ws: s.put(ws, entry("Space/late")),
    "put_many": lambda s, ws: s.put_many(ws, [entry("Space/late"), entry("Space/kept")]),
    "remove": lambda s, ws: s.remove(ws, "Space/kept"),
    "replace_all": lambda s, ws: s.replace_all(ws, [entry("Space/late")], None, None),
    "add_history": lambda s, ws: s.add_history(ws, {"late": True}),
    "set_endpoint": lambda s, ws: s.set_endpoint(ws, "https://late.example"),
}


def assert_refused_and_unchanged(store: StateStore, observer: StateStore, ws: str,
                                 expect: str) -> None:
    """Every kind of write of ``store`` raises LockLostError and changes nothing."""
    before = observer.snapshot(ws)
    history = observer.history(ws)
    for name, write in WRITES.items():
        with pytest.raises(LockLostError) as caught:
            write(store, ws)
        message = str(caught.value)
        assert f"the lock on workspace {ws!r} was lost" in message, name
        assert expect in message, (name, message)
        assert "sends nothing more" in message and "govsync plan" in message
    after = observer.snapshot(ws)
    assert (after.serial, after.entries, after.endpoint) == (
        before.serial, before.entries, before.endpoint)
    assert observer.history(ws) == history


def test_writes_under_a_held_lock_pass_the_fence(backend: Backend, ws: str) -> None:
    store = backend.open()
    epoch = store.acquire(ws, ALICE)
    assert store.acquire(ws, BOB) == epoch  # re-entrant: same epoch
    store.put(ws, entry("Space/kept"))
    store.set_endpoint(ws, "https://api.example")
    store.add_history(ws, {"ok": True})
    assert store.snapshot(ws).endpoint == "https://api.example"
    store.release(ws)
    other = backend.open()
    assert other.acquire(ws, BOB) > epoch  # every acquire bumps the epoch


# -- (a) SQLite: the lock file is removed ---------------------------------------------

def sqlite_stores(tmp_path: Path) -> tuple[Backend, str]:
    backend = Backend("sqlite", str(tmp_path / "state.db"))
    return backend, backend.workspace()


def test_sqlite_removed_lock_file_then_taken_by_another(tmp_path: Path) -> None:
    backend, ws = sqlite_stores(tmp_path)
    try:
        first, second = backend.open(), backend.open()
        first.acquire(ws, ALICE)
        first.put(ws, entry("Space/kept"))
        lock_file = Path(f"{backend.url}.{ws}.lock")
        lock_file.unlink()
        second.acquire(ws, BOB)  # a new lock file, locked by the second store
        assert lock_file.exists()
        assert_refused_and_unchanged(first, second, ws, "taken by bob@laptop pid 1717")
        # The loser's release leaves the new holder alone.
        first.release(ws)
        assert second.holder(ws) == BOB
        with pytest.raises(StateLockedError, match="bob"):
            backend.open().acquire(ws, ALICE)
        second.put(ws, entry("Space/by-bob"))
        assert set(second.snapshot(ws).entries) == {"Space/kept", "Space/by-bob"}
    finally:
        backend.close()


def test_sqlite_removed_lock_file_is_a_lost_lock(tmp_path: Path) -> None:
    backend, ws = sqlite_stores(tmp_path)
    try:
        store = backend.open()
        store.acquire(ws, ALICE)
        store.put(ws, entry("Space/kept"))
        Path(f"{backend.url}.{ws}.lock").unlink()
        assert_refused_and_unchanged(store, backend.open(), ws, "lock file")
    finally:
        backend.close()


# -- (b) PostgreSQL: the lock session is terminated -------------------------------------

def terminate_lock_session(postgres_url: str, store: StateStore, ws: str) -> None:
    import psycopg

    from govsync.state.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    pid = store.lock_backend_pid(ws)
    assert pid is not None
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(100):  # termination is asynchronous
            if admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                             (pid,)).fetchone() == (0,):
                break
            time.sleep(0.05)


@pytest.mark.postgres
def test_postgres_terminated_lock_session_then_taken_by_another(postgres_url: str) -> None:
    backend = Backend("postgres", postgres_url)
    ws = backend.workspace()
    try:
        first, second = backend.open(), backend.open()
        first.acquire(ws, ALICE)
        first.put(ws, entry("Space/kept"))
        terminate_lock_session(postgres_url, first, ws)
        second.acquire(ws, BOB, timeout=10)
        assert_refused_and_unchanged(first, second, ws, "taken by bob@laptop pid 1717")
        first.release(ws)
        assert second.holder(ws) == BOB
        second.put(ws, entry("Space/by-bob"))
    finally:
        backend.close()


@pytest.mark.postgres
def test_postgres_terminated_lock_session_is_never_silently_retaken(postgres_url: str) -> None:
    backend = Backend("postgres", postgres_url)
    ws = backend.workspace()
    try:
        store = backend.open()
        epoch = store.acquire(ws, ALICE)
        store.put(ws, entry("Space/kept"))
        terminate_lock_session(postgres_url, store, ws)
        observer = backend.open()
        assert_refused_and_unchanged(store, observer, ws, "PostgreSQL session holding it")
        # Asking again does not quietly open a new session and take the lock anew.
        assert store.acquire(ws, ALICE) == epoch
        with pytest.raises(LockLostError):
            store.put(ws, entry("Space/late"))
        # The lock is free for others meanwhile.
        observer.acquire(ws, BOB, timeout=10)
        # The store can still lock another workspace (on a new session).
        other_ws = backend.workspace()
        store.acquire(other_ws, ALICE)
        store.put(other_ws, entry("Space/elsewhere"))
    finally:
        backend.close()


# -- (c) the epoch alone refuses the write ---------------------------------------------

def lose_lock_keeping_the_lock_alive_looking(backend: Backend, ws: str,
                                             first: StateStore, second: StateStore) -> None:
    """Make ``second`` take the lock while ``first`` still looks alive where it checks.

    SQLite: the lock file is moved aside, the second store locks a new file,
    and the first store's file is moved back: the first store's flocked file
    is again the file at the lock path, so only the epoch tells.
    PostgreSQL: the lock session is terminated and the second store locks."""
    if backend.name == "sqlite":
        path = Path(f"{backend.url}.{ws}.lock")
        aside = path.with_name(path.name + ".aside")
        path.rename(aside)
        second.acquire(ws, BOB)
        aside.rename(path)
    else:
        terminate_lock_session(backend.url, first, ws)
        second.acquire(ws, BOB, timeout=10)


def test_a_newer_epoch_refuses_the_old_holders_writes(backend: Backend, ws: str) -> None:
    first, second = backend.open(), backend.open()
    old = first.acquire(ws, ALICE)
    first.put(ws, entry("Space/kept"))
    lose_lock_keeping_the_lock_alive_looking(backend, ws, first, second)
    assert second.acquire(ws, BOB) > old
    assert_refused_and_unchanged(first, second, ws, "taken by bob@laptop pid 1717")
    first.release(ws)
    assert second.holder(ws) == BOB


def test_writes_without_the_lock_are_not_fenced(backend: Backend, store: StateStore,
                                                 ws: str) -> None:
    """Stores that never took the lock (plan, tests, tools) write as before."""
    store.put(ws, entry("Space/a"))
    store.put(ws, Entry("Space/a", "Space", "s-1", APPLIED, {"a": 1}, None, ""))
    assert store.snapshot(ws).entries["Space/a"].status == APPLIED


# -- the holder record of a SQLite lock race ------------------------------------------

RACER = """
import sys, time
from govsync.errors import StateLockedError
from govsync.state import LockHolder, open_store
url, ws, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = open_store(url)
time.sleep(max(0.0, start - time.time()))
try:
    store.acquire(ws, LockHolder.me())
except StateLockedError as exc:
    print("LOST", exc, flush=True)
else:
    print("WON", flush=True)
    time.sleep(0.3)
    store.release(ws)
store.close()
"""


def test_every_loser_of_a_lock_race_names_the_holder(tmp_path: Path) -> None:
    """20 processes race for one workspace, twice: each loser's message names a holder."""
    rounds = 2
    url = str(tmp_path / "state.db")
    ws = unique_workspace()
    backend = Backend("sqlite", url)
    backend.open().snapshot(ws)
    backend.close()
    losers: list[str] = []
    winners = 0
    for _ in range(rounds):
        start = str(time.time() + 3.0)
        racers = [subprocess.Popen([sys.executable, "-c", RACER, url, ws, start],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(20)]
        for racer in racers:
            out, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
            if out.startswith("WON"):
                winners += 1
            else:
                assert out.startswith("LOST"), (out, err)
                losers.append(out)
    assert winners >= rounds
    unnamed = [line for line in losers if "another process" in line or " pid " not in line]
    assert not unnamed, f"{len(unnamed)} of {len(losers)} losers named nobody: {unnamed[:3]}"


@pytest.mark.postgres
def test_postgres_lock_race_losers_name_the_holder(postgres_url: str) -> None:
    ws = unique_workspace()
    try:
        start = str(time.time() + 3.0)
        racers = [subprocess.Popen([sys.executable, "-c", RACER, postgres_url, ws, start],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(8)]
        outputs = [r.communicate(timeout=120) for r in racers]
        losers = [out for out, _ in outputs if out.startswith("LOST")]
        assert all(" pid " in line and "another process" not in line for line in losers), losers
        assert len(losers) < len(racers)
    finally:
        drop_workspaces(postgres_url, [ws])
