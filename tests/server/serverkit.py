"""Helpers of the reference server tests: a seed, the app in-process, a served process.

``World`` creates, through the API itself, the objects other requests refer
to (a space, a connector, a native user, a policy, a hook, a signing key);
``VALID`` holds one valid request body per catalog operation, built from a
world.  ``served`` runs ``python -m govsync serve`` on a free loopback port.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from govsync.api.catalog import BY_NAME, LIFECYCLE, Operation, UpdateStyle, Verb
from govsync.api.kinds import BY_KIND
from govsync.server import Store, create_app
from testkit import serve, stop

KEY = "server-test-key"
VIEWER = "server-viewer-key"
H = {"X-API-KEY": KEY}

# RFC 3339, UTC, nanosecond resolution.
TIMESTAMP = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{9}Z$"
# Ids the server makes: <kind in kebab case>-<32 hex digits>.
SERVER_ID = r"^[a-z][a-z-]*-[0-9a-f]{32}$"

T0 = "2024-01-01T00:00:00.000000000Z"

SEED: dict[str, Any] = {
    "resources": [
        {"id": "res-1", "name": "orders-db", "hostname": "db.internal", "port": 5432,
         "environment": "production", "terminationProtection": False, "spaceId": None,
         "createdAt": T0, "updatedAt": T0, "tags": [], "aliases": ["old-alias"]},
    ],
    "groups": [
        {"id": "grp-admins", "name": "admins", "description": "Administrators",
         "dsyncGroupId": "d-1", "terminationProtection": True},
        {"id": "grp-analysts", "name": "analysts", "description": "Read only"},
    ],
    "users": [
        {"id": "usr-ann", "dbUsername": "ann", "fullName": "Ann Lee", "expireAt": None,
         "human": {"firstName": "Ann", "lastName": "Lee", "email": "ann@example.com"}},
        {"id": "usr-bot", "dbUsername": "bot", "machine": {"name": "bot"}},
    ],
    "connectorListenerLinks": [
        {"id": "cll-1", "listener": {"id": "lst-1", "name": "pg", "port": 5432,
                                     "terminationProtection": False,
                                     "createdAt": T0, "updatedAt": T0},
         "terminationProtection": False, "createdAt": T0, "updatedAt": T0},
    ],
    "sidecarResourceLinks": [
        {"id": "srl-1", "sidecar": {"id": "sdc-1", "name": "legacy", "hostname": "s.internal",
                                    "technology": "ssh", "deployed": True},
         "resource": {"id": "res-1", "name": "orders-db"}, "port": 22,
         "terminationProtection": False},
    ],
}


class InProcess:
    """A synchronous client of an ASGI app, through ``httpx.ASGITransport``.

    (starlette's InProcess warns with this httpx; tests run with warnings
    as errors.)  One event loop per client, closed by ``close()``.
    """

    def __init__(self, app: Any, base_url: str = "http://127.0.0.1") -> None:
        self.loop = asyncio.new_event_loop()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=base_url)

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        return self.loop.run_until_complete(self.client.request(method, url, **kw))

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()

    def __enter__(self) -> InProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def path(op: str) -> str:
    return BY_NAME[op].path


def make_app(seed: dict[str, Any] | None = SEED, *, store: Store | None = None,
             **kw: Any) -> tuple[Any, Store]:
    store = Store() if store is None else store
    if seed:
        store.load_seed(seed)
    kw.setdefault("api_keys", [KEY])
    kw.setdefault("viewer_keys", [VIEWER])
    return create_app(store, **kw), store


class World:
    """Objects other requests name, created on first use through the API."""

    def __init__(self, client: InProcess) -> None:
        self.client = client
        self._ids: dict[str, str] = {}

    def call(self, op: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(path(op), json=body, headers=H)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    def _make(self, name: str, op: str, body: Callable[[], dict[str, Any]]) -> str:
        if name not in self._ids:
            key = BY_NAME[op].response_key
            assert key is not None
            self._ids[name] = self.call(op, body())[key]["id"]
        return self._ids[name]

    @property
    def space(self) -> str:
        return self._make("space", "CreateSpace", lambda: {"name": "world-space"})

    @property
    def connector(self) -> str:
        return self._make("connector", "CreateConnector", lambda: {"name": "world-conn"})

    @property
    def native_user(self) -> str:
        return self._make("native_user", "CreateNativeUserV3", lambda: {
            "credentials": {"unauthenticated": {}}, "resourceId": "res-1"})

    @property
    def policy(self) -> str:
        return self._make("policy", "CreatePolicy", lambda: {
            "name": "world-policy", "code": "allow", "groupName": "admins"})

    @property
    def hook(self) -> str:
        return self._make("hook", "CreateHook", lambda: {"name": "world_hook", "code": "x"})

    @property
    def signing_key(self) -> str:
        return self._make("signing_key", "CreateSigningKey", lambda: {
            "name": "world-key", "publicKey": "ssh-ed25519 AAAA", "algorithm": "ed25519"})

    def of(self, kind: str, *, deletable: bool = False) -> str:
        """The id of an object of ``kind``, made on first use with its create's valid body
        (``deletable``: with terminationProtection false, where the body protects it)."""
        op, key = BY_KIND[kind].create, f"{kind}:{deletable}"
        if key not in self._ids:
            body = VALID[op.name](self)
            if deletable and "terminationProtection" in BY_KIND[kind].fields:
                body["terminationProtection"] = False
            answer = self.call(op.name, body)
            self._ids[key] = (answer[op.response_key] if op.response_key else answer)[op.id_field]
        return self._ids[key]


class FakeWorld:
    """Ids that look right but name nothing: enough for requests that fail validation."""

    space = connector = native_user = policy = hook = signing_key = "fake-id"

    def of(self, kind: str, *, deletable: bool = False) -> str:
        return "fake-id"


Body = Callable[[Any], dict[str, Any]]

# One valid request per operation of the catalog.
VALID: dict[str, Body] = {
    "CreateConnector": lambda w: {"name": "conn-a", "terminationProtection": True,
                                  "spaceId": w.space},
    "UpdateConnectorAiProviderV2": lambda w: {"connectorAiProvider": {
        "connectorId": w.connector, "config": {"providerA": {"model": "m-1"}}}},
    "UpdateConnectorListenerLink": lambda w: {"id": "cll-1", "terminationProtection": True},
    "CreateSidecar": lambda w: {"name": "side-a", "technology": "ssh", "hostname": "h.example",
                                "terminationProtection": False},
    "UpdateSidecarResourceLink": lambda w: {"id": "srl-1", "terminationProtection": True},
    "CreateSatellite": lambda w: {"name": "sat-a", "satelliteType": "ai", "spaceId": None},
    "CreateSpace": lambda w: {"name": "space-a", "description": "d",
                              "terminationProtection": True},
    "CreateResourceAlias": lambda w: {"resourceId": "res-1", "alias": "alias-a"},
    "CreateDataDiscoveryConfiguration": lambda w: {
        "resourceId": "res-1", "nativeUserId": w.native_user, "database": "db",
        "schedule": "0 * * * *", "deletionPolicy": "delete", "path": None},
    "CreateNativeUserV3": lambda w: {"credentials": {"cloudIamA": {"username": "u"}},
                                     "resourceId": "res-1", "label": "l"},
    "ListGroups": lambda w: {"limit": 10},
    "GetPolicyCodeValidity": lambda w: {
        "code": 'package formal.v2\n\nsession := {"action": "allow"}\n'},
    "CreateBlockedUser": lambda w: {"id": "usr-ann"},
    "CreatePolicy": lambda w: {"name": "p", "code": "allow", "groupName": "admins",
                               "notification": "owners", "status": "active"},
    "CreatePolicySuspension": lambda w: {"policyId": w.policy, "identityId": "usr-ann",
                                         "expirationMinutes": 30, "reason": "r"},
    "CreatePolicyReport": lambda w: {"policyId": w.policy, "policyCode": "c",
                                     "evaluationWindow": "24h", "logQuery": "q"},
    "ListPolicyImpactReportLogs": lambda w: {"reportId": w.of("PolicyReport"), "limit": 10},
    "GetPolicyImpactReportGraph": lambda w: {"reportId": w.of("PolicyReport")},
    "CreatePolicyDataLoader": lambda w: {"name": "loader", "key": "k", "workerCode": "code",
                                         "workerSchedule": "*/5 * * * *",
                                         "workerRuntime": "python3.11"},
    "CreateHook": lambda w: {"name": "risk_hook", "code": "print()", "timeoutMs": 1000,
                             "allowlistedEnvironmentVariables": ["HOME"],
                             "allowlistedNetworkHosts": ["api.example"]},
    "UpdateHook": lambda w: {"hook": {"id": w.hook, "name": "risk_hook2", "code": "x",
                                      "timeoutMs": 2000, "status": "active",
                                      "createdAt": T0, "updatedAt": T0}},
    "CreatePermission": lambda w: {"name": "perm", "code": "c"},
    "CreateIntegrationLog": lambda w: {"name": "logs",
                                       "logStoreB": {"site": "eu", "apiKey": "SECRET-logb"}},
    "CreateBIIntegration": lambda w: {"name": "bi", "linkedDbUserId": w.native_user,
                                      "biA": {"biAApiKey": "bi-key", "biAApiSecret": "bi-sec"}},
    "CreateIntegrationMDM": lambda w: {"name": "mdm", "mdmB": {
        "clientId": "c", "apiKey": "SECRET-mdm", "apiUrl": "https://mdm.example"}},
    "CreateIntegrationAIProvider": lambda w: {"name": "ai", "keyName": "kn",
                                              "apiKey": "SECRET-ai",
                                              "provider": "AI_PROVIDER_VENDORB_CHAT"},
    "CreateLogQuery": lambda w: {"name": "q", "query": {
        "query": "select", "filters": [{"name": "f", "values": ["a"]}], "relativeTime": 3600}},
    "CreateSessionTermination": lambda w: {"sessionId": "sess-1", "connectorId": w.connector},
    "CreateForm": lambda w: {"name": "form", "fields": [
        {"name": "reason", "type": "text", "config": {"options": [{"label": "A", "value": "a"}]}}]},
    "CreateSigningKey": lambda w: {"name": "key", "publicKey": "ssh-ed25519 AAAA",
                                   "algorithm": "ed25519"},
    "UpdateSigningKey": lambda w: {"id": w.signing_key, "terminationProtection": True},
    "CreateDataLabel": lambda w: {"name": "pii", "classifierType": "regex",
                                  "classifierData": "\\d+"},
    "CreateScenarioMonitor": lambda w: {"name": "m", "scenario": "ssh", "status": "active"},
}

# The lifecycle operations' valid bodies, from their catalog rows: what a
# scoping id, a sparse update and a Delete's extra field take.
SCOPES: dict[str, str] = {"listenerId": "lst-1", "sidecarId": "sdc-1", "resourceId": "res-1"}
SPARSE: dict[str, dict[str, Any]] = {
    "UpdateSidecar": {"hostname": "h2.example"}, "UpdateNativeUserV3": {"label": "l2"},
    "UpdateResourceAlias": {"alias": "alias-b"},
}
EXTRA: dict[str, dict[str, Any]] = {"DeleteBlockedUser": {"reason": "done"}}


def _lifecycle_body(op: Operation) -> Body:
    assert op.kind is not None
    kind = op.kind

    def body(w: Any) -> dict[str, Any]:
        if op.verb == Verb.LIST:  # one object to find, in the seeded scope where it needs one
            w.of(kind)
            scope = next(({s.field: SCOPES[s.field]} for s in op.scope
                          if op.scope_required and s.field in SCOPES), {})
            return {"limit": 10, **scope}
        if op.verb == Verb.UPDATE and op.style == UpdateStyle.REPLACE_ALL:
            assert op.wrap is not None
            create = VALID[BY_KIND[kind].create.name](w)
            return {op.wrap: {**create, "id": w.of(kind)}}
        if op.by == "connectorId":  # a connector AI provider, by its connector
            w.of(kind)
            return {"connectorId": w.connector}
        named = w.of(kind, deletable=op.verb == Verb.DELETE)
        return {"id": named, **SPARSE.get(op.name, {}), **EXTRA.get(op.name, {})}

    return body


VALID.update({op.name: _lifecycle_body(op) for op in LIFECYCLE})


# --- a served process ---------------------------------------------------------


class Served:
    """``govsync serve ARGS`` as a process, its output kept in ``stderr``."""

    def __init__(self, args: list[str], stderr: Path) -> None:
        self.stderr_path = stderr
        try:
            self.proc, self.base = serve(args, key=KEY, output=stderr)
        except RuntimeError as exc:
            raise AssertionError(str(exc)) from None
        self.port = int(self.base.rsplit(":", 1)[1])

    def stop(self, *, kill: bool = False) -> None:
        stop(self.proc, kill=kill)

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()
