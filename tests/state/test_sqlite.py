"""What only the SQLite backend has: its file checked, its backup kept in step, an
older file upgraded, its URLs.  What every backend does is contract.py's.

State integrity (contract section 7): a state file that exists but is empty,
truncated, not SQLite, missing a table, missing rows (the workspace's entry
count disagrees) or holding malformed rows is a StateDamagedError naming the
problem and the file, and the file is left exactly as it was.  The same through the command line: exit
1, one line, no traceback.  A new state is made only where no file exists.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from govsync.cli import cli
from govsync.errors import StateDamagedError, StateError
from govsync.state import APPLIED, Entry, EntryStatus, LockHolder, open_store
from govsync.state.sqlite import SqliteStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
WS = "prod"


def make_state(path: Path, n: int = 40) -> None:
    """A healthy state with ``n`` entries in workspace prod, closed (no WAL left)."""
    with open_store(str(path)) as store:
        for i in range(n):
            store.put(WS, Entry(f"Space/s{i:03}", "Space", f"id-{i}", APPLIED,
                                {"name": f"s{i}", "description": "x" * 200}, {"id": f"id-{i}"}))
    assert not Path(f"{path}-wal").exists()


def sql(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path)
    with db:
        for statement in statements:
            db.execute(statement)
    db.close()


def truncate_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


CORRUPTIONS: dict[str, tuple[Callable[[Path], object], str]] = {
    "empty": (lambda p: p.write_bytes(b""), "it is empty (0 bytes)"),
    "truncated": (truncate_half, "truncated"),
    "truncated-header": (lambda p: p.write_bytes(p.read_bytes()[:60]), "truncated"),
    "not-sqlite": (lambda p: p.write_text("version: 4\nresources: []\n" * 50),
                   "not a SQLite database"),
    "no-objects-table": (lambda p: sql(p, "DROP TABLE objects"), "no objects table"),
    "no-tables": (lambda p: sql(p, *(f"DROP TABLE {t}" for t in
                                     ("objects", "locks", "history", "workspaces"))),
                  "no workspaces, objects, locks, history tables"),
    "rows-missing": (lambda p: sql(p, "DELETE FROM objects WHERE address > 'Space/s030'"),
                     "it records 40 entries but the objects table holds 31"),
    "all-rows-missing": (lambda p: sql(p, "DELETE FROM objects"),
                         "it records 40 entries but the objects table holds 0"),
    "spec-not-json": (lambda p: sql(p, "UPDATE objects SET spec = '{\"name\": ' "
                                       "WHERE address = 'Space/s007'"),
                      "entry 'Space/s007': its spec is not JSON"),
    "spec-a-list": (lambda p: sql(p, "UPDATE objects SET spec = '[1, 2]'"
                                     " WHERE address = 'Space/s007'"),
                    "entry 'Space/s007': its spec is a JSON list, not an object"),
    # Two entries whose texts would merge or split if parsed together are
    # still each found and named.
    "spec-two-objects": (lambda p: sql(p, "UPDATE objects SET spec = '{\"a\": 1},{\"b\": 2}'"
                                          " WHERE address = 'Space/s007'"),
                         "entry 'Space/s007': its spec is not JSON"),
    "specs-that-merge": (lambda p: sql(p, "UPDATE objects SET spec = '{\"a\": \"'"
                                          " WHERE address = 'Space/s007'",
                                       "UPDATE objects SET spec = '\"}'"
                                       " WHERE address = 'Space/s008'"),
                         "entry 'Space/s007': its spec is not JSON"),
    # Two damaged texts that would read as two objects if joined with a comma.
    "specs-that-pair-up": (lambda p: sql(p, "UPDATE objects SET spec = '{\"a\": 1},{\"b\": [{}'"
                                            " WHERE address = 'Space/s007'",
                                         "UPDATE objects SET spec = '{}]}'"
                                         " WHERE address = 'Space/s008'"),
                           "entry 'Space/s007': its spec is not JSON"),
    "spec-then-more": (lambda p: sql(p, "UPDATE objects SET spec = '{\"a\": 1} x'"
                                        " WHERE address = 'Space/s007'"),
                       "entry 'Space/s007': its spec is not JSON"),
    "response-not-json": (lambda p: sql(p, "UPDATE objects SET response = 'nope'"
                                           " WHERE address = 'Space/s001'"),
                          "entry 'Space/s001': its response is not JSON"),
    "serial-not-a-number": (lambda p: sql(p, "UPDATE workspaces SET serial = 'lots'"),
                            "its serial is 'lots', not a number"),
    "unknown-status": (lambda p: sql(p, "UPDATE objects SET status = 'exploded'"
                                        " WHERE address = 'Space/s003'"),
                       "entry 'Space/s003' has the unknown status 'exploded'"),
}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    make_state(path)
    return path


def open_and_read(path: Path) -> None:
    with open_store(str(path)) as store:
        store.snapshot(WS)


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_damaged_sqlite_state_is_an_error_and_left_alone(state: Path, case: str) -> None:
    damage, expected = CORRUPTIONS[case]
    damage(state)
    before = state.read_bytes()
    with pytest.raises(StateDamagedError) as caught:
        open_and_read(state)
    message = str(caught.value)
    assert expected in message
    assert f"the state file {state} is damaged" in message
    assert "govsync state import-all" in message
    assert "\n" not in message
    assert state.read_bytes() == before  # never replaced by a new empty state
    assert not list(state.parent.glob("*.new-*"))


@pytest.mark.parametrize("case", ["empty", "truncated", "not-sqlite", "no-objects-table",
                                  "rows-missing", "spec-not-json", "unknown-status"])
@pytest.mark.parametrize("command", [("state", "list"), ("plan", str(EXAMPLES))])
def test_a_damaged_state_on_the_command_line(state: Path, case: str, command: tuple[str, ...],
                                             example_secrets: dict[str, str]) -> None:
    damage, expected = CORRUPTIONS[case]
    damage(state)
    before = state.read_bytes()
    result = CliRunner().invoke(cli, [*command, "--state", str(state), "--workspace", WS])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: the state file") and expected in lines[0]
    assert "Traceback" not in result.output + result.stderr
    assert state.read_bytes() == before


def test_a_damaged_state_in_a_subprocess_exits_1_with_one_line(state: Path) -> None:
    import subprocess
    import sys

    state.write_bytes(b"")
    run = subprocess.run([sys.executable, "-m", "govsync", "state", "list", "--state",
                          str(state)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert run.stderr.count("\n") == 1 and "it is empty (0 bytes)" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_new_state_is_made_only_where_no_file_exists(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "state.db"
    with open_store(str(path)) as store:
        assert store.snapshot(WS).entries == {}
    assert path.stat().st_size > 0
    assert not list(path.parent.glob("*.new-*"))


def test_a_directory_where_the_state_file_should_be(tmp_path: Path) -> None:
    (tmp_path / "state.db").mkdir()
    with pytest.raises(StateDamagedError, match="not a regular file"):
        open_store(str(tmp_path / "state.db"))


def test_the_entry_count_follows_every_write(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with open_store(str(path)) as store:
        store.put(WS, Entry("Space/a", "Space", "1", APPLIED, {}))
        store.put(WS, Entry("Space/a", "Space", "1", APPLIED, {"b": 1}))  # replaced: still 1
        store.put(WS, Entry("Space/b", "Space", "2", APPLIED, {}))
        store.remove(WS, "Space/a")
        store.remove(WS, "Space/missing")
        assert list(store.snapshot(WS).entries) == ["Space/b"]
        store.replace_all(WS, [Entry(f"Space/{i}", "Space", None, APPLIED) for i in range(5)],
                          None, None)
        assert len(store.snapshot(WS).entries) == 5
    sql(path, "DELETE FROM objects WHERE address = 'Space/3'")
    with pytest.raises(StateDamagedError, match="records 5 entries but the objects table holds 4"):
        open_and_read(path)


# -- the backup -----------------------------------------------------------------------

def test_the_backup_is_kept_in_step_with_every_write(state: Path) -> None:
    backup = Path(f"{state}.backup")
    before = backup.stat().st_mtime_ns
    with open_store(str(state)) as store:
        store.snapshot(WS)
        assert backup.stat().st_mtime_ns == before  # reading writes nothing
        store.put(WS, Entry("Space/new", "Space", "n", APPLIED, {}))
        with open_store(str(backup)) as kept:  # in step before the session ends
            assert kept.snapshot(WS).entries["Space/new"].id == "n"
        store.put(WS, Entry("Space/newer", "Space", "n2", APPLIED, {}))
        store.remove(WS, "Space/s000")
        serial = store.snapshot(WS).serial
    with open_store(str(backup)) as kept:
        snap = kept.snapshot(WS)
    assert {"Space/new", "Space/newer"} <= snap.entries.keys()
    assert "Space/s000" not in snap.entries and len(snap.entries) == 41
    assert snap.serial == serial
    assert oct(backup.stat().st_mode & 0o777) == oct(0o600)
    assert oct(state.stat().st_mode & 0o777) == oct(0o600)


def test_a_backup_another_store_makes_anew_is_followed(state: Path) -> None:
    """Two processes writing two workspaces of one file: each one's first write makes
    the backup anew, and neither loses the other's writes in it."""
    first, second = open_store(str(state)), open_store(str(state))
    try:
        first.put(WS, Entry("Space/a", "Space", "a", APPLIED, {}))
        second.put("staging", Entry("Space/b", "Space", "b", APPLIED, {}))  # copies anew
        first.put(WS, Entry("Space/c", "Space", "c", APPLIED, {}))
    finally:
        first.close()
        second.close()
    with open_store(str(state) + ".backup") as kept:
        assert {"Space/a", "Space/c"} <= kept.snapshot(WS).entries.keys()
        assert "Space/b" in kept.snapshot("staging").entries


