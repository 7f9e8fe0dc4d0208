"""The order of checks and every error the server answers: 400, 401, 403, 404, 500, 504."""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

import pytest
from serverkit import KEY, VALID, VIEWER, FakeWorld, H, InProcess, World, make_app, path

from govsync.api.catalog import BY_NAME

DELETE = object()
NATIVE = "credentials.cloudIamA|cloudIamARole|cloudIamB|cloudIamC|hook|unauthenticated"
LOGS = "logStoreA|logStoreB|logStoreC|logStoreD"
PROVIDERS = "connectorAiProvider.config.providerA|providerB|providerC|providerD|providerE|providerF|providerG"


def mutate(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    *parents, last = dotted.split(".")
    node: Any = body
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if value is DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return body


# (operation, dotted path in the valid body, new value or DELETE, the field reported)
CASES: list[tuple[str, str, Any, str]] = [
    ("CreateConnector", "name", "ab", "name"),
    ("CreateConnector", "name", "a" * 257, "name"),
    ("CreateConnector", "name", "Bad_Name", "name"),
    ("CreateConnector", "name", DELETE, "name"),
    ("CreateConnector", "terminationProtection", "yes", "terminationProtection"),
    ("CreateConnector", "spaceId", 5, "spaceId"),
    ("CreateConnector", "colour", "red", "colour"),
    ("CreateSidecar", "name", "ab", "name"),
    ("CreateSidecar", "name", "a" * 64, "name"),
    ("CreateSidecar", "name", "UPPER", "name"),
    ("CreateSidecar", "hostname", "", "hostname"),
    ("CreateSidecar", "technology", DELETE, "technology"),
    ("CreateSatellite", "satelliteType", "bogus", "satelliteType"),
    ("CreateSatellite", "name", "", "name"),
    ("CreateSpace", "name", "", "name"),
    ("CreateSpace", "description", 5, "description"),
    ("CreateSpace", "terminationProtection", 1, "terminationProtection"),
    ("CreateHook", "name", "1abc", "name"),
    ("CreateHook", "name", "", "name"),
    ("CreateHook", "name", "has space", "name"),
    ("CreateHook", "code", "", "code"),
    ("CreateHook", "timeoutMs", 60001, "timeoutMs"),
    ("CreateHook", "timeoutMs", "100", "timeoutMs"),
    ("CreateHook", "allowlistedEnvironmentVariables", ["OK", "BAD-VAR"],
     "allowlistedEnvironmentVariables.1"),
    ("CreateHook", "allowlistedEnvironmentVariables", [""], "allowlistedEnvironmentVariables.0"),
    ("CreateHook", "allowlistedNetworkHosts", [""], "allowlistedNetworkHosts.0"),
    ("CreateHook", "status", "live", "status"),
    ("UpdateHook", "hook.createdAt", "10000-01-01T00:00:00Z", "hook.createdAt"),
    ("UpdateHook", "hook.updatedAt", "0000-12-31T00:00:00Z", "hook.updatedAt"),
    ("UpdateHook", "hook.createdAt", "2023-02-29T00:00:00Z", "hook.createdAt"),
    ("UpdateHook", "hook.updatedAt", "2024-01-01T00:00:00+02:00", "hook.updatedAt"),
    ("UpdateHook", "hook.timeoutMs", 60001, "hook.timeoutMs"),
    ("UpdateHook", "hook.name", "a b", "hook.name"),
    ("UpdateHook", "hook.id", "", "hook.id"),
    ("UpdateHook", "hook", DELETE, "hook"),
    ("CreatePolicyDataLoader", "workerSchedule", "* * * *", "workerSchedule"),
    ("CreatePolicyDataLoader", "workerRuntime", "python2", "workerRuntime"),
    ("CreatePolicyDataLoader", "name", "", "name"),
    ("CreatePolicyDataLoader", "key", "", "key"),
    ("CreatePolicyDataLoader", "workerCode", "", "workerCode"),
    ("CreatePolicyDataLoader", "status", "paused", "status"),
    ("CreateNativeUserV3", "credentials", {}, NATIVE),
    ("CreateNativeUserV3", "credentials.cloudIamB", {"username": "b"}, NATIVE),
    ("CreateNativeUserV3", "credentials.cloudIamA.username", "", "credentials.cloudIamA.username"),
    ("CreateNativeUserV3", "credentials.basic", {"username": "b"}, "credentials.basic"),
    ("CreateNativeUserV3", "resourceId", "", "resourceId"),
    ("CreateIntegrationLog", "logStoreB", DELETE, LOGS),
    ("CreateIntegrationLog", "logStoreC", {"cloudIntegrationId": "c", "bucketName": "b"}, LOGS),
    ("CreateIntegrationLog", "logStoreB.apiKey", ["SECRET-VALUE-XYZ"], "logStoreB.apiKey"),
    ("CreateIntegrationLog", "logStoreB.apiKey", "", "logStoreB.apiKey"),
    ("CreateIntegrationLog", "name", "", "name"),
    ("CreateBIIntegration", "biA", DELETE, "biA|biB|biC"),
    ("CreateBIIntegration", "biC", {}, "biA|biB|biC"),
    ("CreateBIIntegration", "biA.biAApiSecret", DELETE, "biA.biAApiSecret"),
    ("CreateIntegrationMDM", "mdmB", DELETE, "mdmA|mdmB|mdmC"),
    ("CreateIntegrationMDM", "mdmA", {"apiKey": "k", "apiUrl": "u"}, "mdmA|mdmB|mdmC"),
    ("CreateIntegrationMDM", "mdmB.apiUrl", "", "mdmB.apiUrl"),
    ("CreateIntegrationAIProvider", "provider", "AI_PROVIDER_X", "provider"),
    ("CreateIntegrationAIProvider", "apiKey", "", "apiKey"),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider.config", {}, PROVIDERS),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider.config.providerB", {}, PROVIDERS),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider.extra", 1, "connectorAiProvider.extra"),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider.connectorId", "",
     "connectorAiProvider.connectorId"),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider", DELETE, "connectorAiProvider"),
    ("CreatePolicy", "groupName", DELETE, "groupName|userEmail"),
    ("CreatePolicy", "userEmail", "ann@example.com", "groupName|userEmail"),
    ("CreatePolicy", "groupName", "", "groupName"),
    ("CreatePolicy", "name", "", "name"),
    ("CreatePolicy", "code", "", "code"),
    ("CreatePolicy", "notification", "some", "notification"),
    ("CreatePolicy", "status", "on", "status"),
    # A 64-bit integer may be its decimal digits as a string (proto3's JSON form), and
    # nothing else: no other spelling of a number, and within its type's range.
    ("CreatePolicySuspension", "expirationMinutes", "0", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", "010", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", "1e3", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", "+10", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", " 10", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", "10\n", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", "-1", "expirationMinutes"),
    ("CreatePolicySuspension", "expirationMinutes", str(2**64), "expirationMinutes"),
    ("CreateLogQuery", "query.relativeTime", str(2**63), "query.relativeTime"),
    ("CreateLogQuery", "query.relativeTime", "3600.0", "query.relativeTime"),
    ("CreatePolicySuspension", "expirationMinutes", 0, "expirationMinutes"),
    ("CreatePolicySuspension", "policyId", "", "policyId"),
    ("CreatePolicyReport", "policyId", "", "policyId"),
    ("CreateSigningKey", "algorithm", "rsa", "algorithm"),
    ("CreateSigningKey", "name", "", "name"),
    ("CreateSigningKey", "publicKey", "", "publicKey"),
    ("UpdateSigningKey", "terminationProtection", None, "terminationProtection"),
    ("CreateDataLabel", "classifierType", "ml", "classifierType"),
    ("CreateDataLabel", "classifierData", "", "classifierData"),
    ("CreateScenarioMonitor", "status", "paused", "status"),
    ("CreateScenarioMonitor", "name", "", "name"),
    ("CreateDataDiscoveryConfiguration", "schedule", "", "schedule"),
    ("CreateDataDiscoveryConfiguration", "deletionPolicy", "purge", "deletionPolicy"),
    ("CreateDataDiscoveryConfiguration", "nativeUserId", "", "nativeUserId"),
    ("CreateForm", "fields.0.name", "", "fields.0.name"),
    ("CreateForm", "fields.0.config.options.0.label", 3, "fields.0.config.options.0.label"),
    ("CreateForm", "name", "", "name"),
    ("CreateLogQuery", "query.relativeTime", "1h", "query.relativeTime"),
    ("CreateLogQuery", "query", DELETE, "query"),
    ("CreateSessionTermination", "sessionId", "", "sessionId"),
    ("CreateResourceAlias", "alias", "", "alias"),
    ("UpdateConnectorListenerLink", "id", "", "id"),
    ("UpdateConnectorListenerLink", "terminationProtection", "true", "terminationProtection"),
    ("UpdateSidecarResourceLink", "port", 1, "port"),
    ("ListGroups", "limit", 0, "limit"),
    ("ListGroups", "limit", 501, "limit"),
    ("ListGroups", "limit", 1.5, "limit"),
    ("ListGroups", "order", "size", "order"),
    ("ListGroups", "searchFields", ["colour"], "searchFields.0"),
    ("ListGroups", "filter", {"field": {"key": "name", "value": {"value": 1}}},
     "filter.field.value.value"),
    ("ListGroups", "filter", {"field": {"key": "name", "value": {"type": "number", "value": ""}}},
     "filter.field.value.value"),
    # Integers are written without a fraction: 111.0 is refused everywhere.
    ("CreateHook", "timeoutMs", 1000.0, "timeoutMs"),
    ("UpdateHook", "hook.timeoutMs", 2000.0, "hook.timeoutMs"),
    ("CreatePolicySuspension", "expirationMinutes", 30.0, "expirationMinutes"),
    ("ListGroups", "limit", 10.0, "limit"),
    ("CreateLogQuery", "query.relativeTime", 3600.0, "query.relativeTime"),
    # Timestamps: RFC 3339 in UTC, a day that exists.
    ("UpdateHook", "hook.updatedAt", "", "hook.updatedAt"),
    ("UpdateHook", "hook.updatedAt", "2024-01-01T00:00:00+01:00", "hook.updatedAt"),
    ("UpdateHook", "hook.createdAt", "2023-02-29T00:00:00Z", "hook.createdAt"),
    ("UpdateHook", "hook.createdAt", "0000-01-01T00:00:00Z", "hook.createdAt"),
    # Exactly one variant: present and not null.
    ("CreateIntegrationLog", "logStoreB", None, LOGS),
    ("CreateBlockedUser", "id", "", "id"),
    ("CreatePermission", "name", "", "name"),
    ("CreatePermission", "terminationProtection", "no", "terminationProtection"),
]


