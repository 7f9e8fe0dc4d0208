"""A read that fails mid-refresh (500 after the client's retries): the plan says which
objects could not be refreshed; apply refuses to act on a partial picture and drift
exits 1.  The embedded server's storage behind a real HTTP server whose List and Get of
one kind answer 500."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn
from refreshkit import LOCAL_DB, Gov, copy_examples

from govsync.api.kinds import KINDS
from govsync.server import Operations, Store, create_app
from testkit import free_port, until

KEY = "fault-test-key"


class FailingReads:
    """The reference server, but every read of ``kind`` answers 500 internal_error."""

    def __init__(self, app: Any, operations: set[str]) -> None:
        self.app = app
        self.operations = operations
        self.failed = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].rsplit("/", 1)[-1] in self.operations:
            self.failed += 1
            body = json.dumps({"code": "internal_error", "message": "injected"}).encode()
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


@contextlib.contextmanager
def served(gov: Gov, operations: set[str], offered: Operations = Operations.ALL
           ) -> Iterator[tuple[str, FailingReads]]:
    store = Store(str(gov.folder / LOCAL_DB))
    app = FailingReads(create_app(store, api_keys=[KEY], operations=offered), operations)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                           lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started, "the server listening")
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()


def test_a_failing_read_mid_refresh(gov: Gov) -> None:
    manifests = str(copy_examples(gov.folder))
    with served(gov, set()) as (url, app):
        env = {"GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY}
        applied = gov.run("apply", manifests, "--auto-approve", env=env)
        assert applied.code == 0, applied
        app.operations |= {"ListHooks", "GetHook"}
        plan = gov.run("plan", manifests, env=env)
        assert plan.code == 0, plan
        assert "Check refresh: failed" in plan.out
        assert "could not be refreshed: 4 object(s) (Hook/mask_pii" in plan.out
        assert "ListHooks answered 500 internal_error" in plan.out
        assert app.failed >= 2  # retried like any read
        drift = gov.run("drift", manifests, env=env)
        assert drift.code == 1, drift
        assert "could not be refreshed" in drift.err
        before = gov.entries()
        apply = gov.run("apply", manifests, "--auto-approve", env=env)
        assert apply.code == 1, apply
        assert "nothing was applied" in apply.err
        assert gov.entries() == before


def test_gets_sent_beside_a_probe_that_fails_count_for_nothing(gov: Gov) -> None:
    """The Gets of the kinds without a List go out beside the probe (the List that says
    whether the endpoint has the reads); an endpoint without them answers each 404, as
    it would a deleted object.  When the probe itself fails, those 404s must not make
    the objects "missing" (planned again as creates: duplicates): they could not be
    refreshed."""
    manifests = str(copy_examples(gov.folder))
    probe = next(k.list.name for k in KINDS if k.list is not None and not k.list.scope_required)
    read_by_gets = [k.name for k in KINDS if k.list is None and k.get is not None]
    with served(gov, set(), Operations.SPEC) as (url, app):
        env = {"GOVSYNC_ENDPOINT": url, "GOVSYNC_API_KEY": KEY}
        applied = gov.run("apply", manifests, "--auto-approve", env=env)
        assert applied.code == 0, applied
        recorded = [a for a in gov.entries() if a.split("/")[0] in read_by_gets]
        assert recorded, "the examples record no object read by Gets"
        app.operations |= {probe}
        plan = gov.run("plan", manifests, "--format", "json", env=env)
        assert plan.code == 0, plan
        changes = plan.json()["changes"]
        assert {c["address"]: c["action"] for c in changes if c["address"] in recorded} == {
            address: "no-op" for address in recorded}
        text = gov.run("plan", manifests, env=env)
        assert "Check refresh: failed" in text.out, text
        assert f"{probe} answered 500" in text.out, text
        before = gov.entries()
        apply = gov.run("apply", manifests, "--auto-approve", env=env)
        assert apply.code == 1, apply
        assert gov.entries() == before
