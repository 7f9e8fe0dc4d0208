"""Saved plans that readers cannot forge (issue 21, findings 3 and 4).

The attacker can read everything a reader can: every table of the read-only
role (made with the GRANTs ``govsync state readonly-role`` prints, as a real
PostgreSQL role), ``state export``, a copy of the SQLite state and of its
backup.  They edit a request of a saved plan and recompute its
authentication code with every value they found, then run what the CI
apply job runs.  The server must never hold the forged content."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from govkit import Repo

from govsync import planfile
from testkit import ReaderRole, reader_role

FORGED_TIMEOUT = 4999  # within the rules: only the forgery stands in its way


def candidates(*found: Any) -> set[bytes]:
    """Every value an attacker found, as key material: bytes, text, hex, base64."""
    out: set[bytes] = set()

    def add(value: Any) -> None:
        if isinstance(value, bytes | memoryview):
            out.add(bytes(value))
        elif isinstance(value, str):
            out.add(value.encode())
            for decode in (bytes.fromhex, base64.b64decode):
                with contextlib.suppress(ValueError):
                    out.add(decode(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                add(k)
                add(v)
        elif isinstance(value, list | tuple):
            for v in value:
                add(v)

    for value in found:
        add(value)
    return {c for c in out if c}


def forge(plan: Path, keys: set[bytes]) -> list[Path]:
    """The plan with its Hook request edited, once per candidate key (the current and
    the old derivation of the MAC), and without a MAC at all."""
    data = json.loads(plan.read_text())
    data.pop("mac")
    for change in data["changes"]:
        if change["address"] == "Hook/risk":
            change["request"]["timeoutMs"] = FORGED_TIMEOUT
    data["reviewDigest"] = "forged"
    forged = []
    import hashlib
    import hmac

    def old_mac(body: dict[str, Any], key: bytes) -> str:
        derived = hmac.new(key, b"govsync saved plan v1", hashlib.sha256).digest()
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"),
                               ensure_ascii=False).encode()
        return "hmac-sha256:" + hmac.new(derived, canonical, hashlib.sha256).hexdigest()

    tags = [None] + [f(data, k) for k in keys for f in (planfile.mac, old_mac)]
    for i, tag in enumerate(tags):
        path = plan.with_name(f"forged-{i}.json")
        path.write_text(json.dumps({**data, "mac": tag}))
        forged.append(path)
    return forged


def attack(repo: Repo, plan: Path, keys: set[bytes]) -> None:
    """The first forgery as the CI job runs it (a real process), every other one in
    process: the same command line, without a Python start-up per candidate key."""
    for i, path in enumerate(forge(plan, keys)):
        done = repo.gov("apply", "--env", "staging", str(path), process=i == 0)
        assert done.code == 1, done
        assert "Traceback" not in done.err
        assert repo.hooks()["risk"]["timeoutMs"] != FORGED_TIMEOUT
    shown = repo.gov("show", "--env", "staging", str(path))
    assert f"timeoutMs: {FORGED_TIMEOUT}" in shown.out, shown  # what it would send
    assert "Authentication: DOES NOT VERIFY" in shown.out, shown


def test_a_copy_of_the_sqlite_state_forges_nothing(sqlite_repo: Repo) -> None:
    repo = sqlite_repo
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    repo.set_timeout(3000)
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "staging", "--out", str(plan)).code == 0
    found: list[Any] = []
    state = Path(repo.state)
    for copy in (state, Path(f"{state}.backup")):
        with sqlite3.connect(f"file:{copy}?mode=ro", uri=True) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'"):
                found += [list(row) for row in db.execute(f'SELECT * FROM "{table}"')]
    exported = repo.gov("state", "export", "--env", "staging")
    found.append(json.loads(exported.out))
    assert oct(Path(f"{state}.plan-key").stat().st_mode & 0o777) == oct(0o600)
    assert oct(state.stat().st_mode & 0o777) == oct(0o600)
    attack(repo, plan, candidates(*found))
    # The genuine plan still applies.
    assert repo.gov("apply", "--env", "staging", str(plan)).code == 0
    assert repo.hooks()["risk"]["timeoutMs"] == 3000


@pytest.fixture
def pg() -> Iterator[ReaderRole]:
    """A schema of the test's own and a real reader role."""
    url = os.environ.get("GOVSYNC_TEST_POSTGRES", "")
    if not url:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    with reader_role(url, "gs") as made:
        yield made


