"""Every operation of the catalog succeeds, and the objects it stores have the spec's shape."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from serverkit import SERVER_ID, TIMESTAMP, VALID, VIEWER, H, InProcess, World, make_app, path

from govsync.api.catalog import BY_NAME, OPERATIONS, SPEC
from govsync.api.kinds import KINDS
from govsync.server import Store


def test_every_catalog_operation_has_a_valid_body() -> None:
    assert set(VALID) == {op.name for op in OPERATIONS}


def _objects(client: InProcess) -> dict[str, list[dict[str, Any]]]:
    response = client.get("/_govsync/objects", headers=H)
    assert response.status_code == 200
    objects: dict[str, list[dict[str, Any]]] = response.json()
    return objects


def _check_timestamps(obj: Any) -> None:
    """Every timestamp field, at any depth, is RFC 3339 UTC with nanoseconds."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in ("createdAt", "updatedAt") or (key == "expireAt" and value is not None):
                assert isinstance(value, str) and re.match(TIMESTAMP, value), (key, value)
            else:
                _check_timestamps(value)
    elif isinstance(obj, list):
        for item in obj:
            _check_timestamps(item)


@pytest.mark.parametrize("name", [op.name for op in SPEC if not op.verb.reads])
def test_write_operation_stores_and_returns_the_object(
    name: str, client: InProcess, world: World
) -> None:
    op = BY_NAME[name]
    body = VALID[name](world)
    response = client.post(op.path, json=body, headers=H)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    result = response.json()
    if op.response_key:
        assert list(result) == [op.response_key]
        returned = result[op.response_key]
    else:
        returned = result
    id_ = returned[op.id_field]
    assert isinstance(id_, str) and id_
    given = (body.get("hook") or body.get("connectorAiProvider") or body).get(op.id_field)
    if given is not None and name != "UpdateConnectorAiProviderV2":
        assert id_ == given  # the client named the object (links, session, blocked user)
    else:
        assert re.match(SERVER_ID, id_), id_
    _check_timestamps(returned)

    # Stored under its id (a report answered {reportId} is stored {id, ...}).
    stored = [o for o in _objects(client)[op.kind or ""] if id_ in (o.get(op.id_field),
                                                                    o.get("id"))]
    assert len(stored) == 1
    _check_timestamps(stored[0])
    for key, value in returned.items():
        assert stored[0].get(key, stored[0].get("id")) == value
    if "createdAt" in stored[0]:
        assert re.match(TIMESTAMP, stored[0]["createdAt"])


def test_list_groups_returns_groups_and_metadata(client: InProcess, world: World) -> None:
    response = client.post(path("ListGroups"), json=VALID["ListGroups"](world), headers=H)
    assert response.status_code == 200
    result = response.json()
    assert [g["name"] for g in result["groups"]] == ["admins", "analysts"]
    assert result["listMetadata"] == {"after": "", "before": "", "count": 2, "nextCursor": ""}
    _check_timestamps(result)


def test_objects_lists_every_kind(client: InProcess) -> None:
    objects = _objects(client)
    assert set(objects) == {k.name for k in KINDS} | {"Resource", "Group", "User", "Log"}
    assert all(isinstance(v, list) for v in objects.values())
    assert [g["id"] for g in objects["Group"]] == ["grp-admins", "grp-analysts"]
    assert objects["Space"] == []


def test_tooling_endpoints_need_a_full_key(client: InProcess) -> None:
    for url in ("/_govsync/health", "/_govsync/objects"):
        assert client.get(url).status_code == 401
        assert client.get(url, headers={"X-API-KEY": "nope"}).json()["code"] == "unauthorized"
        forbidden = client.get(url, headers={"X-API-KEY": VIEWER})
        assert forbidden.status_code == 403 and forbidden.json()["code"] == "forbidden"
    assert client.get("/_govsync/health", headers=H).json() == {"status": "ok", "inFlight": 0}


# --- output shaping ---------------------------------------------------------


def call(client: InProcess, op: str, body: dict[str, Any], status: int = 200) -> Any:
    response = client.post(path(op), json=body, headers=H)
    assert response.status_code == status, response.text
    return response.json()


def test_connector_embeds_its_space(client: InProcess, world: World) -> None:
    space = call(client, "CreateSpace", {"name": "s"})["space"]
    connector = call(client, "CreateConnector", {"name": "abc", "spaceId": space["id"]})["connector"]
    assert connector["space"] == space and connector["spaceId"] == space["id"]
    bare = call(client, "CreateConnector", {"name": "abd"})["connector"]
    assert bare["spaceId"] is None and "space" not in bare
    satellite = call(client, "CreateSatellite", {"name": "s", "satelliteType": "ai",
                                                 "spaceId": space["id"]})["satellite"]
    assert satellite["space"] == space and satellite["satelliteType"] == "ai"


