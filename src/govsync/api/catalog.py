"""The catalog of the API's 30 operations: one row each.

The client, the reference server and the OpenAPI document are generated from
these rows; nothing else lists operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from govsync.api.checks import WRAPS

if TYPE_CHECKING:
    from pydantic import BaseModel

# The largest request body the API accepts (api-spec: "a body over 1 MiB").
MAX_REQUEST_BYTES = 1024 * 1024
# The API's integers are 64-bit (signed or unsigned).
INT_MIN, INT_MAX = -(2**63), 2**64 - 1


@dataclass(frozen=True)
class Operation:
    """One operation of the API (api-spec.md): its path, its models and how its answer wraps
    the object."""

    service: str
    name: str
    # The pydantic models, by name in govsync.api.models: imported on first use,
    # so that commands that never send a request never import pydantic.
    response_model: str
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

    @property
    def request(self) -> type[BaseModel]:
        from govsync.api import models

        model: type[BaseModel] = getattr(models, f"{self.name}Request")
        return model

    @property
    def response(self) -> type[BaseModel]:
        from govsync.api import models

        model: type[BaseModel] = getattr(models, self.response_model)
        return model

    @property
    def wrap(self) -> str | None:
        """The key the request wraps its object under (``{"hook": {...}}``), if any."""
        return WRAPS.get(f"{self.name}Request")


def _op(
    service: str,
    name: str,
    response: str,
    response_key: str | None,
    kind: str | None,
    **kw: object,
) -> Operation:
    return Operation(service, name, response, response_key, kind=kind, **kw)  # type: ignore[arg-type]


OPERATIONS: tuple[Operation, ...] = (
    _op("ConnectorService", "CreateConnector", "Connector", "connector", "Connector",
        must_exist=(("spaceId", "Space"),)),
    _op("ConnectorService", "UpdateConnectorAiProviderV2", "ConnectorAiProvider",
        "connectorAiProvider", "ConnectorAIProvider", verb="update", retry_safe=True,
        must_exist=(("connectorAiProvider.connectorId", "Connector"),)),
    _op("ConnectorService", "UpdateConnectorListenerLink", "ConnectorListenerLink",
        "connectorListenerLink", "ConnectorListenerLink", verb="update", retry_safe=True,
        must_exist=(("id", "ConnectorListenerLink"),)),
    _op("SidecarService", "CreateSidecar", "Sidecar", "sidecar", "Sidecar"),
    _op("SidecarService", "UpdateSidecarResourceLink", "SidecarResourceLink", "link",
        "SidecarResourceLink", verb="update", retry_safe=True,
        must_exist=(("id", "SidecarResourceLink"),)),
    _op("SatelliteService", "CreateSatellite", "Satellite", "satellite", "Satellite",
        must_exist=(("spaceId", "Space"),)),
    _op("SpaceService", "CreateSpace", "Space", "space", "Space"),
    _op("ResourceService", "CreateResourceAlias", "ResourceAlias", None, "ResourceAlias",
        must_exist=(("resourceId", "Resource"),)),
    _op("ResourceService", "CreateDataDiscoveryConfiguration", "DataDiscoveryConfiguration",
        "dataDiscoveryConfiguration", "DataDiscoveryConfiguration",
        must_exist=(("resourceId", "Resource"), ("nativeUserId", "NativeUser"))),
    _op("NativeUserService", "CreateNativeUserV3", "NativeUser", "nativeUser", "NativeUser",
        must_exist=(("resourceId", "Resource"),)),
    _op("GroupService", "ListGroups", "ListGroupsResponse", None, None, verb="read",
        retry_safe=True),
    _op("UserService", "CreateBlockedUser", "IdResult", None, "BlockedUser", retry_safe=True,
        must_exist=(("id", "User"),)),
    _op("PoliciesService", "CreatePolicy", "Policy", "policy", "Policy"),
    _op("PoliciesService", "CreatePolicySuspension", "PolicySuspension", "policySuspension",
        "PolicySuspension", must_exist=(("policyId", "Policy"),)),
    _op("PoliciesService", "CreatePolicyReport", "PolicyReportResult", None, "PolicyReport",
        id_field="reportId", must_exist=(("policyId", "Policy"),)),
    _op("PolicyDataLoaderService", "CreatePolicyDataLoader", "PolicyDataLoader",
        "policyDataLoader", "PolicyDataLoader"),
    _op("HookService", "CreateHook", "Hook", "hook", "Hook"),
    _op("HookService", "UpdateHook", "Hook", "hook", "Hook", verb="update", retry_safe=True,
        must_exist=(("hook.id", "Hook"),)),
    _op("PermissionsService", "CreatePermission", "Permission", "permission", "Permission",
        connect=True),
    _op("IntegrationsLogService", "CreateIntegrationLog", "Integration", "integration",
        "LogIntegration", secret_paths=("logStoreB.apiKey", "logStoreD.accessToken")),
    _op("IntegrationBIService", "CreateBIIntegration", "Integration", "integration",
        "BIIntegration", must_exist=(("linkedDbUserId", "NativeUser"),),
        secret_paths=("biA.biAApiKey", "biA.biAApiSecret", "biB.password")),
    _op("IntegrationMDMService", "CreateIntegrationMDM", "Integration", "integration",
        "MDMIntegration", secret_paths=("mdmA.apiKey", "mdmB.apiKey", "mdmC.apiKey")),
    _op("IntegrationAIProviderService", "CreateIntegrationAIProvider", "Integration",
        "integration", "AIProviderIntegration", secret_paths=("apiKey",)),
    _op("LogsService", "CreateLogQuery", "IdResult", None, "LogQuery"),
    _op("SessionsService", "CreateSessionTermination", "SessionShutdown", "sessionShutdown",
        "SessionTermination", id_field="sessionId", must_exist=(("connectorId", "Connector"),)),
    _op("WorkflowService", "CreateForm", "Form", "form", "Form"),
    _op("ChangeAuthorizationService", "CreateSigningKey", "SigningKey", "signingKey",
        "SigningKey"),
    _op("ChangeAuthorizationService", "UpdateSigningKey", "SigningKey", "signingKey",
        "SigningKey", verb="update", retry_safe=True, must_exist=(("id", "SigningKey"),)),
    _op("InventoryService", "CreateDataLabel", "DataLabel", "dataLabel", "DataLabel"),
    _op("ScenarioMonitoringService", "CreateScenarioMonitor", "IdResult", None,
        "ScenarioMonitor"),
)

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
BY_PATH: dict[str, Operation] = {op.path: op for op in OPERATIONS}


def readable_kinds() -> frozenset[str]:
    """Kinds that some read operation returns (today: none of the managed kinds)."""
    return frozenset(op.kind for op in OPERATIONS if op.verb == "read" and op.kind)
