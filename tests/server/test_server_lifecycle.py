"""The reads, updates and deletes of api-lifecycle.md, served from the catalog's rows.

One parametrised test walks the table of kinds: create an object, Get it,
find it in its List, change it with its update, delete it (a protected one
only after its protection is turned off).  The rest: paging, search and
filter, scopes, the viewer key, unknown ids, secrets, replace-all and sparse
semantics, refused deletes, faults, and ``--operations spec``.
"""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from serverkit import KEY, VALID, VIEWER, H, InProcess, World, make_app, path

from govsync.api.catalog import BY_NAME, LIFECYCLE, UpdateStyle, Verb
from govsync.api.kinds import BY_KIND, KINDS, Kind
from govsync.server import Operations

# One field each updatable kind's test changes, and the value it sets.
CHANGES: dict[str, tuple[str, Any]] = {
    "Space": ("description", "changed"),
    "Connector": ("name", "renamed-connector"),
    "Satellite": ("name", "renamed-satellite"),
    "Sidecar": ("hostname", "other.internal"),
    "ConnectorListenerLink": ("terminationProtection", False),
    "SidecarResourceLink": ("terminationProtection", False),
    "ResourceAlias": ("alias", "alias-b"),
    "NativeUser": ("label", "changed"),
    "DataDiscoveryConfiguration": ("schedule", "30 * * * *"),
    "Policy": ("code", "deny"),
    "PolicyDataLoader": ("description", "changed"),
    "Hook": ("description", "changed"),
    "Permission": ("description", "changed"),
    "ConnectorAIProvider": ("config", {"providerB": {"model": "m-2"}}),
    "SigningKey": ("terminationProtection", False),
    "DataLabel": ("classifierData", "[a-z]+"),
    "LogQuery": ("name", "renamed-query"),
    "Form": ("description", "changed"),
    "ScenarioMonitor": ("scenario", "http"),
}
# What a read-modify-write adds to the object as read: a policy's owner is
# written by name (the object read carries it as ``owners``).
ADDED: dict[str, dict[str, Any]] = {"Policy": {"groupName": "admins"}}

LIFECYCLE_KINDS = [k.name for k in KINDS if k.get or k.list or k.update or k.delete]


def call(client: InProcess, op: str, body: dict[str, Any], key: str = KEY) -> httpx.Response:
    return client.post(path(op), json=body, headers={"X-API-KEY": key})


def ok(client: InProcess, op: str, body: dict[str, Any]) -> dict[str, Any]:
    response = call(client, op, body)
    assert response.status_code == 200, (op, response.text)
    answer: dict[str, Any] = response.json()
    return answer


def created(client: InProcess, world: World, kind: Kind) -> dict[str, Any]:
    """The object a kind's create (or adopting update) returns, its id under ``id``."""
    op = kind.create
    answer = ok(client, op.name, VALID[op.name](world))
    obj = dict(answer[op.response_key] if op.response_key else answer)
    obj["id"] = obj[op.id_field]
    return obj


def read(client: InProcess, kind: Kind, obj: dict[str, Any]) -> dict[str, Any]:
    op = kind.get
    assert op is not None
    answer = ok(client, op.name, {op.by: obj[op.by]})
    return answer[op.response_key] if op.response_key else answer


def listed(client: InProcess, kind: Kind, obj: dict[str, Any]) -> list[dict[str, Any]]:
    op = kind.list
    assert op is not None
    body: dict[str, Any] = {"limit": 500}
    if op.scope_required:  # the first scoping id the object has
        for scope in op.scope:
            node: Any = obj
            for part in scope.path.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node is not None:
                body[scope.field] = node
                break
    answer = ok(client, op.name, body)
    assert list(answer) == [op.response_key, "listMetadata"]
    items: list[dict[str, Any]] = answer[op.response_key]
    return items


def update(client: InProcess, kind: Kind, obj: dict[str, Any], **fields: Any) -> dict[str, Any]:
    op = kind.update
    assert op is not None
    if op.style == UpdateStyle.SPARSE:
        body: dict[str, Any] = {"id": obj["id"], **fields}
    else:
        assert op.wrap is not None
        body = {op.wrap: {**obj, **ADDED.get(kind.name, {}), **fields}}
    answer = ok(client, op.name, body)
    return answer[op.response_key] if op.response_key else answer


