"""The client: every operation through call(), unwrap, paging, connect()."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from govsync import errors
from govsync.api.catalog import OPERATIONS, unwrap
from govsync.api.client import AsyncClient
from govsync.api.models import CreateSpaceRequest, ListGroupsRequest
from govsync.runtime import connect

pytestmark = pytest.mark.anyio


async def test_every_operation_is_one_post_to_its_path() -> None:
    sent: list[tuple[str, str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path, json.loads(request.content)))
        return httpx.Response(200, json={})

    async with AsyncClient("http://127.0.0.1", "k",
                           transport=httpx.MockTransport(answer)) as client:
        for op in OPERATIONS:
            assert await client.call(op.name, {"name": op.name}) == {}
    by_path = {op.path: op.name for op in OPERATIONS}
    assert len(by_path) == len(OPERATIONS)
    assert {method for method, _, _ in sent} == {"POST"}
    assert {path for _, path, _ in sent} == set(by_path)
    called = {by_path[path]: body["name"] for _, path, body in sent}
    assert called == {op.name: op.name for op in OPERATIONS}


@pytest.mark.parametrize("base", ["https://api.test", "https://api.test/prefix/"])
async def test_what_every_request_carries(base: str) -> None:
    """URL under the base's path, the client's headers, the call's own, the key,
    the JSON body and the client's timeouts: the same for each call of an
    operation (its URL is merged once, the rest each time); no cookie sent
    back."""
    from govsync import __version__

    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"space": {"id": f"s-{len(sent)}"}},
                              headers={"set-cookie": "AWSALB=sticky; Path=/"})

    async with AsyncClient(base, "key-1", timeout=7.5,
                           transport=httpx.MockTransport(answer)) as client:
        await client.call("CreateSpace", {"name": "a"})
        await client.call("CreateSpace", {"name": "b"}, headers={"X-Trace": "t-2"})
        await client.call("ListGroups", {})
    prefix = base.rstrip("/")
    assert [str(r.url) for r in sent] == [
        f"{prefix}/core.v1.SpaceService/CreateSpace",
        f"{prefix}/core.v1.SpaceService/CreateSpace",
        f"{prefix}/core.v1.GroupService/ListGroups",
    ]
    for request, body in zip(sent, ({"name": "a"}, {"name": "b"}, {}), strict=True):
        assert request.method == "POST"
        assert json.loads(request.content) == body
        assert request.headers["x-api-key"] == "key-1"
        assert request.headers["accept"] == "application/json"
        assert request.headers["user-agent"] == f"govsync/{__version__}"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["content-length"] == str(len(request.content))
        assert request.extensions["timeout"] == {
            "connect": 7.5, "read": 7.5, "write": 7.5, "pool": 7.5}
    assert "x-trace" not in sent[0].headers and sent[1].headers["x-trace"] == "t-2"
    assert not any("cookie" in r.headers for r in sent)  # the key authenticates, nothing else


def test_unwrap_follows_the_catalog() -> None:
    assert unwrap("CreateSpace", {"space": {"id": "s-1", "name": "a"}}) == (
        {"id": "s-1", "name": "a"}, "s-1")
    assert unwrap("CreatePolicyReport", {"reportId": "r-1"}) == ({"reportId": "r-1"}, "r-1")
    assert unwrap("CreateLogQuery", {"id": "q-1"})[1] == "q-1"
    assert unwrap("CreateSessionTermination",
                  {"sessionShutdown": {"sessionId": "x", "connectorId": "c"}})[1] == "x"
    with pytest.raises(errors.ApiError, match="CreateSpace"):
        unwrap("CreateSpace", {"id": "s-1"})
    with pytest.raises(ValueError, match="unknown API operation"):
        unwrap("DeleteEverything", {})


async def test_list_all_groups_pages_through_every_group(make_server: Any, aclient_for: Any) -> None:
    app = make_server(groups=120)
    async with aclient_for(app) as client:
        groups = await client.list_all_groups(page_size=7)
    ids = [g["id"] for g in groups]
    assert len(ids) == 120 and set(ids) == {f"grp-{i:04d}" for i in range(120)}
    assert app.seen["ListGroups"] in (18, 19)  # ceil(120 / 7), maybe one empty last page


async def test_list_all_groups_with_a_search(make_server: Any, aclient_for: Any) -> None:
    async with aclient_for(make_server(groups=30)) as client:
        groups = await client.list_all_groups(ListGroupsRequest(search="group-001"),
                                              page_size=4)
    assert sorted(g["id"] for g in groups) == [f"grp-{i:04d}" for i in range(10, 20)]


async def test_pydantic_bodies_are_accepted(server: Any, aclient_for: Any) -> None:
    async with aclient_for(server) as client:
        body = await client.call("CreateSpace", CreateSpaceRequest(name="from-model"))
    space, space_id = unwrap("CreateSpace", body)
    assert space["name"] == "from-model" and space_id


def test_missing_endpoint_names_both_ways() -> None:
    for endpoint in (None, "", "  "):
        with pytest.raises(errors.ConfigError) as caught:
            connect(endpoint, "k")
        assert "--endpoint" in str(caught.value) and "GOVSYNC_ENDPOINT" in str(caught.value)


def test_url_endpoint_needs_a_key() -> None:
    with pytest.raises(errors.ConfigError, match="GOVSYNC_API_KEY"):
        connect("https://api.example.com", None)


async def test_connect_local_runs_the_server_in_process(tmp_path: Path) -> None:
    pytest.importorskip("govsync.server")
    db = tmp_path / ".govsync" / "local-api.db"
    async with connect("local", None, local_db=db) as client:
        created = await client.call("CreateSpace", {"name": "local-space"})
        assert (await client.call("ListGroups", {}))["groups"] == []
    assert db.exists()
    # The objects outlive the client: a second connection sees the same store.
    async with connect("local", None, local_db=db) as second:
        await second.call("CreateSpace", {"name": "second"})
        spaces = (await second.call("ListSpaces", {"limit": 10}))["spaces"]
    assert [s["id"] for s in spaces][0] == created["space"]["id"]
    assert [s["name"] for s in spaces] == ["local-space", "second"]
    assert repr(client) == "AsyncClient(base_url='http://localhost')"

