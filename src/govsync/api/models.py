"""Pydantic models of the control API (``shared/api-spec.md``).

Requests are strict (no type coercion) and forbid unknown fields, so the
same models validate a manifest's ``spec`` offline, a request in the
reference server, and produce the OpenAPI document.  Field names are the
API's lowerCamelCase names.  Fields the spec leaves unnamed use the names of
contract section 1 (Policy ``notification``/``status``, PolicyDataLoader
``workerRuntime``/``status``).
"""

from __future__ import annotations

import calendar
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from govsync.api.status import SPEC_CODES

# --- scalar types ---------------------------------------------------------

NonEmpty = Annotated[str, Field(min_length=1)]
Identifier = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ConnectorName = Annotated[str, Field(min_length=3, max_length=256, pattern=r"^[0-9a-z\-]+$")]
SidecarName = Annotated[str, Field(min_length=3, max_length=63, pattern=r"^[0-9a-z\-]+$")]

# RFC 3339 date-time in UTC (``Z`` or ``+00:00``), 0001-01-01..9999-12-31, up to
# nanoseconds.  The same pattern is the OpenAPI document's; the day of the
# month is checked beside it (``format: date-time`` there).
TIMESTAMP_PATTERN = (
    r"^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|\+00:00)$"
)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)


def _check_timestamp(value: str) -> str:
    if not _TIMESTAMP.match(value):
        raise PydanticCustomError(
            "timestamp", "must be an RFC 3339 UTC timestamp such as 2024-01-31T12:00:00.000000000Z"
        )
    y, mo, d = int(value[:4]), int(value[5:7]), int(value[8:10])
    if d > calendar.monthrange(y, mo)[1]:
        raise PydanticCustomError("timestamp", "timestamp has no such day")
    return value


Timestamp = Annotated[
    str,
    AfterValidator(_check_timestamp),
    Field(json_schema_extra={"format": "date-time", "pattern": TIMESTAMP_PATTERN}),
]

# Sidecar technology: ssh, http, llm and multi are named by the spec; ten more
# values (database engines, storage, orchestrator, cloud platforms) are not
# reproduced there, so any lowercase token is accepted beside the four.
KNOWN_TECHNOLOGIES = ("ssh", "http", "llm", "multi")
Technology = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z][a-z0-9_\-]*$",
        json_schema_extra={"examples": list(KNOWN_TECHNOLOGIES)},
    ),
]


def _variants_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """``oneOf``: exactly one of the model's VARIANTS is present and not null."""
    variants: tuple[str, ...] = getattr(model, "VARIANTS", ())
    if variants:
        schema["oneOf"] = [
            {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
            for key in variants
        ]


class Model(BaseModel):
    """A request model: strict types, unknown fields rejected.

    A model with ``VARIANTS`` requires exactly one of those fields to be set
    (rule 1 of the spec: none or several is 400), in validation and in its
    JSON Schema alike.
    """

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_variants_schema,
                              defer_build=True)
    VARIANTS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _exactly_one_variant(self) -> Model:
        if self.VARIANTS:
            _exactly_one(self, self.VARIANTS)
        return self


class Output(BaseModel):
    """An object as the API returns it (documentation only)."""

    model_config = ConfigDict(extra="allow", defer_build=True)


def _exactly_one(model: BaseModel, keys: tuple[str, ...]) -> None:
    """Rule 1 of the spec: exactly one variant key; none or several is 400."""
    present = [k for k in keys if getattr(model, k) is not None]
    if len(present) != 1:
        got = "none" if not present else ", ".join(present)
        raise PydanticCustomError(
            "exactly_one",
            "exactly one of {fields} must be set (got {got})",
            {"fields": ", ".join(keys), "got": got},
        )


def wrap_key(request: type[BaseModel]) -> str | None:
    """The key a request wraps its object under (``{"hook": {...}}``), if any."""
    fields = request.model_fields
    if len(fields) != 1:
        return None
    (key, info), = fields.items()
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return key
    return None


class Empty(Model):
    """A variant without fields."""


# --- spaces, connectors, satellites, sidecars ------------------------------


class CreateSpaceRequest(Model):
    name: NonEmpty
    description: str = ""
    terminationProtection: bool = False