@pytest.mark.parametrize("name", LIFECYCLE_KINDS)
def test_every_kind_is_read_updated_and_deleted(name: str, client: InProcess,
                                                world: World) -> None:
    kind = BY_KIND[name]
    obj = created(client, world, kind)
    current = obj
    if kind.get:
        current = read(client, kind, obj)
        # A read answers the id as its create did, or as ``id`` (a report made {reportId}).
        assert current.get(kind.create.id_field, current.get("id")) == obj["id"]
    if kind.list:
        match = [item for item in listed(client, kind, current) if item.get("id") == obj["id"]]
        assert len(match) == 1
        if kind.get:
            assert match == [current]  # a List answers each object as its Get does
    if kind.update:
        field, value = CHANGES[name]
        answer = update(client, kind, current, **{field: value})
        if kind.get:
            current = read(client, kind, obj)
            assert current[field] == value
            assert current["id"] == obj["id"]
        else:
            assert answer["id"] == obj["id"]
    if kind.delete:
        if current.get("terminationProtection") is True:
            refused = call(client, kind.delete.name, {kind.delete.by: current[kind.delete.by]})
            assert refused.status_code == 400
            assert "terminationProtection" in refused.json()["message"]
            current = update(client, kind, current, terminationProtection=False)
        answer = ok(client, kind.delete.name, {kind.delete.by: obj[kind.delete.by]}
                    if kind.delete.by in obj else {"id": obj["id"]})
        assert answer in ({"id": obj["id"]}, {})
        if kind.get:
            gone = call(client, kind.get.name, {kind.get.by: current[kind.get.by]})
            assert gone.status_code == 404 and gone.json()["code"] == "not_found"


def test_list_pages_like_list_groups(client: InProcess) -> None:
    ids = {ok(client, "CreateSpace", {"name": f"space-{n}"})["space"]["id"] for n in range(7)}
    seen, cursor, pages = [], "", 0
    while True:
        page = ok(client, "ListSpaces", {"limit": 3, "cursor": cursor})
        seen += [s["id"] for s in page["spaces"]]
        assert page["listMetadata"]["count"] == 7
        assert page["listMetadata"]["before"] == cursor
        cursor, pages = page["listMetadata"]["nextCursor"], pages + 1
        if not cursor:
            break
    assert pages == 3 and sorted(seen) == sorted(ids) and len(seen) == 7
    for limit in (0, 501):
        refused = call(client, "ListSpaces", {"limit": limit})
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_request"
    by_name = ok(client, "ListSpaces", {"filter": {"field": {
        "key": "name", "value": {"value": "space-4"}}}})
    assert [s["name"] for s in by_name["spaces"]] == ["space-4"]
    assert ok(client, "ListSpaces", {"search": "SPACE-6"})["listMetadata"]["count"] == 1
    # A List without search refuses it like any unknown field.
    assert call(client, "ListSidecars", {"search": "x"}).status_code == 400


def test_list_scopes(client: InProcess, world: World) -> None:
    inside = ok(client, "CreateConnector", {"name": "in-space", "spaceId": world.space})
    ok(client, "CreateConnector", {"name": "no-space"})
    scoped = ok(client, "ListConnectors", {"spaceId": world.space})["connectors"]
    assert [c["id"] for c in scoped] == [inside["connector"]["id"]]
    links = ok(client, "ListConnectorListenerLinks", {"listenerId": "lst-1"})["links"]
    assert [link["id"] for link in links] == ["cll-1"]
    assert ok(client, "ListSidecarResourceLinks", {"resourceId": "res-1"})["links"][0]["id"] \
        == "srl-1"
    for op in ("ListNativeUsersV3", "ListConnectorListenerLinks", "ListDataDiscoveryConfigurations"):
        missing = call(client, op, {})
        assert missing.status_code == 400 and missing.json()["code"] == "invalid_request"


def test_viewer_key_reads_but_never_writes(client: InProcess, world: World) -> None:
    space = world.space
    assert call(client, "GetSpace", {"id": space}, VIEWER).status_code == 200
    assert call(client, "ListSpaces", {}, VIEWER).status_code == 200
    for op, body in (("UpdateSpaceV2", {"space": {"id": space, "name": "x"}}),
                     ("DeleteSpace", {"id": space})):
        refused = call(client, op, body, VIEWER)
        assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert ok(client, "GetSpace", {"id": space})["space"]["name"] == "world-space"


@pytest.mark.parametrize(("op", "body"), [
    ("GetSpace", {"id": "space-nope"}),
    ("GetConnectorAiProvider", {"connectorId": "connector-nope"}),
    ("UpdateSpaceV2", {"space": {"id": "space-nope", "name": "x"}}),
    ("UpdateSidecar", {"id": "sidecar-nope", "hostname": "h"}),
    ("DeleteSpace", {"id": "space-nope"}),
    ("GetBlockedUser", {"id": "usr-bot"}),
])
def test_unknown_id_is_404_with_the_error_body(client: InProcess, op: str,
                                               body: dict[str, Any]) -> None:
    response = call(client, op, body)
    assert response.status_code == 404
    assert response.json()["code"] == "not_found" and response.json()["message"]


