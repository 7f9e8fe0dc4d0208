"""The audit trail: what each apply's history entry records beyond the
changes, and ``govsync audit export`` for access reviews.

An apply's record (state ``history``) holds who ran it (user, host, the CI
actor when there is one), the plan's hash (SHA-256 of the saved plan file's
bytes, which is what approvers sign; of the plan's canonical JSON when the
plan was not saved), the approvers, the manifests' git commit and whether
the work tree was dirty, the environment, and every change with its outcome.
Nothing in it is a secret: addresses, ids, codes; a password in a URL of the
recorded command line is masked.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from govsync import redact, runtime
from govsync.errors import ConfigError
from govsync.formats import FORMAT_VERSION

if TYPE_CHECKING:
    from govsync.approvals import Approver
    from govsync.manifests.model import ManifestSet
    from govsync.planfile import SavedPlan
    from govsync.settings import Settings

# Who ran it in CI: the first of these that is set.
ACTOR_VARIABLES = ("GOVSYNC_ACTOR", "GITHUB_ACTOR", "GITLAB_USER_LOGIN", "BUILD_REQUESTEDFOR")
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


def manifests_folder(manifests: ManifestSet | None, settings: Settings) -> str:
    """Where the manifests are: their common folder, else the project's, else here."""
    files = manifests.files if manifests is not None else []
    if files:
        try:
            return os.path.commonpath([os.path.dirname(os.path.abspath(f)) for f in files])
        except ValueError:
            pass
    project = settings.selection.project
    if project is not None:
        return os.path.dirname(os.path.abspath(project.file))
    return "."


def context(source: ManifestSet | SavedPlan, settings: Settings,
            approvers: list[Approver]) -> dict[str, Any]:
    """The audit fields of an apply known before it runs."""
    from govsync.planfile import SavedPlan

    saved = source if isinstance(source, SavedPlan) else None
    folder = manifests_folder(None if saved is not None else source, settings)  # type: ignore[arg-type]
    actor = next((settings.environ[v] for v in ACTOR_VARIABLES if settings.environ.get(v)), None)
    fields: dict[str, Any] = {
        "environment": settings.selection.name,
        "actor": actor,
        "approvers": [a.as_dict() for a in approvers],
        # A saved plan's own commit (what was reviewed); else the checkout's.
        "git": saved.plan.git if saved is not None and saved.plan.git else git_state(folder),
    }
    if saved is not None:
        fields["planHash"] = "sha256:" + saved.file_digest
        fields["planFile"] = os.path.basename(saved.path)
    return fields


def record(history: dict[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """An apply's history record with the audit fields (and nothing secret).

    ``fields`` hold the plan's hash: a saved plan's file hash (``context``), or
    the applied plan's digest, which apply computes while its requests run."""
    return dict(scrub({**history, **fields}))


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


def records(settings: Settings, since: str | None = None) -> list[dict[str, Any]]:
    """The workspace's apply records, oldest first, from ``since`` on."""
    from govsync.state import exists

    if not exists(settings.state):
        return []
    with runtime.open_state(settings) as store:
        found = store.history(settings.workspace, 1_000_000_000)
    out = []
    for item in reversed(found):
        if since is not None and str(item.get("at", "")) < since:
            continue
        out.append({"formatVersion": FORMAT_VERSION, "workspace": settings.workspace,
                    **scrub(item)})
    return out


def json_lines(items: Iterable[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(i, sort_keys=True, ensure_ascii=False) + "\n" for i in items)


def csv_text(items: Iterable[Mapping[str, Any]]) -> str:
    """One row per change (an apply without changes: one row without one)."""
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


def export(settings: Settings, *, since: str | None = None, fmt: str = "json") -> str:
    """``govsync audit export``: JSON lines (one apply a line) or CSV (one change a row)."""
    items = records(settings, parse_since(since) if since else None)
    return csv_text(items) if fmt == "csv" else json_lines(items)
