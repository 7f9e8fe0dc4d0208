"""The read-only role blocks no writer (issue 30, finding 8).

The role made with the GRANTs ``govsync state readonly-role`` prints tries
everything a session of it can to hold govsync's locks: every advisory lock
it can see or compute (the workspace's and the agent's keys, every key held
in ``pg_locks``), a row lock on every table, every table lock.  A writer's
lock of the workspace and an agent's leadership are still taken, and a lost
lock is still seen.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import psycopg
import pytest

from govsync.errors import StateLockedError
from govsync.state import LockHolder
from govsync.state.postgres import PostgresStore
from testkit import ReaderRole, environ, govsync, reader_role

pytestmark = pytest.mark.postgres

MODES = ("ACCESS SHARE", "ROW SHARE", "ROW EXCLUSIVE", "SHARE UPDATE EXCLUSIVE", "SHARE",
         "SHARE ROW EXCLUSIVE", "EXCLUSIVE", "ACCESS EXCLUSIVE")


@pytest.fixture
def pg(postgres_url: str) -> Iterator[ReaderRole]:
    with reader_role(postgres_url, "locks") as made:
        yield made


def advisory_key(name: str) -> int:
    """The advisory lock key govsync 0.x used for ``name`` (any reader can compute it)."""
    return int.from_bytes(hashlib.sha256(f"govsync:{name}".encode()).digest()[:8], "big",
                          signed=True)


def grant_reader(pg: ReaderRole) -> None:
    printed = govsync("state", "readonly-role", pg.role, "--state", pg.writer, env=environ())
    assert printed.code == 0, printed
    pg.grant(printed.out)


def hold_everything(reader: psycopg.Connection[tuple[object, ...]], workspace: str,
                    seen: list[tuple[object, ...]]) -> int:
    """Every lock the reader's session can take and keep (the advisory keys it can
    compute, those it ``seen`` held in pg_locks); how many it holds."""
    held = 0
    keys = {advisory_key(workspace), advisory_key(f"agent:{workspace}")}
    for classid, objid in seen:
        unsigned = int(str(classid)) << 32 | int(str(objid))
        keys.add(unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned)
    for key in keys:
        held += bool(reader.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0])
    tables = [r[0] for r in reader.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = current_schema() AND c.relkind = 'r'")]
    reader.execute("BEGIN")
    for table in tables:
        for statement in ([f'SELECT 1 FROM "{table}" FOR {strength}' for strength in
                           ("UPDATE", "NO KEY UPDATE", "SHARE", "KEY SHARE")]
                          + [f'LOCK TABLE "{table}" IN {mode} MODE NOWAIT' for mode in MODES]):
            reader.execute("SAVEPOINT attempt")
            try:
                reader.execute(statement)  # noqa: S608
                held += 1
                reader.execute("RELEASE SAVEPOINT attempt")
            except psycopg.Error:
                reader.execute("ROLLBACK TO SAVEPOINT attempt")
    return held


def test_the_read_only_role_blocks_no_writer_nor_leader(pg: ReaderRole) -> None:
    workspace = "locked-by-reader"
    seen: list[tuple[object, ...]] = []
    first = PostgresStore(pg.writer)
    try:
        first.acquire(workspace, LockHolder.me())  # what a reader then sees in pg_locks
        first.lead(workspace, LockHolder.me())
        with psycopg.connect(pg.reader, autocommit=True) as spy:
            seen = spy.execute("SELECT classid, objid FROM pg_locks"
                               " WHERE locktype = 'advisory'").fetchall()
    finally:
        first.close()
    grant_reader(pg)
    with psycopg.connect(pg.reader, autocommit=True) as reader:
        assert hold_everything(reader, workspace, seen) > 0  # it holds what it could
        writer = PostgresStore(pg.writer)
        try:
            assert writer.acquire(workspace, LockHolder.me()) >= 1
            assert writer.lead(workspace, LockHolder.me()) is not None
            writer.put_many(workspace, [])
            # ... and the lock is still one: another writer is refused.
            other = PostgresStore(pg.writer)
            try:
                with pytest.raises(StateLockedError, match="is locked by"):
                    other.acquire(workspace, LockHolder.me())
                assert other.lead(workspace, LockHolder.me()) is None
            finally:
                other.close()
        finally:
            writer.close()
