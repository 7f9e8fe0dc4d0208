"""The table of the 27 manifest kinds: one row each.

A kind differs from another only in data: which operation makes it exist,
which operation updates it and which fields that update covers, how its
request is wrapped.  Everything else is derived from the operation catalog
and the request models: a kind's spec model, whether its API object has a
``name`` (taken from ``metadata.name``), its reference fields and its secret
fields.  The models' facts are read from their compiled form
(``govsync.api._generated_checks``), so that planning never imports pydantic.  The
loader, graph, planner, applier, reference server and JSON Schema all read
this table; none of them branches on a kind's name.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from govsync.api import _generated_checks as checks
from govsync.api.catalog import BY_NAME, Operation, Scope, UpdateStyle, Verb, of_kind
from govsync.policycode.stages import Role

if TYPE_CHECKING:
    from pydantic import BaseModel


class Reference(NamedTuple):
    """An ``<x>Id`` field that may be written ``<x>Ref: <metadata.name>``."""

    id_field: str
    ref_field: str
    target: str


# Contract section 1: the references a manifest may write by name.
REFERENCES: tuple[Reference, ...] = (
    Reference("spaceId", "spaceRef", "Space"),
    Reference("connectorId", "connectorRef", "Connector"),
    Reference("policyId", "policyRef", "Policy"),
    Reference("nativeUserId", "nativeUserRef", "NativeUser"),
    Reference("linkedDbUserId", "linkedDbUserRef", "NativeUser"),
)


class LiveRef(NamedTuple):
    """A spec field naming an object govsync does not manage but can read live."""

    field: str
    target: str            # the kind named (Group)
    read_operation: str    # the operation that lists them (ListGroups)
    check: str             # the name of its plan and drift check (groups)
    noun: str              # what each value is, in messages (policy owner group)

    @property
    def word(self) -> str:
        """The target kind in messages and in drift's problems ("group")."""
        return self.target.lower()