class CreateConnectorRequest(Model):
    name: ConnectorName
    terminationProtection: bool = False
    spaceId: str | None = None


class CreateSatelliteRequest(Model):
    name: NonEmpty
    terminationProtection: bool = False
    spaceId: str | None = None
    satelliteType: Literal["data_discovery", "data_classifier", "policy_data_loader", "ai"]


class CreateSidecarRequest(Model):
    name: SidecarName
    technology: Technology
    hostname: NonEmpty
    terminationProtection: bool = False


class UpdateConnectorListenerLinkRequest(Model):
    id: NonEmpty
    terminationProtection: bool | None = None


class UpdateSidecarResourceLinkRequest(Model):
    id: NonEmpty
    terminationProtection: bool | None = None


# --- resources and native users ------------------------------------------


class CreateResourceAliasRequest(Model):
    resourceId: NonEmpty
    alias: NonEmpty


class UsernameCredential(Model):
    username: NonEmpty


class RoleCredential(Model):
    username: NonEmpty
    role: NonEmpty


class HookCredential(Model):
    hook: NonEmpty
    allowlistedEnvVariables: list[str] = []
    allowlistedNetworkHosts: list[str] = []


class NativeUserCredentials(Model):
    cloudIamA: UsernameCredential | None = None
    cloudIamARole: RoleCredential | None = None
    cloudIamB: UsernameCredential | None = None
    cloudIamC: UsernameCredential | None = None
    hook: HookCredential | None = None
    unauthenticated: Empty | None = None

    VARIANTS = ("cloudIamA", "cloudIamARole", "cloudIamB", "cloudIamC", "hook", "unauthenticated")


class CreateNativeUserV3Request(Model):
    credentials: NativeUserCredentials
    resourceId: NonEmpty
    label: str = ""
    terminationProtection: bool = False


class CreateDataDiscoveryConfigurationRequest(Model):
    resourceId: NonEmpty
    nativeUserId: NonEmpty
    database: str = ""
    schedule: NonEmpty
    deletionPolicy: Literal["delete", "mark_for_deletion"] | None = None
    path: str | None = None


# --- groups and users ------------------------------------------------------


# A number filter value: a JSON number written as a string.
NUMBER_PATTERN = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_NUMBER = re.compile(NUMBER_PATTERN)
BOOL_VALUES = ("true", "false")


class GroupFilterValue(Model):
    """``value`` as text; a ``number`` is a JSON number, a ``bool`` true or false."""

    model_config = ConfigDict(json_schema_extra={"oneOf": [
        {"properties": {"type": {"const": "string"}}},
        {"required": ["type"],
         "properties": {"type": {"const": "number"}, "value": {"pattern": NUMBER_PATTERN}}},
        {"required": ["type"],
         "properties": {"type": {"const": "bool"}, "value": {"enum": list(BOOL_VALUES)}}},
    ]})

    type: Literal["string", "bool", "number"] = "string"
    value: str

    @field_validator("value")
    @classmethod
    def _typed(cls, value: str, info: ValidationInfo) -> str:
        kind = info.data.get("type")
        if kind == "number" and not _NUMBER.match(value):
            raise PydanticCustomError("number", "a number filter value must be a number")
        if kind == "bool" and value not in BOOL_VALUES:
            raise PydanticCustomError("bool", "a bool filter value is true or false")
        return value


class GroupFieldFilter(Model):
    key: Literal["id", "name", "description", "dsyncGroupId", "terminationProtection"]
    value: GroupFilterValue


class GroupFilter(Model):
    field: GroupFieldFilter | None = None
    group: GroupFilterGroup | None = None


class GroupFilterGroup(Model):
    filters: list[GroupFilter] = []


class ListGroupsRequest(Model):
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str = ""
    order: str = Field(
        default="",
        pattern=r"^(|-?(name|createdAt|updatedAt|id)|(name|createdAt|updatedAt|id) (asc|desc))$",
        description="Sort field, `-field` or `field desc` for descending; default name.",
    )
    search: str = ""
    searchFields: list[Literal["name", "description", "dsyncGroupId", "id"]] = []
    filter: GroupFilter | None = None


GroupFilter.model_rebuild()


class CreateBlockedUserRequest(Model):
    id: NonEmpty


# --- policies and hooks ----------------------------------------------------


