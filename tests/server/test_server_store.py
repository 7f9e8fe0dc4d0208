"""The store: timestamps, ids, persistence in a file, seeds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from serverkit import SEED, TIMESTAMP

from govsync.server import SeedError, Store
from govsync.server.store import new_id, timestamp

EXAMPLE_SEED = Path(__file__).parents[2] / "examples" / "server-seed.yaml"


def test_timestamp_has_nanoseconds() -> None:
    assert timestamp(0) == "1970-01-01T00:00:00.000000000Z"
    assert timestamp(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789Z"
    assert re.match(TIMESTAMP, timestamp())


def test_ids_are_unique_and_well_formed() -> None:
    ids = {new_id("space") for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"space-[0-9a-f]{32}", i) for i in ids)


def test_a_file_store_keeps_everything(tmp_path: Path) -> None:
    db = tmp_path / "api.db"
    store = Store(db)
    store.put("Space", "s1", {"id": "s1", "name": "one"})
    store.put("ConnectorAIProvider", "p1", {"id": "p1", "connectorId": "c1"}, key="c1")
    store.put("Space", "s1", {"id": "s1", "name": "one again"})
    store.put("Space", "s2", {"id": "s2", "name": "two"})
    store.close()
    reopened = Store(db)
    assert reopened.list("Space") == [{"id": "s1", "name": "one again"},
                                      {"id": "s2", "name": "two"}]
    assert reopened.get_by_key("ConnectorAIProvider", "c1") == {"id": "p1", "connectorId": "c1"}
    assert reopened.get("Space", "nope") is None and not reopened.exists("Space", "nope")
    assert reopened._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reopened.close()


def test_seeding_is_idempotent_and_fills_timestamps(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(SEED))
    store = Store()
    assert store.load_seed(seed) == 7
    group = store.get("Group", "grp-analysts")
    assert group is not None and re.match(TIMESTAMP, group["createdAt"])
    assert group["terminationProtection"] is False and group["dsyncGroupId"] == ""
    assert store.get("Group", "grp-admins") == {**SEED["groups"][0],
                                                "createdAt": group["createdAt"],
                                                "updatedAt": group["createdAt"]}
    changed = {"groups": [{**SEED["groups"][0], "description": "changed"}]}
    store.load_seed(changed)
    store.load_seed(seed)
    assert store.count("Group") == 2 and store.count("User") == 2
    assert store.get("Group", "grp-admins")["description"] == "Administrators"  # type: ignore[index]


@pytest.mark.parametrize(("seed", "message"), [
    ({"spaces": []}, "unknown seed key"),
    ({"groups": {"id": "g"}}, "expected a list"),
    ({"groups": [{"name": "no id"}]}, "groups[0]"),
    ({"users": ["usr-1"]}, "users[0]"),
    ([1, 2], "a seed is a mapping"),
])
def test_bad_seeds_are_rejected(seed: object, message: str, tmp_path: Path) -> None:
    path = tmp_path / "seed.yaml"
    path.write_text(yaml.safe_dump(seed))
    with pytest.raises(SeedError, match=re.escape(message)):
        Store().load_seed(path)


@pytest.mark.parametrize(("content", "message"), [
    (b"groups: [\xff\xfe]\n", "cannot read seed"),
    # libyaml composes in C recursion: this deep it would crash the process.  (The
    # libyaml of PyYAML 6.0.4 and later refuses it at its own 1,000 levels, met
    # scanning ahead of the events counted: the same refusal, further along.)
    (b"[" * 100_000, r"line 1, column (101|1001): nested deeper than 100 levels"),
    (b"groups:\n" + b"- " * 101 + b"x\n", "line 2, column 199: nested deeper than 100 levels"),
])
def test_a_seed_that_is_not_utf8_or_nests_too_deep_is_a_seed_error(
        content: bytes, message: str, tmp_path: Path) -> None:
    path = tmp_path / "seed.yaml"
    path.write_bytes(content)
    with pytest.raises(SeedError, match=message):
        Store().load_seed(path)


def test_unreadable_seed(tmp_path: Path) -> None:
    with pytest.raises(SeedError, match="cannot read seed"):
        Store().load_seed(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("groups: [\n")
    with pytest.raises(SeedError, match="cannot read seed"):
        Store().load_seed(tmp_path / "bad.yaml")


@pytest.mark.skipif(not EXAMPLE_SEED.exists(), reason="no example seed")
def test_the_example_seed_loads() -> None:
    store = Store()
    assert store.load_seed(EXAMPLE_SEED) > 0
    assert store.count("Group") and store.count("Resource") and store.count("User")