@dataclass(frozen=True)
class Kind:
    """One kind of object a manifest can declare: its operations, fields, references and
    secrets (the table below drives plan, apply and drift)."""

    name: str
    # Operation that makes the object exist (for objects that already exist on
    # the server, such as links, the update operation that adopts them).
    create_op: str
    # The update request carries the object's id beside the fields (a connector's
    # AI provider is named by its connectorId, a field of its spec).
    update_with_id: bool = True
    # The manifest spec model (by name in govsync.api.models), when it is not
    # the create request itself.
    spec_override: str | None = None
    # Fields that name objects govsync does not manage but can read live.
    # Checked by plan and drift.
    live_refs: tuple[LiveRef, ...] = ()
    summary: str = ""
    # The spec fields that find the object on the server before govsync has recorded
    # it (the duplicate lookup before a create), where they are not its ``name`` or
    # the field its Get reads it by; () where nothing but its id identifies it.
    lookup: tuple[str, ...] | None = None
    # What the spec's ``code`` holds (policycode.Role: a policy's Rego, a permission's,
    # a hook's JavaScript module), checked by validate; None: no code.
    code: Role | None = None
    # The spec field whose value is the ``data.<key>`` policies read what it loads under.
    loads: str | None = None

    @cached_property
    def create(self) -> Operation:
        return BY_NAME[self.create_op]

    @cached_property
    def update(self) -> Operation | None:
        """The update api-lifecycle.md (or api-spec.md) lists for this kind: a replace-all
        (``…V2``) or a sparse one; None: nothing can change after create."""
        return of_kind(self.name, Verb.UPDATE)

    @property
    def update_op(self) -> str | None:
        return self.update.name if self.update else None

    @property
    def replace_all(self) -> bool:
        """The update replaces every mutable field (sent read-modify-write)."""
        return self.update is not None and self.update.style == UpdateStyle.REPLACE_ALL

    @cached_property
    def update_fields(self) -> frozenset[str]:
        """The spec fields an update request carries (of the object it wraps, for a
        replace-all update); none where nothing updates the kind."""
        return frozenset(checks.UPDATE_FIELDS.get(self.name, ())) & frozenset(self.fields)

    @cached_property
    def updatable(self) -> frozenset[str]:
        """The top-level spec fields the update can change: those its request carries but
        the update's read-only ones and the field that names the object."""
        op = self.update
        if op is None:
            return frozenset()
        return self.update_fields - set(op.read_only) - {op.by} - {"id"}

    # The operations of api-lifecycle.md, from the catalog's rows of this kind
    # (an endpoint may lack them: whether it offers them is learned per run).

    @cached_property
    def get(self) -> Operation | None:
        """The Get that reads one object by id (None: the API has none for this kind)."""
        return of_kind(self.name, Verb.GET)

    @cached_property
    def list(self) -> Operation | None:
        """The List that reads the objects in pages, like ListGroups."""
        return of_kind(self.name, Verb.LIST)

    @cached_property
    def delete(self) -> Operation | None:
        return of_kind(self.name, Verb.DELETE)

    @property
    def get_op(self) -> str | None:
        return self.get.name if self.get else None

    @property
    def list_op(self) -> str | None:
        return self.list.name if self.list else None

    @property
    def delete_op(self) -> str | None:
        return self.delete.name if self.delete else None

    @property
    def list_scope(self) -> tuple[Scope, ...]:
        """The List's scoping ids (one of them required where ``list.scope_required``)."""
        return self.list.scope if self.list else ()

    @cached_property
    def identity(self) -> tuple[str, ...]:
        """The spec fields that identify an object of this kind on the server before it is
        recorded: ``lookup``, else its name, else the field its Get reads it by."""
        if self.lookup is not None:
            return self.lookup
        if self.named:
            return ("name",)
        if self.get is not None and self.get.by != "id":
            return (self.get.by,)
        return ()

    @cached_property
    def request_model(self) -> type[BaseModel]:
        """The model that validates a resolved spec (names and ids filled in)."""
        from pydantic import BaseModel

        from govsync.api import models

        if self.spec_override is not None:
            model: type[BaseModel] = getattr(models, self.spec_override)
            return model
        request = self.create.request
        wrap = models.wrap_key(request)  # not Operation.wrap: checkgen reads this
        if wrap is None:
            return request
        annotation = request.model_fields[wrap].annotation
        assert isinstance(annotation, type) and issubclass(annotation, BaseModel)
        return annotation

    @cached_property
    def fields(self) -> tuple[str, ...]:
        """The spec model's fields, in order (from the compiled models)."""
        return checks.FIELDS[checks.KIND_MODELS[self.name]]

    @cached_property
    def named(self) -> bool:
        """The API object has a ``name``: it is the manifest's ``metadata.name``."""
        return "name" in self.fields

    @cached_property
    def references(self) -> tuple[Reference, ...]:
        return tuple(r for r in REFERENCES if r.id_field in self.fields)

    @cached_property
    def secrets(self) -> tuple[str, ...]:
        """Dotted spec paths whose values are secrets (written ``{fromEnv: VAR}``)."""
        return self.create.secret_paths

    @cached_property
    def open_variants(self) -> tuple[str, ...]:
        """Dotted spec paths of variants whose fields the API leaves open (a connector AI
        provider's ``config.providerA``...): a ``{fromEnv: VAR}`` anywhere inside is a secret."""
        return checks.OPEN_VARIANTS.get(self.name, ())

    def __reduce__(self) -> tuple[object, tuple[str]]:
        # A kind is a row of the table: pickled as its name, unpickled as the row.
        return (_kind_named, (self.name,))

    def unnamed(self, field: str, value: object) -> bool:
        """Whether a spec's top-level ``field`` at ``value`` is one its manifest does not
        name: the value the API takes where a manifest leaves the field out."""
        defaults = checks.DEFAULTS.get(self.name, {})
        return field in defaults and defaults[field] == value \
            and type(defaults[field]) is type(value)

    def can_update(self, field: str) -> bool:
        """Whether the update operation can change top-level spec ``field``."""
        return field in self.updatable

    @property
    def changeable(self) -> str:
        """Human text for the docs: what can change after create."""
        if self.updatable and self.updatable == frozenset(self.fields):
            return "every field"
        return ", ".join(sorted(self.updatable)) if self.updatable else "nothing"


