"""The JSON documents for scripts other than plans and drift reports, and ``govsync show``.

Each document carries ``formatVersion``; its JSON Schema is in
``render/schemas.py`` (written to ``docs/json/`` by ``govsync docs``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from govsync.render import FORMAT_VERSION, plan_text

if TYPE_CHECKING:
    from govsync.errors import Problem
    from govsync.planfile import SavedPlan
    from govsync.state.base import Snapshot


def dumps(document: Mapping[str, Any]) -> str:
    """One compact line, as ``plan --format json`` prints (pipe through ``jq`` to read)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def validate_public(problems: Iterable[Problem]) -> dict[str, Any]:
    """``validate --format json``: valid when there is no error."""
    errors = [{"file": p.file, "line": p.line, "column": p.col, "message": p.message}
              for p in problems]
    return {"formatVersion": FORMAT_VERSION, "valid": not errors, "errors": errors}


def state_list_public(snapshot: Snapshot) -> dict[str, Any]:
    """``state list --format json``."""
    return {
        "formatVersion": FORMAT_VERSION,
        "workspace": snapshot.workspace,
        "lineage": snapshot.lineage,
        "serial": snapshot.serial,
        "entries": [{"address": e.address, "id": e.id, "status": e.status, "kind": e.kind}
                    for e in snapshot.entries.values()],
    }


def state_history_public(workspace: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """``state history --format json``: newest first."""
    return {"formatVersion": FORMAT_VERSION, "workspace": workspace, "history": records}


def show_text(saved: SavedPlan, *, color: bool = False, verbose: bool = False) -> str:
    """``govsync show FILE``: where the plan comes from, then the plan as ``plan`` shows it."""
    p = saved.plan
    made = f", made by govsync {p.version}" if p.version else ""
    head = [
        f"Saved plan {saved.path}: workspace {p.workspace!r}, state serial {p.serial} "
        f"(lineage {p.lineage}){made}.",
        f"Content sha256:{saved.file_digest}.",
        "Shown as written: its authentication code is not checked here (that needs the "
        f"workspace's state); `govsync apply {saved.path}` checks it before anything is sent.",
        "",
    ]
    return "\n".join(head) + plan_text(p, color=color, verbose=verbose)
