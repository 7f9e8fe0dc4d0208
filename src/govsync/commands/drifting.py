"""`govsync drift`: the manifests against the state, and the live checks where a read
exists (a module of its own: a plan does not load the drift report)."""

from __future__ import annotations

from govsync import envvars, live, runtime
from govsync.commands.endpoint import endpoint_change, key_rejected
from govsync.commands.observing import (
    moved_error,
    refreshed,
    refreshing,
    refused_partial,
)
from govsync.commands.workspace import check_secrets_set, read_snapshot, with_secrets
from govsync.drift import DriftReport, live_checks, unobservable
from govsync.errors import ApiError, TransportError, UnauthorizedError
from govsync.manifests.manifest import ManifestSet
from govsync.plan import make_plan
from govsync.settings import Settings


def drift(manifests: ManifestSet, settings: Settings, *,
          read_secrets: bool = True, allow_endpoint_change: bool = False) -> DriftReport:
    """The scheduled check: manifests against state, and live checks where a read exists.

    With an endpoint configured, an unreachable API is an error (exit 1): a
    drift job must not report "in sync" when it could not look.
    """

    if read_secrets:
        check_secrets_set(manifests, settings)
    settings = with_secrets(settings, manifests)
    snapshot = read_snapshot(settings, responses=refreshing(settings))
    found, observed, _ = refreshed(settings, snapshot, lambda observation: make_plan(
        manifests, snapshot, environ=settings.environ, targets=settings.targets,
        read_secrets=read_secrets, prune=settings.selection.prune,
        replace=settings.replace, ignore=settings.selection.ignore_changes,
        observation=observation))
    refused_partial(observed, "drift cannot say what it could not read")
    values = live.wanted(manifests)
    existing: dict[str, set[str]] | None = None
    skipped = f"no endpoint configured ({envvars.ENDPOINT} / --endpoint)"
    moved = (endpoint_change(snapshot, settings)
             if settings.endpoint and not allow_endpoint_change else "")
    if moved and values:
        raise ApiError(moved_error(values, moved))
    if settings.endpoint:
        async def read() -> dict[str, set[str]]:
            async with runtime.client(settings, max_retries=1) as client:
                return await live.read(client, values)

        try:
            existing = runtime.run(read())
        except UnauthorizedError as exc:
            raise key_rejected(exc) from exc
        except TransportError as exc:
            raise ApiError(f"cannot run the live checks: endpoint unreachable ({exc.message})"
                           ) from exc
        except ApiError as exc:
            raise ApiError(f"cannot run the live checks: {live.failed(values, exc)}") from exc
    checks = live_checks(values, existing, skipped)
    return DriftReport(found, checks, unobservable(
        manifests, observed.reading.read_kinds() if observed else None))