class CreatePolicyRequest(Model):
    name: NonEmpty
    description: str = ""
    code: NonEmpty
    terminationProtection: bool = False
    groupName: NonEmpty | None = None
    userEmail: NonEmpty | None = None
    notification: Literal["none", "consumer", "owners", "all"] | None = None
    status: Literal["draft", "dry-run", "active"] | None = None

    VARIANTS = ("groupName", "userEmail")  # the owner


class CreatePolicySuspensionRequest(Model):
    policyId: NonEmpty
    identityId: NonEmpty
    expirationMinutes: int = Field(ge=1)
    inputCondition: str = ""
    oneoff: bool = False
    reason: str = ""


class CreatePolicyReportRequest(Model):
    policyCode: str = ""
    evaluationWindow: str = ""
    policyId: NonEmpty
    logQuery: str = ""


class CreatePolicyDataLoaderRequest(Model):
    name: NonEmpty
    description: str = ""
    key: NonEmpty
    workerCode: NonEmpty
    workerSchedule: Annotated[str, Field(min_length=9)]
    terminationProtection: bool = False
    workerRuntime: Literal["python3.11", "nodejs18.x"]
    status: Literal["draft", "active"] | None = None


HookStatus = Literal["draft", "active"]
TimeoutMs = Annotated[int, Field(ge=0, le=60000)]


class CreateHookRequest(Model):
    name: Identifier
    description: str = ""
    code: NonEmpty
    timeoutMs: TimeoutMs | None = None
    allowlistedEnvironmentVariables: list[Identifier] = []
    allowlistedNetworkHosts: list[NonEmpty] = []
    status: HookStatus | None = None


class HookUpdate(Model):
    id: NonEmpty
    name: Identifier
    description: str = ""
    code: NonEmpty
    timeoutMs: TimeoutMs | None = None
    createdAt: Timestamp | None = None
    updatedAt: Timestamp | None = None
    allowlistedEnvironmentVariables: list[Identifier] = []
    allowlistedNetworkHosts: list[NonEmpty] = []
    status: HookStatus | None = None


class UpdateHookRequest(Model):
    hook: HookUpdate


# CreatePermission's Connect headers: the protocol version, and a deadline in
# milliseconds (a positive integer of at most 10 digits).
CONNECT_PROTOCOL_VERSION = "1"
CONNECT_TIMEOUT_PATTERN = r"^[1-9][0-9]{0,9}$"


class CreatePermissionRequest(Model):
    name: NonEmpty
    description: str = ""
    code: str = ""
    terminationProtection: bool = False


# --- integrations ----------------------------------------------------------


class LogStoreA(Model):
    bucketName: NonEmpty
    cloudIntegrationId: NonEmpty
    bucketPrefix: str = ""


class LogStoreB(Model):
    site: NonEmpty
    apiKey: NonEmpty
    accountId: str = ""


class LogStoreC(Model):
    cloudIntegrationId: NonEmpty
    bucketName: NonEmpty
    bucketPrefix: str = ""


class LogStoreD(Model):
    host: NonEmpty
    port: int = Field(ge=1, le=65535)
    accessToken: NonEmpty


class CreateIntegrationLogRequest(Model):
    name: NonEmpty
    terminationProtection: bool = False
    logStoreA: LogStoreA | None = None
    logStoreB: LogStoreB | None = None
    logStoreC: LogStoreC | None = None
    logStoreD: LogStoreD | None = None

    VARIANTS = ("logStoreA", "logStoreB", "logStoreC", "logStoreD")


class BiA(Model):
    biAApiKey: NonEmpty
    biAApiSecret: NonEmpty


class BiB(Model):
    hostname: NonEmpty
    username: NonEmpty
    password: NonEmpty


class CreateBIIntegrationRequest(Model):
    name: NonEmpty
    linkedDbUserId: str | None = None
    sync: bool = False
    biA: BiA | None = None
    biB: BiB | None = None
    biC: Empty | None = None

    VARIANTS = ("biA", "biB", "biC")


class MdmA(Model):
    apiKey: NonEmpty
    apiUrl: NonEmpty


class MdmB(Model):
    clientId: NonEmpty
    apiKey: NonEmpty
    apiUrl: NonEmpty


