"""formalco/terraform-provider-formal's resource types: one row each.

Read from the provider's ``formal/resources/*.go`` at version 4.23.2, and,
for ``formal_sidecar`` and ``formal_sidecar_resource_link`` (removed in
4.23.0), at the last version that had them.  A row says which govsync kind a
resource type becomes and, attribute by attribute, what each becomes:

==============  ==============================================================
``Field``       a spec field (dotted path); values in ``omit`` are left out
``WriteOnly``   a write-only secret: Terraform sends it and never stores it,
                so it is always ``{fromEnv: VAR}``
``Block``       a nested block (a list in state): with ``single`` (MaxItems 1)
                one object, or nothing; a variant of the spec when several
                such blocks exclude each other
``Owner``       a policy's owner: a user's email, else a group's name
``JsonText``    a JSON object written as a string (``input_json``)
``Ignored``     read-only, Terraform bookkeeping, or fixed when the object was
                made (a link's ends): not part of the govsync spec
``Unsupported`` an input with no API field: dropped, named in MIGRATION.md
                when it holds anything but ``default``
==============  ==============================================================

Whether a value is a secret is not in this table: it is the govsync kind's
(``Kind.secrets``, ``Kind.open_variants``), or Terraform's (a sensitive or
write-only attribute).  The neutral variant names of the API spec follow the
real names in alphabetical order, as every variant family whose fields the
spec shows does (logStoreA..D: aws_s3, datadog, gcs, splunk; mdmA..C:
fleet, jamf, kandji): so providerA..G are anthropic, aws_bedrock, azure_ai,
formal_ai_satellite, gemini, google_vertex_ai, openai.

Schema versions: a state written at an older version goes through the
row's ``upgrades`` first, one version at a time, as the provider's own
StateUpgraders would, except that nothing is asked of the API and what a
govsync manifest still needs is kept (a Policy's owner, which version 2
dropped).  A version with no upgrade has the same attributes as the next.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

PROVIDER = "formalco/formal"
PROVIDER_VERSION = "4.23.2"
TYPE_PREFIX = "formal_"
# Attributes every resource may carry that are Terraform's, not the provider's.
BOOKKEEPING = ("timeouts",)

# (attributes) -> (attributes at the next schema version, notes for MIGRATION.md)
Upgrade = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]]


@dataclass(frozen=True)
class Field:
    """An attribute that is a spec field (``to``, dotted)."""

    to: str
    omit: tuple[Any, ...] = (None,)


@dataclass(frozen=True)
class WriteOnly:
    """A write-only secret attribute: never in state, always ``{fromEnv: VAR}``."""

    to: str


@dataclass(frozen=True)
class Block:
    """A nested block, stored as a list; ``single`` (MaxItems 1): one object or none."""

    to: str
    attributes: Mapping[str, Attribute]
    single: bool = True


@dataclass(frozen=True)
class Owner:
    """A policy's owner: ``userEmail`` when it is an email address, else ``groupName``."""


@dataclass(frozen=True)
class JsonText:
    """A JSON object written as a string: the object, at ``to``."""

    to: str


@dataclass(frozen=True)
class Ignored:
    """Not part of the govsync spec: read-only, Terraform's bookkeeping, or fixed when
    the object was made."""


@dataclass(frozen=True)
class Unsupported:
    """An input the API has no field for: dropped, and reported when it holds a value."""

    default: Any = None


Attribute = Field | WriteOnly | Block | Owner | JsonText | Ignored | Unsupported


@dataclass(frozen=True)
class ResourceType:
    """One resource type of the provider that has a govsync kind."""

    type: str
    kind: str
    schema_version: int
    attributes: Mapping[str, Attribute]
    upgrades: Mapping[int, Upgrade] = field(default_factory=dict)
    note: str = ""


# --- upgrades ------------------------------------------------------------------------

POLICY_STATUSES = ("draft", "dry-run", "active")