@pytest.fixture(scope="module")
def shared() -> Any:
    app, _ = make_app()
    with InProcess(app) as client:
        yield client


def _connect_fields(body: dict[str, Any]) -> list[str]:
    assert set(body) == {"message", "details"}
    assert all(d["type"] == "core.v1.FieldViolation" for d in body["details"])
    return [d["value"] for d in body["details"]]


@pytest.mark.parametrize(("op", "where", "value", "field"), CASES,
                         ids=[f"{c[0]}:{c[1]}={str(c[2])[:12]}" for c in CASES])
def test_one_violation_names_its_field(shared: InProcess, op: str, where: str, value: Any,
                                       field: str) -> None:
    valid = VALID[op](FakeWorld())
    body = mutate(valid, where, value)
    response = shared.post(path(op), json=body, headers=H)
    assert response.status_code == 400, response.text
    result = response.json()
    if BY_NAME[op].connect:
        assert _connect_fields(result) == [field]
    else:
        assert set(result) == {"code", "message", "details"}
        assert result["code"] == "invalid_request"
        violations = result["details"]["fieldViolations"]
        assert [v["field"] for v in violations] == [field]
        assert violations[0]["description"]
    assert "SECRET-VALUE-XYZ" not in response.text
    if isinstance(value, str) and len(value) >= 4:
        assert value not in response.text  # submitted values are never echoed


