"""The one exception tree of govsync.

    GovsyncError
     ├── ConfigError               no endpoint, bad option, bad URL
     ├── ManifestError             manifests are invalid (carries every Problem)
     ├── GraphError                dependency cycle (carries every Problem)
     ├── PlanError                 a plan cannot be made or applied as asked
     │    ├── BlockedPlanError     the plan holds blocked changes
     │    ├── StalePlanError       a saved plan no longer matches state or secrets
     │    ├── ApprovalError        a saved plan lacks the signed approvals required
     │    └── GovernanceError      a run contradicts what its workspace records (environment,
     │                             approvals, rules), or a reviewed plan differs
     ├── MigrateError              a Terraform state cannot be migrated (carries every problem)
     ├── AgentError                the agent cannot reach its repository or a notification sink
     ├── StateError                the state store failed or refuses
     │    ├── StateLockedError     another process holds the workspace lock
     │    ├── LockLostError        this process's workspace lock was lost: it writes nothing more
     │    ├── StateDamagedError    the state exists but is empty, truncated or malformed
     │    └── PlanKeyUnavailable   these credentials may not read the key of saved plans
     └── ApiError                  talking to the control API failed
          ├── TransportError       no request reached the server (safe to retry)
          ├── AmbiguousError       sent, no answer: the outcome is unknown
          └── ApiStatusError       the server answered with an error status
               ├── InvalidRequestError   400 invalid_request
               ├── UnauthorizedError     401 unauthorized
               ├── ForbiddenError        403 forbidden
               ├── NotFoundError         404 not_found
               ├── RateLimitedError      429
               └── ServerError           5xx internal_error

Statuses and their codes come from the one table in ``api/status.py``.
Lower-level errors (httpx, sqlite3, psycopg, yaml) are translated where they
enter govsync with ``raise X(...) from exc``.  No message ever carries an API
key or a secret value.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from govsync.api.status import STATUS_OF, TOO_MANY_REQUESTS, ErrorCode


class Problem(NamedTuple):
    """One user error with its place: ``FILE:LINE:COL: message``."""

    file: str
    line: int
    col: int
    message: str

    def __str__(self) -> str:
        if not self.file:
            return self.message
        return f"{self.file}:{self.line}:{self.col}: {self.message}"


class GovsyncError(Exception):
    """Root of every error govsync raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as it is, not rebuilt through __init__ (whose parameters differ from
        # class to class): an error raised in the worker process (bounded.py) comes back whole.
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[GovsyncError], args: tuple[Any, ...],
             attrs: dict[str, Any]) -> GovsyncError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(attrs)
    return error


class ConfigError(GovsyncError):
    """The command line or environment is incomplete or contradictory."""


class _ProblemsError(GovsyncError):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ManifestError(_ProblemsError):
    """The manifests are invalid; ``problems`` lists every error found (``warnings``:
    what was found beside them that is not an error)."""

    def __init__(self, problems: list[Problem], *, warnings: list[Problem] | None = None
                 ) -> None:
        super().__init__(problems)
        self.warnings = sorted(warnings or [])


class GraphError(_ProblemsError):
    """The dependency graph has a cycle; ``problems`` names each member."""


class PlanError(GovsyncError):
    """A plan cannot be made or applied as asked."""


class BlockedPlanError(PlanError):
    """The plan has changes the API cannot make."""


class StalePlanError(PlanError):
    """A saved plan no longer matches the state or the secrets' values."""


class ApprovalError(PlanError):
    """A saved plan lacks the signed approvals its environment requires (or they are malformed)."""


class GovernanceError(PlanError):
    """A run contradicts its workspace's recorded governance, or differs from what was
    reviewed."""


class MigrateError(GovsyncError):
    """A Terraform state cannot be migrated; ``problems`` lists every one (one line each,
    never a value of the state)."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class AgentError(GovsyncError):
    """The agent cannot reach its repository, or a notification sink refused a message."""


class StateError(GovsyncError):
    """The state store failed or refuses an operation."""


class StateLockedError(StateError):
    """Another apply holds the workspace lock."""

    def __init__(self, message: str, holder: dict[str, Any] | None = None) -> None:
        self.holder = holder or {}
        super().__init__(message)


class LockLostError(StateError):
    """The workspace lock this process held was lost; the write was refused."""


class StateDamagedError(StateError):
    """The state exists but is empty, truncated, missing tables or malformed."""


class PlanKeyUnavailable(StateError):
    """The store's credentials may not read the key that authenticates saved plans (a
    read-only role): plans it saves are evidence for review, not applicable as they are."""


class ApiError(GovsyncError):
    """Calling the control API failed."""

    def __init__(self, message: str, *, operation: str = "") -> None:
        self.operation = operation
        self.message = message
        super().__init__(f"{operation}: {message}" if operation else message)


class TransportError(ApiError):
    """The request never reached the server; retrying is safe."""


class AmbiguousError(ApiError):
    """The request was sent but no answer came; the outcome is unknown."""


class ApiStatusError(ApiError):
    """The server answered with an error status."""

    status: int = 0

    def __init__(
        self,
        message: str,
        *,
        operation: str = "",
        status: int = 0,
        code: str = "",
        details: Any = None,
    ) -> None:
        self.status = status or self.status
        self.code = code
        self.details = details
        super().__init__(message, operation=operation)

    def __str__(self) -> str:
        prefix = f"{self.operation}: " if self.operation else ""
        return f"{prefix}{self.status} {self.code}: {self.message}"


class InvalidRequestError(ApiStatusError):
    """400 invalid_request: the body or a field is invalid."""

    status = STATUS_OF[ErrorCode.INVALID_REQUEST]


class UnauthorizedError(ApiStatusError):
    """401 unauthorized: missing or unknown API key."""

    status = STATUS_OF[ErrorCode.UNAUTHORIZED]


class ForbiddenError(ApiStatusError):
    """403 forbidden: the key may not call this operation."""

    status = STATUS_OF[ErrorCode.FORBIDDEN]


class NotFoundError(ApiStatusError):
    """404 not_found: unknown operation or a referenced id does not exist."""

    status = STATUS_OF[ErrorCode.NOT_FOUND]


class RateLimitedError(ApiStatusError):
    """429: too many requests."""

    status = TOO_MANY_REQUESTS


class ServerError(ApiStatusError):
    """5xx: the server failed."""

    status = STATUS_OF[ErrorCode.INTERNAL_ERROR]


STATUS_ERRORS: dict[int, type[ApiStatusError]] = {
    cls.status: cls
    for cls in (InvalidRequestError, UnauthorizedError, ForbiddenError, NotFoundError,
                RateLimitedError)
}


def error_for_status(status: int) -> type[ApiStatusError]:
    """The exception class for an HTTP error status."""
    if status >= 500:
        return ServerError
    return STATUS_ERRORS.get(status, ApiStatusError)