class CreateIntegrationMDMRequest(Model):
    name: NonEmpty
    mdmA: MdmA | None = None
    mdmB: MdmB | None = None
    mdmC: MdmA | None = None

    VARIANTS = ("mdmA", "mdmB", "mdmC")


AIProvider = Literal[
    "AI_PROVIDER_UNSPECIFIED",
    "AI_PROVIDER_VENDORA_API_PLATFORM",
    "AI_PROVIDER_VENDORC_ENTERPRISE",
    "AI_PROVIDER_VENDORB_API_PLATFORM",
    "AI_PROVIDER_VENDORA_ENTERPRISE",
    "AI_PROVIDER_VENDORB_CHAT",
]


class CreateIntegrationAIProviderRequest(Model):
    name: NonEmpty
    keyName: str = ""
    apiKey: NonEmpty
    providerOrganizationId: str = ""
    provider: AIProvider


class ConnectorAiProviderConfig(Model):
    """Exactly one of seven provider variants; their inner fields are not specified."""

    providerA: dict[str, Any] | None = None
    providerB: dict[str, Any] | None = None
    providerC: dict[str, Any] | None = None
    providerD: dict[str, Any] | None = None
    providerE: dict[str, Any] | None = None
    providerF: dict[str, Any] | None = None
    providerG: dict[str, Any] | None = None

    VARIANTS = tuple(f"provider{c}" for c in "ABCDEFG")


class ConnectorAiProviderSpec(Model):
    connectorId: NonEmpty
    config: ConnectorAiProviderConfig


class ConnectorAiProviderInput(ConnectorAiProviderSpec):
    id: str | None = None
    createdAt: Timestamp | None = None
    updatedAt: Timestamp | None = None


class UpdateConnectorAiProviderV2Request(Model):
    connectorAiProvider: ConnectorAiProviderInput


# --- logs, sessions, workflow, change authorization, inventory, scenarios --


class LogQueryFilter(Model):
    name: NonEmpty
    values: list[str] = []


class MetricAggregation(Model):
    field: str = ""


class LogQueryBody(Model):
    query: str = ""
    filters: list[LogQueryFilter] = []
    relativeTime: int | None = None
    histogramGroupByFields: list[str] = []
    metricAggregation: MetricAggregation | None = None


class CreateLogQueryRequest(Model):
    name: NonEmpty
    query: LogQueryBody


class CreateSessionTerminationRequest(Model):
    sessionId: NonEmpty
    connectorId: NonEmpty


class FormOption(Model):
    label: str
    value: str


class FormCommand(Model):
    name: NonEmpty


class FormOptionsSource(Model):
    app: str = ""
    command: FormCommand | None = None
    machineUserId: str = ""
    input: dict[str, Any] = {}
    transform: str = ""


class FormFieldConfig(Model):
    options: list[FormOption] = []
    optionsSource: FormOptionsSource | None = None


class FormField(Model):
    id: str | None = None
    name: NonEmpty
    type: NonEmpty
    config: FormFieldConfig | None = None


class CreateFormRequest(Model):
    name: NonEmpty
    description: str = ""
    fields: list[FormField] = []


class CreateSigningKeyRequest(Model):
    name: NonEmpty
    publicKey: NonEmpty
    algorithm: Literal["ecdsa-p384", "ed25519", "ml-dsa-87"]
    # The object carries terminationProtection; create accepts it so a new key
    # is protected from its first moment (see README, "assumptions").
    terminationProtection: bool = False


class UpdateSigningKeyRequest(Model):
    id: NonEmpty
    terminationProtection: bool


class CreateDataLabelRequest(Model):
    name: NonEmpty
    classifierType: Literal["regex", "prompt"]
    classifierData: NonEmpty


class CreateScenarioMonitorRequest(Model):
    name: NonEmpty
    scenario: str = ""
    status: Literal["active", "draft"]


# --- objects as returned (for the OpenAPI document) ------------------------


class Space(Output):
    id: str
    name: str
    description: str = ""
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class Connector(Output):
    id: str
    name: str
    terminationProtection: bool = False
    spaceId: str | None = None
    space: Space | None = None
    createdAt: str
    updatedAt: str


class Satellite(Connector):
    satelliteType: str


class Sidecar(Output):
    id: str
    name: str
    hostname: str
    technology: str
    terminationProtection: bool = False
    deployed: bool = False
    createdAt: str
    updatedAt: str


