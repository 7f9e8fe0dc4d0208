"""The dashboard as an ASGI app (Starlette): ``govsync ui``, and the agent's ``/``.

Read-only always: every route answers GET (and HEAD) only, and no form posts
anything (filters and searches are GET queries).  With a token, every request
must carry it: ``Authorization: Bearer TOKEN``, or the cookie a browser gets by
opening any page once with ``?token=TOKEN`` (the token is then dropped from the
address; it goes back only to a path of this server, never to another site, and
it is ``Secure`` when the page was reached over HTTPS).  Without a token only
requests to this machine's names are answered (``served.LoopbackOnly``).
Pages load nothing from elsewhere, and the Content-Security-Policy says so to
the browser.
"""

from __future__ import annotations

import hmac
import socket
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from govsync.envvars import UI_TOKEN
from govsync.errors import ConfigError
from govsync.render.html import SCRIPTS, STATIC, STYLES, Filter, esc, page
from govsync.served import LoopbackOnly, config, loopback
from govsync.server.serve import AnnouncingServer, listen, url_of
from govsync.settings import Settings
from govsync.statuses import StatusProvider
from govsync.ui import pages
from govsync.ui.dashboard import Dashboard, EnvironmentView, environments

COOKIE = "govsync_ui_token"
POLICY = ("default-src 'none'; style-src 'self' 'unsafe-inline'; script-src 'self'; "
          "img-src 'self' data:; connect-src 'none'; base-uri 'none'; form-action 'self'; "
          "frame-ancestors 'none'")
HEADERS = {
    "content-security-policy": POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "x-frame-options": "DENY",
}
TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