@pytest.mark.postgres
def test_the_read_only_role_forges_nothing(tmp_path: Path, pg: ReaderRole) -> None:
    import psycopg

    writer, reader, role = pg.writer, pg.reader, pg.role
    repo = Repo(tmp_path / "repo", writer)
    try:
        # The reader plans a fresh database: it reads as empty, and nothing is made.
        fresh = repo.gov("plan", "--env", "staging", "--state", reader)
        assert fresh.code == 0 and "1 to create" in fresh.out, fresh
        with psycopg.connect(writer) as conn:
            assert conn.execute("SELECT to_regclass('govsync_workspaces')").fetchone() == (None,)
        grants = repo.gov("state", "readonly-role", role, "--state", writer)
        assert grants.code == 0, grants
        pg.grant(grants.out)
        assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
        repo.set_timeout(3000)
        # The reader's plan of a pull request: saved for review only.
        review = repo.root / "review.json"
        made = repo.gov("plan", "--env", "staging", "--out", str(review), "--state", reader)
        assert made.code == 0 and "for review only" in made.err, made
        assert json.loads(review.read_text())["mac"] is None
        # Everything the reader role can read.
        found: list[Any] = []
        with psycopg.connect(reader) as conn:
            tables = [r[0] for r in conn.execute(  # pg_class: every table, granted or not
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid ="
                " c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'")]
            assert "govsync_plan_keys" in tables
            for table in tables:
                try:
                    found += [list(r) for r in conn.execute(f'SELECT * FROM "{table}"')]
                except psycopg.errors.InsufficientPrivilege:
                    assert table in ("govsync_plan_keys", "govsync_applied_plans"), table
                    conn.rollback()
        assert found, "the reader reads the state"
        exported = repo.gov("state", "export", "--env", "staging", "--state", reader)
        assert exported.code == 0, exported
        found.append(json.loads(exported.out))
        # A genuine plan, made by the writer; the attacker edits it.
        plan = repo.root / "plan.json"
        assert repo.gov("plan", "--env", "staging", "--out", str(plan)).code == 0
        attack(repo, plan, candidates(*found))
        # What the CI apply job runs, with the pull request's (forged) artifact.
        for i, path in enumerate(forge(review, candidates(*found))[:3]):
            done = repo.gov("apply", "--env", "staging", "--reviewed", str(path),
                            "--auto-approve", process=i == 0)
            assert done.code == 1 and "differs from the reviewed" in done.err, done
            assert "Hook/risk differs in request.timeoutMs" in done.err, done
        # The genuine review applies.
        applied = repo.gov("apply", "--env", "staging", "--reviewed", str(review))
        assert applied.code == 0, applied
        assert repo.hooks()["risk"]["timeoutMs"] == 3000
        # The reader writes nothing.
        refused = repo.gov("apply", "--env", "staging", "--auto-approve", "--state", reader)
        assert refused.code == 1 and "permission denied" in refused.err, refused
    finally:
        repo.close()


def test_show_shows_what_is_sent_and_whether_it_verifies(sqlite_repo: Repo) -> None:
    """The finding's example: a change shown as 1500 -> 2000 that would send 5000."""
    repo = sqlite_repo
    assert repo.gov("apply", "--env", "staging", "--auto-approve").code == 0
    repo.set_timeout(2000)
    plan = repo.root / "plan.json"
    assert repo.gov("plan", "--env", "staging", "--out", str(plan)).code == 0
    shown = repo.gov("show", "--env", "staging", str(plan))
    assert "Authentication: verified" in shown.out, shown
    assert "UpdateHook Hook/risk" in shown.out and "timeoutMs: 2000" in shown.out
    data = json.loads(plan.read_text())
    for change in data["changes"]:
        if change["address"] == "Hook/risk":
            change["request"]["timeoutMs"] = 5000
    plan.write_text(json.dumps(data))
    shown = repo.gov("show", "--env", "staging", str(plan))
    assert "timeoutMs: 1500 -> 2000" in shown.out  # the diff, as the file says
    assert "timeoutMs: 5000" in shown.out  # and what would really be sent
    assert "Authentication: DOES NOT VERIFY" in shown.out
