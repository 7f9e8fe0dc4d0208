"""The catalog of the API's 30 operations: one row each.

The client, the reference server and the OpenAPI document are generated from
these rows; nothing else lists operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel

from govsync.api import models as m

# The largest request body the API accepts (api-spec: "a body over 1 MiB").
MAX_REQUEST_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Operation:
    service: str
    name: str
    request: type[BaseModel]
    response: type[BaseModel]
    # Key under which the response wraps the object; None: fields at top level.
    response_key: str | None
    # Field of the returned object that carries its id.
    id_field: str = "id"
    # Kind of object it creates or updates (kind table names), None for reads.
    kind: str | None = None
    verb: str = "create"  # create | update | read
    # Safe to send again after an ambiguous failure (idempotent).
    retry_safe: bool = False
    # Request fields (dotted) that must name an existing object: (path, kind).
    must_exist: tuple[tuple[str, str], ...] = ()
    # Header handling of the Connect protocol (CreatePermission only).
    connect: bool = False
    # Dotted request paths that are secret: never logged or echoed.
    secret_paths: tuple[str, ...] = field(default=())

    @property
    def path(self) -> str:
        return f"/core.v1.{self.service}/{self.name}"


def _op(
    service: str,
    name: str,
    response: type[BaseModel],
    response_key: str | None,
    kind: str | None,
    **kw: object,
) -> Operation:
    request = getattr(m, f"{name}Request")
    return Operation(service, name, request, response, response_key, kind=kind, **kw)  # type: ignore[arg-type]


OPERATIONS: tuple[Operation, ...] = (
    _op("ConnectorService", "CreateConnector", m.Connector, "connector", "Connector",
        must_exist=(("spaceId", "Space"),)),
    _op("ConnectorService", "UpdateConnectorAiProviderV2", m.ConnectorAiProvider,
        "connectorAiProvider", "ConnectorAIProvider", verb="update", retry_safe=True,
        must_exist=(("connectorAiProvider.connectorId", "Connector"),)),
    _op("ConnectorService", "UpdateConnectorListenerLink", m.ConnectorListenerLink,
        "connectorListenerLink", "ConnectorListenerLink", verb="update", retry_safe=True,
        must_exist=(("id", "ConnectorListenerLink"),)),
    _op("SidecarService", "CreateSidecar", m.Sidecar, "sidecar", "Sidecar"),
    _op("SidecarService", "UpdateSidecarResourceLink", m.SidecarResourceLink, "link",
        "SidecarResourceLink", verb="update", retry_safe=True,
        must_exist=(("id", "SidecarResourceLink"),)),
    _op("SatelliteService", "CreateSatellite", m.Satellite, "satellite", "Satellite",
        must_exist=(("spaceId", "Space"),)),
    _op("SpaceService", "CreateSpace", m.Space, "space", "Space"),
    _op("ResourceService", "CreateResourceAlias", m.ResourceAlias, None, "ResourceAlias",
        must_exist=(("resourceId", "Resource"),)),
    _op("ResourceService", "CreateDataDiscoveryConfiguration", m.DataDiscoveryConfiguration,
        "dataDiscoveryConfiguration", "DataDiscoveryConfiguration",
        must_exist=(("resourceId", "Resource"), ("nativeUserId", "NativeUser"))),
    _op("NativeUserService", "CreateNativeUserV3", m.NativeUser, "nativeUser", "NativeUser",
        must_exist=(("resourceId", "Resource"),)),
    _op("GroupService", "ListGroups", m.ListGroupsResponse, None, None, verb="read",
        retry_safe=True),
    _op("UserService", "CreateBlockedUser", m.IdResult, None, "BlockedUser", retry_safe=True,
        must_exist=(("id", "User"),)),
    _op("PoliciesService", "CreatePolicy", m.Policy, "policy", "Policy"),
    _op("PoliciesService", "CreatePolicySuspension", m.PolicySuspension, "policySuspension",
        "PolicySuspension", must_exist=(("policyId", "Policy"),)),
    _op("PoliciesService", "CreatePolicyReport", m.PolicyReportResult, None, "PolicyReport",
        id_field="reportId", must_exist=(("policyId", "Policy"),)),
    _op("PolicyDataLoaderService", "CreatePolicyDataLoader", m.PolicyDataLoader,
        "policyDataLoader", "PolicyDataLoader"),
    _op("HookService", "CreateHook", m.Hook, "hook", "Hook"),
    _op("HookService", "UpdateHook", m.Hook, "hook", "Hook", verb="update", retry_safe=True,
        must_exist=(("hook.id", "Hook"),)),
    _op("PermissionsService", "CreatePermission", m.Permission, "permission", "Permission",
        connect=True),
    _op("IntegrationsLogService", "CreateIntegrationLog", m.Integration, "integration",
        "LogIntegration", secret_paths=("logStoreB.apiKey", "logStoreD.accessToken")),
    _op("IntegrationBIService", "CreateBIIntegration", m.Integration, "integration",
        "BIIntegration", must_exist=(("linkedDbUserId", "NativeUser"),),
        secret_paths=("biA.biAApiKey", "biA.biAApiSecret", "biB.password")),
    _op("IntegrationMDMService", "CreateIntegrationMDM", m.Integration, "integration",
        "MDMIntegration", secret_paths=("mdmA.apiKey", "mdmB.apiKey", "mdmC.apiKey")),
    _op("IntegrationAIProviderService", "CreateIntegrationAIProvider", m.Integration,
        "integration", "AIProviderIntegration", secret_paths=("apiKey",)),
    _op("LogsService", "CreateLogQuery", m.IdResult, None, "LogQuery"),
    _op("SessionsService", "CreateSessionTermination", m.SessionShutdown, "sessionShutdown",
        "SessionTermination", id_field="sessionId", must_exist=(("connectorId", "Connector"),)),
    _op("WorkflowService", "CreateForm", m.Form, "form", "Form"),
    _op("ChangeAuthorizationService", "CreateSigningKey", m.SigningKey, "signingKey",
        "SigningKey"),
    _op("ChangeAuthorizationService", "UpdateSigningKey", m.SigningKey, "signingKey",
        "SigningKey", verb="update", retry_safe=True, must_exist=(("id", "SigningKey"),)),
    _op("InventoryService", "CreateDataLabel", m.DataLabel, "dataLabel", "DataLabel"),
    _op("ScenarioMonitoringService", "CreateScenarioMonitor", m.IdResult, None,
        "ScenarioMonitor"),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
BY_PATH: dict[str, Operation] = {op.path: op for op in OPERATIONS}


def readable_kinds() -> frozenset[str]:
    """Kinds that some read operation returns (today: none of the managed kinds)."""
    return frozenset(op.kind for op in OPERATIONS if op.verb == "read" and op.kind)
