"""Helpers of the refresh tests: govsync in process against the embedded reference
server (``--endpoint local``), and the same server's API called directly, as a person
in the service's console would change an object.

Every test runs in a folder of its own (the embedded server keeps its objects in
``.govsync/local-api.db`` there), with its state in SQLite or PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import random
import shutil
import textwrap
import threading
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
import yaml

from govsync.runtime import seed_local
from govsync.server import Store, create_app
from testkit import (
    EXAMPLE_MANIFESTS,
    EXAMPLE_SECRET_VARS,
    EXAMPLE_SEED,
    Run,
    drop_pg_workspaces,
    environ,
    free_port,
    govsync,
    until,
    without_settings,
)

LOCAL_DB = Path(".govsync") / "local-api.db"


@dataclass
class Gov:
    """govsync in one folder: ``run(...)`` the command line against the embedded server,
    ``call(...)`` that server's API directly."""

    folder: Path
    state: str
    workspace: str
    env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, env: Mapping[str, str] | None = None) -> Run:
        """``govsync ARGS`` in the test process (``testkit.govsync``), in the current
        directory (the fixtures change into the test's folder)."""
        return govsync(*args, env=environ({
            "GOVSYNC_STATE": self.state, "GOVSYNC_WORKSPACE": self.workspace,
            "GOVSYNC_ENDPOINT": "local", **self.env, **(env or {})}))

    def ok(self, *args: str, code: int = 0) -> Run:
        run = self.run(*args)
        assert run.code == code, run
        return run

    def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """One operation of the embedded server, as the service's console calls it."""
        from govsync.api.catalog import BY_NAME

        async def send() -> httpx.Response:
            store = Store(str(self.folder / LOCAL_DB))
            try:
                transport = httpx.ASGITransport(app=create_app(store, api_keys=None))
                async with httpx.AsyncClient(transport=transport,
                                             base_url="http://console") as client:
                    return await client.post(BY_NAME[operation].path, json=dict(body),
                                             headers={"X-API-KEY": "console"})
            finally:
                store.close()

        response = asyncio.run(send())
        assert response.status_code == 200, (operation, response.status_code, response.text)
        data: dict[str, Any] = response.json()
        return data

    def objects(self, kind: str) -> list[dict[str, Any]]:
        store = Store(str(self.folder / LOCAL_DB))
        try:
            return list(store.list(kind))
        finally:
            store.close()

    def store_update(self, kind: str, object_id: str, **fields: Any) -> None:
        """A change no API operation makes (a hook's status after create), written into
        the embedded server's storage directly."""
        store = Store(str(self.folder / LOCAL_DB))
        try:
            obj = store.get(kind, object_id)
            assert obj is not None, (kind, object_id)
            store.put(kind, object_id, {**obj, **fields})
        finally:
            store.close()

    def entries(self) -> dict[str, dict[str, Any]]:
        run = self.ok("state", "export")
        return {e["address"]: e for e in run.json()["entries"]}


def lost(gov: Gov, suffix: str = "-lost") -> Gov:
    """The same folder and server with its state lost: a new SQLite state file (the same
    workspace), or, on PostgreSQL, a new workspace of the same state (whose objects are
    then the first workspace's: govsync refuses them as another workspace's)."""
    if gov.state.startswith("postgresql"):
        return dataclasses.replace(gov, workspace=gov.workspace + suffix)
    return dataclasses.replace(gov, state=str(Path(gov.state).with_name(f"state{suffix}.db")))


# What a create of an object that exists on the server and is not this workspace's says:
# unrecorded, or recorded by another workspace of the same state.
NOT_OURS = ("exists on the server as ", "is recorded by workspace")


def not_ours(reason: str) -> bool:
    return reason.startswith(NOT_OURS[0]) or NOT_OURS[1] in reason


def make_gov(folder: Path, state: str) -> Gov:
    env = {name: f"secret-{name.lower()}" for name in EXAMPLE_SECRET_VARS}
    seed_local(str(EXAMPLE_SEED), str(folder / LOCAL_DB))
    return Gov(folder, state, f"ws-{uuid.uuid4().hex[:10]}", env)


def copy_examples(folder: Path) -> Path:
    target = folder / "manifests"
    shutil.copytree(EXAMPLE_MANIFESTS, target)
    return target


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


