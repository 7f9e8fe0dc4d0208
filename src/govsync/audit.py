"""The audit trail: what each apply's history entry records beyond the
changes, and ``govsync audit export`` for access reviews.

An apply's record (state ``history``, built by ``record`` alone) holds who
ran it (user, host, the CI actor when there is one), the plan's id, its
review digest (what approvers sign) and hash (SHA-256 of the saved plan
file's bytes; of the plan's canonical JSON when the plan was not saved), the
approvers, the manifests' git commit and whether the work tree was dirty, the
environment, and every change with its outcome.  Nothing in it is a secret:
addresses, ids, codes; a credential in a URL of the recorded command line is
masked.  Functions here take the values they record, never the settings.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from govsync import envvars, redact
from govsync.errors import ConfigError
from govsync.formats import FORMAT_VERSION
from govsync.plan import Plan
from govsync.state import LockHolder, now

if TYPE_CHECKING:
    from govsync.apply import ApplyResult

# Who ran it in CI: the first of these that is set.
ACTOR_VARIABLES = (envvars.ACTOR, "GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILD_REQUESTEDFOR")
CSV_COLUMNS = ("at", "workspace", "environment", "user", "actor", "host", "planHash",
               "savedPlan", "approvers", "gitCommit", "gitDirty", "ok", "address", "action",
               "outcome", "id", "code", "error")


def scrub(value: Any) -> Any:
    """``value`` with every credential in a URL masked (``scheme://user:***@host``)."""
    if isinstance(value, str):
        return redact.in_text(value)
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def git_state(folder: str) -> dict[str, Any] | None:
    """``{commit, dirty}`` of the git work tree holding ``folder`` (None outside git)."""
    import subprocess  # on the list of slow packages: an apply's record only, not a plan

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                                  timeout=15, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return None
    status = git("status", "--porcelain", "--", ".")
    return {"commit": commit.strip(), "dirty": bool(status and status.strip())}


def manifests_folder(files: Iterable[str], project_file: str | None) -> str:
    """Where the manifests are: their common folder, else the project's, else here."""
    folders = [os.path.dirname(os.path.abspath(f)) for f in files]
    if folders:
        try:
            return os.path.commonpath(folders)
        except ValueError:
            pass
    if project_file is not None:
        return os.path.dirname(os.path.abspath(project_file))
    return "."


def actor(environ: Mapping[str, str]) -> str | None:
    """Who ran it in CI (None: not in CI)."""
    return next((environ[v] for v in ACTOR_VARIABLES if environ.get(v)), None)


def record(plan: Plan, result: ApplyResult, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An apply's history record: who applied what, when, with which outcome, and the
    audit ``fields`` (environment, actor, approvers, git, planId, reviewDigest,
    planHash, planFile, savedPlan); nothing secret (a credential in a URL masked)."""
    me = LockHolder.me()
    body = {
        "at": now(),
        "user": me.user,
        "host": me.host,
        "command": me.command,
        "serialBefore": plan.serial,
        "summary": result.summary(),
        "ok": result.ok,
        "changes": [
            {"address": o.address, "action": o.action, "status": o.status, "id": o.id,
             "code": o.code, "error": o.error}
            for o in result.outcomes
        ],
    }
    return dict(scrub({**body, **fields}))


# -- export ---------------------------------------------------------------------------


def parse_since(text: str) -> str:
    """``--since``: a date or an ISO time, as the records' ``at`` strings compare."""
    value = text.strip()
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(f"--since {text!r}: write a date (2025-01-31) or a time "
                          "(2025-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def records(history: Iterable[Mapping[str, Any]], workspace: str,
            since: str | None = None) -> list[dict[str, Any]]:
    """A workspace's apply records (``history`` newest first, as a store reads it),
    oldest first, from ``since`` on."""
    out = []
    for item in reversed(list(history)):
        if since is not None and str(item.get("at", "")) < since:
            continue
        out.append({"formatVersion": FORMAT_VERSION, "workspace": workspace, **scrub(item)})
    return out


def json_lines(items: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items)


def csv_text(items: Iterable[Mapping[str, Any]]) -> str:
    """One row per change (an apply without changes: one row without one)."""
    import csv  # 1 ms: for `audit export --format csv`

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for item in items:
        git = item.get("git") or {}
        approvers = item.get("approvers") or []
        head = {
            "at": item.get("at"), "workspace": item.get("workspace"),
            "environment": item.get("environment") or "", "user": item.get("user"),
            "actor": item.get("actor") or "", "host": item.get("host"),
            "planHash": item.get("planHash", ""), "savedPlan": item.get("savedPlan"),
            "approvers": ";".join(str(a.get("principal", "")) for a in approvers
                                  if isinstance(a, dict)),
            "gitCommit": git.get("commit", "") if isinstance(git, dict) else "",
            "gitDirty": git.get("dirty", "") if isinstance(git, dict) else "",
            "ok": item.get("ok"),
        }
        changes = item.get("changes") or [{}]
        for change in changes:
            writer.writerow({**head, "address": change.get("address", ""),
                             "action": change.get("action", ""),
                             "outcome": change.get("status", ""), "id": change.get("id") or "",
                             "code": change.get("code") or "", "error": change.get("error") or ""})
    return buffer.getvalue()


def export(history: Iterable[Mapping[str, Any]], workspace: str, *, since: str | None = None,
           fmt: str = "json") -> str:
    """``govsync audit export``: JSON lines (one apply a line) or CSV (one change a row)."""
    items = records(history, workspace, parse_since(since) if since else None)
    return csv_text(items) if fmt == "csv" else json_lines(items)