def test_several_violations_are_each_reported(shared: InProcess) -> None:
    response = shared.post(path("CreateHook"), headers=H, json={
        "name": "9", "code": "", "timeoutMs": 70000, "unknown": True})
    fields = [v["field"] for v in response.json()["details"]["fieldViolations"]]
    assert sorted(fields) == ["code", "name", "timeoutMs", "unknown"]


# --- authentication, authorization, routing ---------------------------------


def test_missing_and_unknown_keys_are_401(shared: InProcess) -> None:
    for headers in ({}, {"X-API-KEY": ""}, {"X-API-KEY": "wrong"}):
        response = shared.post(path("CreateSpace"), json={"name": "s"}, headers=headers)
        assert response.status_code == 401
        assert response.json() == {"code": "unauthorized", "message": response.json()["message"]}


def test_401_comes_before_404_and_400(shared: InProcess) -> None:
    assert shared.post("/core.v1.NoService/Nothing", content=b"[").status_code == 401
    assert shared.post(path("CreateSpace"), content=b"[").status_code == 401


def test_unknown_operation_and_wrong_method_are_404(shared: InProcess) -> None:
    for method, url in (("POST", "/core.v1.SpaceService/EraseSpace"), ("POST", "/"),
                        ("GET", path("CreateSpace")), ("PUT", path("CreateSpace")),
                        ("POST", "/_govsync/health")):
        response = shared.request(method, url, json={}, headers=H)
        assert response.status_code == 404, (method, url)
        assert response.json()["code"] == "not_found"


