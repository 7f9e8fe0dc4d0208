"""An organisation that Terraform made: objects created on the reference server through
the API, as formalco/terraform-provider-formal creates them, and the state Terraform
would hold for them, pointing at their ids.

Resource types of several kinds, in modules, with ``count`` and ``for_each``;
policies at schema versions 0, 1 and 2; secrets kept in the state (sensitive
or not), write-only ones (null in state), a computed secret with no API
field, and resources that stay in Terraform.  Every secret value is a
canary that must appear nowhere govsync writes or prints.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from migratekit import Api, TerraformState, attr, instance

# Terraform addresses of the instances govsync must adopt, by govsync address.
ADOPTED: dict[str, str] = {
    "Space/analytics": "formal_space.analytics",
    "Connector/eu-main": 'module.region["eu"].formal_connector.main',
    "Connector/edge-0": "formal_connector.edge[0]",
    "Connector/edge-1": "formal_connector.edge[1]",
    "Satellite/discovery": "formal_satellite.discovery",
    "ConnectorListenerLink/ledger": "formal_connector_listener_link.ledger",
    "Hook/risk_score": 'formal_hook.rules["risk"]',
    "Hook/pii_mask": 'formal_hook.rules["pii"]',
    "Policy/legacy-v0": "formal_policy.legacy",
    "Policy/owned-v1": "formal_policy.owned",
    "Policy/current-v2": "formal_policy.current",
    "PolicyDataLoader/ip-ranges": "formal_policy_data_loader.ip_ranges",
    "Permission/read-orders": "formal_permission.read_orders",
    "LogIntegration/siem": "formal_integration_log.siem",
    "LogIntegration/dd": "formal_integration_log.dd",
    "BIIntegration/metabase": "formal_integration_bi.metabase",
    "MDMIntegration/jamf": "formal_integration_mdm.jamf",
    "ConnectorAIProvider/region.eu.assistant":
        'module.region["eu"].formal_connector_ai_provider.assistant',
    "DataLabel/iban": "formal_data_label.iban",
    "Form/access-request": "formal_form.access_request",
    "DataDiscoveryConfiguration/orders": "formal_data_discovery.orders",
    "Sidecar/legacy-pg": "formal_sidecar.legacy",
    "SidecarResourceLink/legacy_orders": "formal_sidecar_resource_link.legacy_orders",
}
# Instances that stay in Terraform.
KEPT = ("formal_native_user.reader", "formal_group.platform", "formal_resource.orders",
        "formal_network_rule.block_ssh")

# The variable each secret is read from (named after its Terraform address).
VARIABLES = {
    "siem": "FORMAL_INTEGRATION_LOG_SIEM_ACCESS_TOKEN",
    "dd": "FORMAL_INTEGRATION_LOG_DD_API_KEY",
    "metabase": "FORMAL_INTEGRATION_BI_METABASE_PASSWORD",
    "jamf": "FORMAL_INTEGRATION_MDM_JAMF_API_KEY",
    "assistant": "FORMAL_CONNECTOR_AI_PROVIDER_REGION_EU_ASSISTANT_API_KEY",
}


@dataclass
class Organisation:
    state: TerraformState
    # Every secret value, by name: none may appear in what govsync writes or prints.
    canaries: dict[str, str] = field(default_factory=dict)
    # The environment govsync runs with: each variable holding the live value.
    environ: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)   # govsync address -> id
    native_user: str = ""                               # the id of one that stays


def canary(name: str) -> str:
    return f"canary-{name}-{uuid.uuid4().hex}"


def build(api: Api) -> Organisation:
    """Create the organisation on the server; the Terraform state that records it."""
    state = TerraformState()
    secrets = {n: canary(n) for n in ("siem", "dd", "metabase", "jamf", "assistant",
                                      "native-user", "connector-key", "satellite-key")}
    org = Organisation(state, secrets, {VARIABLES[n]: secrets[n] for n in VARIABLES})

    space = api.call("CreateSpace", {"name": "analytics", "description": "Analytics"})
    state.add("formal_space", "analytics", instance({
        "id": space["id"], "name": "analytics", "description": "Analytics",
        "created_at": 1717171717, "termination_protection": False}, schema_version=1))

    main = api.call("CreateConnector", {"name": "eu-main", "terminationProtection": True,
                                        "spaceId": space["id"]})
    state.add("formal_connector", "main", instance({
        "id": main["id"], "name": "eu-main", "api_key": secrets["connector-key"],
        "termination_protection": True, "space_id": space["id"], "timeouts": None},
        schema_version=1, sensitive=(attr("api_key"),),
        dependencies=("formal_space.analytics",)), module='module.region["eu"]')
    edges = [api.call("CreateConnector", {"name": f"edge-{i}"}) for i in range(2)]
    state.add("formal_connector", "edge", *(instance({
        "id": c["id"], "name": f"edge-{i}", "api_key": canary("edge"),
        "termination_protection": False, "space_id": "", "timeouts": None},
        schema_version=1, key=i, sensitive=(attr("api_key"),)) for i, c in enumerate(edges)))

    satellite = api.call("CreateSatellite", {"name": "discovery", "satelliteType":
                                             "data_discovery", "spaceId": space["id"]})
    state.add("formal_satellite", "discovery", instance({
        "id": satellite["id"], "name": "discovery", "satellite_type": "data_discovery",
        "tls_cert": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "api_key": secrets["satellite-key"], "termination_protection": False,
        "space_id": space["id"], "timeouts": None}, sensitive=(attr("api_key"),)))

    # Listener links exist already (seeded): Terraform's link is one of them.
    state.add("formal_connector_listener_link", "ledger", instance({
        "id": "cll-payments-eu-5433", "connector_listener_id": "lst-payments-eu-ledger",
        "connector_id": main["id"], "termination_protection": True, "timeouts": None},
        schema_version=1))

    hooks = {"risk": ("risk_score", ["RISK_API"], ["risk.internal"]),
             "pii": ("pii_mask", [], [])}
    made = []
    hook_ids: dict[str, str] = {}
    for key, (name, env, hosts) in hooks.items():
        code = f"export default function {name}(input, env) {{\n  return {{ok: true}};\n}}\n"
        hook = api.call("CreateHook", {"name": name, "description": f"{key} hook", "code": code,
                                       "timeoutMs": 2500, "allowlistedEnvironmentVariables": env,
                                       "allowlistedNetworkHosts": hosts, "status": "active"})
        hook_ids[f"Hook/{name}"] = hook["id"]
        made.append(instance({
            "id": hook["id"], "name": name, "description": f"{key} hook", "code": code,
            "status": "active", "timeout_ms": 2500, "allowlisted_environment_variables": env,
            "allowlisted_network_hosts": hosts, "created_at": hook["createdAt"],
            "updated_at": hook["updatedAt"]}, key=key))
    state.add("formal_hook", "rules", *made)

    code = ("package formal.v2\n\nimport future.keywords.if\n\n"
            "default session := {\"action\": \"allow\"}\n")
    legacy = api.call("CreatePolicy", {"name": "legacy-v0", "description": "old", "code": code,
                                       "groupName": "security", "notification": "all",
                                       "status": "active"})
    state.add("formal_policy", "legacy", instance({  # schema version 0: provider 1.x
        "id": legacy["id"], "name": "legacy-v0", "description": "old", "module": code,
        "created_by": "usr-alice", "created_at": "2023-01-05T10:00:00Z",
        "updated_at": "2023-01-05T10:00:00Z", "active": True, "org_id": "org-1",
        "expire_at": "", "status": "", "notification": "all", "owners": ["security"]}))
    owned = api.call("CreatePolicy", {"name": "owned-v1", "description": "by email",
                                      "code": code, "userEmail": "alice.martin@northwind.example",
                                      "notification": "owners", "status": "dry-run",
                                      "terminationProtection": True})
    state.add("formal_policy", "owned", instance({  # schema version 1: provider 2.x to 4.x
        "id": owned["id"], "name": "owned-v1", "description": "by email", "module": code,
        "created_at": "2024-05-01T10:00:00Z", "updated_at": "2024-05-01T10:00:00Z",
        "status": "dry-run", "notification": "owners",
        "owner": "alice.martin@northwind.example", "termination_protection": True},
        schema_version=1))
    current = api.call("CreatePolicy", {"name": "current-v2", "description": "today",
                                        "code": code, "groupName": "data-platform",
                                        "status": "draft"})
    state.add("formal_policy", "current", instance({  # schema version 2: no owner
        "id": current["id"], "name": "current-v2", "description": "today", "module": code,
        "created_at": "2026-07-01T10:00:00Z", "updated_at": "2026-07-01T10:00:00Z",
        "status": "draft", "termination_protection": False}, schema_version=2))

    loader = api.call("CreatePolicyDataLoader", {
        "name": "ip-ranges", "description": "office IPs", "key": "ip_ranges",
        "workerCode": "print('[]')", "workerSchedule": "0 */5 * * * *",
        "workerRuntime": "python3.11", "status": "active"})
    state.add("formal_policy_data_loader", "ip_ranges", instance({
        "id": loader["id"], "name": "ip-ranges", "description": "office IPs", "key": "ip_ranges",
        "worker_runtime": "python3.11", "worker_code": "print('[]')",
        "worker_schedule": "0 */5 * * * *", "status": "active", "termination_protection": False,
        "created_at": loader["createdAt"], "updated_at": loader["updatedAt"],
        "timeouts": None}, schema_version=1))

    permission = api.call("CreatePermission", {"name": "read-orders", "description": "reads",
                                               "code": "package p\nallow := true"})
    state.add("formal_permission", "read_orders", instance({  # code still named module
        "id": permission["id"], "name": "read-orders", "description": "reads",
        "module": "package p\nallow := true", "status": "active",
        "termination_protection": False, "created_at": "2025-04-01T00:00:00Z",
        "updated_at": "2025-04-01T00:00:00Z"}, schema_version=1))

    siem = api.call("CreateIntegrationLog", {"name": "siem", "logStoreD": {
        "host": "splunk.example", "port": 8088, "accessToken": secrets["siem"]}})
    state.add("formal_integration_log", "siem", instance({
        "id": siem["id"], "name": "siem", "datadog": [], "aws_s3": [], "gcs": [],
        "splunk": [{"host": "splunk.example", "port": 8088, "access_token": secrets["siem"]}],
        "timeouts": None}))
    dd = api.call("CreateIntegrationLog", {"name": "dd", "logStoreB": {
        "site": "datadoghq.eu", "apiKey": secrets["dd"], "accountId": "1234"}})
    state.add("formal_integration_log", "dd", instance({
        "id": dd["id"], "name": "dd", "splunk": [], "aws_s3": [], "gcs": [],
        "datadog": [{"site": "datadoghq.eu", "api_key": secrets["dd"], "account_id": "1234"}],
        "timeouts": None}))

    bi = api.call("CreateBIIntegration", {"name": "metabase", "sync": True, "biB": {
        "hostname": "metabase.example", "username": "admin", "password": secrets["metabase"]}})
    state.add("formal_integration_bi", "metabase", instance({
        "id": bi["id"], "name": "metabase", "sync": True, "metabase": [{
            "hostname": "metabase.example", "username": "admin",
            "password": secrets["metabase"]}], "timeouts": None}))

    mdm = api.call("CreateIntegrationMDM", {"name": "jamf", "mdmB": {
        "clientId": "client-1", "apiKey": secrets["jamf"], "apiUrl": "https://jamf.example"}})
    state.add("formal_integration_mdm", "jamf", instance({
        "id": mdm["id"], "name": "jamf", "kandji": [], "fleet": [],
        "jamf": [{"api_key": None, "api_url": "https://jamf.example", "client_id": "client-1"}],
        "timeouts": None}, schema_version=1))

    assistant = api.call("UpdateConnectorAiProviderV2", {"connectorAiProvider": {
        "connectorId": main["id"], "config": {"providerG": {"apiKey": secrets["assistant"]}}}})
    state.add("formal_connector_ai_provider", "assistant", instance({
        "id": assistant["id"], "connector_id": main["id"], "formal_ai_satellite": [],
        "gemini": [], "google_vertex_ai": [], "anthropic": [], "aws_bedrock": [],
        "openai": [{"api_key": None, "api_key_version": 1}], "azure_ai": [],
        "timeouts": None}), module='module.region["eu"]')

    label = api.call("CreateDataLabel", {"name": "iban", "classifierType": "regex",
                                         "classifierData": "[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}"})
    state.add("formal_data_label", "iban", instance({
        "id": label["id"], "name": "iban", "classifier_type": "regex",
        "classifier_data": "[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}"}, schema_version=1))

    fields = [{"id": "reason", "name": "Reason", "type": "string"},
              {"id": "db", "name": "Database", "type": "select", "config": {
                  "options": [{"label": "Orders", "value": "orders"}],
                  "optionsSource": {"app": "formal", "command": {"name": "list-dbs"},
                                    "machineUserId": "usr-workflow-bot",
                                    "input": {"limit": 10, "tags": ["prod"]},
                                    "transform": "items.map(i, {'label': i, 'value': i})"}}}]
    form = api.call("CreateForm", {"name": "access-request", "description": "Ask",
                                   "fields": fields})
    state.add("formal_form", "access_request", instance({
        "id": form["id"], "name": "access-request", "description": "Ask",
        "created_at": form["createdAt"], "updated_at": form["updatedAt"], "field": [
            {"id": "reason", "name": "Reason", "type": "string", "config": []},
            {"id": "db", "name": "Database", "type": "select", "config": [{
                "option": [{"label": "Orders", "value": "orders"}],
                "options_source": [{
                    "app": "formal", "command": [{"name": "list-dbs"}],
                    "machine_user_id": "usr-workflow-bot", "input": None,
                    "input_json": '{"limit":10,"tags":["prod"]}',
                    "transform": "items.map(i, {'label': i, 'value': i})"}]}]}]}))

    # A native user with a password: no govsync form, so it stays in Terraform; the data
    # discovery that uses it keeps its id.
    user = api.call("CreateNativeUserV3", {"credentials": {"unauthenticated": {}},
                                           "resourceId": "res-orders-db", "label": "reader"})
    state.add("formal_native_user", "reader", instance({
        "id": user["id"], "resource_id": "res-orders-db", "native_user_id": "reader",
        "native_user_secret": secrets["native-user"], "native_user_secret_wo": None,
        "native_user_secret_wo_version": None, "use_as_default": False,
        "termination_protection": False}, sensitive=(attr("native_user_secret"),)))
    org.native_user = user["id"]
    discovery = api.call("CreateDataDiscoveryConfiguration", {
        "resourceId": "res-orders-db", "nativeUserId": user["id"], "schedule": "24h",
        "deletionPolicy": "mark_for_deletion", "database": ""})
    state.add("formal_data_discovery", "orders", instance({
        "id": discovery["id"], "resource_id": "res-orders-db", "native_user_id": user["id"],
        "created_at": 1717171717, "schedule": "24h", "deletion_policy": "mark_for_deletion",
        "path": "", "timeouts": None}, dependencies=("formal_native_user.reader",)))

    sidecar = api.call("CreateSidecar", {"name": "legacy-pg", "technology": "postgres",
                                         "hostname": "pg.legacy.example"})
    state.add("formal_sidecar", "legacy", instance({  # provider 4.22, the last with sidecars
        "id": sidecar["id"], "name": "legacy-pg", "technology": "postgres",
        "created_at": 1700000000, "hostname": "pg.legacy.example",
        "formal_control_plane_tls_certificate": "-----BEGIN CERTIFICATE-----\n",
        "version": "", "termination_protection": False, "api_key": canary("sidecar"),
        "timeouts": None}, schema_version=1,
        sensitive=(attr("api_key"), attr("formal_control_plane_tls_certificate"))))
    state.add("formal_sidecar_resource_link", "legacy_orders", instance({
        "id": "srl-orders-db", "resource_id": "res-orders-db", "sidecar_id": sidecar["id"],
        "port": 5432, "termination_protection": False}))

    # Resources that stay in Terraform, a data source and another provider's resource.
    state.add("formal_group", "platform", instance({
        "id": "grp-data-platform", "name": "data-platform", "description": "",
        "termination_protection": False}))
    state.add("formal_resource", "orders", instance({
        "id": "res-orders-db", "name": "orders-db", "technology": "postgres",
        "hostname": "orders-db.prod.northwind.internal", "port": 5432}))
    state.add("formal_network_rule", "block_ssh", instance({"id": "nr-1", "name": "block"}))
    state.add("formal_space", "lookup", instance({"id": space["id"], "name": "analytics"}),
              mode="data")
    state.add("random_password", "db", instance({"id": "none", "result": canary("random")}),
              provider='provider["registry.terraform.io/hashicorp/random"]')

    org.ids = {
        "Space/analytics": space["id"], "Connector/eu-main": main["id"],
        "Connector/edge-0": edges[0]["id"], "Connector/edge-1": edges[1]["id"],
        "Satellite/discovery": satellite["id"], "ConnectorListenerLink/ledger":
        "cll-payments-eu-5433", "Policy/legacy-v0": legacy["id"],
        "Policy/owned-v1": owned["id"], "Policy/current-v2": current["id"],
        "LogIntegration/siem": siem["id"], "LogIntegration/dd": dd["id"],
        "BIIntegration/metabase": bi["id"], "MDMIntegration/jamf": mdm["id"],
        "ConnectorAIProvider/region.eu.assistant": assistant["id"],
        "DataDiscoveryConfiguration/orders": discovery["id"],
        "Sidecar/legacy-pg": sidecar["id"], "SidecarResourceLink/legacy_orders": "srl-orders-db",
        "PolicyDataLoader/ip-ranges": loader["id"], "Permission/read-orders": permission["id"],
        "DataLabel/iban": label["id"], "Form/access-request": form["id"], **hook_ids,
    }
    assert set(org.ids) == set(ADOPTED)
    return org