class Guard:
    """ASGI middleware: the token (when there is one) and the headers of every answer."""

    def __init__(self, app: ASGIApp, token: str | None, *, secure: bool = False) -> None:
        self.app = app
        self.token = token
        self.secure = secure  # the cookie is always Secure (served behind HTTPS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []),
                                      *((k.encode(), v.encode()) for k, v in HEADERS.items())]
            await send(message)

        refusal = self._refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)

    def _valid(self, given: str | None) -> bool:
        assert self.token is not None
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def _refusal(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._valid(credentials.strip()):
            return None
        if self._valid(request.cookies.get(COOKIE)):
            return None
        if self._valid(request.query_params.get("token")):
            # Into a cookie, and out of the address (and so out of the history).
            rest = urlencode([(k, v) for k, v in parse_qsl(request.url.query) if k != "token"])
            # A path of this server only: "//elsewhere.example/" (or "/\\...") would send
            # the browser to another site.
            target = "/" + request.url.path.lstrip("/\\") + (f"?{rest}" if rest else "")
            answer = RedirectResponse(target, status_code=303)
            answer.set_cookie(COOKIE, self.token, httponly=True, samesite="strict",
                              path=request.scope.get("root_path") or "/",
                              secure=self.secure or _https(request))
            return answer
        body = page("govsync: token needed", (
            "<h1>This dashboard needs a token</h1><p>Open it once with "
            "<code>?token=TOKEN</code> (the value of <code>GOVSYNC_UI_TOKEN</code> where it "
            "runs), or send <code>Authorization: Bearer TOKEN</code>.</p>"),
            prefix=request.scope.get("root_path", ""))
        return HTMLResponse(body, status_code=401, headers={"www-authenticate": "Bearer"})


def _https(request: Request) -> bool:
    """Whether the browser reached this page over HTTPS: the connection's scheme, or a
    proxy's X-Forwarded-Proto.  The header is not trusted for anything else: at worst
    a client that lies gets a cookie its browser keeps to HTTPS."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


def _int(text: str | None) -> int:
    try:
        return max(1, int(text or "1"))
    except ValueError:
        return 1


def create_app(sources: Mapping[str, Settings], *, token: str | None = None,
               statuses: StatusProvider | None = None, max_age: float = 15.0,
               secure: bool = False, root: str | None = None) -> ASGIApp:
    """The dashboard over ``sources`` (environment name -> the settings that read it:
    ``reading.environments``).  ``token``: required of every request when given
    (without one, only requests to this machine's names are answered).
    ``statuses``: the agent's word on each environment (None: the dashboard's plan).
    ``secure``: the token's cookie is Secure whatever the request says.  ``root``: the
    agent's checkout, outside which the dashboard reads nothing."""
    board = Dashboard(sources, statuses=statuses, max_age=max_age, root=root)
    assets = {name: (STATIC / name).read_bytes() for name in (*STYLES, *SCRIPTS)}

    def prefix(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def home(request: Request) -> Response:
        views = [board.view(n) for n in board.names]
        return HTMLResponse(pages.overview(views, board.names, prefix(request)))

    def of_environment(render: Callable[[EnvironmentView, Request], str]
                       ) -> Callable[[Request], Response]:
        """An environment's page (404 for a name the dashboard does not show)."""
        def endpoint(request: Request) -> Response:
            name = request.path_params["name"]
            if name not in board.sources:
                return HTMLResponse(page("govsync: not found", (
                    f"<h1>No environment {esc(name)}</h1><p>Known: "
                    + ", ".join(esc(n) for n in board.names) + "</p>"),
                    prefix=prefix(request)), status_code=404)
            return HTMLResponse(render(board.view(name), request))

        return endpoint

    def changes(request: Request) -> Filter:
        q = request.query_params
        return Filter(q.get("action", ""), q.get("kind", ""), q.get("q", ""), _int(q.get("page")))

    def records(request: Request) -> pages.HistoryFilter:
        q = request.query_params
        since = q.get("since", "")
        try:
            since = (datetime.fromisoformat(since).replace(tzinfo=UTC)
                     .strftime("%Y-%m-%dT%H:%M:%S.%fZ") if since else "")
        except ValueError:
            since = ""
        return pages.HistoryFilter(q.get("kind", ""), q.get("outcome", ""), q.get("who", ""),
                                   q.get("address", ""), since)

    environment = of_environment(
        lambda v, r: pages.environment(v, board.names, changes(r), prefix(r)))
    plan = of_environment(lambda v, r: pages.plan_page(v, board.names, changes(r), prefix(r)))
    history = of_environment(
        lambda v, r: pages.history_page(v, board.names, records(r), prefix(r)))
    graph = of_environment(lambda v, r: pages.graph_page(
        v, board.names, r.query_params.get("node", ""), r.query_params.get("q", ""), prefix(r)))

    def static(request: Request) -> Response:
        name = request.path_params["file"]
        if name not in assets:
            return PlainTextResponse("not found", status_code=404)
        return Response(assets[name], media_type=TYPES["." + name.rsplit(".", 1)[-1]])

    routes = [Route("/", home, methods=["GET"]),
              Route("/environments/{name}", environment, methods=["GET"]),
              Route("/environments/{name}/plan", plan, methods=["GET"]),
              Route("/environments/{name}/history", history, methods=["GET"]),
              Route("/environments/{name}/graph", graph, methods=["GET"]),
              Route("/static/{file}", static, methods=["GET"])]
    guarded = Guard(Starlette(routes=routes), token, secure=secure)
    return guarded if token is not None else LoopbackOnly(guarded)


def run(app: ASGIApp, host: str, port: int, *, announce: str = "govsync ui:") -> None:
    """Serve the dashboard on ``host:port`` until interrupted."""
    sock: socket.socket = listen(host, port)
    where = url_of(host, sock.getsockname()[1])
    try:
        AnnouncingServer(config(app), lambda: print(f"{announce} listening on {where}/",
                                               flush=True)).run(sockets=[sock])
    finally:
        sock.close()


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) of ``--listen``."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"--listen {text!r}: write HOST:PORT, such as 127.0.0.1:8421")
    return host, int(port)


def serve(settings: Settings, listen_at: str, token: str | None) -> None:
    """``govsync ui``: the dashboard of ``settings``' environments on ``listen_at``.

    Beyond loopback it needs a token (ConfigError otherwise): the pages show
    what the state records, which is not for everyone on the network."""
    host, port = parse_listen(listen_at)
    if token is None and not loopback(host):
        raise ConfigError(f"--listen {listen_at} is reachable beyond this machine: set "
                          f"{UI_TOKEN} to a token that every request must carry")
    run(create_app(environments(settings), token=token), host, port)