def test_viewer_key_may_list_groups_only(shared: InProcess) -> None:
    viewer = {"X-API-KEY": VIEWER}
    assert shared.post(path("ListGroups"), json={}, headers=viewer).status_code == 200
    response = shared.post(path("CreateSpace"), json={"name": "s"}, headers=viewer)
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    # 403 comes before 400: the viewer learns nothing about the body.
    assert shared.post(path("CreateSpace"), content=b"[", headers=viewer).status_code == 403


def test_without_api_keys_any_non_empty_key_is_accepted() -> None:
    app, _ = make_app(api_keys=None, viewer_keys=[VIEWER])
    with InProcess(app) as client:
        assert client.post(path("CreateSpace"), json={"name": "s"},
                           headers={"X-API-KEY": "anything"}).status_code == 200
        assert client.post(path("CreateSpace"), json={"name": "s"}).status_code == 401
        assert client.post(path("CreateSpace"), json={"name": "s"},
                           headers={"X-API-KEY": VIEWER}).status_code == 403


# --- body checks ------------------------------------------------------------


@pytest.mark.parametrize(("content", "content_type"), [
    (b"{not json", "application/json"),
    (b"", "application/json"),
    (b'{"name": NaN}', "application/json"),
    (b"[1, 2]", "application/json"),
    (b'"a string"', "application/json"),
    (b"null", "application/json"),
    (b'{"name": "s"}', "text/plain"),
    (b'{"name": "s"}', "application/x-www-form-urlencoded"),
    (b'{"name": "s"}', ""),
    ('{"name": "\u00e9"}'.encode("latin-1"), "application/json"),
    (b"\xef\xbb\xbf" + b'{"name": "s"}', "application/json"),
])
def test_bodies_that_are_not_json_objects_are_400(
    shared: InProcess, content: bytes, content_type: str
) -> None:
    headers = {**H, "Content-Type": content_type} if content_type else H
    response = shared.post(path("CreateSpace"), content=content, headers=headers)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"]["fieldViolations"][0]["field"] == ""


def test_charset_parameter_is_accepted(shared: InProcess) -> None:
    response = shared.post(path("CreateSpace"), content=b'{"name": "s"}',
                           headers={**H, "Content-Type": "application/json; charset=utf-8"})
    assert response.status_code == 200


def test_lone_surrogates_do_not_break_the_server(client: InProcess, world: World) -> None:
    json_h = {**H, "Content-Type": "application/json"}
    response = client.post(path("CreateSpace"), content=b'{"name": "\\ud800x"}', headers=json_h)
    assert response.status_code == 400
    assert response.json()["details"]["fieldViolations"][0]["field"] == "name"
    # Free-form objects are stored as sent, surrogates included.
    body = json.dumps({"connectorAiProvider": {"connectorId": world.connector,
                                               "config": {"providerA": {"k": "\ud800"}}}})
    stored = client.post(path("UpdateConnectorAiProviderV2"), content=body.encode(), headers=json_h)
    assert stored.status_code == 200
    assert stored.json()["connectorAiProvider"]["config"] == {"providerA": {"k": "\ud800"}}
    assert client.get("/_govsync/objects", headers=H).status_code == 200


def test_body_over_one_mib_is_400(shared: InProcess) -> None:
    big = json.dumps({"name": "s", "description": "x" * (1024 * 1024)}).encode()
    response = shared.post(path("CreateSpace"), content=big,
                           headers={**H, "Content-Type": "application/json"})
    assert response.status_code == 400 and "1 MiB" in response.json()["message"]

    async def chunks() -> Any:  # no Content-Length: the bytes are counted
        for _ in range(20):
            yield b" " * 65536
        yield b'{"name": "s"}'

    streamed = shared.post(path("CreateSpace"), content=chunks(),
                           headers={**H, "Content-Type": "application/json"})
    assert streamed.status_code == 400 and "1 MiB" in streamed.json()["message"]
    just_under = b'{"name": "s"}' + b" " * (1024 * 1024 - 13)
    assert shared.post(path("CreateSpace"), content=just_under,
                       headers={**H, "Content-Type": "application/json"}).status_code == 200