def test_server_filled_fields(client: InProcess, world: World) -> None:
    sidecar = call(client, "CreateSidecar", VALID["CreateSidecar"](world))["sidecar"]
    assert sidecar["deployed"] is False and sidecar["technology"] == "ssh"
    hook = call(client, "CreateHook", {"name": "h", "code": "c"})["hook"]
    assert hook["status"] == "draft"
    active = call(client, "CreateHook", {"name": "h", "code": "c", "status": "active"})["hook"]
    assert active["status"] == "active"
    log = call(client, "CreateIntegrationLog", {"name": "l", "logStoreA": {
        "bucketName": "b", "cloudIntegrationId": "c"}})["integration"]
    assert log["logStoreA"] == {"bucketName": "b", "cloudIntegrationId": "c", "bucketPrefix": "",
                                "region": "us-east-1"}
    ai = call(client, "CreateIntegrationAIProvider", VALID["CreateIntegrationAIProvider"](world))
    assert ai["integration"]["status"] == "connected"
    assert ai["integration"]["provider"] == "AI_PROVIDER_VENDORB_CHAT"


def test_secrets_are_neither_returned_nor_stored(tmp_path: Path) -> None:
    db = tmp_path / "server.db"  # --db: the objects written through to a file
    app, store = make_app(store=Store(db))
    with InProcess(app) as client:
        _secrets_are_neither_returned_nor_stored(client, World(client))
    store.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = conn.execute("SELECT body FROM objects").fetchall()
    assert rows and not any("SECRET-" in body for (body,) in rows)


def _secrets_are_neither_returned_nor_stored(client: InProcess, world: World) -> None:
    log = call(client, "CreateIntegrationLog", {"name": "d", "logStoreD": {
        "host": "h", "port": 443, "accessToken": "SECRET-logd"}})["integration"]
    assert log["logStoreD"] == {"host": "h", "port": 443}
    logb = call(client, "CreateIntegrationLog", VALID["CreateIntegrationLog"](world))["integration"]
    assert logb["logStoreB"] == {"site": "eu", "accountId": ""}
    mdm = call(client, "CreateIntegrationMDM", VALID["CreateIntegrationMDM"](world))["integration"]
    assert mdm["mdmB"] == {"clientId": "c", "apiUrl": "https://mdm.example"}
    ai = call(client, "CreateIntegrationAIProvider", VALID["CreateIntegrationAIProvider"](world))
    assert "apiKey" not in ai["integration"]
    everything = client.get("/_govsync/objects", headers=H).text
    assert "SECRET-" not in everything


def test_bi_a_keys_are_returned_under_their_output_names(client: InProcess, world: World) -> None:
    bi = call(client, "CreateBIIntegration", VALID["CreateBIIntegration"](world))["integration"]
    assert bi["biA"] == {"apiKey": "bi-key", "apiSecret": "bi-sec"}
    assert bi["linkedDbUserId"] == world.native_user and bi["sync"] is False
    none = call(client, "CreateBIIntegration", {"name": "c", "biC": {}})["integration"]
    assert none["linkedDbUserId"] is None and none["biC"] == {}


def test_input_only_fields_are_not_returned(client: InProcess, world: World) -> None:
    ddc = call(client, "CreateDataDiscoveryConfiguration",
               VALID["CreateDataDiscoveryConfiguration"](world))["dataDiscoveryConfiguration"]
    assert "deletionPolicy" not in ddc and ddc["path"] is None


def test_policy_owners_resolve_groups_and_users(client: InProcess) -> None:
    by_group = call(client, "CreatePolicy", {"name": "p", "code": "c", "groupName": "admins"})
    policy = by_group["policy"]
    assert policy["owners"] == [{"group": client.get("/_govsync/objects", headers=H)
                                 .json()["Group"][0]}]
    assert policy["version"] == 1 and policy["ast"] == ""
    assert "groupName" not in policy
    by_user = call(client, "CreatePolicy", {"name": "p", "code": "c",
                                            "userEmail": "ann@example.com"})["policy"]
    assert by_user["owners"][0]["user"]["id"] == "usr-ann"
    for owner in ({"groupName": "nobody"}, {"userEmail": "nobody@example.com"}):
        error = call(client, "CreatePolicy", {"name": "p", "code": "c", **owner}, 404)
        assert error["code"] == "not_found"
    assert len(client.get("/_govsync/objects", headers=H).json()["Policy"]) == 2


