"""HTTP statuses of the control API and the error code each carries: the one table.

    400 invalid_request    401 unauthorized    403 forbidden    404 not_found
    500 internal_error     (api-spec.md, Errors)
    504 deadline_exceeded  (CreatePermission's Connect deadline, reference server)
    429                    (no code: a rate limiter's answer)

The reference server's error bodies (``server/errors.py``), the client's
exception classes (``errors.py``) and error mapping (``api/client.py``) and
the OpenAPI document (``schema.py``) all read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple


class DetailType(StrEnum):
    """The ``type`` of an error body's ``details`` items."""

    ERROR_CODE = "core.v1.ErrorCode"
    FIELD_VIOLATION = "core.v1.FieldViolation"


class ErrorCode(StrEnum):
    """The ``code`` of an error body."""

    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    INTERNAL_ERROR = "internal_error"
    DEADLINE_EXCEEDED = "deadline_exceeded"


class ErrorStatus(NamedTuple):
    """An HTTP status the API answers with, its error code and what it means."""

    status: int
    code: ErrorCode
    meaning: str
    # In api-spec.md's table (every operation may answer it), not only the server's.
    spec: bool = True


ERROR_STATUSES: tuple[ErrorStatus, ...] = (
    ErrorStatus(400, ErrorCode.INVALID_REQUEST, "invalid request parameters or body"),
    ErrorStatus(401, ErrorCode.UNAUTHORIZED, "missing or invalid authentication"),
    ErrorStatus(403, ErrorCode.FORBIDDEN, "insufficient permissions"),
    ErrorStatus(404, ErrorCode.NOT_FOUND, "resource does not exist"),
    ErrorStatus(500, ErrorCode.INTERNAL_ERROR, "internal failure"),
    ErrorStatus(504, ErrorCode.DEADLINE_EXCEEDED,
                "the Connect-Timeout-Ms deadline passed first (CreatePermission)", spec=False),
)

# HTTP status -> code, as api-spec.md lists them.
SPEC_CODES: Mapping[int, ErrorCode] = MappingProxyType(
    {e.status: e.code for e in ERROR_STATUSES if e.spec})
# HTTP status -> code, as the reference server answers them.
SERVER_CODES: Mapping[int, ErrorCode] = MappingProxyType(
    {e.status: e.code for e in ERROR_STATUSES})
# Code -> HTTP status.
STATUS_OF: Mapping[ErrorCode, int] = MappingProxyType(
    {e.code: e.status for e in ERROR_STATUSES})

# Too many requests: a rate limiter's answer, without a code of the spec.
TOO_MANY_REQUESTS = 429