def test_no_read_returns_a_secret(client: InProcess, world: World) -> None:
    bi = ok(client, "CreateBIIntegration", VALID["CreateBIIntegration"](world))["integration"]
    assert bi["biA"]["apiKey"] == "bi-key"  # the create answers it (api-spec.md)
    logs = ok(client, "CreateIntegrationLog", VALID["CreateIntegrationLog"](world))
    ai = ok(client, "UpdateConnectorAiProviderV2", {"connectorAiProvider": {
        "connectorId": world.connector,
        "config": {"providerA": {"model": "m", "maxTokens": 512, "keyId": "k1",
                                 "apiKey": "SECRET-provider", "accessToken": "SECRET-t"}}}})
    reads = [
        ok(client, "GetBIIntegration", {"id": bi["id"]}),
        ok(client, "ListBIIntegrations", {}),
        ok(client, "GetIntegrationLog", {"id": logs["integration"]["id"]}),
        ok(client, "ListIntegrationLogs", {}),
        ok(client, "GetConnectorAiProvider", {"connectorId": world.connector}),
    ]
    for answer in reads:
        text = str(answer)
        assert "bi-key" not in text and "bi-sec" not in text and "SECRET" not in text, text
    assert reads[0]["integration"]["biA"] == {}
    got = reads[-1]["connectorAiProvider"]
    # Secrets by how a key's name ends; maxTokens and keyId are fields like any other.
    assert got["config"] == {"providerA": {"model": "m", "maxTokens": 512, "keyId": "k1"}}
    assert got["id"] == ai["connectorAiProvider"]["id"]


def test_replace_all_update_ignores_read_only_fields(client: InProcess) -> None:
    policy = ok(client, "CreatePolicy", VALID["CreatePolicy"](None))["policy"]
    assert policy["version"] == 1
    sent = {**policy, "groupName": "analysts", "code": "deny", "ast": "forged", "version": 40,
            "createdAt": "2024-01-01T00:00:00Z", "description": "d"}
    for expected in (2, 3):
        got = ok(client, "UpdatePolicyV2", {"policy": sent})["policy"]
        assert got["version"] == expected
        assert got["ast"] == policy["ast"] and got["createdAt"] == policy["createdAt"]
        assert got["code"] == "deny" and got["owners"][0]["group"]["name"] == "analysts"
    satellite = ok(client, "CreateSatellite", VALID["CreateSatellite"](None))["satellite"]
    changed = ok(client, "UpdateSatelliteV2", {"satellite": {
        "id": satellite["id"], "name": "sat-b", "satelliteType": "data_discovery"}})
    assert changed["satellite"]["satelliteType"] == "ai"  # cannot change: ignored
    # Replace-all: a field left out is reset, not kept.
    space = ok(client, "CreateSpace", {"name": "s", "description": "kept?"})["space"]
    assert ok(client, "UpdateSpaceV2", {"space": {"id": space["id"], "name": "s"}})[
        "space"]["description"] == ""


def test_a_policy_is_updated_as_read(client: InProcess) -> None:
    """Issue 43, finding 10: UpdatePolicyV2 takes the policy as a read returns it (its
    ``owners``, no ``groupName`` or ``userEmail``), as every read-modify-write client but
    govsync's sends it; ``owners`` as sent name each owner by its id."""
    created_ = ok(client, "CreatePolicy", VALID["CreatePolicy"](None))["policy"]
    as_read = ok(client, "GetPolicy", {"id": created_["id"]})["policy"]
    got = ok(client, "UpdatePolicyV2", {"policy": {**as_read, "code": "deny"}})["policy"]
    assert (got["code"], got["version"], got["owners"]) == ("deny", 2, as_read["owners"])

    groups = {g["id"]: g for g in ok(client, "ListGroups", {})["groups"]}
    owners = [{"group": groups["grp-analysts"]}, {"user": {"id": "usr-ann", "fullName": "?"}}]
    got = ok(client, "UpdatePolicyV2", {"policy": {**got, "owners": owners}})["policy"]
    assert got["owners"][0] == {"group": groups["grp-analysts"]}
    assert got["owners"][1]["user"]["id"] == "usr-ann"
    assert got["owners"][1]["user"]["fullName"] == "Ann Lee"  # the user as stored
    assert ok(client, "GetPolicy", {"id": got["id"]})["policy"] == got

    gone = call(client, "UpdatePolicyV2", {"policy": {**got, "owners": [
        {"group": {"id": "grp-gone"}}]}})
    assert gone.status_code == 404 and "owners.0.group.id" in gone.json()["message"]
    for policy, field in (({**got, "owners": [{"group": {"id": "grp-admins"},
                                               "user": {"id": "usr-ann"}}]},
                           "policy.owners.0.group|user"),
                          ({**got, "groupName": "admins", "userEmail": "ann@example.com"},
                           "policy.groupName|userEmail")):
        refused = call(client, "UpdatePolicyV2", {"policy": policy})
        assert refused.status_code == 400, refused.text
        assert [v["field"] for v in refused.json()["details"]["fieldViolations"]] == [field]


