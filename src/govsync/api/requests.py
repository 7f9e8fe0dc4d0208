"""The request models of api-spec.md's operations, by service (``models.py`` is
their face; the conventions are ``modelbase.Model``'s)."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError

from govsync.api.modelbase import (
    ConnectorName,
    Empty,
    Identifier,
    Int64,
    Model,
    NonEmpty,
    SidecarName,
    Technology,
    Timestamp,
    UInt64,
)

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

    VARIANTS: ClassVar[tuple[str, ...]] = ("groupName", "userEmail")  # the owner


class CreatePolicySuspensionRequest(Model):
    policyId: NonEmpty
    identityId: NonEmpty
    expirationMinutes: UInt64 = Field(ge=1)
    inputCondition: str = ""
    oneoff: bool = False
    reason: str = ""


class CreatePolicyReportRequest(Model):
    policyCode: str = ""
    evaluationWindow: str = ""
    # Omitted for code not yet stored as a policy (policy-code.md).
    policyId: NonEmpty | None = None
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
    relativeTime: Int64 | None = None
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