class Resource(Output):
    id: str
    name: str
    hostname: str = ""
    port: int = 0
    environment: str = ""
    terminationProtection: bool = False
    spaceId: str | None = None
    space: Space | None = None
    createdAt: str
    updatedAt: str
    tags: list[dict[str, str]] = []
    aliases: list[str] = []


class Group(Output):
    id: str
    name: str
    description: str = ""
    dsyncGroupId: str = ""
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class User(Output):
    id: str
    dbUsername: str = ""
    terminationProtection: bool = False
    expireAt: str | None = None
    createdAt: str
    updatedAt: str
    groupIds: list[str] = []
    fullName: str = ""
    human: dict[str, str] | None = None
    machine: dict[str, str] | None = None


class Listener(Output):
    id: str
    name: str
    port: int
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str
    connector: Connector | None = None


class ConnectorListenerLink(Output):
    id: str
    listener: Listener
    connector: Connector | None = None
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class SidecarResourceLink(Output):
    id: str
    sidecar: Sidecar
    resource: Resource
    port: int = 0
    terminationProtection: bool = False


class ResourceAlias(Output):
    id: str
    alias: str


class NativeUser(Output):
    id: str
    resourceId: str
    label: str = ""
    terminationProtection: bool = False
    credentials: dict[str, Any]
    createdAt: str
    updatedAt: str


class DataDiscoveryConfiguration(Output):
    id: str
    resourceId: str
    nativeUserId: str
    database: str = ""
    schedule: str
    path: str | None = None
    createdAt: str
    updatedAt: str


class PolicyOwner(Output):
    group: Group | None = None
    user: User | None = None


class Policy(Output):
    id: str
    name: str
    description: str = ""
    code: str
    ast: str = ""
    owners: list[PolicyOwner] = []
    terminationProtection: bool = False
    version: int
    createdAt: str
    updatedAt: str


class PolicySuspension(Output):
    id: str
    policyId: str
    orgId: str = ""
    identityId: str
    identityType: str = "user"
    createdBy: str = ""
    requestId: str = ""
    suspensionType: str = ""
    inputCondition: str = ""
    reason: str = ""
    expireAt: str
    createdAt: str
    updatedAt: str


class PolicyReportResult(Output):
    reportId: str


class PolicyDataLoader(Output):
    id: str
    name: str
    description: str = ""
    key: str
    workerCode: str
    workerSchedule: str
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class Hook(Output):
    id: str
    name: str
    description: str = ""
    code: str
    status: str = "draft"
    timeoutMs: int | None = None
    allowlistedEnvironmentVariables: list[str] = []
    allowlistedNetworkHosts: list[str] = []
    createdAt: str
    updatedAt: str


class Permission(Output):
    id: str
    name: str
    description: str = ""
    code: str = ""
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class Integration(Output):
    id: str
    name: str
    createdAt: str


class ConnectorAiProvider(Output):
    id: str
    connectorId: str
    config: dict[str, Any]
    createdAt: str
    updatedAt: str


class SessionShutdown(Output):
    sessionId: str
    connectorId: str
    createdAt: str


class Form(Output):
    id: str
    name: str
    description: str = ""
    fields: list[dict[str, Any]] = []
    createdAt: str
    updatedAt: str


class SigningKey(Output):
    id: str
    name: str
    publicKey: str
    userId: str = ""
    terminationProtection: bool = False
    createdAt: str
    updatedAt: str


class DataLabel(Output):
    id: str
    name: str
    classifierData: str
    createdAt: str
    updatedAt: str


class IdResult(Output):
    id: str


class ListMetadata(Output):
    after: str = ""
    before: str = ""
    count: int
    nextCursor: str = ""


class ErrorBody(BaseModel):
    """The error body of every operation (``details`` only for 400)."""

    code: str = Field(json_schema_extra={"enum": [str(c) for c in SPEC_CODES.values()]})
    message: str
    details: dict[str, Any] | None = None


class ConnectErrorDetail(BaseModel):
    type: str
    value: str
    debug: dict[str, Any] = {}


class ConnectErrorBody(BaseModel):
    """CreatePermission's alternate error body."""

    message: str
    details: list[ConnectErrorDetail] = []