def test_a_discovery_configuration_is_read_by_its_id_or_its_resource(
        client: InProcess, world: World) -> None:
    """Issue 43, finding 11: GetDataDiscoveryConfiguration takes the SDK's
    ``dataDiscoveryConfigurationId`` or ``resourceId`` (``id`` as the first)."""
    made = ok(client, "CreateDataDiscoveryConfiguration",
              VALID["CreateDataDiscoveryConfiguration"](world))["dataDiscoveryConfiguration"]
    for body in ({"dataDiscoveryConfigurationId": made["id"]}, {"resourceId": "res-1"},
                 {"id": made["id"]}):
        assert ok(client, "GetDataDiscoveryConfiguration", body) == {
            "dataDiscoveryConfiguration": made}, body
    for body, status in (({"resourceId": "res-none"}, 404),
                         ({"dataDiscoveryConfigurationId": "ddc-none"}, 404),
                         ({"resourceId": "res-1", "dataDiscoveryConfigurationId": made["id"]}, 400),
                         ({}, 400)):
        answer = call(client, "GetDataDiscoveryConfiguration", body)
        assert answer.status_code == status, (body, answer.text)
    assert "resourceId names no existing" in call(
        client, "GetDataDiscoveryConfiguration", {"resourceId": "res-none"}).json()["message"]


def test_sparse_update_leaves_absent_fields(client: InProcess) -> None:
    user = ok(client, "CreateNativeUserV3", VALID["CreateNativeUserV3"](None))["nativeUser"]
    got = ok(client, "UpdateNativeUserV3", {"id": user["id"], "label": "new"})["nativeUser"]
    assert got["credentials"] == {"cloudIamA": {"username": "u"}}
    assert got["terminationProtection"] is False and got["label"] == "new"
    got = ok(client, "UpdateNativeUserV3", {"id": user["id"], "credentials": {
        "cloudIamA": {"username": "v"}}})["nativeUser"]
    assert got["credentials"] == {"cloudIamA": {"username": "v"}} and got["label"] == "new"
    refused = call(client, "UpdateNativeUserV3", {"id": user["id"], "credentials": {
        "cloudIamB": {"username": "v"}}})
    assert refused.status_code == 400 and "variant" in refused.json()["message"]
    sidecar = ok(client, "CreateSidecar", VALID["CreateSidecar"](None))["sidecar"]
    got = ok(client, "UpdateSidecar", {"id": sidecar["id"], "name": "side-b"})["sidecar"]
    assert (got["name"], got["hostname"], got["technology"]) == ("side-b", "h.example", "ssh")


def test_alias_update_and_delete_follow_the_resource(client: InProcess,
                                                     app_store: tuple[Any, Any]) -> None:
    store = app_store[1]
    alias = ok(client, "CreateResourceAlias", {"resourceId": "res-1", "alias": "a-1"})
    assert ok(client, "UpdateResourceAlias", {"id": alias["id"], "alias": "a-2"}) == \
        {"id": alias["id"], "alias": "a-2"}
    assert store.get("Resource", "res-1")["aliases"] == ["old-alias", "a-2"]
    assert ok(client, "DeleteResourceAlias", {"id": alias["id"]}) == {}
    assert store.get("Resource", "res-1")["aliases"] == ["old-alias"]


