"""The endpoint as the state records and governance binds it, and what a run says when
the state was applied against another one or the API rejects the key."""

from __future__ import annotations

from govsync import endpoints
from govsync.errors import ConfigError, UnauthorizedError
from govsync.redact import url as safe_url
from govsync.settings import Settings
from govsync.state import Snapshot


def normal_endpoint(endpoint: str) -> str:
    """The endpoint as the state records and compares it: one spelling, no credentials
    in it (``endpoints.identity``)."""

    return endpoints.identity(endpoint)


def identity(settings: Settings) -> str | None:
    """The configured endpoint as governance binds it (None: no endpoint)."""
    return normal_endpoint(settings.endpoint) if settings.endpoint else None


def endpoint_change(snapshot: Snapshot, settings: Settings) -> str:
    """Why ``settings``' endpoint is not the one the state was applied against ('' if it
    is).  Both are compared as ``endpoints.identity`` spells them, so a recorded
    endpoint written another way (``http://127.0.0.1:P/.``) is the same one; a name and
    its address are not (another name may be another virtual host)."""
    if not snapshot.endpoint or not settings.endpoint:
        return ""
    if endpoints.same(settings.endpoint, snapshot.endpoint):
        return ""

    return (f"workspace {snapshot.workspace!r} was applied against {safe_url(snapshot.endpoint)}"
            f", not {safe_url(normal_endpoint(settings.endpoint))}: its ids may not exist there")


def key_rejected(exc: UnauthorizedError) -> ConfigError:
    """A live read refused for the key: the key, not the check, is what to fix."""
    # The client's message names the environment, the endpoint and the variable read.
    return ConfigError(f"the API rejected the key ({exc.status}): {exc.message}")
