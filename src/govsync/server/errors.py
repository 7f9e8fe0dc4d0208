"""Error bodies of the reference server.

Every failed operation answers with one JSON body (``api-spec.md``, Errors)::

    {"code": "invalid_request", "message": "…",
     "details": {"fieldViolations": [{"field": "hook.timeoutMs", "description": "…"}]}}

``details`` is present only on 400.  ``field`` is the dotted path of the
offending request field (list indexes as numbers: ``fields.0.name``); for an
"exactly one of" (or "at most one of") rule it names the alternatives joined by ``|`` under their
parent (``credentials.cloudIamA|cloudIamARole|…``); for a problem with the
body as a whole (not JSON, not an object, too large, wrong Content-Type) it
is the empty string.  No error ever repeats a submitted value: secrets must
not be echoed.

CreatePermission speaks the Connect protocol and answers every error in the
alternate shape::

    {"message": "…", "details": [{"type": "core.v1.FieldViolation",
                                  "value": "name", "debug": {"description": "…"}}]}

with one ``core.v1.FieldViolation`` detail per field on 400, and otherwise
one ``{"type": "core.v1.ErrorCode", "value": "<code>", "debug": {}}``
detail carrying the code of the table (``unauthorized``, ``not_found``…, and
``deadline_exceeded`` with HTTP 504 when its ``Connect-Timeout-Ms`` is
shorter than the server's injected latency).  Statuses and codes: the one
table in ``api/status.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from starlette.responses import Response

from govsync.api.status import SERVER_CODES, DetailType, ErrorCode


class ApiFailure(Exception):
    """An operation fails with an HTTP status, a code and a short message."""

    def __init__(
        self,
        status: int,
        message: str,
        violations: Sequence[tuple[str, str]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code: ErrorCode = SERVER_CODES[status]
        self.message = message
        self.violations = list(violations)


def invalid(message: str, field: str = "", description: str | None = None) -> ApiFailure:
    """A 400 with one field violation (``field`` empty: the body as a whole)."""
    return ApiFailure(400, message, [(field, description or message)])


def violations(exc: ValidationError) -> list[tuple[str, str]]:
    """One (field, description) per offending field of a pydantic error.

    Only ``loc``, ``msg`` and ``ctx`` are read: never ``input``, so no
    submitted value (a secret, say) can reach the response.
    """
    found: dict[str, str] = {}
    for error in exc.errors(include_url=False, include_input=False, include_context=True):
        path = [str(part) for part in error["loc"]]
        ctx = error.get("ctx") or {}
        if error["type"] in ("exactly_one", "at_most_one") and "fields" in ctx:
            path.append("|".join(f.strip() for f in str(ctx["fields"]).split(",")))
        field = ".".join(path)
        description = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        found.setdefault(field, description)
    return list(found.items())


def _dumps(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def json_response(body: Any, status: int = 200) -> Response:
    return Response(_dumps(body), status_code=status, media_type="application/json")


def error_body(failure: ApiFailure) -> dict[str, Any]:
    body: dict[str, Any] = {"code": failure.code, "message": failure.message}
    if failure.status == 400:
        body["details"] = {
            "fieldViolations": [{"field": f, "description": d} for f, d in failure.violations]
        }
    return body


def connect_error_body(failure: ApiFailure) -> dict[str, Any]:
    details: Iterable[dict[str, Any]]
    if failure.status == 400:
        details = (
            {"type": DetailType.FIELD_VIOLATION, "value": f, "debug": {"description": d}}
            for f, d in failure.violations
        )
    else:
        details = ({"type": DetailType.ERROR_CODE, "value": failure.code, "debug": {}},)
    return {"message": failure.message, "details": list(details)}


def error_response(failure: ApiFailure, *, connect: bool = False) -> Response:
    body = connect_error_body(failure) if connect else error_body(failure)
    return json_response(body, failure.status)
