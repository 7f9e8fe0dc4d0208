"""A change of the governance record made outside govsync is in the audit export
(issue 30, finding 10).

With the writer's credentials, an UPDATE of a workspace's governance record
(its approvals dropped) went unnoticed.  Now the database itself records it
(PostgreSQL: a trigger; SQLite: the same), and ``govsync audit export`` lists
it; govsync's own writes of the record list nothing of the kind.
"""

from __future__ import annotations

import json
import sqlite3

from govkit import Repo


def tamper(repo: Repo) -> None:
    """What an attacker with the writer's credentials does: one UPDATE (prod's approvals
    dropped to none)."""
    if repo.state.startswith("postgres"):
        import psycopg

        with psycopg.connect(repo.state, autocommit=True) as conn:
            conn.execute("UPDATE govsync_workspaces SET governance = jsonb_set(governance,"
                         " '{approvals,required}', '0'::jsonb) WHERE name = %s", (repo.prod,))
    else:
        with sqlite3.connect(repo.state) as conn:
            conn.execute("UPDATE workspaces SET governance = json_set(governance,"
                         " '$.approvals.required', 0) WHERE name = ?", (repo.prod,))


def recorded_required(repo: Repo) -> object:
    if repo.state.startswith("postgres"):
        import psycopg

        with psycopg.connect(repo.state) as conn:
            row = conn.execute("SELECT governance FROM govsync_workspaces WHERE name = %s",
                               (repo.prod,)).fetchone()
            return row[0]["approvals"]["required"] if row else None
    with sqlite3.connect(repo.state) as db:
        found = db.execute("SELECT governance FROM workspaces WHERE name = ?",
                           (repo.prod,)).fetchone()
        return json.loads(found[0])["approvals"]["required"] if found else None


def exported(repo: Repo) -> list[dict[str, object]]:
    done = repo.gov("audit", "export", "--env", "prod")
    assert done.code == 0, done
    return [json.loads(line) for line in done.out.splitlines()]


def test_an_update_of_the_governance_record_outside_govsync_is_audited(repo: Repo) -> None:
    a, b = repo.key("alice"), repo.key("bob")
    assert repo.approved_apply(a, b).code == 0  # records prod's governance
    before = exported(repo)
    assert before and not [r for r in before if r.get("type") == "governance-changed"]
    tamper(repo)
    found = [r for r in exported(repo) if r.get("type") == "governance-changed"]
    assert len(found) == 1, found
    assert "outside govsync" in str(found[0]["command"])
    assert found[0]["ok"] is False
    # govsync's own write of the record (a new apply) adds none.
    repo.set_timeout(2500)
    assert repo.approved_apply(a, b).code == 0
    assert recorded_required(repo) == 2  # written again, by govsync
    assert len([r for r in exported(repo) if r.get("type") == "governance-changed"]) == 1
