"""Every error status maps onto its class of errors.py, with status, code, message."""

from __future__ import annotations

from typing import Any

import pytest

from govsync import errors

pytestmark = pytest.mark.anyio

SPACE = {"name": "analytics", "description": "d"}
MISSING_HOOK = {"hook": {"id": "hook-missing", "name": "h", "code": "return true"}}


async def test_400_invalid_request_with_field_violations(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        with pytest.raises(errors.InvalidRequestError) as caught:
            await client.call("CreateSpace", {"description": "no name"})
    exc = caught.value
    assert (exc.status, exc.code, exc.operation) == (400, "invalid_request", "CreateSpace")
    assert exc.message and str(exc).startswith("CreateSpace: 400 invalid_request: ")
    fields = [v["field"] for v in exc.details["fieldViolations"]]
    assert any("name" in f for f in fields)
    assert server.seen["CreateSpace"] == 1


async def test_401_unauthorized(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server, key="wrong-key") as client:
        with pytest.raises(errors.UnauthorizedError) as caught:
            await client.call("ListGroups", {})
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
    assert caught.value.message


async def test_401_without_key(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server, key=None) as client:
        with pytest.raises(errors.UnauthorizedError):
            await client.call("CreateSpace", SPACE)


async def test_403_forbidden_for_viewer_key(server: Any, aclient_for: Any, viewer_key: str) -> None:
    async with aclient_for(server, key=viewer_key) as client:
        assert "groups" in await client.call("ListGroups", {})
        with pytest.raises(errors.ForbiddenError) as caught:
            await client.call("CreateSpace", SPACE)
    assert (caught.value.status, caught.value.code) == (403, "forbidden")
    assert server.seen["CreateSpace"] == 1


async def test_404_not_found(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        with pytest.raises(errors.NotFoundError) as caught:
            await client.call("UpdateHook", MISSING_HOOK)
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    assert server.seen["UpdateHook"] == 1  # retry-safe, but a 404 is an answer


async def test_500_from_fault_injection_is_retried_then_raised(
    make_server: Any, aclient_for: Any, sleeps: Any, error_rng: Any,
) -> None:
    app = make_server(fault_rate=1.0, rng=error_rng)
    async with aclient_for(app, max_retries=2) as client:
        with pytest.raises(errors.ServerError) as caught:
            await client.call("CreateSpace", SPACE)
    assert (caught.value.status, caught.value.code) == (500, "internal_error")
    assert "after 3 attempts" in caught.value.message
    assert app.seen["CreateSpace"] == 3 and len(sleeps) == 2


async def test_create_permission_connect_shape_400(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        with pytest.raises(errors.InvalidRequestError) as caught:
            await client.call("CreatePermission", {"name": "", "code": "allow"})
    exc = caught.value
    assert (exc.status, exc.code) == (400, "invalid_request")
    assert exc.message
    assert [v["field"] for v in exc.details["fieldViolations"]] == ["name"]


@pytest.mark.parametrize(("key", "cls", "code"), [
    ("wrong-key", errors.UnauthorizedError, "unauthorized"),
    ("viewer", errors.ForbiddenError, "forbidden"),
])
async def test_create_permission_connect_shape_codes(
    server: Any, aclient_for: Any, viewer_key: str, key: str,
    cls: type[errors.ApiStatusError], code: str,
) -> None:
    key = viewer_key if key == "viewer" else key
    async with aclient_for(server, key=key) as client:
        with pytest.raises(cls) as caught:
            await client.call("CreatePermission", {"name": "p", "code": "allow"})
    assert caught.value.code == code and caught.value.message


async def test_create_permission_succeeds_with_connect_headers(
    server: Any, aclient_for: Any,
) -> None:
    async with aclient_for(server) as client:
        body = await client.call("CreatePermission", {"name": "read-all", "code": "allow"})
    assert body["permission"]["name"] == "read-all"


async def test_non_json_error_body_uses_status_defaults(aclient_for: Any) -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 403, "headers": []})
        await send({"type": "http.response.body", "body": b"<html>nope</html>"})

    async with aclient_for(app) as client:
        with pytest.raises(errors.ForbiddenError) as caught:
            await client.call("ListGroups", {})
    assert caught.value.code == "forbidden"
    assert str(caught.value) == ("ListGroups: 403 forbidden: Forbidden (http://127.0.0.1 refused "
                                 "the key read from GOVSYNC_API_KEY: check that variable)")
