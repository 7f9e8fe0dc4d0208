"""The API key never leaks; plain http:// leaves loopback only when asked."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import httpx
import pytest

from govsync import errors
from govsync.api.client import AsyncClient, RetryPolicy
from govsync.api.transport import open_transport
from govsync.runtime import connect

pytestmark = pytest.mark.anyio

CANARY = "canary-7f3e9a1c-d00d-4b1e-9f0a-sekrit"


def _chain(exc: BaseException | None) -> list[BaseException]:
    found = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


async def test_key_is_in_no_log_record_repr_or_exception(
    caplog: pytest.LogCaptureFixture, make_server: Any, aclient_for: Any,
) -> None:
    for name in ("httpx", "httpcore", "govsync"):
        caplog.set_level(logging.DEBUG, logger=name)
    raised: list[BaseException] = []
    app = make_server(api_keys=[CANARY])
    app.script("CreateSpace", 503, "drop")
    async with aclient_for(app, key=CANARY) as client:
        assert CANARY not in repr(client) and CANARY not in str(vars(client))
        await client.call("ListGroups", {})
        with pytest.raises(errors.AmbiguousError) as caught:
            await client.call("CreateSpace", {"name": "s"})
        raised.append(caught.value)
    # The wrong key (the canary) is refused: 401, and the message must not echo it.
    async with aclient_for(make_server(), key=CANARY) as client:
        with pytest.raises(errors.UnauthorizedError) as caught:
            await client.call("CreateSpace", {"name": "s"})
        raised.append(caught.value)
    # Over a real socket too: connection refused, retried, then TransportError.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with AsyncClient(f"http://127.0.0.1:{port}", CANARY,
                           retry=RetryPolicy(max_retries=1, sleep=lambda s: None)) as client:
        with pytest.raises(errors.TransportError) as caught:
            await client.call("ListGroups", {})
        raised.append(caught.value)
    async with AsyncClient(f"https://{CANARY}@api.example.com", CANARY) as client:
        assert CANARY not in repr(client) and CANARY not in client.base_url

    assert caplog.records, "expected httpx/govsync to log at DEBUG"
    for record in caplog.records:
        assert CANARY not in record.getMessage()
        assert CANARY not in repr(record.args)
    for exc in raised:
        for link in _chain(exc):
            assert CANARY not in str(link) and CANARY not in repr(link)


async def test_secret_values_are_scrubbed_from_error_messages(aclient_for: Any) -> None:
    secret = "logstore-secret-value-42"

    async def echoing(scope: Any, receive: Any, send: Any) -> None:
        body = json.loads((await receive())["body"])
        echo = json.dumps({"code": "invalid_request",
                           "message": f"bad apiKey {body['logStoreB']['apiKey']}",
                           "details": {"fieldViolations": [{
                               "field": "logStoreB.apiKey",
                               "description": f"{body['logStoreB']['apiKey']} is wrong"}]}})
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": echo.encode()})

    async with aclient_for(echoing) as client:
        with pytest.raises(errors.InvalidRequestError) as caught:
            await client.call("CreateIntegrationLog", {
                "name": "logs", "logStoreB": {"site": "eu", "apiKey": secret, "accountId": "a"}})
    assert secret not in str(caught.value)
    assert secret not in json.dumps(caught.value.details)
    assert "(sensitive)" in caught.value.message


@pytest.mark.parametrize("url", [
    "http://api.example.com", "http://10.0.0.5:8080", "http://[2001:db8::1]/api",
    "http://localhost.example.com",
])
async def test_plain_http_to_a_remote_host_is_refused(url: str) -> None:
    with pytest.raises(errors.ConfigError, match="--insecure-http"):
        AsyncClient(url, "k")
    with pytest.raises(errors.ConfigError, match="--insecure-http"):
        connect(url, "k")
    for connections, reads in ((1, False), (4, False), (4, True)):
        with pytest.raises(errors.ConfigError, match="--insecure-http"):
            open_transport(url, connections=connections, reads=reads)
        await AsyncClient(url, "k", transport=open_transport(
            url, connections=connections, reads=reads, insecure_http=True)).aclose()
    await connect(url, "k", insecure_http=True).aclose()


@pytest.mark.parametrize("url", [
    "http://localhost:8080", "http://127.0.0.1", "http://127.1.2.3:9", "http://[::1]:8080",
    "https://api.example.com/prefix",
])
async def test_loopback_http_and_https_are_allowed(url: str) -> None:
    async with AsyncClient(url, "k") as client:
        assert repr(client) == f"AsyncClient(base_url={client.base_url!r})"


@pytest.mark.parametrize("url", ["ftp://example.com", "api.example.com", "https://"])
def test_invalid_urls_are_config_errors(url: str) -> None:
    with pytest.raises(errors.ConfigError, match="invalid endpoint URL"):
        AsyncClient(url, "k")


@pytest.mark.parametrize("key", ["", "line\nbreak", "caf\u00e9"])
def test_keys_a_header_cannot_carry_are_refused_without_echo(key: str) -> None:
    with pytest.raises(errors.ConfigError) as caught:
        AsyncClient("https://api.example.com", key)
    assert key not in str(caught.value) or not key


async def test_certificate_verification_stays_on() -> None:
    async with AsyncClient("https://api.example.com", "k") as client:
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context.verify_mode.name == "CERT_REQUIRED"
    for connections, reads in ((4, False), (4, True)):
        lanes = open_transport("https://api.example.com", connections=connections, reads=reads)
        lane = lanes._make()  # type: ignore[attr-defined]
        tls = lane._tls if reads else lane._pool._ssl_context
        assert tls.verify_mode.name == "CERT_REQUIRED" and tls.check_hostname


async def test_auth_repr_hides_the_key() -> None:
    async with AsyncClient("https://api.example.com", CANARY) as client:
        assert CANARY not in repr(client._auth)
        assert isinstance(client._auth, httpx.Auth)


async def test_every_answer_is_scrubbed_of_the_secrets_the_client_knows() -> None:
    """Issue 41, finding 9: what a server echoes in any answer (a read as a write), the
    key or a secret the client was given, even inside a longer string or a key, is
    ``(sensitive)``; the fields objects are found by stay as read, and a value too
    short to be a secret is not looked for."""
    secret = "log-secret-31337"
    echoed = {"hook": {
        "id": f"hook-{CANARY}", "name": f"n-{secret}", "description": f"read with {CANARY}",
        "code": "x", "labels": {secret: "v", "short": "abc"},
        "nested": [{"note": f"{secret}!", "spaceId": secret}]}}

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=echoed)

    async with AsyncClient("http://127.0.0.1:9", CANARY, hidden=[secret, "abc"],
                           transport=httpx.MockTransport(answer)) as client:
        for operation in ("GetHook", "CreateHook"):
            got = (await client.call(operation, {"id": "h"} if operation == "GetHook"
                                     else {"name": "h", "code": "x"}))["hook"]
            assert got["description"] == "read with (sensitive)"
            assert got["labels"] == {"(sensitive)": "v", "short": "abc"}
            assert got["nested"] == [{"note": "(sensitive)!", "spaceId": secret}]
            assert (got["id"], got["name"]) == (f"hook-{CANARY}", f"n-{secret}")
    # A body that writes the secret's characters as escapes (\u006c...) hides nothing.
    escaped = "".join(f"\\u{ord(c):04x}" for c in secret)
    body = ('{"hook": {"id": "h", "description": "' + escaped + ' echoed"}}').encode()
    async with AsyncClient("http://127.0.0.1:9", CANARY, hidden=[secret],
                           transport=httpx.MockTransport(
                               lambda r: httpx.Response(200, content=body))) as client:
        got = (await client.call("GetHook", {"id": "h"}))["hook"]
        assert got["description"] == "(sensitive) echoed", got
    # The embedded server's stand-in key is no secret.
    async with AsyncClient("http://localhost", "local", transport=httpx.MockTransport(
            lambda r: httpx.Response(200, json={"hook": {"description": "local"}}))) as client:
        assert (await client.call("GetHook", {"id": "h"}))["hook"]["description"] == "local"