# --- references that must exist -----------------------------------------------


@pytest.mark.parametrize(("op", "where", "message"), [
    ("CreateConnector", "spaceId", "spaceId"),
    ("CreateSatellite", "spaceId", "spaceId"),
    ("UpdateConnectorAiProviderV2", "connectorAiProvider.connectorId", "connectorId"),
    ("CreateSessionTermination", "connectorId", "connectorId"),
    ("CreateResourceAlias", "resourceId", "resourceId"),
    ("CreateNativeUserV3", "resourceId", "resourceId"),
    ("CreateDataDiscoveryConfiguration", "nativeUserId", "nativeUserId"),
    ("CreateDataDiscoveryConfiguration", "resourceId", "resourceId"),
    ("CreatePolicySuspension", "policyId", "policyId"),
    ("CreatePolicyReport", "policyId", "policyId"),
    ("CreateBIIntegration", "linkedDbUserId", "linkedDbUserId"),
    ("CreateBlockedUser", "id", "id"),
    ("UpdateHook", "hook.id", "hook.id"),
    ("UpdateSigningKey", "id", "id"),
    ("UpdateConnectorListenerLink", "id", "id"),
    ("UpdateSidecarResourceLink", "id", "id"),
])
def test_unknown_ids_are_404_and_store_nothing(
    client: InProcess, world: World, op: str, where: str, message: str
) -> None:
    body = mutate(VALID[op](world), where, "does-not-exist")
    before = client.get("/_govsync/objects", headers=H).json()
    response = client.post(path(op), json=body, headers=H)
    assert response.status_code == 404, response.text
    assert response.json()["code"] == "not_found" and message in response.json()["message"]
    assert "does-not-exist" not in response.text
    assert client.get("/_govsync/objects", headers=H).json() == before


# --- CreatePermission: the Connect protocol --------------------------------------


def test_create_permission_error_shape(client: InProcess) -> None:
    url = path("CreatePermission")
    unauthorized = client.post(url, json={"name": "p"})
    assert unauthorized.status_code == 401
    assert unauthorized.json() == {"message": unauthorized.json()["message"], "details": [
        {"type": "core.v1.ErrorCode", "value": "unauthorized", "debug": {}}]}
    forbidden = client.post(url, json={"name": "p"}, headers={"X-API-KEY": VIEWER})
    assert forbidden.status_code == 403
    assert forbidden.json()["details"][0]["value"] == "forbidden"
    invalid = client.post(url, json={"name": "", "x": 1}, headers=H)
    assert invalid.status_code == 400
    assert sorted(_connect_fields(invalid.json())) == ["name", "x"]
    assert all(d["debug"]["description"] for d in invalid.json()["details"])
    not_json = client.post(url, content=b"[", headers={**H, "Content-Type": "application/json"})
    assert _connect_fields(not_json.json()) == [""]


@pytest.mark.parametrize(("headers", "status", "field"), [
    ({"Connect-Protocol-Version": "1"}, 200, None),
    ({"Connect-Protocol-Version": "2"}, 400, "Connect-Protocol-Version"),
    ({"Connect-Protocol-Version": ""}, 400, "Connect-Protocol-Version"),
    ({"Connect-Timeout-Ms": "1500"}, 200, None),
    ({"Connect-Timeout-Ms": "9999999999"}, 200, None),
    ({"Connect-Timeout-Ms": "0"}, 400, "Connect-Timeout-Ms"),
    ({"Connect-Timeout-Ms": "0150"}, 400, "Connect-Timeout-Ms"),
    ({"Connect-Timeout-Ms": "-5"}, 400, "Connect-Timeout-Ms"),
    ({"Connect-Timeout-Ms": "12345678901"}, 400, "Connect-Timeout-Ms"),
    ({"Connect-Timeout-Ms": "1.5"}, 400, "Connect-Timeout-Ms"),
    ({"Connect-Timeout-Ms": "soon"}, 400, "Connect-Timeout-Ms"),
])
def test_connect_headers(client: InProcess, headers: dict[str, str], status: int,
                         field: str | None) -> None:
    response = client.post(path("CreatePermission"), json={"name": "p"}, headers={**H, **headers})
    assert response.status_code == status, response.text
    if field:
        assert _connect_fields(response.json()) == [field]
        assert client.get("/_govsync/objects", headers=H).json()["Permission"] == []
    else:
        assert response.json()["permission"]["name"] == "p"


