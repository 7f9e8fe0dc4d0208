"""The objects as the API returns them, and its error bodies: for the OpenAPI
document (``models.py`` is their face)."""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    Field,
)

from govsync.api.modelbase import (
    Output,
)
from govsync.api.status import SPEC_CODES

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
