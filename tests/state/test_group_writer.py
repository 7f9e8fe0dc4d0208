"""GroupWriter: the writes asked for while one commits are committed together,
and each keeps its own outcome (apply writes through it when the state is
across a network).

The store is the real SQLite store; its first commit waits until the test has
queued more writes, and it can be told to fail one entry or to lose its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

import pytest

from govsync.errors import LockLostError, StateError
from govsync.state import APPLIED, PENDING, Entry
from govsync.state.sqlite import SqliteStore
from govsync.state.writer import GroupWriter

WS = "default"


def entry(address: str) -> Entry:
    return Entry(address, address.split("/")[0], f"id-{address}", APPLIED, {"name": address})


class HeldStore(SqliteStore):
    """The SQLite store; its first commit waits for ``go``; ``fail`` names an address
    whose writes fail, ``defect`` one whose writes hit a defect (not a StateError);
    ``lose_lock`` makes the second commit find the lock lost."""

    def __init__(self, path: str, *, fail: str = "", defect: str = "",
                 lose_lock: bool = False) -> None:
        super().__init__(path)
        self.groups: list[list[str]] = []
        self.committing = threading.Event()
        self.go = threading.Event()
        self.fail = fail
        self.defect = defect
        self.lose_lock = lose_lock

    def put_many(self, workspace: str, entries: Sequence[Entry]) -> int:
        self.groups.append([e.address for e in entries])
        if len(self.groups) == 1:
            self.committing.set()
            assert self.go.wait(10)
        elif self.lose_lock:
            raise LockLostError(f"the lock on workspace {workspace!r} was lost (test)")
        if self.fail in self.groups[-1]:
            raise StateError(f"cannot write {self.fail} (test)")
        if self.defect in self.groups[-1]:
            raise TypeError(f"{self.defect} cannot be written as JSON (test)")
        return super().put_many(workspace, entries)


@pytest.fixture
def path(tmp_path: Path) -> str:
    return str(tmp_path / "state.db")


def queue_behind_the_first(store: HeldStore, writer: GroupWriter,
                           *addresses: str) -> list[Future[int]]:
    """Queue the first address, wait until its commit has begun, queue the rest."""
    first = writer.put(entry(addresses[0]))
    assert store.committing.wait(10)
    return [first, *(writer.put(entry(a)) for a in addresses[1:])]


def test_writes_queued_during_a_commit_are_committed_together(path: str) -> None:
    store = HeldStore(path)
    writer = GroupWriter(store, WS)
    done = queue_behind_the_first(store, writer, "Space/a", "Space/b", "Space/c")
    store.go.set()
    assert [f.result(10) for f in done] == [1, 2, 2]
    writer.close()
    assert store.groups == [["Space/a"], ["Space/b", "Space/c"]]
    snap = store.snapshot(WS)
    assert snap.serial == 2 and list(snap.entries) == ["Space/a", "Space/b", "Space/c"]


@pytest.mark.parametrize(("fault", "error", "message"), [
    ("fail", StateError, "cannot write Space/b"),                # the store refuses it
    ("defect", TypeError, "Space/b cannot be written as JSON"),  # a defect, not a StateError
])
def test_an_entry_that_fails_fails_alone(path: str, fault: str, error: type[Exception],
                                         message: str) -> None:
    store = HeldStore(path, **{fault: "Space/b"})
    writer = GroupWriter(store, WS)
    done = queue_behind_the_first(store, writer, "Space/a", "Space/b", "Space/c")
    store.go.set()
    writer.close()
    with pytest.raises(error, match=message):
        done[1].result(10)
    assert done[0].result(10) == 1 and done[2].result(10) == 2
    # The group failed, then each of its entries was written on its own.
    assert store.groups == [["Space/a"], ["Space/b", "Space/c"], ["Space/b"], ["Space/c"]]
    assert list(store.snapshot(WS).entries) == ["Space/a", "Space/c"]


def test_a_lost_lock_fails_every_write_of_the_group(path: str) -> None:
    store = HeldStore(path, lose_lock=True)
    writer = GroupWriter(store, WS)
    done = queue_behind_the_first(store, writer, "Space/a", "Space/b", "Space/c")
    store.go.set()
    writer.close()
    assert done[0].result(10) == 1
    for future in done[1:]:
        with pytest.raises(LockLostError):
            future.result(10)
    assert store.groups == [["Space/a"], ["Space/b", "Space/c"]]  # not tried one by one
    assert list(store.snapshot(WS).entries) == ["Space/a"]


def test_close_returns_once_every_queued_write_is_made(path: str) -> None:
    store = HeldStore(path)
    writer = GroupWriter(store, WS)
    done = queue_behind_the_first(store, writer, "Space/a", "Space/b")
    done.append(writer.put(Entry("Space/c", "Space", None, PENDING, {"name": "c"})))
    closing = threading.Thread(target=writer.close)
    closing.start()
    closing.join(0.2)
    assert closing.is_alive()  # the first commit still waits
    store.go.set()
    closing.join(10)
    assert not closing.is_alive() and all(f.done() for f in done)
    assert len(store.snapshot(WS).entries) == 3


def test_a_cancelled_intent_is_not_written_a_cancelled_answer_is(path: str) -> None:
    # An apply interrupted while an intent waits to be written never sends it,
    # so the intent must not be written either; an answer the API already
    # gave is recorded, whether or not anyone still waits for it.
    store = HeldStore(path)
    writer = GroupWriter(store, WS)
    first = writer.put(entry("Space/a"))
    assert store.committing.wait(10)
    intent = writer.put(Entry("Space/b", "Space", None, PENDING, {"name": "b"}))
    answer = writer.put(entry("Space/c"))
    kept = writer.put(entry("Space/d"))
    assert intent.cancel() and answer.cancel()
    store.go.set()
    writer.close()
    assert first.result(10) == 1 and kept.result(10) == 2
    assert store.groups == [["Space/a"], ["Space/c", "Space/d"]]
    assert list(store.snapshot(WS).entries) == ["Space/a", "Space/c", "Space/d"]


def test_a_write_after_close_is_refused(path: str) -> None:
    writer = GroupWriter(SqliteStore(path), WS)
    writer.close()
    with pytest.raises(StateError, match="closed"):
        writer.put(entry("Space/late"))