def _policy_v0(attributes: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Version 0 (until provider 1.x): a boolean ``active`` beside a read-only ``status``;
    the provider's upgrader asked the API for the status, this takes it from ``active``
    when the state has no valid one."""
    out = {k: v for k, v in attributes.items() if k not in ("active", "org_id", "expire_at")}
    notes: list[str] = []
    if out.get("status") not in POLICY_STATUSES:
        out["status"] = "active" if attributes.get("active") is True else "draft"
        notes.append("status taken from the schema-version-0 attribute active")
    return out, notes


def _policy_v1(attributes: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Version 1: ``owner`` (provider 2.x to 4.x) or, before it, a list ``owners`` and
    ``created_by``.  Version 2 dropped ``owner`` and ``notification``; both are kept."""
    out = {k: v for k, v in attributes.items() if k not in ("owners", "created_by")}
    notes: list[str] = []
    owners = attributes.get("owners")
    if "owner" not in out and isinstance(owners, list) and owners:
        out["owner"] = owners[0]
        if len(owners) > 1:
            notes.append(f"Terraform lists {len(owners)} owners and the API takes one: "
                         "the first is kept")
    return out, notes


# --- the table -------------------------------------------------------------------------

_NAME = Field("name")
_PROTECTION = Field("terminationProtection")
_SPACE = Field("spaceId", omit=(None, ""))
_STAMPS: dict[str, Attribute] = {"created_at": Ignored(), "updated_at": Ignored()}
_API_KEY: dict[str, Attribute] = {"api_key": WriteOnly("apiKey"), "api_key_version": Ignored()}

TYPES: tuple[ResourceType, ...] = (
    ResourceType("formal_space", "Space", 1, {
        "name": _NAME, "description": Field("description"),
        "termination_protection": _PROTECTION, "created_at": Ignored()}),
    ResourceType("formal_connector", "Connector", 1, {
        "name": _NAME, "termination_protection": _PROTECTION, "space_id": _SPACE,
        "api_key": Ignored()}),
    ResourceType("formal_satellite", "Satellite", 0, {
        "name": _NAME, "satellite_type": Field("satelliteType"),
        "termination_protection": _PROTECTION, "space_id": _SPACE,
        "tls_cert": Ignored(), "api_key": Ignored()}),
    ResourceType("formal_sidecar", "Sidecar", 1, {
        "name": _NAME, "technology": Field("technology"), "hostname": Field("hostname"),
        "termination_protection": _PROTECTION, "version": Unsupported(),
        "created_at": Ignored(), "formal_control_plane_tls_certificate": Ignored(),
        "api_key": Ignored()},
        note="removed in provider 4.23.0; read as 4.22 wrote it"),
    ResourceType("formal_connector_listener_link", "ConnectorListenerLink", 1, {
        "id": Field("id"), "termination_protection": _PROTECTION,
        "connector_listener_id": Ignored(), "connector_id": Ignored()}),
    ResourceType("formal_sidecar_resource_link", "SidecarResourceLink", 0, {
        "id": Field("id"), "termination_protection": _PROTECTION,
        "resource_id": Ignored(), "sidecar_id": Ignored(), "port": Ignored()},
        note="removed in provider 4.23.0; read as 4.22 wrote it"),
    ResourceType("formal_data_discovery", "DataDiscoveryConfiguration", 0, {
        "resource_id": Field("resourceId"), "native_user_id": Field("nativeUserId"),
        "schedule": Field("schedule"), "deletion_policy": Field("deletionPolicy"),
        "path": Field("path", omit=(None, "")), "created_at": Ignored()}),
    ResourceType("formal_policy", "Policy", 2, {
        "name": _NAME, "description": Field("description"), "module": Field("code"),
        "status": Field("status"), "termination_protection": _PROTECTION,
        "owner": Owner(), "notification": Field("notification", omit=(None, "")),
        **_STAMPS},
        upgrades={0: _policy_v0, 1: _policy_v1}),
    ResourceType("formal_policy_data_loader", "PolicyDataLoader", 1, {
        "name": _NAME, "description": Field("description"), "key": Field("key"),
        "worker_runtime": Field("workerRuntime"), "worker_code": Field("workerCode"),
        "worker_schedule": Field("workerSchedule"), "status": Field("status"),
        "termination_protection": _PROTECTION, **_STAMPS}),
    ResourceType("formal_hook", "Hook", 0, {
        "name": _NAME, "description": Field("description"), "code": Field("code"),
        "status": Field("status"), "timeout_ms": Field("timeoutMs"),
        "allowlisted_environment_variables": Field("allowlistedEnvironmentVariables"),
        "allowlisted_network_hosts": Field("allowlistedNetworkHosts"), **_STAMPS}),
    ResourceType("formal_permission", "Permission", 1, {
        "name": _NAME, "description": Field("description"), "code": Field("code"),
        # provider 4.x before the attribute was renamed code
        "module": Field("code"),
        "status": Unsupported(), "termination_protection": _PROTECTION, **_STAMPS}),
    ResourceType("formal_integration_log", "LogIntegration", 0, {
        "name": _NAME,
        "aws_s3": Block("logStoreA", {
            "s3_bucket_name": Field("bucketName"), "s3_bucket_prefix": Field("bucketPrefix"),
            "cloud_integration_id": Field("cloudIntegrationId"),
            "compression": Unsupported("none"), "region": Ignored()}),
        "datadog": Block("logStoreB", {
            "site": Field("site"), "api_key": Field("apiKey"), "account_id": Field("accountId")}),
        "gcs": Block("logStoreC", {
            "gcs_bucket_name": Field("bucketName"), "gcs_bucket_prefix": Field("bucketPrefix"),
            "cloud_integration_id": Field("cloudIntegrationId"),
            "compression": Unsupported("none")}),
        "splunk": Block("logStoreD", {
            "host": Field("host"), "port": Field("port"), "access_token": Field("accessToken")}),
    }),
    ResourceType("formal_integration_bi", "BIIntegration", 0, {
        "name": _NAME, "sync": Field("sync"),
        "metabase": Block("biB", {
            "hostname": Field("hostname"), "username": Field("username"),
            "password": Field("password")}),
    }),
    ResourceType("formal_integration_mdm", "MDMIntegration", 1, {
        # Version 0 kept kandji's api_key in state: it is a {fromEnv} all the same.
        "name": _NAME,
        "fleet": Block("mdmA", {"api_key": WriteOnly("apiKey"), "api_url": Field("apiUrl")}),
        "jamf": Block("mdmB", {"api_key": WriteOnly("apiKey"), "api_url": Field("apiUrl"),
                               "client_id": Field("clientId")}),
        "kandji": Block("mdmC", {"api_key": WriteOnly("apiKey"), "api_url": Field("apiUrl")}),
    }),
    ResourceType("formal_connector_ai_provider", "ConnectorAIProvider", 0, {
        "connector_id": Field("connectorId"),
        "anthropic": Block("config.providerA", _API_KEY),
        "aws_bedrock": Block("config.providerB", {"region": Field("region")}),
        "azure_ai": Block("config.providerC", {**_API_KEY, "endpoint": Field("endpoint")}),
        "formal_ai_satellite": Block("config.providerD", {}),
        "gemini": Block("config.providerE", _API_KEY),
        "google_vertex_ai": Block("config.providerF", {
            "gcp_project_id": Field("gcpProjectId"), "region": Field("region")}),
        "openai": Block("config.providerG", _API_KEY),
    }),
    ResourceType("formal_data_label", "DataLabel", 1, {
        "name": _NAME, "classifier_type": Field("classifierType"),
        "classifier_data": Field("classifierData")}),
    ResourceType("formal_form", "Form", 0, {
        "name": _NAME, "description": Field("description"), **_STAMPS,
        "field": Block("fields", single=False, attributes={
            "id": Field("id"), "name": Field("name"), "type": Field("type"),
            "config": Block("config", {
                "option": Block("options", single=False, attributes={
                    "label": Field("label"), "value": Field("value")}),
                "options_source": Block("optionsSource", {
                    "app": Field("app"), "command": Block("command", {"name": Field("name")}),
                    "machine_user_id": Field("machineUserId"), "transform": Field("transform"),
                    "input": Field("input", omit=(None, {})),
                    "input_json": JsonText("input")}),
            }),
        }),
    }),
)

BY_TYPE: dict[str, ResourceType] = {t.type: t for t in TYPES}

# The provider's other resource types: why each stays in Terraform.
_NO_OPERATION = "the API govsync drives has no operation that makes or changes {}"
NOT_MIGRATED: dict[str, str] = {
    "formal_resource": "govsync does not create resources (the API has no such operation): "
                       "manifests name them by id (resourceId)",
    "formal_group": "govsync does not create groups: it reads them (ListGroups) to check "
                    "policy owners",
    "formal_user": _NO_OPERATION.format("users"),
    "formal_group_user_link": _NO_OPERATION.format("group membership"),
    "formal_native_user": "govsync's NativeUser is made by CreateNativeUserV3, whose "
                          "credentials are cloud IAM, a hook or none: a native user with a "
                          "username and password has no govsync form",
    "formal_native_user_link": _NO_OPERATION.format("native user links"),
    "formal_network_rule": _NO_OPERATION.format("network rules"),
    "formal_connector_hostname": _NO_OPERATION.format("connector hostnames"),
    "formal_connector_listener": _NO_OPERATION.format("connector listeners (their links "
                                                      "are ConnectorListenerLink)"),
    "formal_connector_listener_rule": _NO_OPERATION.format("listener rules"),
    "formal_connector_configuration": _NO_OPERATION.format("connector configurations"),
    "formal_connector_token_encryption_key": _NO_OPERATION.format("token encryption keys"),
    "formal_connector_satellite_link": _NO_OPERATION.format("connector-satellite links"),
    "formal_satellite_link": _NO_OPERATION.format("satellite links"),
    "formal_satellite_hostname": _NO_OPERATION.format("satellite hostnames"),
    "formal_resource_hostname": _NO_OPERATION.format("resource hostnames"),
    "formal_resource_tls_configuration": _NO_OPERATION.format("TLS configurations"),
    "formal_resource_ssh_host_key": _NO_OPERATION.format("SSH host keys"),
    "formal_resource_dial_configuration": _NO_OPERATION.format("dial configurations"),
    "formal_resource_health_check": _NO_OPERATION.format("health checks"),
    "formal_resource_classifier_configuration": _NO_OPERATION.format(
        "classifier configurations"),
    "formal_integration_cloud": _NO_OPERATION.format("cloud integrations"),
    "formal_integration_cloud_gcp_activation": _NO_OPERATION.format("cloud integrations"),
    "formal_integration_oidc": _NO_OPERATION.format("OIDC integrations"),
    "formal_inventory_object": _NO_OPERATION.format("inventory objects"),
    "formal_inventory_object_data_label_link": _NO_OPERATION.format("inventory labels"),
    "formal_log_configuration": _NO_OPERATION.format("log configurations"),
    "formal_encryption_key": _NO_OPERATION.format("encryption keys"),
    "formal_workflow": _NO_OPERATION.format("workflows"),
}
