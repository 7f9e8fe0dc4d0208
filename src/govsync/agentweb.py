"""The agent's HTTP side (contract section 9), served by uvicorn on ``--listen``:

=====================================  ==============================================
``GET /healthz``                       200 while the agent's loop is alive
``GET /readyz``                        200 once every environment was cycled once,
                                       the repository fetched and one endpoint
                                       reachable in the last round (readiness.py);
                                       503 otherwise (ready or not: nothing more)
``GET /metrics``                       Prometheus text
``POST /hooks/git``                    GitHub's push webhook: ``X-Hub-Signature-256``
                                       checked with GOVSYNC_AGENT_WEBHOOK_SECRET (401
                                       otherwise, and nothing changes); a push to the
                                       branch runs every cycle at once; a delivery seen
                                       before (its X-GitHub-Delivery, or its body) is
                                       answered and does nothing
``GET /api/v1/environments``           each environment's status (JSON)
``GET /api/v1/environments/{name}``    one of them
``GET /api/v1/environments/{name}/history``  its history records, newest first
``/``                                  the dashboard (``govsync ui``'s), with the
                                       agent's statuses
=====================================  ==============================================

The API and the dashboard need the dashboard's bearer token when one is set
(GOVSYNC_UI_TOKEN, the same mechanism as ``govsync ui``); probes, metrics and
the webhook (authenticated by its signature) do not.  Without a token, only
requests to this machine's names are answered (``served.LoopbackOnly``),
and the server is ``served.py``'s (a connection cap, a request timeout).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from collections import OrderedDict
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from govsync import runtime
from govsync.agent.loop import Agent
from govsync.agent.metrics import CONTENT_TYPE
from govsync.errors import GovsyncError
from govsync.formats import FORMAT_VERSION
from govsync.served import LoopbackOnly, config
from govsync.server.serve import listen
from govsync.ui.app import Guard
from govsync.ui.app import create_app as dashboard_app

# GitHub sends at most 25 MB; a push of the manifests is far less.
MAX_BODY = 5 * 1024 * 1024
HISTORY_LIMIT = 100
# How many push deliveries the agent remembers, to answer a replay without a cycle.
DELIVERIES_KEPT = 1024
# The loop is alive while it beats at least this often (beyond its longest wait).
STALE_AFTER = 3600.0


def _json(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status)


class LazyDashboard:
    """The dashboard over the agent's environments, made again when they change."""

    def __init__(self, agent: Agent, token: str | None, secure: bool) -> None:
        self.agent = agent
        self.token = token
        self.secure = secure
        self._app: ASGIApp | None = None
        self._names: list[str] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sources = self.agent.dashboard_sources()
        with self._lock:
            if self._app is None or list(sources) != self._names:
                checkout = self.agent.checkout
                self._app = dashboard_app(sources, token=self.token, statuses=self.agent.report,
                                          secure=self.secure, root=checkout.directory
                                          if checkout is not None else None)
                self._names = list(sources)
            app = self._app
        await app(scope, receive, send)


class Deliveries:
    """The push deliveries seen lately (their ids and their bodies' digests): GitHub
    signs the body only, so a replay with another X-GitHub-Delivery is known too."""

    def __init__(self, keep: int = DELIVERIES_KEPT) -> None:
        self.keep = keep
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def first(self, delivery: str, body: bytes) -> bool:
        """Whether this delivery is new (it is remembered, then)."""
        keys = ["body:" + hashlib.sha256(body).hexdigest()] + (
            ["id:" + delivery] if delivery else [])
        with self._lock:
            if any(k in self._seen for k in keys):
                return False
            for key in keys:
                self._seen[key] = None
            while len(self._seen) > self.keep:
                self._seen.popitem(last=False)
        return True


