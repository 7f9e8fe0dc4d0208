"""Pydantic models of the reads, updates and deletes (``shared/api-lifecycle.md``).

The spec's own operations keep their models in ``models.py``; this module
holds the requests and answers only api-lifecycle.md lists, in the same
conventions (strict, unknown fields refused).  A Get or a Delete takes
``IdRequest``; a List ``ListRequest`` (paged like ListGroups), with search
and filter where the catalog says so, and a scoping id where it has one.  A
replace-all update (``…V2``) wraps the whole object: its create request's
fields, its ``id``, and the fields only the server sets (accepted, ignored),
so that an object as read can be sent back with the client's fields laid over
it.  The catalog (``catalog.py``) names these models per operation.  So does it for
the operations ``policy-code.md`` lists beside the spec's (GetPolicyCodeValidity).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator
from pydantic_core import PydanticCustomError

from govsync.api.models import (
    Connector,
    CreateConnectorRequest,
    CreateDataDiscoveryConfigurationRequest,
    CreateDataLabelRequest,
    CreateFormRequest,
    CreateLogQueryRequest,
    CreatePermissionRequest,
    CreatePolicyDataLoaderRequest,
    CreatePolicyRequest,
    CreateSatelliteRequest,
    CreateScenarioMonitorRequest,
    CreateSpaceRequest,
    GroupFilterValue,
    ListGroupsRequest,
    Model,
    NativeUserCredentials,
    NonEmpty,
    Output,
    Policy,
    Satellite,
    SidecarName,
    Timestamp,
)

# Fields every object carries that only the server sets.
SERVER_FIELDS = ("id", "createdAt", "updatedAt")

# --- Get and Delete --------------------------------------------------------------


class IdRequest(Model):
    id: NonEmpty


class ConnectorIdRequest(Model):
    connectorId: NonEmpty


class GetDataDiscoveryConfigurationRequest(Model):
    """The configuration by its id (the SDK's ``dataDiscoveryConfigurationId``, or ``id``),
    or by its resource's (the resource's first configuration)."""

    dataDiscoveryConfigurationId: NonEmpty | None = None
    resourceId: NonEmpty | None = None
    id: NonEmpty | None = None

    VARIANTS = ("dataDiscoveryConfigurationId", "resourceId", "id")


class DeleteBlockedUserRequest(Model):
    id: NonEmpty
    reason: str = ""


# --- List ------------------------------------------------------------------------


class ObjectFieldFilter(Model):
    key: Literal["id", "name", "description", "terminationProtection"]
    value: GroupFilterValue


class ObjectFilter(Model):
    field: ObjectFieldFilter | None = None
    group: ObjectFilterGroup | None = None


class ObjectFilterGroup(Model):
    filters: list[ObjectFilter] = []


ObjectFilter.model_rebuild()


class ListRequest(Model):
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str = ""
    order: str = Field(default="", pattern=ListGroupsRequest.model_fields["order"].metadata[0].pattern,
                       description="Sort field, `-field` or `field desc` for descending; default name.")


class SearchListRequest(ListRequest):
    search: str = ""
    searchFields: list[Literal["name", "description", "id"]] = []
    filter: ObjectFilter | None = None


class ListInSpaceRequest(SearchListRequest):
    spaceId: NonEmpty | None = None


class ListOfResourceRequest(ListRequest):
    resourceId: NonEmpty


class ListConnectorListenerLinksRequest(ListRequest):
    connectorId: NonEmpty | None = None
    listenerId: NonEmpty | None = None

    VARIANTS = ("connectorId", "listenerId")


class ListSidecarResourceLinksRequest(ListRequest):
    sidecarId: NonEmpty | None = None
    resourceId: NonEmpty | None = None

    VARIANTS = ("sidecarId", "resourceId")


# --- Update ----------------------------------------------------------------------


class UpdateSidecarRequest(Model):
    id: NonEmpty
    name: SidecarName | None = None
    hostname: NonEmpty | None = None
    terminationProtection: bool | None = None


class UpdateNativeUserV3Request(Model):
    id: NonEmpty
    label: str | None = None
    terminationProtection: bool | None = None
    credentials: NativeUserCredentials | None = None


class UpdateResourceAliasRequest(Model):
    id: NonEmpty
    alias: NonEmpty


def _replace_all(name: str, key: str, create: type[Model],
                 returned: type[BaseModel] | None = None) -> type[Model]:
    """``{key: object}``: the create's fields, ``id``, the timestamps, and the fields only
    the returned object has (read-only: accepted, ignored)."""
    extra: dict[str, Any] = {"id": (NonEmpty, ...), "createdAt": (Timestamp | None, None),
                             "updatedAt": (Timestamp | None, None)}
    for field in (returned.model_fields if returned else ()):
        if field not in create.model_fields and field not in extra:
            extra[field] = (Any, None)
    inner = create_model(f"{name.removeprefix('Update').removesuffix('V2')}Input",
                         __base__=create, **extra)
    wrapped: dict[str, Any] = {key: (inner, ...)}
    return create_model(f"{name}Request", __base__=Model, **wrapped)


class OwnerRef(Model):
    """The group or the user of a policy's owner as read: named by its ``id``; the rest of
    what the read returned is read-only (accepted, ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: NonEmpty


class PolicyOwnerInput(Model):
    """One owner of a policy as read: exactly one of its group and its user."""

    group: OwnerRef | None = None
    user: OwnerRef | None = None

    VARIANTS = ("group", "user")


class PolicyAsRead(CreatePolicyRequest):
    """UpdatePolicyV2's policy: the object as a read returns it, sent back whole.  Its
    owner is ``owners`` as read (what the service's own clients send), or one of
    ``groupName`` and ``userEmail`` in their place (what govsync's manifests write);
    ``owners`` left out or empty keep the stored ones."""

    owners: list[PolicyOwnerInput] | None = None

    VARIANTS = ()

    @model_validator(mode="after")
    def _one_owner_named(self) -> PolicyAsRead:
        named = [k for k in ("groupName", "userEmail") if getattr(self, k) is not None]
        if len(named) > 1:
            raise PydanticCustomError("at_most_one", "at most one of {fields} may be set "
                                      "(got {got})",
                                      {"fields": "groupName, userEmail", "got": ", ".join(named)})
        return self


class PolicyReport(Output):
    """A report as GetPolicyReport answers it (the SDK's PolicyReport; policy-code.md):
    ``evaluationStart`` is where its window of logged requests begins; ``status``
    ``completed`` or ``failed`` once done (any other value: still running)."""

    id: str
    policyCode: str = ""
    policyId: str = ""
    logQuery: str = ""
    evaluationStart: str
    createdAt: str
    createdBy: str
    status: str


class LogQuery(Output):
    """A saved query as GetLogQuery answers it (the SDK's LogQueryMetadata)."""

    id: str
    name: str
    createdBy: str
    query: dict[str, Any]


class ScenarioMonitor(Output):
    id: str
    name: str
    scenario: str = ""
    status: str
    createdAt: str
    updatedAt: str


class BlockedUserStatus(Output):
    id: str
    blocked: bool


class EmptyResult(Output):
    """``{}``: the answer of a delete that returns nothing."""


# --- policy-code.md: the operations beside the spec's ---------------------------------


class GetPolicyCodeValidityRequest(Model):
    code: str


class PolicyCodeValidity(Output):
    """Whether a policy's code compiles; ``ast`` the compiled module (the text a stored
    policy's ``ast`` holds), ``error`` why it does not compile, with its line."""

    valid: bool
    ast: str = ""
    error: str = ""


class ListPolicyImpactReportLogsRequest(Model):
    """A page of what an impact report found, paged as every List; ``query`` keeps the
    logs it selects (``field:value`` terms, all of them)."""

    reportId: NonEmpty
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str = ""
    query: str = ""


class GetPolicyImpactReportGraphRequest(Model):
    reportId: NonEmpty
    query: str = ""


class TriggeredPolicy(Output):
    """A policy a logged request triggered: ``type`` is its decision's action."""

    id: str
    name: str
    status: str
    type: str


class PolicyImpactReportLog(Output):
    """One logged request on which the report's code decides other than allow: its
    stage, the decision, and who and what it was (``input``: its user and resource)."""

    id: str
    time: str
    stage: str
    decision: dict[str, Any]
    triggeredPolicies: list[TriggeredPolicy]
    input: dict[str, Any] = {}


class GraphAction(Output):
    name: str
    count: int


class GraphEdge(Output):
    """Requests from one user to one resource: how many, how many the code triggered on,
    and by action (the SDK's core.v1.Edge)."""

    id: str
    sourceId: str
    targetId: str
    requestCount: int
    triggeredPolicyIds: list[str] = []
    triggeredPolicyCount: int
    actions: list[GraphAction] = []


class PolicyImpactReportGraph(Output):
    """The report's requests as a graph, users to resources (the SDK's core.v1.Graph):
    ``nodes`` each ``{id, userNode | resourceNode: {id, name, ...}}``."""

    nodes: list[dict[str, Any]] = []
    edges: list[GraphEdge] = []


UpdateSpaceV2Request = _replace_all("UpdateSpaceV2", "space", CreateSpaceRequest)
UpdateConnectorV2Request = _replace_all("UpdateConnectorV2", "connector", CreateConnectorRequest,
                                        Connector)
UpdateSatelliteV2Request = _replace_all("UpdateSatelliteV2", "satellite", CreateSatelliteRequest,
                                        Satellite)
UpdateDataDiscoveryConfigurationV2Request = _replace_all(
    "UpdateDataDiscoveryConfigurationV2", "dataDiscoveryConfiguration",
    CreateDataDiscoveryConfigurationRequest)
UpdatePolicyV2Request = _replace_all("UpdatePolicyV2", "policy", PolicyAsRead, Policy)
UpdatePolicyDataLoaderV2Request = _replace_all("UpdatePolicyDataLoaderV2", "policyDataLoader",
                                               CreatePolicyDataLoaderRequest)
UpdatePermissionV2Request = _replace_all("UpdatePermissionV2", "permission",
                                         CreatePermissionRequest)
UpdateDataLabelV2Request = _replace_all("UpdateDataLabelV2", "dataLabel", CreateDataLabelRequest)
UpdateLogQueryV2Request = _replace_all("UpdateLogQueryV2", "metadata", CreateLogQueryRequest,
                                       LogQuery)
UpdateFormV2Request = _replace_all("UpdateFormV2", "form", CreateFormRequest)
UpdateScenarioMonitorV2Request = _replace_all("UpdateScenarioMonitorV2", "scenarioMonitor",
                                              CreateScenarioMonitorRequest)