def test_policy_suspension_fields(client: InProcess, world: World) -> None:
    suspension = call(client, "CreatePolicySuspension",
                      VALID["CreatePolicySuspension"](world))["policySuspension"]
    assert suspension["identityType"] == "user"
    for field in ("orgId", "createdBy", "requestId", "suspensionType"):
        assert isinstance(suspension[field], str) and suspension[field]
    created = datetime.fromisoformat(suspension["createdAt"][:26] + "+00:00")
    expire = datetime.fromisoformat(suspension["expireAt"][:26] + "+00:00")
    assert expire - created == timedelta(minutes=30)
    assert created.tzinfo == UTC


# The fields of the service's own messages (its SDK's core.v1): what a read answers.
SDK_FIELDS = {
    "PolicySuspension": {"id", "policyId", "orgId", "identityType", "identityId", "createdBy",
                         "expireAt", "createdAt", "updatedAt", "requestId", "suspensionType",
                         "inputCondition", "reason"},
    "PolicyReport": {"id", "policyCode", "evaluationStart", "createdAt", "logQuery", "policyId",
                     "createdBy", "status"},
    "LogQueryMetadata": {"id", "name", "createdBy", "query"},
}


def test_suspensions_reports_and_queries_are_answered_as_the_services_messages(
        client: InProcess, world: World) -> None:
    """Issue 43, finding 12: no field the service's message lacks (a strict decoder fails
    on one), none it has missing."""
    suspension = call(client, "CreatePolicySuspension",
                      VALID["CreatePolicySuspension"](world))["policySuspension"]
    assert set(suspension) == SDK_FIELDS["PolicySuspension"]
    assert call(client, "GetPolicySuspension", {"id": suspension["id"]}) == {
        "policySuspension": suspension}

    body = {**VALID["CreatePolicyReport"](world), "evaluationWindow": "604800s"}
    made = call(client, "CreatePolicyReport", body)
    report = call(client, "GetPolicyReport", {"id": made["reportId"]})["report"]
    assert set(report) == SDK_FIELDS["PolicyReport"]
    assert (report["id"], report["policyId"], report["status"]) == (
        made["reportId"], body["policyId"], "running")
    created = datetime.fromisoformat(report["createdAt"][:26] + "+00:00")
    start = datetime.fromisoformat(report["evaluationStart"][:26] + "+00:00")
    assert created - start == timedelta(days=7)
    assert report["createdBy"]

    query = call(client, "CreateLogQuery", VALID["CreateLogQuery"](world))
    read = call(client, "GetLogQuery", {"id": query["id"]})["metadata"]
    assert set(read) == SDK_FIELDS["LogQueryMetadata"] and read["createdBy"]
    updated = call(client, "UpdateLogQueryV2", {"metadata": {**read, "name": "renamed"}})
    assert updated == {"metadata": {**read, "name": "renamed"}}


def test_a_bi_integration_has_no_update_time_and_a_signing_key_has_its_user(
        client: InProcess, world: World) -> None:
    """api-spec.md's BI integration has createdAt only, its signing key a userId (as the
    service's messages)."""
    bi = call(client, "CreateBIIntegration", VALID["CreateBIIntegration"](world))["integration"]
    assert "createdAt" in bi and "updatedAt" not in bi
    key = call(client, "CreateSigningKey", VALID["CreateSigningKey"](world))["signingKey"]
    assert key["userId"]
    updated = call(client, "UpdateSigningKey", {"id": key["id"], "terminationProtection": True})
    assert updated["signingKey"]["userId"] == key["userId"]


def test_policy_suspension_ending_after_9999_is_invalid(client: InProcess, world: World) -> None:
    body = {**VALID["CreatePolicySuspension"](world), "expirationMinutes": 10**12}
    error = call(client, "CreatePolicySuspension", body, 400)
    assert error["details"]["fieldViolations"][0]["field"] == "expirationMinutes"


def test_top_level_responses(client: InProcess, world: World) -> None:
    report = call(client, "CreatePolicyReport", VALID["CreatePolicyReport"](world))
    assert list(report) == ["reportId"]
    assert list(call(client, "CreateLogQuery", VALID["CreateLogQuery"](world))) == ["id"]
    assert list(call(client, "CreateScenarioMonitor", VALID["CreateScenarioMonitor"](world))) == ["id"]
    assert call(client, "CreateBlockedUser", {"id": "usr-ann"}) == {"id": "usr-ann"}


