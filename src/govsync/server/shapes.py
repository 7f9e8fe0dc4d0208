"""How each kind's stored object differs from its request: one row per kind.

The engine (``operations.py``) turns any create or update request into the
object the API returns by the same steps; this table holds the only
differences between kinds: fields that are input-only (dropped), renamed, filled in by the server, computed, resolved from another object
(by a field of it, or by its id as a read returned it), embedded, or appended to another object.  A kind without a row is stored as
its request plus ``id``, ``createdAt`` and ``updatedAt``.

Secret inputs are the operation's ``secret_paths`` (``api/catalog.py``):
they are neither stored nor returned, unless the row says the API returns
them (``returns_secrets``: the BI integrations, whose output carries them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from govsync.server.errors import invalid
from govsync.server.store import new_id, timestamp

JsonObject = dict[str, Any]

# The one organisation and principal of the reference server.
ORG_ID = "org-reference"
PRINCIPAL_ID = "user-reference"

# 9999-12-31T23:59:59.999999999Z, the last instant a timestamp may name.
MAX_NS = 253_402_300_799_999_999_999


@dataclass(frozen=True)
class Lookup:
    """An input naming another object by a field of it, returned as that object.

    ``groupName: admins`` becomes ``owners: [{group: <the Group named admins>}]``;
    404 when no such object exists.  The input field itself is not returned.
    """

    field: str  # input field, e.g. groupName
    kind: str  # kind searched, e.g. Group
    match: str  # dotted field of that kind compared with the input, e.g. human.email
    into: str  # output list the match is appended to, e.g. owners
    entry: str  # key of the entry in that list, e.g. group


@dataclass(frozen=True)
class ById:
    """A list whose entries each name one object by id under one of ``kinds``' keys, as a
    read returns it (``owners: [{group: {id, ...}}]``), sent back by an update: stored with
    the object each entry names as it is now; 404 when one is gone.  A lookup of the same
    list, where the request has one, takes its place; sent empty or not at all, an update
    keeps the stored list."""

    field: str  # e.g. owners
    kinds: Mapping[str, str]  # entry key -> the kind it names, e.g. group -> Group


@dataclass(frozen=True)
class Embed:
    """An ``<x>Id`` input returned beside the object it names (``space``)."""

    field: str
    kind: str
    into: str


@dataclass(frozen=True)
class Append:
    """A create that also appends one of its fields to a list of another object."""

    ref: str  # input field holding the other object's id
    kind: str
    list_field: str
    value: str  # input field whose value is appended


Derive = Callable[[JsonObject, int], Any]


@dataclass(frozen=True)
class Shape:
    # Dotted input paths neither stored nor returned (input-only, dropped once the
    # derived fields are computed from them; secrets are the operation's
    # secret_paths, dropped unless returns_secrets).
    drop: tuple[str, ...] = ()
    # The API returns this kind's secret inputs (api-spec.md: BI integrations).
    returns_secrets: bool = False
    # Dotted input path -> new name of its last segment.
    rename: tuple[tuple[str, str], ...] = ()
    # Top-level fields returned as null when not given (other nulls are left out).
    keep_null: tuple[str, ...] = ()
    # Dotted path -> value the server sets when the request does not (only
    # under a parent that exists); a replace-all update keeps the stored value.
    defaults: Mapping[str, Any] = field(default_factory=dict)
    # Field -> function of (object, now in ns) computed on create.
    derived: Mapping[str, Derive] = field(default_factory=dict)
    lookups: tuple[Lookup, ...] = ()
    by_id: tuple[ById, ...] = ()
    embeds: tuple[Embed, ...] = ()
    appends: tuple[Append, ...] = ()
    # Field that addresses the object besides its id: an update upserts by it.
    key: str | None = None
    timestamps: tuple[str, ...] = ("createdAt", "updatedAt")
    # When the response is not wrapped: the fields it returns (empty: all), each under
    # its name in ``answer_names`` where it has one there (a report's id as reportId).
    response_fields: tuple[str, ...] = ()
    answer_names: Mapping[str, str] = field(default_factory=dict)
    # The stored object's id field, where the create's answer names it otherwise
    # (CreatePolicyReport answers {reportId}; the report read is {id, ...}).
    id_field: str | None = None
    # A field the server adds 1 to on every update (a policy's version).
    counter: str | None = None
    # Free-form objects (dotted paths) whose keys matching WRITE_ONLY_KEY are
    # secrets: stored, never returned by a read (a connector AI provider's
    # config.providerA...: the spec does not show their fields).
    open_secrets: tuple[str, ...] = ()
    # Fields holding exactly one variant key that an update cannot change.
    fixed_variant: tuple[str, ...] = ()
    # (code field, field of its compiled module): set on every create and update by the
    # engine validate and GetPolicyCodeValidity use (a policy's ast; "" when it does not
    # compile).
    compiled: tuple[str, str] | None = None
    # An impact report: once stored, its code is evaluated over the seeded logs in the
    # background (reports.py), and its status set when that ends.
    evaluated: bool = False


def _expire_at(obj: JsonObject, now: int) -> str:
    ns = now + int(obj["expirationMinutes"]) * 60_000_000_000
    if ns > MAX_NS:
        raise invalid("expireAt would fall after 9999-12-31", "expirationMinutes",
                      "too large: the suspension would end after 9999-12-31")
    return timestamp(ns)


# A proto3 Duration in JSON: seconds, with up to nine decimals, and an "s".
_DURATION = re.compile(r"(-?[0-9]{1,12})(?:\.([0-9]{1,9}))?s")


def _evaluation_start(obj: JsonObject, now: int) -> str:
    """Where a report's window starts: its evaluationWindow (a proto3 Duration, ``604800s``)
    before its creation; a window written otherwise (the spec says only "string") is
    empty, starting at the creation."""
    found = _DURATION.fullmatch(str(obj.get("evaluationWindow") or ""))
    if found is None:
        return timestamp(now)
    seconds, fraction = found.groups()
    window = int(seconds) * 1_000_000_000 + int((fraction or "").ljust(9, "0"))
    return timestamp(min(max(now - window, 0), MAX_NS))


# An impact report's status: running while its code is evaluated over the logged
# requests (reports.py), then completed, or failed (code that does not compile or run).
REPORT_RUNNING, REPORT_COMPLETED, REPORT_FAILED = "running", "completed", "failed"

# A key inside a free-form variant that holds a secret (apiKey, secretKey, token...):
# by how its name ends, so that maxTokens or keyId are returned like any field.
WRITE_ONLY_KEY = re.compile(r"(?i)(key|secret|token|password|credentials?)$")

_IN_SPACE = Shape(keep_null=("spaceId",), embeds=(Embed("spaceId", "Space", "space"),))

SHAPES: Mapping[str, Shape] = MappingProxyType({
    "Connector": _IN_SPACE,
    "Satellite": _IN_SPACE,
    "Sidecar": Shape(defaults={"deployed": False}),
    "ResourceAlias": Shape(appends=(Append("resourceId", "Resource", "aliases", "alias"),),
                           response_fields=("id", "alias")),
    "DataDiscoveryConfiguration": Shape(drop=("deletionPolicy",), keep_null=("path",)),
    "Policy": Shape(
        lookups=(Lookup("groupName", "Group", "name", "owners", "group"),
                 Lookup("userEmail", "User", "human.email", "owners", "user")),
        by_id=(ById("owners", {"group": "Group", "user": "User"}),),
        defaults={"owners": [], "version": 1},
        counter="version",
        compiled=("code", "ast"),
    ),
    # The SDK's PolicySuspension: expirationMinutes and oneoff are inputs only.
    "PolicySuspension": Shape(
        drop=("expirationMinutes", "oneoff"),
        defaults={"orgId": ORG_ID, "identityType": "user", "createdBy": PRINCIPAL_ID},
        derived={
            "expireAt": _expire_at,
            "requestId": lambda obj, now: new_id("request"),
            "suspensionType": lambda obj, now: "oneoff" if obj.get("oneoff") else "temporary",
        },
    ),
    # The SDK's PolicyReport, as policy-code.md's GetPolicyReport answers it: {id,
    # policyCode, policyId, logQuery, evaluationStart, createdAt, createdBy, status}.
    "PolicyReport": Shape(
        id_field="id", response_fields=("id",), answer_names={"id": "reportId"},
        drop=("evaluationWindow",), defaults={"createdBy": PRINCIPAL_ID},
        derived={"evaluationStart": _evaluation_start,
                 "status": lambda obj, now: REPORT_RUNNING},
        timestamps=("createdAt",), evaluated=True,
    ),
    "Hook": Shape(defaults={"status": "draft"}),
    "LogIntegration": Shape(defaults={"logStoreA.region": "us-east-1"}),
    "BIIntegration": Shape(rename=(("biA.biAApiKey", "apiKey"), ("biA.biAApiSecret", "apiSecret")),
                           keep_null=("linkedDbUserId",), returns_secrets=True,
                           timestamps=("createdAt",)),
    "AIProviderIntegration": Shape(defaults={"status": "connected", "providerOrganizationName": ""}),
    "ConnectorAIProvider": Shape(key="connectorId", open_secrets=("config",)),
    # The SDK's LogQueryMetadata: {id, name, createdBy, query}, no timestamps.
    "LogQuery": Shape(response_fields=("id",), defaults={"createdBy": PRINCIPAL_ID},
                      timestamps=()),
    "ScenarioMonitor": Shape(response_fields=("id",)),
    # The key's user: the principal of the reference server.
    "SigningKey": Shape(defaults={"userId": PRINCIPAL_ID}),
    "SessionTermination": Shape(timestamps=("createdAt",)),
    "BlockedUser": Shape(response_fields=("id",), defaults={"blocked": True}),
    "NativeUser": Shape(fixed_variant=("credentials",)),
})

DEFAULT_SHAPE = Shape()


def shape_of(kind: str) -> Shape:
    return SHAPES.get(kind, DEFAULT_SHAPE)
