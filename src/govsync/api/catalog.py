"""The catalog of the API's operations: one row each.

``SPEC`` holds the 30 operations api-spec.md shows (creates, four updates,
ListGroups); ``LIFECYCLE`` the reads, updates and deletes api-lifecycle.md
lists per kind (contract section 12); ``CODE`` the operations on code policy-code.md
lists beside the spec's (GetPolicyCodeValidity, and what an impact report found:
ListPolicyImpactReportLogs, GetPolicyImpactReportGraph).  The client, the reference server and
the OpenAPI document are generated from these rows; nothing else lists
operations.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from govsync import errors
from govsync.api._generated_checks import WRAPS

if TYPE_CHECKING:
    from pydantic import BaseModel

# Every operation is POST {base}/core.v1.<Service>/<Operation>.
PATH_PREFIX = "/core.v1."
# The largest request body the API accepts (api-spec: "a body over 1 MiB").
MAX_REQUEST_BYTES = 1024 * 1024
# The API's integers are 64-bit (signed or unsigned).
INT_MIN, INT_MAX = -(2**63), 2**64 - 1


class Verb(StrEnum):
    """What an operation does to the object of its kind."""

    CREATE = "create"
    UPDATE = "update"
    GET = "get"
    LIST = "list"
    DELETE = "delete"
    # A question about what is sent, answered without a side effect (GetPolicyCodeValidity).
    CHECK = "check"
    # What an action of its kind found, read by the action's id (``by``): an impact
    # report's logs, page by page, and its graph.
    RESULTS = "results"

    @property
    def reads(self) -> bool:
        """Free of side effects (a viewer key may call it; always safe to retry)."""
        return self in (Verb.GET, Verb.LIST, Verb.CHECK, Verb.RESULTS)


class UpdateStyle(StrEnum):
    """How an update treats the fields it is not sent (api-lifecycle.md, Conventions)."""

    REPLACE_ALL = "replace-all"  # every mutable field is replaced by what is sent
    SPARSE = "sparse"  # an absent field is left unchanged


class Scope(NamedTuple):
    """A List's scoping id: request ``field`` keeps the objects whose ``path`` equals it."""

    field: str
    path: str


class Operation(NamedTuple):
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
    # Kind of object it creates, reads, updates or deletes (kind table names,
    # or a kind only a seed creates: Group).
    kind: str | None = None
    verb: Verb = Verb.CREATE
    # Safe to send again after an ambiguous failure (idempotent).
    retry_safe: bool = False
    # Shown in api-spec.md (False: api-lifecycle.md only; `serve --operations
    # spec` answers those 404).
    spec: bool = False
    # The request model by name in govsync.api.models, when it is not
    # ``<name>Request`` (Gets and Deletes share ``IdRequest``).
    request_model: str | None = None
    # Get, Delete and sparse Update: the request field naming the object (a
    # connector AI provider is named by its connectorId).
    by: str = "id"
    # Get: other request fields that may name the object instead, each with the stored
    # field it matches (the request model takes exactly one of them and ``by``).
    also_by: tuple[tuple[str, str], ...] = ()
    # Update: replace-all or sparse; the fields it cannot change (ignored).
    style: UpdateStyle | None = None
    read_only: tuple[str, ...] = ()
    # List: its scoping ids (at least one required when scope_required), and
    # whether it takes search, searchFields and filter as ListGroups does.
    scope: tuple[Scope, ...] = ()
    scope_required: bool = False
    search: bool = False
    # Request fields (dotted) that must name an existing object: (path, kind).
    must_exist: tuple[tuple[str, str], ...] = ()
    # Header handling of the Connect protocol (CreatePermission only).
    connect: bool = False
    # Dotted request paths that are secret: never logged or echoed.
    secret_paths: tuple[str, ...] = ()
    # Results answered a page at a time, ``{key: [...], listMetadata}``, as every List.
    pages: bool = False

    @property
    def paged(self) -> bool:
        """Answers one page and its ``listMetadata`` (every List, an impact report's logs)."""
        return self.verb == Verb.LIST or self.pages

    @property
    def sends(self) -> str:
        """The request field a client names the object by: the service's own name for the
        object's id where it has one (``dataDiscoveryConfigurationId``), else ``by``."""
        if self.by == "id":
            return next((field for field, matched in self.also_by if matched == "id"), "id")
        return self.by

    @property
    def path(self) -> str:
        return f"{PATH_PREFIX}{self.service}/{self.name}"

    @property
    def request(self) -> type[BaseModel]:
        return _model(self.request_model or f"{self.name}Request")

    @property
    def response(self) -> type[BaseModel]:
        return _model(self.response_model)

    @property
    def wrap(self) -> str | None:
        """The key the request wraps its object under (``{"hook": {...}}``), if any."""
        return WRAPS.get(f"{self.name}Request")


