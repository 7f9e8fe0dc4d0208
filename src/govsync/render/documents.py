"""The JSON documents for scripts other than plans and drift reports, and ``govsync show``.

Each document carries ``formatVersion``; its JSON Schema is in
``render/schemas.py`` (written to ``docs/json/`` by ``govsync docs``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.catalog import BY_NAME
from govsync.api.kinds import BY_KIND
from govsync.errors import ManifestError, Problem
from govsync.formats import FORMAT_VERSION
from govsync.plan import Action, Plan
from govsync.planfile import SavedPlan
from govsync.redact import url
from govsync.render.lines import created_lines
from govsync.render.text import plan_text
from govsync.state import Snapshot
from govsync.values import PlannedSecret, Ref

if TYPE_CHECKING:
    from govsync.impactconfig import ImpactSettings


def dumps(document: Mapping[str, Any]) -> str:
    """One compact line, as ``plan --format json`` prints (pipe through ``jq`` to read)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def validate_public(problems: Iterable[Problem],
                    warnings: Iterable[Problem] = ()) -> dict[str, Any]:
    """``validate --format json``: valid when there is no error; warnings beside."""
    errors = [_placed(p) for p in problems]
    return {"formatVersion": FORMAT_VERSION, "valid": not errors, "errors": errors,
            "warnings": [_placed(w) for w in warnings]}


def _placed(problem: Problem) -> dict[str, Any]:
    return {"file": problem.file, "line": problem.line, "column": problem.col,
            "message": problem.message}


def error_public(exc: Exception) -> dict[str, Any]:
    """What a ``--format json`` command prints on stdout when it fails (exit 1): the
    message, and each error with its place (a manifest's, or none: file "")."""
    problems = list(getattr(exc, "problems", None) or [Problem("", 0, 0, str(exc))])
    message = (f"{len(problems)} error(s) in the manifests; nothing was sent and the state "
               "is untouched" if isinstance(exc, ManifestError) else str(exc))
    return {"formatVersion": FORMAT_VERSION, "error": message or type(exc).__name__,
            "errors": [_placed(p) for p in problems]}


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


def environments_public(project: str | None, rows: list[dict[str, Any]],
                        impact: dict[str, Any] | None = None) -> dict[str, Any]:
    """``govsync environments --format json``: every environment, resolved (no secret:
    URLs are masked); ``impact``: the project's own impact settings (``impact_public``),
    what a project without environments plans with."""

    return {"formatVersion": FORMAT_VERSION, "project": project, "impact": impact,
            "environments": [
                {**row, "endpoint": url(row["endpoint"]) if row["endpoint"] else None,
                 "state": url(row["state"]) if row["state"] else None} for row in rows]}


def impact_public(settings: ImpactSettings | None) -> dict[str, Any] | None:
    """``impact:`` of a project or an environment as its file says it (None: not set)."""
    if settings is None:
        return None
    return {"window": settings.window.text if settings.window is not None else None,
            "logQuery": settings.log_query, "timeout": settings.timeout,
            "from": settings.from_file}


def state_history_public(workspace: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    """``state history --format json``: newest first."""
    return {"formatVersion": FORMAT_VERSION, "workspace": workspace, "history": records}


def show_text(saved: SavedPlan, *, verification: str, color: bool = False,
              verbose: bool = False) -> str:
    """``govsync show FILE``: where the plan comes from, whether it verifies, what
    approvers sign, the plan as ``plan`` shows it, then every request it sends."""
    p = saved.plan
    made = f", made by govsync {p.version}" if p.version else ""
    env = f", environment {p.environment}" if p.environment else ""
    head = [
        f"Saved plan {saved.path}: workspace {p.workspace!r}{env}, state serial {p.serial} "
        f"(lineage {p.lineage or 'none yet'}){made}.",
        f"Authentication: {verification}.",
        f"Review digest (what approvers sign): sha256:{saved.review_digest}.",
        "",
    ]
    return "\n".join(head) + plan_text(p, color=color, verbose=verbose) + requests_text(p)


def requests_text(plan: Plan) -> str:
    """Every request the plan sends, field by field, exactly as apply builds it
    (secrets by their variable, ids of objects this plan creates as not known yet)."""
    from govsync.apply import request_body

    work = [c for c in plan.work() if c.action != Action.ORPHAN]
    if not work:
        return ""
    lines = ["", "What apply sends, request by request:"]
    for change in work:
        if change.request is None or (change.operation is None
                                      and change.action != Action.CREATE):
            lines.append(f"  {change.address}: recorded in state; nothing is sent")
            continue
        operation, body = request_body(BY_KIND[change.kind], change, _sent(change.request))
        wrap = BY_NAME[operation].wrap
        for kept in change.kept:  # ignoreChanges: sent as the server holds it
            at = (*((wrap,) if wrap else ()), *paths.parse(kept))
            body = paths.put(body, at, _Shown("(kept: the value the server holds; "
                                              "ignoreChanges)"))
        lines.append(f"  {operation} {change.address}")
        for path, value in _leaves(body, ""):
            lines += ([f"      {path}: {value}"] if isinstance(value, _Shown)
                      else created_lines(path, value))
    return "\n".join(lines) + "\n"


def _sent(value: Any) -> Any:

    if isinstance(value, PlannedSecret):
        return _Shown(f"(sensitive: the value of ${value.variable})")
    if isinstance(value, Ref):
        return _Shown(f"(the id of {value.address}, known after apply)")
    if isinstance(value, dict):
        return {k: _sent(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sent(v) for v in value]
    return value


class _Shown(str):
    """A placeholder shown as it is, not as a JSON string."""


def _leaves(value: Any, at: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{at}.{key}" if at else key)
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _leaves(item, f"{at}[{i}]")
    else:
        yield at or "(body)", value
