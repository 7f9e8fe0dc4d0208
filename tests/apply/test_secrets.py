"""A secret canary: values read through ``fromEnv`` never leave the process.

Every secret variable holds a fresh uuid.  After applying the example
organisation (whose BI integration the server echoes back with its key) and
running every read command in every format, plus an apply whose calls all
fail, no canary is in any output, in the saved plan, in the server's log, or
anywhere in the state: the SQLite files byte for byte (WAL included), or
every row of the govsync_ tables in PostgreSQL.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import (
    BIG_SECRET_VAR,
    EXAMPLE_MANIFESTS,
    EXAMPLE_SECRET_VARS,
    Govsync,
    Server,
    doc,
    write_docs,
)

pytestmark = pytest.mark.slow


def stored_text(state_url: str, tmp_path: Path) -> str:
    """Everything the state backend holds, as text."""
    if state_url.startswith("postgres"):
        import psycopg

        parts = []
        with psycopg.connect(state_url) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_name LIKE 'govsync%%'")]
            assert {"govsync_objects", "govsync_history"} <= set(tables), tables
            for table in tables:
                rows = conn.execute(f'SELECT t::text FROM "{table}" t').fetchall()  # noqa: S608
                parts += [r[0] for r in rows]
        return "\n".join(parts)
    files = sorted((tmp_path / ".govsync").iterdir())
    assert any(f.name == "state.db" for f in files)
    return "\n".join(f.read_bytes().decode("latin-1") for f in files if f.is_file())


def test_secret_canary(serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
                       state_url: str, tmp_path: Path) -> None:
    server = serve(process=True)  # its output is searched too
    manifests = tmp_path / "manifests"
    shutil.copytree(EXAMPLE_MANIFESTS, manifests)
    gov = make_govsync(state_url, server.url)
    canaries = [gov.secrets[v] for v in (*EXAMPLE_SECRET_VARS, BIG_SECRET_VAR)]
    keeper = None
    if not state_url.startswith("postgres"):
        # A reader that stays open keeps the write-ahead log on disk (the last
        # connection to close would checkpoint and delete it): it is searched too.
        # govsync makes the file (a file without its tables is a damaged state).
        assert gov.invoke("state", "unlock").code == 0  # a writing command: it makes the file
        keeper = sqlite3.connect(state_url)
        keeper.execute("PRAGMA journal_mode=WAL")
        keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()

    plan_file = tmp_path / "plan.json"
    plan = gov.run("plan", str(manifests), "--out", str(plan_file))
    assert plan.code == 0, plan
    assert "(sensitive)" in plan.out
    applied = gov.run("apply", str(plan_file))
    assert applied.code == 0, applied
    # The server did receive the BI key: the client sent the real value.
    (bi,) = server.objects()["BIIntegration"]
    assert bi["biA"]["apiKey"] == gov.secrets["GOVSYNC_EXAMPLE_BI_API_KEY"]

    # Read commands in-process (the same code, faster than a process each).
    for fmt in ("text", "json", "markdown"):
        assert gov.invoke("plan", str(manifests), "--format", fmt).code == 0
        assert gov.invoke("drift", str(manifests), "--format", fmt).code == 0
    assert gov.invoke("-v", "plan", str(manifests)).code == 0
    assert gov.run("apply", str(manifests), "--auto-approve").code == 0
    for args in (("list",), ("export",), ("history",), ("history", "--format", "json"),
                 ("show", "BIIntegration/exec-dashboards"),
                 ("show", "LogIntegration/security-siem"),
                 ("show", "AIProviderIntegration/vendor-a-enterprise")):
        run = gov.invoke("state", *args)
        assert run.code == 0, run
    shown = gov.invoke("state", "show", "BIIntegration/exec-dashboards").out
    assert "hmac-sha256:" in shown and "(sensitive)" in shown

    # A changed secret of an integration is a blocked change; the diff hides both values.
    changed = {"GOVSYNC_EXAMPLE_MDM_API_KEY": f"{canaries[3]}-new"}
    blocked = gov.invoke("plan", str(manifests), "--format", "json", env=changed)
    assert blocked.code == 1 and "(sensitive)" in blocked.out, blocked
    assert gov.run("apply", str(manifests), "--auto-approve", env=changed).code == 1

    # Every write call fails (500 or a dropped connection): error paths stay clean.
    faulty = serve("--fault-rate", "1.0", process=True)
    other = make_govsync(state_url, faulty.url)
    write_docs(tmp_path / "faulty" / "logs.yaml", [
        doc("LogIntegration", f"canary-{i}", {"logStoreB": {
            "site": "eu1.example", "apiKey": {"fromEnv": BIG_SECRET_VAR}}}) for i in range(4)])
    failed = other.run("apply", str(tmp_path / "faulty"), "--auto-approve")
    assert failed.code == 1, failed
    assert {e["status"] for e in other.entries().values()} <= {"uncertain"}

    # The search works: the server itself stores the BI key it was sent.
    server_files = [p.read_bytes().decode("latin-1") for p in tmp_path.glob(f"{server.name}.db*")]
    assert any(gov.secrets["GOVSYNC_EXAMPLE_BI_API_KEY"] in text for text in server_files)

    outputs = gov.transcript + other.transcript + [plan_file.read_text()]
    logs = [s.log.read_text(errors="replace") for s in (server, faulty)]
    if keeper is not None:
        assert keeper.execute("SELECT count(*) FROM objects").fetchone()[0] > 0
        assert Path(f"{state_url}-wal").stat().st_size > 0
    stored = stored_text(state_url, tmp_path)
    if keeper is not None:
        keeper.close()
    assert gov.workspace in stored and "hmac-sha256:" in stored
    for canary in canaries:
        assert not [o for o in outputs if canary in o]
        assert not [log for log in logs if canary in log]
        assert canary not in stored