__all__ = ["Gov", "Run", "copy_examples", "documents", "make_gov", "os", "without_settings",
           "write"]


def console_edit(gov: Gov, kind: str, object_id: str) -> str:
    """Change one field of a stored object behind govsync's back (as the service's
    console would), in the server's own storage; returns the field's dotted path."""
    from govsync.api.kinds import BY_KIND

    spec = BY_KIND[kind]
    store = Store(str(gov.folder / LOCAL_DB))
    try:
        id_field = spec.create.id_field
        obj = next(o for o in store.list(kind) if o.get(id_field, o.get("id")) == object_id)
        path, value = _changed_field(spec.fields, spec.secrets, obj)
        target: Any = obj
        *parents, last = path.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
        store.put(kind, object_id, obj, key=obj.get("connectorId") if kind ==
                  "ConnectorAIProvider" else None)
        return path
    finally:
        store.close()


def _changed_field(fields: tuple[str, ...], secrets: tuple[str, ...],
                   obj: Mapping[str, Any]) -> tuple[str, Any]:
    """A field of ``obj`` to change (not its name, an id, or a secret) and a new value."""
    def leaf(value: Any, path: str) -> tuple[str, Any] | None:
        if path in secrets or path.endswith("Id") or path in ("name", "id"):
            return None
        if isinstance(value, bool):
            return path, not value
        if isinstance(value, int):
            return path, value + 1
        if isinstance(value, str) and value:
            return path, value + "-console"
        if isinstance(value, dict):
            for key, inner in value.items():
                found = leaf(inner, f"{path}.{key}")
                if found:
                    return found
        return None

    for name in fields:
        found = leaf(obj.get(name), name) if name in obj else None
        if found:
            return found
    raise AssertionError(f"no field to change in {obj}")


def console_adds_a_host(gov: Gov) -> None:
    """The issue's console edit: exfil.example.net added to Hook/risk_score's hosts."""
    hook = next(o for o in gov.objects("Hook") if o["name"] == "risk_score")
    gov.call("UpdateHook", {"hook": {**{k: v for k, v in hook.items()
                                         if k not in ("createdAt", "updatedAt")},
                                     "allowlistedNetworkHosts": [
                                         *hook["allowlistedNetworkHosts"], "exfil.example.net"]}})


def hosts(gov: Gov) -> list[str]:
    """Hook/risk_score's allowlisted hosts as the server holds them."""
    hook = next(o for o in gov.objects("Hook") if o["name"] == "risk_score")
    return list(hook["allowlistedNetworkHosts"])


# -- the fixtures both tests/refresh and tests/change use (their conftests import them) --

POSTGRES_ENV = "GOVSYNC_TEST_POSTGRES"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def gov(request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> Iterator[Gov]:
    url = os.environ.get(POSTGRES_ENV, "")
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    if request.param == "sqlite":
        yield make_gov(tmp_path, str(tmp_path / ".govsync" / "state.db"))
        return
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    made = make_gov(tmp_path, url)
    yield made
    drop_pg_workspaces(url, [made.workspace])


@pytest.fixture
def sqlite_gov(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Gov:
    """SQLite only: for what does not depend on the state backend."""
    without_settings(monkeypatch)
    monkeypatch.chdir(tmp_path)
    return make_gov(tmp_path, str(tmp_path / ".govsync" / "state.db"))


FAULTY_KEY = "fault-test-key"


@contextlib.contextmanager
def faulty_endpoint(gov: Gov, rate: float, rng: random.Random,
                    http: Any = "auto") -> Iterator[Gov]:
    """``gov`` against a reference server over its local database whose writes fail at
    ``rate`` as ``rng`` draws (``http``: uvicorn's protocol, e.g. one that drops the
    connection after the server stored the write)."""
    store = Store(str(gov.folder / LOCAL_DB))
    app = create_app(store, api_keys=[FAULTY_KEY], fault_rate=rate, rng=rng)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error",
                                           lifespan="off", http=http))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started, "the faulty endpoint listening")
    try:
        yield dataclasses.replace(gov, env={**gov.env, "GOVSYNC_ENDPOINT":
                                            f"http://127.0.0.1:{port}",
                                            "GOVSYNC_API_KEY": FAULTY_KEY})
    finally:
        server.should_exit = True
        thread.join(10)
        store.close()
