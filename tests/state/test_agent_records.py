"""The agent's records in the state (contract section 9), on both backends: its
values (pause, last cycle...), its cycles in the history (equal ones merged), and
its leadership of a workspace (one leader; fenced; taken over when given back)."""

from __future__ import annotations

import os

import pytest
from statekit import Backend, history_times

from govsync.errors import LockLostError
from govsync.state import LockHolder


def cycle(status: str, key: str, at: str) -> dict[str, object]:
    return {"type": "drift", "status": status, "key": key, "at": at}


def test_values_are_recorded_replaced_and_removed(backend: Backend, ws: str) -> None:
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


def test_equal_cycles_are_one_history_record(backend: Backend, ws: str) -> None:
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


def test_a_cycle_is_kept_at_its_own_time_on_every_backend(backend: Backend, ws: str) -> None:
    """The history's time of a cycle is the record's ``at``, appended or merged: both
    backends alike (PostgreSQL once kept the time of the write instead)."""
    store = backend.open()
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:00:00.000000Z"))
    assert history_times(backend, ws) == ["2025-01-01T00:00:00.000000Z"]
    store.add_cycle(ws, cycle("Synced", "k1", "2025-01-01T00:01:00.000000Z"))
    assert history_times(backend, ws) == ["2025-01-01T00:01:00.000000Z"]
    store.add_cycle(ws, cycle("OutOfSync", "k2", "2025-01-02T00:00:00.000000Z"))
    assert history_times(backend, ws) == ["2025-01-02T00:00:00.000000Z",
                                          "2025-01-01T00:01:00.000000Z"]


def test_one_leader_at_a_time_and_a_take_over_is_recorded(backend: Backend, ws: str) -> None:
    first, second = backend.open(), backend.open()
    me = LockHolder.me()
    assert first.lead(ws, me) == 1
    assert first.lead(ws, me) == 1  # again: the same epoch
    assert second.lead(ws, me) is None
    assert first.leads(ws) and not second.leads(ws)
    first.set_agent(ws, "cycle", {"status": "Synced"})
    first.close()  # as when its process dies: the leadership ends with it
    assert second.lead(ws, me) == 2
    leader = second.agent(ws)["leader"]
    assert leader["epoch"] == 2 and leader["previous"]["pid"] == me.pid
    second.resign(ws)
    assert not second.leads(ws)


def test_a_store_that_lost_its_leadership_records_nothing(backend: Backend, ws: str) -> None:
    first, second = backend.open(), backend.open()
    assert first.lead(ws, LockHolder.me()) == 1
    # Taken over while the first still believes it leads (its lock given back
    # behind its back, as a lost PostgreSQL session or a removed lock file does).
    lead = first._leading[ws]  # type: ignore[attr-defined]
    if backend.name == "sqlite":
        os.unlink(first._lead_path(ws))  # type: ignore[attr-defined]
    else:
        import psycopg

        with psycopg.connect(backend.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (lead.session_pid,))
    assert second.lead(ws, LockHolder.me()) == 2
    assert not first.leads(ws)
    with pytest.raises(LockLostError, match="no longer leads"):
        first.set_agent(ws, "cycle", {"status": "Synced"})
    with pytest.raises(LockLostError):
        first.add_cycle(ws, cycle("Synced", "k", "2025-01-01T00:00:00.000000Z"))
    assert "cycle" not in second.agent(ws)
