"""``govsync serve``: the reference server on a TCP port, with uvicorn.

The socket is bound here, before uvicorn starts, so that a port in use (or
any other reason the address cannot be had) is one ConfigError line rather
than uvicorn's log and exit status.  Once uvicorn accepts connections, one
line on stderr says where; with ``verbose`` every request adds one line
(method, path, status, milliseconds).
"""

from __future__ import annotations

import errno
import socket
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
import uvicorn.config
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from govsync.errors import ConfigError
from govsync.server.app import Operations, create_app
from govsync.server.droppable import DroppableH11Protocol
from govsync.server.store import SeedError, Store

PREFIX = "govsync serve:"

Write = Callable[[str], None]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class RequestLog:
    """ASGI middleware: one line per request, written once it is answered."""

    def __init__(self, app: ASGIApp, write: Write) -> None:
        self.app = app
        self.write = write

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status: int | None = None

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            ms = (time.perf_counter() - started) * 1000
            path = "".join(c if c.isprintable() else "?" for c in scope["path"])
            answer = str(status) if status is not None else "no answer"
            self.write(f"{PREFIX} {scope['method']} {path} -> {answer} ({ms:.1f} ms)")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def url_of(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port, or a ConfigError that says why not."""
    where = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"cannot listen on {where}: unknown host ({exc}); check --host") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = {
            errno.EADDRINUSE: "the address is already in use; pick another --port",
            errno.EACCES: "permission denied; pick a --port above 1023",
            errno.EADDRNOTAVAIL: "the address is not one of this machine's; check --host",
        }.get(exc.errno or 0, exc.strerror or str(exc))
        raise ConfigError(f"cannot listen on {where}: {reason}") from exc
    sock.set_inheritable(True)
    return sock


def run(
    host: str,
    port: int,
    db: str,
    api_keys: Sequence[str],
    viewer_keys: Sequence[str],
    seed: str | None,
    latency_ms: int,
    fault_rate: float,
    verbose: bool = False,
    operations: str = Operations.ALL,
) -> None:
    """Serve the API on ``host:port`` until interrupted (one uvicorn worker)."""
    store = open_store(db, seed)
    try:
        sock = listen(host, port)
        try:
            server(sock, store, host=host, db=db, api_keys=api_keys, viewer_keys=viewer_keys,
                   latency_ms=latency_ms, fault_rate=fault_rate, verbose=verbose,
                   operations=Operations(operations), write=_stderr).run(sockets=[sock])
        finally:
            sock.close()
    finally:
        store.close()


def open_store(db: str, seed: str | None) -> Store:
    """The server's database (a file, or ``:memory:``), with ``seed`` loaded."""
    try:
        store = Store(db)
    except sqlite3.Error as exc:
        raise ConfigError(f"cannot open the server database {db}: {exc}") from exc
    try:
        if seed:
            store.load_seed(seed)
    except SeedError as exc:
        store.close()
        raise ConfigError(str(exc)) from exc
    except BaseException:
        store.close()
        raise
    return store


def server(sock: socket.socket, store: Store, *, host: str, db: str, api_keys: Sequence[str],
           viewer_keys: Sequence[str], latency_ms: int, fault_rate: float, verbose: bool,
           operations: Operations, write: Write,
           log_config: dict[str, Any] | None = uvicorn.config.LOGGING_CONFIG,
           ) -> AnnouncingServer:
    """The uvicorn server of ``govsync serve`` on ``sock``, not started: ``write`` takes
    its lines (where it listens; with ``verbose``, each request).  ``log_config`` is
    uvicorn's logging set-up (None: leave this process's logging as it is)."""
    if not api_keys:
        write(f"{PREFIX} warning: no --api-key given, any non-empty X-API-KEY is accepted")
    app: ASGIApp = create_app(
        store,
        api_keys=list(api_keys),
        viewer_keys=list(viewer_keys),
        latency_ms=latency_ms,
        fault_rate=fault_rate,
        operations=operations,
    )
    if verbose:
        app = RequestLog(app, write)
    listening = (
        f"{PREFIX} listening on {url_of(host, sock.getsockname()[1])} (db {db}, "
        f"{_plural(len(set(api_keys)), 'api key')}, "
        f"{_plural(len(set(viewer_keys) - set(api_keys)), 'viewer key')}"
        + (", spec operations only)" if operations == Operations.SPEC else ")")
    )
    config = uvicorn.Config(
        app,
        workers=1,
        log_level="warning",
        log_config=log_config,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        http=DroppableH11Protocol,
        lifespan="off",
    )
    return AnnouncingServer(config, lambda: write(listening))


class AnnouncingServer(uvicorn.Server):
    """uvicorn's Server, announcing once it accepts connections."""

    def __init__(self, config: uvicorn.Config, on_listening: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_listening = on_listening

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.on_listening()