def test_the_damage_message_points_to_the_backup(state: Path) -> None:
    with open_store(str(state)) as store:
        store.put(WS, Entry("Space/new", "Space", "n", APPLIED, {}))
    truncate_half(state)
    with pytest.raises(StateDamagedError, match=f"Restore it from {state}.backup"):
        open_and_read(state)
    shutil.copy(f"{state}.backup", state)  # the advice works, and loses nothing
    with open_store(str(state)) as store:
        assert store.snapshot(WS).entries["Space/new"].id == "n"
        assert len(store.snapshot(WS).entries) == 41


def test_leftover_copies_of_a_killed_process_are_removed(state: Path) -> None:
    leftover = Path(f"{state}.backup.tmp-999999999-abcd")  # no such process
    leftover.write_bytes(state.read_bytes())
    with open_store(str(state)) as store:
        store.put(WS, Entry("Space/new", "Space", "n", APPLIED, {}))
    assert not leftover.exists()


# -- an older state file ----------------------------------------------------------------

OLD_WORKSPACES = """CREATE TABLE workspaces (name TEXT PRIMARY KEY, lineage TEXT NOT NULL,
    serial INTEGER NOT NULL DEFAULT 0, fingerprint_key BLOB NOT NULL, created_at TEXT NOT NULL)"""