def test_delete_refuses_what_is_protected_or_referred_to(client: InProcess,
                                                         world: World) -> None:
    protected = ok(client, "CreateSpace", {"name": "p", "terminationProtection": True})["space"]
    refused = call(client, "DeleteSpace", {"id": protected["id"]})
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_request"
    assert "terminationProtection" in refused.json()["message"]

    space = ok(client, "CreateSpace", {"name": "in-use"})["space"]
    connector = ok(client, "CreateConnector", {"name": "user-of-space", "spaceId": space["id"]})
    refused = call(client, "DeleteSpace", {"id": space["id"]})
    assert refused.status_code == 400
    message = refused.json()["message"]
    assert "Connector" in message and connector["connector"]["id"] in message
    assert refused.json()["details"]["fieldViolations"][0]["field"] == "id"

    ddc = ok(client, "CreateDataDiscoveryConfiguration",
             VALID["CreateDataDiscoveryConfiguration"](world))["dataDiscoveryConfiguration"]
    refused = call(client, "DeleteNativeUserV3", {"id": world.native_user})
    assert refused.status_code == 400 and "DataDiscoveryConfiguration" in refused.json()["message"]
    ok(client, "DeleteDataDiscoveryConfiguration", {"id": ddc["id"]})
    assert ok(client, "DeleteNativeUserV3", {"id": world.native_user}) == \
        {"id": world.native_user}

    ok(client, "DeleteConnector", {"id": connector["connector"]["id"]})
    assert ok(client, "DeleteSpace", {"id": space["id"]}) == {"id": space["id"]}


def test_faults_hit_updates_and_deletes_as_creates() -> None:
    app, store = make_app(fault_rate=1.0, rng=random.Random(7))
    for n in range(12):
        store.put("Space", f"space-{n}", {"id": f"space-{n}", "name": f"s{n}",
                                          "description": "", "terminationProtection": False})
    outcomes = set()
    with InProcess(app) as client:
        for n in range(6):
            try:
                response = call(client, "UpdateSpaceV2", {"space": {
                    "id": f"space-{n}", "name": "changed"}})
            except ConnectionResetError:  # stored, then the connection dropped
                outcomes.add("update dropped")
                assert store.get("Space", f"space-{n}")["name"] == "changed"
            else:
                assert response.status_code == 500
                outcomes.add("update failed")
                assert store.get("Space", f"space-{n}")["name"] == f"s{n}"
        for n in range(6, 12):
            try:
                response = call(client, "DeleteSpace", {"id": f"space-{n}"})
            except ConnectionResetError:
                outcomes.add("delete dropped")
                assert store.get("Space", f"space-{n}") is None
            else:
                assert response.status_code == 500
                outcomes.add("delete failed")
                assert store.get("Space", f"space-{n}") is not None
        # Reads have no side effect: no fault.
        assert call(client, "ListSpaces", {}).status_code == 200
    assert outcomes == {"update dropped", "update failed", "delete dropped", "delete failed"}


def test_operations_spec_serves_the_spec_only() -> None:
    app, _ = make_app(operations=Operations.SPEC)
    with InProcess(app) as client:
        space = ok(client, "CreateSpace", {"name": "s"})["space"]
        assert ok(client, "ListGroups", {})["listMetadata"]["count"] == 2
        for op in (o for k in KINDS for o in (k.get, k.list, k.delete) if o is not None):
            response = call(client, op.name, {"id": space["id"]})
            assert response.status_code == 404, op.name
            assert response.json()["code"] == "not_found"
        assert call(client, "UpdateSpaceV2", {"space": {"id": space["id"], "name": "x"}}) \
            .status_code == 404
        assert call(client, "UpdateHook", {"hook": {"id": "h", "name": "n", "code": "c"}}) \
            .status_code == 404  # a spec operation: its own 404 for an unknown hook


def test_every_get_list_update_and_delete_is_served() -> None:
    """Every row of the table of kinds names operations the server answers."""
    served = {op.verb for k in KINDS for op in (k.get, k.list, k.update, k.delete)
              if op is not None}
    assert served == {Verb.GET, Verb.LIST, Verb.UPDATE, Verb.DELETE}
    app, _ = make_app()
    with InProcess(app) as client:
        for kind in KINDS:
            for op in (kind.get, kind.list, kind.update, kind.delete):
                if op is not None:
                    response = client.post(op.path, json={}, headers=H)
                    # An empty body is refused by the model (400), never "no such operation".
                    assert response.status_code in (200, 400), (op.name, response.text)


@pytest.mark.parametrize("name", [op.name for op in LIFECYCLE])
def test_every_lifecycle_operation_answers_its_valid_body(name: str, client: InProcess,
                                                          world: World) -> None:
    op = BY_NAME[name]
    response = call(client, name, VALID[name](world))
    answer = response.json()
    assert response.status_code == 200, response.text
    if op.verb == Verb.LIST:
        assert list(answer) == [op.response_key, "listMetadata"] and answer[op.response_key]
    elif op.response_key:
        assert list(answer) == [op.response_key]
