"""GetPolicyCodeValidity and a stored policy's ``ast`` (contract section 13): the
reference server compiles code with the engine validate uses; a viewer key may
ask; ``--operations spec`` does not serve it; code that crashes the engine or
is too large is an answer, and the server goes on.  The client's batch
(``codevalidity.code_validity``) against the real server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serverkit import KEY, VIEWER, InProcess, make_app, path

from govsync.api.client import AsyncClient
from govsync.codevalidity import code_validity
from govsync.server import Operations

GOOD = ('package formal.v2\n\nimport future.keywords.if\n\n'
        'session := {"action": "block"} if input.hooks.risk.score > 80\n')
BAD = 'package formal.v2\n\nsession := {"action": "block"\n'
DEEP = "package formal.v2\n\nsession := " + "[" * 100_000 + "]" * 100_000 + "\n"


@pytest.fixture
def server() -> Iterator[InProcess]:
    app, _ = make_app(viewer_keys=[VIEWER])
    with InProcess(app) as client:
        yield client


def ask(client: InProcess, code: Any, key: str = KEY) -> httpx.Response:
    return client.post(path("GetPolicyCodeValidity"), json={"code": code},
                       headers={"X-API-KEY": key})


def test_valid_code_gives_its_compiled_module(server: InProcess) -> None:
    answer = ask(server, GOOD)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"valid", "ast", "error"}
    assert body["valid"] is True and body["error"] == ""
    assert '"formal/v2/session"' in body["ast"]


def test_invalid_code_says_why_with_its_line_and_a_viewer_may_ask(server: InProcess) -> None:
    answer = ask(server, BAD, key=VIEWER)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"valid": False, "ast": "",
                             "error": "line 3, column 12: Rego: this is unclosed"}


def test_an_engine_crash_is_an_answer_and_the_server_goes_on(server: InProcess) -> None:
    answer = ask(server, DEEP).json()
    assert answer["valid"] is False
    assert answer["error"].startswith("the Rego engine was stopped")
    assert ask(server, GOOD).json()["valid"] is True


def test_a_body_of_100_mb_is_refused_before_it_is_read_whole(server: InProcess) -> None:
    answer = ask(server, "#" * (100 * 1024 * 1024))
    assert answer.status_code == 400
    assert answer.json()["message"] == "the request body exceeds 1 MiB"


def test_code_must_be_a_string(server: InProcess) -> None:
    assert ask(server, 42).status_code == 400
    assert server.post(path("GetPolicyCodeValidity"), json={},
                       headers={"X-API-KEY": KEY}).status_code == 400


def test_an_endpoint_of_the_spec_only_does_not_serve_it() -> None:
    app, _ = make_app(operations=Operations.SPEC)
    with InProcess(app) as client:
        answer = ask(client, GOOD)
    assert answer.status_code == 404 and answer.json()["code"] == "not_found"


def test_a_stored_policy_holds_its_compiled_code_in_ast(server: InProcess) -> None:
    def call(op: str, body: dict[str, Any]) -> dict[str, Any]:
        response = server.post(path(op), json=body, headers={"X-API-KEY": KEY})
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    created = call("CreatePolicy", {"name": "p", "code": GOOD, "groupName": "admins"})["policy"]
    assert created["ast"] == ask(server, GOOD).json()["ast"] != ""
    got = call("GetPolicy", {"id": created["id"]})["policy"]
    assert got["ast"] == created["ast"]
    changed = GOOD.replace("session", "pre_request")
    updated = call("UpdatePolicyV2", {"policy": {**got, "code": changed, "groupName": "admins",
                                                 "ast": "sent by the client: ignored"}})
    assert updated["policy"]["ast"] == ask(server, changed).json()["ast"]
    assert '"formal/v2/pre_request"' in updated["policy"]["ast"]
    broken = call("UpdatePolicyV2", {"policy": {**got, "code": BAD, "groupName": "admins"}})
    assert broken["policy"]["ast"] == ""


def test_the_clients_batch_asks_each_code_once() -> None:
    calls: list[str] = []

    async def run(operations: Operations) -> Any:
        served, _ = make_app(operations=operations)
        transport = httpx.ASGITransport(served)

        async def counting(request: httpx.Request) -> httpx.Response:
            calls.append(request.url.path)
            return await transport.handle_async_request(request)

        async with AsyncClient("http://127.0.0.1", KEY,
                               transport=httpx.MockTransport(counting)) as client:
            return await code_validity(client, [GOOD, BAD, GOOD, DEEP])

    found = asyncio.run(run(Operations.ALL))
    assert found is not None and list(found) == [GOOD, BAD, DEEP]
    assert found[GOOD].valid and '"formal/v2/session"' in found[GOOD].ast
    assert not found[BAD].valid and found[BAD].error.startswith("line 3, column 12")
    assert not found[DEEP].valid
    assert len(calls) == 3
    calls.clear()
    assert asyncio.run(run(Operations.SPEC)) is None
    assert len(calls) == 1  # learned from the first answer