def create_app(agent: Agent, *, token: str | None, webhook_secret: str | None,
               secure: bool = False) -> ASGIApp:
    """The agent's HTTP side.  ``token``: the API's and the dashboard's (without one,
    only requests to this machine's names are answered); ``secure``: the token's
    cookie is always Secure (the agent is reached over HTTPS)."""
    deliveries = Deliveries()

    def healthz(request: Request) -> Response:
        quiet = time.monotonic() - agent.heartbeat
        if quiet > max(STALE_AFTER, 3 * max((agent.interval(k.target)
                                             for k in agent.known.values()), default=0)):
            return _json({"status": "stale", "reason": f"no cycle for {quiet:.0f} s"}, 503)
        return _json({"status": "ok"})

    def readyz(request: Request) -> Response:
        if not agent.ready:
            return _json({"status": "starting"}, 503)
        return _json({"status": "ready"})

    def metrics(request: Request) -> Response:
        return Response(agent.metrics.text(), media_type=CONTENT_TYPE)

    async def hook(request: Request) -> Response:
        if not webhook_secret:
            return _json({"error": "this agent has no webhook secret "
                                   "(GOVSYNC_AGENT_WEBHOOK_SECRET): it accepts no webhook"}, 401)
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:
                return _json({"error": "the body is too large"}, 413)
        given = request.headers.get("x-hub-signature-256", "")
        expected = "sha256=" + hmac.new(webhook_secret.encode(), body,
                                        hashlib.sha256).hexdigest()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return _json({"error": "the X-Hub-Signature-256 signature does not verify"}, 401)
        if not deliveries.first(request.headers.get("x-github-delivery", ""), body):
            return _json({"ok": True, "ignored": "this delivery was received before"})
        event = request.headers.get("x-github-event", "push")
        if event == "ping":
            return _json({"ok": True, "event": "ping"})
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return _json({"error": "the body is not JSON"}, 400)
        ref = data.get("ref") if isinstance(data, dict) else None
        branch = agent.branch
        if event != "push" or (branch and ref != f"refs/heads/{branch}"):
            return _json({"ok": True, "ignored": f"not a push to {branch or 'the branch'}"})
        agent.wake()
        return _json({"ok": True, "cycle": "started"}, 202)

    def environments(request: Request) -> Response:
        return _json({"formatVersion": FORMAT_VERSION, "revision": agent.revision,
                      "problem": agent.problem or None,
                      "environments": agent.environments()})

    def environment(request: Request) -> Response:
        found = agent.environment(request.path_params["name"])
        if found is None:
            return _json({"error": f"no environment {request.path_params['name']!r}"}, 404)
        return _json({"formatVersion": FORMAT_VERSION, **found})

    def history(request: Request) -> Response:
        name = request.path_params["name"]
        settings = agent.settings_of(name)
        if settings is None:
            return _json({"error": f"no environment {name!r}"}, 404)
        try:
            limit = max(1, min(1000, int(request.query_params.get("limit", HISTORY_LIMIT))))
        except ValueError:
            limit = HISTORY_LIMIT
        try:
            with runtime.open_state(settings) as store:
                records = store.history(settings.workspace, limit)
        except GovsyncError as exc:
            return _json({"error": str(exc)}, 503)
        return _json({"formatVersion": FORMAT_VERSION, "environment": name,
                      "workspace": settings.workspace, "records": records})

    api = Guard(Starlette(routes=[
        Route("/environments", environments, methods=["GET"]),
        Route("/environments/{name}", environment, methods=["GET"]),
        Route("/environments/{name}/history", history, methods=["GET"]),
    ]), token, secure=secure)
    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/hooks/git", hook, methods=["POST"]),
        Mount("/api/v1", app=api),
        Mount("/", app=LazyDashboard(agent, token, secure)),
    ])
    return app if token is not None else LoopbackOnly(app)


class Served:
    """The HTTP side running on a thread of its own (``stop`` ends it)."""

    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        self.sock: socket.socket = listen(host, port)
        self.port = int(self.sock.getsockname()[1])
        self.server = uvicorn.Server(config(app))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True, name="govsync-agent-http")
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10.0)
        self.sock.close()
