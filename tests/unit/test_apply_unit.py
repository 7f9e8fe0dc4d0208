"""Apply on built objects: request bodies, the throttle, chain lengths, and the
Applier against the real reference server in-process (through a proxy that
can spoil one answer: a world that misbehaves)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx

from govsync.api.client import AsyncClient, RetryEvent
from govsync.api.kinds import BY_KIND
from govsync.apply import Applier, ChangeStatus, Throttle, chain_lengths, request_body
from govsync.manifests import ManifestSet
from govsync.plan import Action, Change, make_plan
from govsync.server import Store, create_app
from govsync.state import APPLIED, UNCERTAIN, Entry
from govsync.state.sqlite import SqliteStore

KEY = "unit-key"


def change(address: str, after: list[str] | None = None, action: Action = Action.CREATE,
           **kw: Any) -> Change:
    kind = BY_KIND[address.split("/")[0]]
    kw.setdefault("operation", kind.create_op if action == Action.CREATE else kind.update_op)
    return Change(address, action, kind.name, after=after or [], **kw)


def test_request_body_follows_the_kinds_row() -> None:
    hook = BY_KIND["Hook"]
    spec = {"code": "x", "timeoutMs": 1}
    assert request_body(hook, change("Hook/h"), spec) == ("CreateHook", spec)
    assert request_body(hook, change("Hook/h", action=Action.UPDATE, id="hk-1"), spec) == (
        "UpdateHook", {"hook": {"id": "hk-1", **spec}})
    key = BY_KIND["SigningKey"]
    full = {"name": "k", "publicKey": "p", "terminationProtection": True}
    assert request_body(key, change("SigningKey/k", action=Action.UPDATE, id="sk"), full) == (
        "UpdateSigningKey", {"id": "sk", "terminationProtection": True})
    ai = BY_KIND["ConnectorAIProvider"]
    body = {"connectorId": "c", "config": {"providerA": {}}}
    assert request_body(ai, change("ConnectorAIProvider/a", action=Action.UPDATE, id="x"),
                        body) == ("UpdateConnectorAiProviderV2", {"connectorAiProvider": body})


def test_chain_lengths_count_the_longest_waiting_chain() -> None:
    changes = [change("Space/a"), change("Connector/b", ["Space/a"]),
               change("Satellite/c", ["Space/a"]), change("SessionTermination/d", ["Connector/b"])]
    assert chain_lengths(changes) == {"Space/a": 3, "Connector/b": 2, "Satellite/c": 1,
                                      "SessionTermination/d": 1}


def test_throttle_halves_on_429_and_503_and_creeps_back() -> None:
    throttle = Throttle(8)
    throttle.on_retry(RetryEvent("CreateHook", 1, 429, 0.1, "429"))
    assert throttle.limit == 4
    throttle.on_retry(RetryEvent("CreateHook", 1, 503, 0.1, "503"))
    assert throttle.limit == 2
    throttle.on_retry(RetryEvent("CreateHook", 1, 500, 0.1, "500"))
    assert throttle.limit == 2

    async def calls(n: int) -> None:
        for _ in range(n):
            async with throttle.slot():
                pass

    asyncio.run(calls(2))
    assert throttle.limit == 3
    asyncio.run(calls(100))
    assert throttle.limit == 8


def test_throttle_serves_the_longest_chain_first() -> None:
    throttle = Throttle(1)
    served: list[int] = []

    async def main() -> None:
        async def one(priority: int) -> None:
            async with throttle.slot(priority):
                served.append(priority)
                await asyncio.sleep(0)

        async with asyncio.TaskGroup() as group:
            for p in (0, -1, -5, -2):
                group.create_task(one(p))

    asyncio.run(main())
    assert served == [0, -5, -2, -1]


class SpoilOne(httpx.AsyncBaseTransport):
    """The real server, but the answer to creating Hook ``name`` loses its object."""

    def __init__(self, app: Any, name: str) -> None:
        self.inner = httpx.ASGITransport(app=app)
        self.name = name

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        if (request.url.path.endswith("/CreateHook")
                and json.loads(request.content)["name"] == self.name):
            body = b'{"something": "else"}'
        return httpx.Response(response.status_code, headers={"content-type": "application/json"},
                              content=body)


HOOKS = "".join(f"""
---
apiVersion: govsync/v1
kind: Hook
metadata: {{name: {name}}}
spec: {{code: "def handler(e):\\n  return 1\\n", timeoutMs: 100}}
""" for name in ("bad_hook", "good_one", "good_two"))
POLICY_ON_BAD = """
---
apiVersion: govsync/v1
kind: Policy
metadata: {name: pol-one, dependsOn: [Hook/bad_hook]}
spec: {code: "allow", groupName: admins}
"""


def test_one_bad_answer_stops_only_what_depends_on_it(
        manifests: Callable[[str], ManifestSet], store: SqliteStore, tmp_path: Any) -> None:
    # Issue 8, defect 2: an unreadable 200 answer used to end the whole apply.
    server_store = Store(str(tmp_path / "api.db"))
    app = create_app(server_store, api_keys=[KEY])
    loaded = manifests(HOOKS + POLICY_ON_BAD)
    snapshot = store.snapshot("default")
    plan = make_plan(loaded, snapshot, environ={})

    async def main() -> Any:
        async with AsyncClient("http://127.0.0.1", KEY, transport=SpoilOne(app, "bad_hook")) as client:
            return await Applier(store, snapshot, client, environ={}).run(plan, plan.work())

    result = asyncio.run(main())
    statuses = {o.address: o.status for o in result.outcomes}
    assert statuses == {"Hook/bad_hook": ChangeStatus.UNCERTAIN, "Hook/good_one": ChangeStatus.APPLIED,
                        "Hook/good_two": ChangeStatus.APPLIED, "Policy/pol-one": ChangeStatus.SKIPPED}
    entries = store.snapshot("default").entries
    assert entries["Hook/bad_hook"].status == UNCERTAIN  # never created twice
    assert entries["Hook/good_one"].status == entries["Hook/good_two"].status == APPLIED
    assert "Policy/pol-one" not in entries
    assert not result.ok and result.requests == 3
    assert repr(result) == "ApplyResult(4 outcomes: 2 applied, 1 skipped, 1 uncertain, requests=3)"


def test_a_defect_in_one_change_is_its_outcome(
        manifests: Callable[[str], ManifestSet], tmp_path: Any) -> None:
    """An exception nobody expected fails that change, not the apply."""
    server_store = Store(str(tmp_path / "api.db"))
    app = create_app(server_store, api_keys=[KEY])
    loaded = manifests(HOOKS)

    class Flaky(SqliteStore):
        def put(self, workspace: str, entry: Entry) -> int:
            if entry.address == "Hook/bad_hook":
                raise RuntimeError("disk on fire")
            return super().put(workspace, entry)

    with Flaky(str(tmp_path / "s.db")) as store:
        snapshot = store.snapshot("default")
        plan = make_plan(loaded, snapshot, environ={})

        async def main() -> Any:
            transport = httpx.ASGITransport(app=app)
            async with AsyncClient("http://127.0.0.1", KEY, transport=transport) as client:
                return await Applier(store, snapshot, client, environ={}).run(plan, plan.work())

        result = asyncio.run(main())
    statuses = {o.address: o.status for o in result.outcomes}
    assert statuses["Hook/bad_hook"] == ChangeStatus.FAILED
    assert "internal error" in next(o.error for o in result.outcomes if o.address == "Hook/bad_hook")
    assert statuses["Hook/good_one"] == statuses["Hook/good_two"] == ChangeStatus.APPLIED