def test_an_older_state_file_is_migrated_after_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    make_state(path, n=3)
    sql(path, "ALTER TABLE workspaces RENAME TO w_new", OLD_WORKSPACES,
        "INSERT INTO workspaces SELECT name, lineage, serial, fingerprint_key, created_at"
        " FROM w_new", "DROP TABLE w_new")
    with open_store(str(path)) as store:
        snap = store.snapshot(WS)
        assert (len(snap.entries), snap.serial, snap.endpoint) == (3, 3, None)
        assert store.acquire(WS, LockHolder("alice", "ci", 1, "govsync apply", "")) == 1
        store.put(WS, Entry("Space/d", "Space", "4", APPLIED, {}))
    assert Path(f"{path}.before-upgrade").exists()
    with sqlite3.connect(f"{path}.before-upgrade") as old:
        columns = {r[1] for r in old.execute("PRAGMA table_info(workspaces)")}
    assert "entry_count" not in columns  # the copy is of the file as it was


# -- endpoint, statuses, URLs --------------------------------------------------------------

def test_entry_status_is_a_str_enum() -> None:
    assert [s.value for s in EntryStatus] == ["applied", "pending", "uncertain"]
    assert str(EntryStatus.APPLIED) == "applied" and APPLIED is EntryStatus.APPLIED
    assert EntryStatus("pending") is EntryStatus.PENDING
    assert f"{EntryStatus.UNCERTAIN}" == "uncertain"


@pytest.mark.parametrize("url", ["mysql://user@db/state", "redis://localhost:6379/0",
                                 "s3://bucket/state.db"])
def test_an_unknown_url_scheme_is_an_error(url: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StateError, match="not a state backend"):
        open_store(url)
    assert list(tmp_path.iterdir()) == []  # no file or folder named after the scheme


def test_sqlite_urls_and_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store(f"sqlite:///{tmp_path}/a.db") as a, open_store("b.db") as b:
        assert isinstance(a, SqliteStore) and isinstance(b, SqliteStore)
    assert (tmp_path / "a.db").exists() and (tmp_path / "b.db").exists()


def test_sqlite_open_failure_is_a_state_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StateError):
        open_store(str(blocker / "state.db"))