def _model(name: str) -> type[BaseModel]:
    """A model by name: the spec's (``models``) or api-lifecycle.md's (``lifecycle``)."""
    from govsync.api import lifecycle, models

    model: type[BaseModel] = getattr(models, name, None) or getattr(lifecycle, name)
    return model


def _op(
    service: str,
    name: str,
    response: str,
    response_key: str | None,
    kind: str | None,
    **kw: object,
) -> Operation:
    """A row of api-spec.md."""
    return Operation(service, name, response, response_key, kind=kind, spec=True, **kw)  # type: ignore[arg-type]


SPEC: tuple[Operation, ...] = (
    _op("ConnectorService", "CreateConnector", "Connector", "connector", "Connector",
        must_exist=(("spaceId", "Space"),)),
    _op("ConnectorService", "UpdateConnectorAiProviderV2", "ConnectorAiProvider",
        "connectorAiProvider", "ConnectorAIProvider", verb=Verb.UPDATE, retry_safe=True,
        style=UpdateStyle.REPLACE_ALL, read_only=("connectorId",), by="connectorId",
        must_exist=(("connectorAiProvider.connectorId", "Connector"),)),
    _op("ConnectorService", "UpdateConnectorListenerLink", "ConnectorListenerLink",
        "connectorListenerLink", "ConnectorListenerLink", verb=Verb.UPDATE, retry_safe=True,
        style=UpdateStyle.SPARSE, must_exist=(("id", "ConnectorListenerLink"),)),
    _op("SidecarService", "CreateSidecar", "Sidecar", "sidecar", "Sidecar"),
    _op("SidecarService", "UpdateSidecarResourceLink", "SidecarResourceLink", "link",
        "SidecarResourceLink", verb=Verb.UPDATE, retry_safe=True, style=UpdateStyle.SPARSE,
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
    _op("GroupService", "ListGroups", "Group", "groups", "Group", verb=Verb.LIST,
        retry_safe=True, search=True),
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
    # api-spec.md's UpdateHook carries no status (its answer does): one sent is ignored,
    # as a read-modify-write client sends the hook as read.
    _op("HookService", "UpdateHook", "Hook", "hook", "Hook", verb=Verb.UPDATE, retry_safe=True,
        style=UpdateStyle.REPLACE_ALL, read_only=("status",),
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
        "SigningKey", verb=Verb.UPDATE, retry_safe=True, style=UpdateStyle.SPARSE,
        read_only=("name", "publicKey", "algorithm"), must_exist=(("id", "SigningKey"),)),
    _op("InventoryService", "CreateDataLabel", "DataLabel", "dataLabel", "DataLabel"),
    _op("ScenarioMonitoringService", "CreateScenarioMonitor", "IdResult", None,
        "ScenarioMonitor"),
)


# --- api-lifecycle.md: the reads, updates and deletes, per kind ------------------


def _get(service: str, name: str, key: str | None, kind: str, response: str, *,
         by: str = "id", request_model: str = "IdRequest",
         also_by: tuple[tuple[str, str], ...] = ()) -> Operation:
    """A Get: ``{"id"}`` (or ``by``, or one of ``also_by``) -> ``{key: object}``."""
    return Operation(service, name, response, key, kind=kind, verb=Verb.GET, retry_safe=True,
                     request_model=request_model, by=by, also_by=also_by)


def _list(service: str, name: str, key: str, kind: str, response: str, *,
          search: bool = False, scope: tuple[Scope, ...] = (), scope_required: bool = False,
          request: str | None = None) -> Operation:
    """A List, paged like ListGroups: ``{key: [objects], listMetadata}``."""
    model = request or ("SearchListRequest" if search else "ListRequest")
    return Operation(service, name, response, key, kind=kind, verb=Verb.LIST, retry_safe=True,
                     request_model=model, search=search, scope=scope,
                     scope_required=scope_required)


def _replace_all(service: str, name: str, key: str, kind: str, response: str, *,
                 read_only: tuple[str, ...] = (),
                 must_exist: tuple[tuple[str, str], ...] = ()) -> Operation:
    """A ``…V2`` update: ``{key: whole object}`` -> ``{key: object}``."""
    return Operation(service, name, response, key, kind=kind, verb=Verb.UPDATE,
                     style=UpdateStyle.REPLACE_ALL, read_only=read_only,
                     must_exist=((f"{key}.id", kind), *must_exist))


def _sparse(service: str, name: str, key: str | None, kind: str, response: str, *,
            read_only: tuple[str, ...] = ()) -> Operation:
    """A sparse update: ``{"id", field?...}``, an absent field left unchanged."""
    return Operation(service, name, response, key, kind=kind, verb=Verb.UPDATE,
                     style=UpdateStyle.SPARSE, read_only=read_only, must_exist=(("id", kind),))


def _delete(service: str, name: str, kind: str, *, empty: bool = False,
            request: str = "IdRequest", by: str = "id") -> Operation:
    """A Delete: ``{"id"}`` -> ``{"id"}``, or ``{}`` where api-lifecycle.md says so."""
    return Operation(service, name, "EmptyResult" if empty else "IdResult", None, kind=kind,
                     verb=Verb.DELETE, request_model=request, by=by)


_SPACE = (("spaceId", "Space"),)
_IN_SPACE = (Scope("spaceId", "spaceId"),)
_OF_RESOURCE = (Scope("resourceId", "resourceId"),)

LIFECYCLE: tuple[Operation, ...] = (
    _get("SpaceService", "GetSpace", "space", "Space", "Space"),
    _list("SpaceService", "ListSpaces", "spaces", "Space", "Space", search=True),
    _replace_all("SpaceService", "UpdateSpaceV2", "space", "Space", "Space"),
    _delete("SpaceService", "DeleteSpace", "Space"),

    _get("ConnectorService", "GetConnector", "Connector", "Connector", "Connector"),
    _list("ConnectorService", "ListConnectors", "connectors", "Connector", "Connector",
          search=True, scope=_IN_SPACE, request="ListInSpaceRequest"),
    _replace_all("ConnectorService", "UpdateConnectorV2", "connector", "Connector", "Connector",
                 must_exist=(("connector.spaceId", "Space"),)),
    _delete("ConnectorService", "DeleteConnector", "Connector"),

    _get("SatelliteService", "GetSatellite", "satellite", "Satellite", "Satellite"),
    _list("SatelliteService", "ListSatellites", "satellites", "Satellite", "Satellite",
          search=True, scope=_IN_SPACE, request="ListInSpaceRequest"),
    _replace_all("SatelliteService", "UpdateSatelliteV2", "satellite", "Satellite", "Satellite",
                 read_only=("satelliteType",), must_exist=(("satellite.spaceId", "Space"),)),
    _delete("SatelliteService", "DeleteSatellite", "Satellite"),

    _get("SidecarService", "GetSidecar", "sidecar", "Sidecar", "Sidecar"),
    _list("SidecarService", "ListSidecars", "sidecars", "Sidecar", "Sidecar"),
    _sparse("SidecarService", "UpdateSidecar", "sidecar", "Sidecar", "Sidecar",
            read_only=("technology",)),
    _delete("SidecarService", "DeleteSidecar", "Sidecar"),

    _get("ConnectorService", "GetConnectorListenerLink", "connectorListenerLink",
         "ConnectorListenerLink", "ConnectorListenerLink"),
    _list("ConnectorService", "ListConnectorListenerLinks", "links", "ConnectorListenerLink",
          "ConnectorListenerLink", request="ListConnectorListenerLinksRequest",
          scope=(Scope("connectorId", "connector.id"), Scope("listenerId", "listener.id")),
          scope_required=True),
    _delete("ConnectorService", "DeleteConnectorListenerLink", "ConnectorListenerLink"),

    _get("SidecarService", "GetSidecarResourceLink", "link", "SidecarResourceLink",
         "SidecarResourceLink"),
    _list("SidecarService", "ListSidecarResourceLinks", "links", "SidecarResourceLink",
          "SidecarResourceLink", request="ListSidecarResourceLinksRequest",
          scope=(Scope("sidecarId", "sidecar.id"), Scope("resourceId", "resource.id")),
          scope_required=True),
    _delete("SidecarService", "DeleteSidecarResourceLink", "SidecarResourceLink"),

    _sparse("ResourceService", "UpdateResourceAlias", None, "ResourceAlias", "ResourceAlias",
            read_only=("resourceId",)),
    _delete("ResourceService", "DeleteResourceAlias", "ResourceAlias", empty=True),

    _get("NativeUserService", "GetNativeUserV3", "nativeUser", "NativeUser", "NativeUser"),
    _list("NativeUserService", "ListNativeUsersV3", "nativeUsers", "NativeUser", "NativeUser",
          request="ListOfResourceRequest", scope=_OF_RESOURCE, scope_required=True),
    _sparse("NativeUserService", "UpdateNativeUserV3", "nativeUser", "NativeUser", "NativeUser",
            read_only=("resourceId",)),
    _delete("NativeUserService", "DeleteNativeUserV3", "NativeUser"),

    # The SDK names the configuration by its id or by its resource's; {id} is accepted.
    _get("ResourceService", "GetDataDiscoveryConfiguration", "dataDiscoveryConfiguration",
         "DataDiscoveryConfiguration", "DataDiscoveryConfiguration",
         request_model="GetDataDiscoveryConfigurationRequest",
         also_by=(("dataDiscoveryConfigurationId", "id"), ("resourceId", "resourceId"))),
    _list("ResourceService", "ListDataDiscoveryConfigurations", "dataDiscoveryConfigurations",
          "DataDiscoveryConfiguration", "DataDiscoveryConfiguration",
          request="ListOfResourceRequest", scope=_OF_RESOURCE, scope_required=True),
    _replace_all("ResourceService", "UpdateDataDiscoveryConfigurationV2",
                 "dataDiscoveryConfiguration", "DataDiscoveryConfiguration",
                 "DataDiscoveryConfiguration", read_only=("resourceId",),
                 must_exist=(("dataDiscoveryConfiguration.nativeUserId", "NativeUser"),)),
    _delete("ResourceService", "DeleteDataDiscoveryConfiguration", "DataDiscoveryConfiguration"),

    _get("PoliciesService", "GetPolicy", "policy", "Policy", "Policy"),
    _list("PoliciesService", "ListPolicies", "policies", "Policy", "Policy", search=True),
    _replace_all("PoliciesService", "UpdatePolicyV2", "policy", "Policy", "Policy",
                 read_only=("ast", "version")),
    _delete("PoliciesService", "DeletePolicy", "Policy"),

    _get("PoliciesService", "GetPolicySuspension", "policySuspension", "PolicySuspension",
         "PolicySuspension"),
    _list("PoliciesService", "ListPolicySuspensions", "policySuspensions", "PolicySuspension",
          "PolicySuspension"),
    _delete("PoliciesService", "DeletePolicySuspension", "PolicySuspension"),

    _get("PoliciesService", "GetPolicyReport", "report", "PolicyReport", "PolicyReport"),

    _get("PolicyDataLoaderService", "GetPolicyDataLoader", "policyDataLoader",
         "PolicyDataLoader", "PolicyDataLoader"),
    _list("PolicyDataLoaderService", "ListPolicyDataLoaders", "policyDataLoaders",
          "PolicyDataLoader", "PolicyDataLoader", search=True),
    _replace_all("PolicyDataLoaderService", "UpdatePolicyDataLoaderV2", "policyDataLoader",
                 "PolicyDataLoader", "PolicyDataLoader"),
    _delete("PolicyDataLoaderService", "DeletePolicyDataLoader", "PolicyDataLoader"),

    _get("HookService", "GetHook", "hook", "Hook", "Hook"),
    _list("HookService", "ListHooks", "hooks", "Hook", "Hook", search=True),
    _delete("HookService", "DeleteHook", "Hook"),

    _get("PermissionsService", "GetPermission", "permission", "Permission", "Permission"),
    _list("PermissionsService", "ListPermissions", "permissions", "Permission", "Permission",
          search=True),
    _replace_all("PermissionsService", "UpdatePermissionV2", "permission", "Permission",
                 "Permission"),
    _delete("PermissionsService", "DeletePermission", "Permission"),

    _get("IntegrationsLogService", "GetIntegrationLog", "integration", "LogIntegration",
         "Integration"),
    _list("IntegrationsLogService", "ListIntegrationLogs", "integrations", "LogIntegration",
          "Integration", search=True),
    _delete("IntegrationsLogService", "DeleteIntegrationLog", "LogIntegration"),

    _get("IntegrationBIService", "GetBIIntegration", "integration", "BIIntegration",
         "Integration"),
    _list("IntegrationBIService", "ListBIIntegrations", "integrations", "BIIntegration",
          "Integration", search=True),
    _delete("IntegrationBIService", "DeleteBIIntegration", "BIIntegration"),

    _get("IntegrationMDMService", "GetIntegrationMDM", "integration", "MDMIntegration",
         "Integration"),
    _list("IntegrationMDMService", "ListIntegrationsMDM", "integrations", "MDMIntegration",
          "Integration", search=True),
    _delete("IntegrationMDMService", "DeleteIntegrationMDM", "MDMIntegration"),

    _get("IntegrationAIProviderService", "GetIntegrationAIProvider", "integration",
         "AIProviderIntegration", "Integration"),
    _list("IntegrationAIProviderService", "ListIntegrationsAIProvider", "integrations",
          "AIProviderIntegration", "Integration"),
    _delete("IntegrationAIProviderService", "DeleteIntegrationAIProvider",
            "AIProviderIntegration"),

    _get("ConnectorService", "GetConnectorAiProvider", "connectorAiProvider",
         "ConnectorAIProvider", "ConnectorAiProvider", by="connectorId",
         request_model="ConnectorIdRequest"),
    _delete("ConnectorService", "DeleteConnectorAiProvider", "ConnectorAIProvider", empty=True),

    _list("ChangeAuthorizationService", "ListSigningKeys", "signingKeys", "SigningKey",
          "SigningKey"),
    _delete("ChangeAuthorizationService", "DeleteSigningKey", "SigningKey"),

    _get("InventoryService", "GetDataLabel", "dataLabel", "DataLabel", "DataLabel"),
    _list("InventoryService", "ListDataLabels", "dataLabels", "DataLabel", "DataLabel"),
    _replace_all("InventoryService", "UpdateDataLabelV2", "dataLabel", "DataLabel", "DataLabel"),
    _delete("InventoryService", "DeleteDataLabel", "DataLabel"),

    _get("LogsService", "GetLogQuery", "metadata", "LogQuery", "LogQuery"),
    _list("LogsService", "ListLogQueries", "savedQueries", "LogQuery", "LogQuery"),
    _replace_all("LogsService", "UpdateLogQueryV2", "metadata", "LogQuery", "LogQuery"),
    _delete("LogsService", "DeleteLogQuery", "LogQuery", empty=True),

    _get("WorkflowService", "GetForm", "form", "Form", "Form"),
    _list("WorkflowService", "ListForms", "forms", "Form", "Form", search=True),
    _replace_all("WorkflowService", "UpdateFormV2", "form", "Form", "Form"),
    _delete("WorkflowService", "DeleteForm", "Form"),

    _get("ScenarioMonitoringService", "GetScenarioMonitor", "monitor", "ScenarioMonitor",
         "ScenarioMonitor"),
    _list("ScenarioMonitoringService", "ListScenarioMonitors", "monitors", "ScenarioMonitor",
          "ScenarioMonitor"),
    _replace_all("ScenarioMonitoringService", "UpdateScenarioMonitorV2", "scenarioMonitor",
                 "ScenarioMonitor", "ScenarioMonitor"),
    _delete("ScenarioMonitoringService", "DeleteScenarioMonitor", "ScenarioMonitor", empty=True),

    _get("UserService", "GetBlockedUser", None, "BlockedUser", "BlockedUserStatus"),
    _delete("UserService", "DeleteBlockedUser", "BlockedUser", request="DeleteBlockedUserRequest"),
)

# --- policy-code.md: the operations beside the spec's ------------------------------

CODE: tuple[Operation, ...] = (
    # Whether a policy's code compiles (the Terraform provider asks at plan time).
    Operation("PoliciesService", "GetPolicyCodeValidity", "PolicyCodeValidity", None,
              kind="Policy", verb=Verb.CHECK, retry_safe=True),
    # What an impact report found (CreatePolicyReport, GetPolicyReport): the logged
    # requests its code would trigger on, page by page, and their graph.
    Operation("PoliciesService", "ListPolicyImpactReportLogs", "PolicyImpactReportLog", "logs",
              kind="PolicyReport", verb=Verb.RESULTS, retry_safe=True, by="reportId",
              pages=True),
    Operation("PoliciesService", "GetPolicyImpactReportGraph", "PolicyImpactReportGraph",
              "graph", kind="PolicyReport", verb=Verb.RESULTS, retry_safe=True, by="reportId"),
)

OPERATIONS: tuple[Operation, ...] = SPEC + LIFECYCLE + CODE

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
BY_PATH: dict[str, Operation] = {op.path: op for op in OPERATIONS}


def operation(name: str | Operation) -> Operation:
    """The row of an operation named ``name`` (ValueError for a name no row has)."""
    if isinstance(name, Operation):
        return name
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown API operation {name!r}") from None


def unwrap(name: str | Operation, body: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The object an answer of the operation carries, and its id, as its row says
    (ApiError for an answer without one)."""
    op = operation(name)
    obj = body.get(op.response_key) if op.response_key else body
    if not isinstance(obj, Mapping):
        raise errors.ApiError(f"the answer has no object under {op.response_key!r}",
                              operation=op.name)
    ident = obj.get(op.id_field)
    return dict(obj), ident if isinstance(ident, str) else None


def readable_kinds() -> frozenset[str]:
    """Kinds that a read operation of api-spec.md returns (Group: none of the managed kinds).

    The reads of api-lifecycle.md are not counted: whether an endpoint offers
    them is learned per run (contract section 12)."""
    return frozenset(op.kind for op in SPEC if op.verb.reads and op.kind)


def of_kind(kind: str, verb: Verb) -> Operation | None:
    """The operation that does ``verb`` to a ``kind`` (a Get, a List, a Delete...), if any."""
    return _BY_KIND_VERB.get((kind, verb))


_BY_KIND_VERB: dict[tuple[str, Verb], Operation] = {}
for _row in OPERATIONS:
    # A kind has one operation of each verb, but for creates and what actions found.
    if _row.kind is not None and _row.verb not in (Verb.CREATE, Verb.RESULTS):
        assert (_row.kind, _row.verb) not in _BY_KIND_VERB, _row.name
        _BY_KIND_VERB[_row.kind, _row.verb] = _row
