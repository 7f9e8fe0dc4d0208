"""The agent's and the dashboard's HTTP side as an attacker reaches it (issue 30,
findings 9 and 10), in-process through httpx's ASGITransport: DNS rebinding
without a token, a replayed push, an off-site redirect, the cookie over HTTPS,
and what /readyz tells a stranger."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from govsync.agent import Agent, Options
from govsync.agentweb import create_app
from govsync.ui.app import create_app as dashboard_app

SECRET = "push-secret"
TOKEN = "ui-token-7c1d"
REBIND = "rebind.attacker.example"


@pytest.fixture
def agent(tmp_path: Path) -> Agent:
    (tmp_path / "govsync.yaml").write_text("apiVersion: govsync/v1\nkind: Project\n")
    return Agent(Options(project=str(tmp_path / "govsync.yaml")), {})


class Client:
    """Requests to an ASGI app, one event loop each (the app's routes are sync)."""

    def __init__(self, app: ASGIApp, base: str) -> None:
        self.app = app
        self.base = base

    def request(self, method: str, path: str | httpx.URL, **kw: Any) -> httpx.Response:
        async def one() -> httpx.Response:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                         base_url=self.base) as web:
                return await web.request(method, path, **kw)

        return asyncio.run(one())

    def get(self, path: str | httpx.URL, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)


def client(app: ASGIApp, base: str = "http://127.0.0.1:8420") -> Client:
    return Client(app, base)


@pytest.mark.parametrize("path", ["/", "/api/v1/environments", "/metrics", "/readyz"])
def test_without_a_token_only_this_machines_names_are_answered(agent: Agent, path: str) -> None:
    agent.ready = True
    web = client(create_app(agent, token=None, webhook_secret=None))
    refused = web.get(path, headers={"host": f"{REBIND}:8420"})
    assert refused.status_code == 400 and "127.0.0.1, localhost or [::1]" in refused.text
    assert web.get(path, headers={"host": REBIND}).status_code == 400
    for host in ("127.0.0.1:8420", "localhost:8420", "[::1]:8420", "127.0.0.1", "LOCALHOST"):
        assert web.get(path, headers={"host": host}).status_code == 200, host


def test_the_dashboard_without_a_token_answers_only_this_machines_names() -> None:
    web = client(dashboard_app({}, token=None), "http://127.0.0.1:8421")
    assert web.get("/").status_code == 200
    assert web.get("/", headers={"host": f"{REBIND}:8421"}).status_code == 400
    # With a token, the token guards it: any name (a proxy's) may reach it.
    guarded = client(dashboard_app({}, token=TOKEN), f"http://{REBIND}")
    assert guarded.get("/").status_code == 401
    assert guarded.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_readyz_says_ready_or_not_and_nothing_more(agent: Agent) -> None:
    web = client(create_app(agent, token=TOKEN, webhook_secret=None))
    assert web.get("/readyz").json() == {"status": "starting"}
    agent.ready = True
    agent.problem = "govsync.yaml:3:5: hooks/secret.yaml: unknown key 'code'"
    answer = web.get("/readyz")
    assert answer.status_code == 200 and answer.json() == {"status": "ready"}


def push(web: Client, body: bytes, delivery: str) -> int:
    signed = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return web.post("/hooks/git", content=body, headers={
        "x-hub-signature-256": signed, "x-github-event": "push",
        **({"x-github-delivery": delivery} if delivery else {})}).status_code


def test_a_replayed_push_is_answered_and_does_nothing(agent: Agent) -> None:
    web = client(create_app(agent, token=TOKEN, webhook_secret=SECRET))
    body = json.dumps({"ref": "refs/heads/main", "after": "a" * 40}).encode()
    assert push(web, body, "d-1") == 202 and agent.woken.is_set()
    for delivery in ("d-1", "d-2", ""):  # the same, another id, none: one body, signed once
        agent.woken.clear()
        assert push(web, body, delivery) == 200
        assert not agent.woken.is_set(), delivery
    later = json.dumps({"ref": "refs/heads/main", "after": "b" * 40}).encode()
    assert push(web, later, "d-3") == 202 and agent.woken.is_set()


@pytest.mark.parametrize("path", ["//attacker.example/", "/\\attacker.example/",
                                  "///attacker.example/x"])
def test_the_token_redirect_stays_on_this_server(path: str) -> None:
    web = client(dashboard_app({}, token=TOKEN))
    # Sent as it is written (a client would read "//host/" as another host).
    raw = httpx.URL("http://127.0.0.1:8420").copy_with(raw_path=f"{path}?token={TOKEN}&q=1"
                                                       .encode())
    answer = web.get(raw)
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert location.startswith("/") and not location.startswith(("//", "/\\")), location
    assert location.endswith("attacker.example/?q=1") or location.endswith(
        "attacker.example/x?q=1")


def test_the_token_cookie_is_secure_over_https() -> None:
    def cookie(base: str, headers: dict[str, str] | None = None, **kw: bool) -> str:
        web = client(dashboard_app({}, token=TOKEN, **kw), base)
        answer = web.get(f"/?token={TOKEN}", headers=headers or {})
        assert answer.status_code == 303
        return answer.headers["set-cookie"].lower()

    assert "; secure" in cookie("https://govsync.example")
    assert "; secure" in cookie("http://127.0.0.1", {"x-forwarded-proto": "https"})
    assert "; secure" not in cookie("http://127.0.0.1")
    assert "; secure" in cookie("http://127.0.0.1", secure=True)  # GOVSYNC_AGENT_URL https
