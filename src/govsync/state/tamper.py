"""A change of a workspace's governance record outside govsync, kept in its history.

Whoever holds the writer's credentials can ``UPDATE`` the record directly
(drop prod's approvals, say).  Each backend's tables carry a trigger that
appends a ``governance-changed`` history record (the record before and after,
who) for every change of the record in a write that is not govsync's own, so
that ``govsync audit export`` lists it.  govsync's own write
(``StateStore.set_governance``) marks its transaction: PostgreSQL sets
``govsync.writing`` to the workspace for the transaction; SQLite, which has
no session settings, writes the workspace into ``governance_writes`` and
removes it again in the same transaction.  It catches a careless or hurried
change; an owner who also drops the trigger or the history row is not
stopped, as nothing inside a database can stop its owner.
"""

from __future__ import annotations

from govsync.state.records import CHANGED_OUTSIDE, GOVERNANCE_CHANGED

GOVERNANCE_TRIGGER = "govsync_governance_audit"

# PostgreSQL: the function, then the trigger (made again whole when missing).
GOVERNANCE_AUDIT = (
    f"""CREATE OR REPLACE FUNCTION {GOVERNANCE_TRIGGER}() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
    BEGIN
        IF NEW.governance IS DISTINCT FROM OLD.governance AND
                coalesce(current_setting('govsync.writing', true), '') <> NEW.name THEN
            INSERT INTO govsync_history (workspace, record) VALUES (NEW.name,
                jsonb_build_object('type', '{GOVERNANCE_CHANGED}', 'at', to_char(
                clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                'user', session_user, 'host', coalesce(host(inet_client_addr()), 'local'),
                'command', '{CHANGED_OUTSIDE}', 'ok', false,
                'before', OLD.governance, 'after', NEW.governance));
        END IF;
        RETURN NEW;
    END $$""",
    f"DROP TRIGGER IF EXISTS {GOVERNANCE_TRIGGER} ON govsync_workspaces",
    f"CREATE TRIGGER {GOVERNANCE_TRIGGER} AFTER UPDATE OF governance ON govsync_workspaces"
    f" FOR EACH ROW EXECUTE FUNCTION {GOVERNANCE_TRIGGER}()",
)

# SQLite: the trigger (its table of marks, governance_writes, is one of sqlite.py's).
SQLITE_GOVERNANCE_AUDIT = f"""CREATE TRIGGER IF NOT EXISTS governance_audit
AFTER UPDATE OF governance ON workspaces WHEN NEW.governance IS NOT OLD.governance
AND NOT EXISTS (SELECT 1 FROM governance_writes WHERE workspace = NEW.name) BEGIN
INSERT INTO history (workspace, at, record) VALUES (NEW.name,
strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), json_object('type', '{GOVERNANCE_CHANGED}',
'at', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'user', 'unknown', 'host', 'unknown',
'command', '{CHANGED_OUTSIDE}', 'ok', json('false'), 'before', json(OLD.governance),
'after', json(NEW.governance)));
END"""