def test_connect_headers_are_ignored_elsewhere(client: InProcess) -> None:
    response = client.post(path("CreateSpace"), json={"name": "s"},
                           headers={**H, "Connect-Protocol-Version": "7"})
    assert response.status_code == 200


def test_deadline_shorter_than_latency_is_504_and_stores_nothing() -> None:
    app, store = make_app(latency_ms=1000)
    with InProcess(app) as client:
        started = time.monotonic()
        response = client.post(path("CreatePermission"), json={"name": "p"},
                               headers={**H, "Connect-Timeout-Ms": "20"})
        elapsed = time.monotonic() - started
        assert response.status_code == 504
        assert response.json()["details"] == [
            {"type": "core.v1.ErrorCode", "value": "deadline_exceeded", "debug": {}}]
        assert 0.015 <= elapsed < 0.9  # answered at the deadline, not after the latency
        assert store.list("Permission") == []
        ok = client.post(path("CreatePermission"), json={"name": "p"},
                         headers={**H, "Connect-Timeout-Ms": "5000"})  # waits 1 s
        assert ok.status_code == 200 and len(store.list("Permission")) == 1


def test_latency_delays_every_answer() -> None:
    app, _ = make_app(latency_ms=60)
    with InProcess(app) as client:
        for body, headers, status in (({"name": "s"}, H, 200), ({}, H, 400), ({}, {}, 401)):
            started = time.monotonic()
            response = client.post(path("CreateSpace"), json=body, headers=headers)
            assert response.status_code == status
            assert time.monotonic() - started >= 0.055


# --- 500 and fault injection in-process ----------------------------------------


def test_unexpected_errors_are_500_without_a_trace(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = make_app()
    server = app.state.server

    def explode(*args: Any) -> Any:
        raise RuntimeError("boom: secret internals")

    monkeypatch.setattr(server.engine, "perform", explode)
    with InProcess(app) as client:
        plain = client.post(path("CreateSpace"), json={"name": "s"}, headers=H)
        assert plain.status_code == 500
        assert plain.json() == {"code": "internal_error", "message": plain.json()["message"]}
        assert "boom" not in plain.text and "Traceback" not in plain.text
        connect = client.post(path("CreatePermission"), json={"name": "p"}, headers=H)
        assert connect.status_code == 500
        assert connect.json()["details"][0]["value"] == "internal_error"
    assert "boom" in caplog.text  # logged on the server side


def _rng_for(branches: list[str]) -> random.Random:
    """A seeded rng whose draws give these fault branches at fault_rate 1.0."""
    for seed in range(10_000):
        rng = random.Random(seed)
        if all(("error" if (rng.random(), rng.random())[1] < 0.5 else "drop") == b
               for b in branches):
            return random.Random(seed)
    raise AssertionError("no seed")


def test_fault_error_stores_nothing_and_drop_stores_then_raises() -> None:
    app, store = make_app(fault_rate=1.0, rng=_rng_for(["error", "drop"]))
    with InProcess(app) as client:
        first = client.post(path("CreateSpace"), json={"name": "one"}, headers=H)
        assert first.status_code == 500 and first.json()["code"] == "internal_error"
        assert store.list("Space") == []
        with pytest.raises(ConnectionResetError):
            client.post(path("CreateSpace"), json={"name": "two"}, headers=H)
        assert [s["name"] for s in store.list("Space")] == ["two"]
        # Reads and invalid requests are never faulted.
        assert client.post(path("ListGroups"), json={}, headers=H).status_code == 200
        assert client.post(path("CreateSpace"), json={}, headers=H).status_code == 400


def test_fault_rate_zero_never_fails() -> None:
    app, store = make_app(fault_rate=0.0)
    with InProcess(app) as client:
        for i in range(50):
            assert client.post(path("CreateSpace"), json={"name": f"s{i}"},
                               headers=H).status_code == 200
    assert store.count("Space") == 50


def test_key_is_checked_exactly(shared: InProcess) -> None:
    assert shared.post(path("CreateSpace"), json={"name": "s"},
                       headers={"X-API-KEY": KEY + " "}).status_code == 401