def test_resource_alias_is_appended_to_the_resource(client: InProcess) -> None:
    alias = call(client, "CreateResourceAlias", {"resourceId": "res-1", "alias": "orders"})
    assert set(alias) == {"id", "alias"} and alias["alias"] == "orders"
    call(client, "CreateResourceAlias", {"resourceId": "res-1", "alias": "orders"})
    resource = client.get("/_govsync/objects", headers=H).json()["Resource"][0]
    assert resource["aliases"] == ["old-alias", "orders"]
    aliases = client.get("/_govsync/objects", headers=H).json()["ResourceAlias"]
    assert len(aliases) == 2


def test_session_termination_and_blocked_user_are_keyed_by_the_client_id(
    client: InProcess, world: World
) -> None:
    body = VALID["CreateSessionTermination"](world)
    first = call(client, "CreateSessionTermination", body)["sessionShutdown"]
    assert set(first) == {"sessionId", "connectorId", "createdAt"}
    again = call(client, "CreateSessionTermination", body)["sessionShutdown"]
    assert again == first
    call(client, "CreateBlockedUser", {"id": "usr-ann"})
    call(client, "CreateBlockedUser", {"id": "usr-ann"})
    objects = client.get("/_govsync/objects", headers=H).json()
    assert [o["sessionId"] for o in objects["SessionTermination"]] == ["sess-1"]
    assert [o["id"] for o in objects["BlockedUser"]] == ["usr-ann"]


def test_update_hook_replaces_every_field(client: InProcess) -> None:
    hook = call(client, "CreateHook", {"name": "h1", "description": "d", "code": "c",
                                       "timeoutMs": 100, "status": "active",
                                       "allowlistedNetworkHosts": ["a.example"]})["hook"]
    updated = call(client, "UpdateHook", {"hook": {
        "id": hook["id"], "name": "h2", "code": "c2",
        "createdAt": "2001-01-01T00:00:00Z", "updatedAt": "2001-01-01T00:00:00Z"}})["hook"]
    assert updated["name"] == "h2" and updated["code"] == "c2" and updated["description"] == ""
    assert "timeoutMs" not in updated and updated["allowlistedNetworkHosts"] == []
    assert updated["status"] == "active"  # not given: kept
    assert updated["createdAt"] == hook["createdAt"]
    assert updated["updatedAt"] > hook["updatedAt"]
    # api-spec.md's UpdateHook carries no status: one sent (a hook as read) is ignored.
    drafted = call(client, "UpdateHook", {"hook": {"id": hook["id"], "name": "h2", "code": "c",
                                                   "status": "draft"}})["hook"]
    assert drafted["status"] == "active" and drafted["code"] == "c"
    stored = client.get("/_govsync/objects", headers=H).json()["Hook"]
    assert stored == [drafted]


def test_update_signing_key_and_links(client: InProcess, world: World) -> None:
    key = call(client, "UpdateSigningKey", {"id": world.signing_key,
                                            "terminationProtection": True})["signingKey"]
    assert key["terminationProtection"] is True and key["name"] == "world-key"
    link = call(client, "UpdateConnectorListenerLink", {"id": "cll-1",
                                                        "terminationProtection": True})
    assert link["connectorListenerLink"]["terminationProtection"] is True
    assert link["connectorListenerLink"]["listener"]["id"] == "lst-1"
    kept = call(client, "UpdateConnectorListenerLink", {"id": "cll-1",
                                                        "terminationProtection": None})
    assert kept["connectorListenerLink"]["terminationProtection"] is True
    srl = call(client, "UpdateSidecarResourceLink", {"id": "srl-1"})["link"]
    assert srl["terminationProtection"] is False and srl["port"] == 22


def test_connector_ai_provider_is_upserted_by_connector(client: InProcess, world: World) -> None:
    body = VALID["UpdateConnectorAiProviderV2"](world)
    first = call(client, "UpdateConnectorAiProviderV2", body)["connectorAiProvider"]
    body["connectorAiProvider"]["config"] = {"providerG": {}}
    second = call(client, "UpdateConnectorAiProviderV2", body)["connectorAiProvider"]
    assert second["id"] == first["id"] and second["createdAt"] == first["createdAt"]
    assert second["config"] == {"providerG": {}}
    stored = client.get("/_govsync/objects", headers=H).json()["ConnectorAIProvider"]
    assert stored == [second]