KINDS: tuple[Kind, ...] = (
    Kind("Space", "CreateSpace", summary="A space groups connectors, satellites and resources."),
    Kind("Connector", "CreateConnector", summary="A connector, optionally in a space."),
    Kind("Satellite", "CreateSatellite", summary="A satellite of a given type, optionally in a space."),
    Kind("Sidecar", "CreateSidecar", summary="A sidecar in front of a technology."),
    Kind("ConnectorListenerLink", "UpdateConnectorListenerLink",
         summary="An existing connector listener link (spec.id), adopted and protected."),
    Kind("SidecarResourceLink", "UpdateSidecarResourceLink",
         summary="An existing sidecar resource link (spec.id), adopted and protected."),
    Kind("ResourceAlias", "CreateResourceAlias", lookup=(),
         summary="An alias of an existing resource."),
    Kind("NativeUser", "CreateNativeUserV3", lookup=("resourceId", "label"),
         summary="Credentials for an existing resource."),
    Kind("DataDiscoveryConfiguration", "CreateDataDiscoveryConfiguration",
         lookup=("resourceId", "nativeUserId", "database", "path"),
         summary="A data discovery schedule for a resource and native user."),
    Kind("Policy", "CreatePolicy", live_refs=(LiveRef("groupName", "Group", "ListGroups", "groups", "policy owner group"),), code=Role.POLICY, summary="A policy owned by a group or a user."),
    # Not looked up: one identity may hold several suspensions of a policy (their input
    # conditions and expiries differ), so no field of the table tells one from another.
    Kind("PolicySuspension", "CreatePolicySuspension", lookup=(),
         summary="A suspension of a policy for an identity."),
    Kind("PolicyReport", "CreatePolicyReport", lookup=(),
         summary="A report over a policy's evaluations."),
    Kind("PolicyDataLoader", "CreatePolicyDataLoader", loads="key",
         summary="A scheduled worker that loads policy data."),
    Kind("Hook", "CreateHook", code=Role.HOOK,
         summary="Code run by policies; replaced whole by UpdateHook."),
    Kind("Permission", "CreatePermission", code=Role.PERMISSION,
         summary="A permission defined by code."),
    Kind("LogIntegration", "CreateIntegrationLog", summary="A log destination (one of logStoreA..D)."),
    Kind("BIIntegration", "CreateBIIntegration", summary="A BI integration (one of biA..C)."),
    Kind("MDMIntegration", "CreateIntegrationMDM", summary="An MDM integration (one of mdmA..C)."),
    Kind("AIProviderIntegration", "CreateIntegrationAIProvider", summary="An AI provider account."),
    Kind("ConnectorAIProvider", "UpdateConnectorAiProviderV2", update_with_id=False,
         spec_override="ConnectorAiProviderSpec",
         summary="A connector's AI provider configuration; replaced whole on change."),
    Kind("SigningKey", "CreateSigningKey",
         summary="A public key that signs change authorizations."),
    Kind("DataLabel", "CreateDataLabel", summary="A data classification label."),
    Kind("LogQuery", "CreateLogQuery", summary="A saved log query."),
    Kind("Form", "CreateForm", summary="A workflow form."),
    Kind("ScenarioMonitor", "CreateScenarioMonitor", summary="An SSH scenario monitor."),
    Kind("SessionTermination", "CreateSessionTermination", lookup=(),
         summary="A session shutdown on a connector."),
    Kind("BlockedUser", "CreateBlockedUser", summary="A blocked user (spec.id is the user's id)."),
)

BY_KIND: dict[str, Kind] = {k.name: k for k in KINDS}
# The kind whose objects policies read as input.hooks.<name>.
HOOK_KIND = next(k.name for k in KINDS if k.code is Role.HOOK)
# The kind whose code the service evaluates at the stages (PolicyTest's policyRef).
POLICY_KIND = next(k.name for k in KINDS if k.code is Role.POLICY)


@functools.cache
def identifying_fields() -> frozenset[str]:
    """The fields govsync finds objects by: ids (every kind's, and every reference's),
    names and the kinds' identifying fields, and a List's page cursor.  An answer keeps
    their values as read, a known secret inside one included (``values.scrub``'s
    ``keep``): replaced, a secret's value that happens to be part of a name (a short
    or common one a commit names) would lose govsync its objects."""
    found = {"id", "name", "cursor", "nextCursor"}
    for kind in KINDS:
        found.add(kind.create.id_field)
        found.update(kind.identity)
    found.update(r.id_field for r in REFERENCES)
    return frozenset(found)


def _kind_named(name: str) -> Kind:
    return BY_KIND[name]

# Kinds the API cannot create; the reference server's --seed preloads them (``Log``: the
# requests the service logged, ``{id, time, stage, input}``, that impact reports evaluate).
SEEDED_KINDS: tuple[str, ...] = (
    "Resource", "Group", "User", "ConnectorListenerLink", "SidecarResourceLink", "Log",
)
