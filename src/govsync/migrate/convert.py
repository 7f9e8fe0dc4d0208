"""Terraform instances to govsync objects, by the table in ``formal.py``.

``convert`` reads every instance of the state and sorts it into one of:

* ``Migrated``: a govsync object (kind, name, spec, id) that validates;
* ``Kept``: stays in Terraform, with the reason (no govsync kind, a spec
  govsync cannot express, a sensitive value govsync would have to write in
  clear, a name another object has too...);
* a problem: the state is not what this migration knows (an attribute or a
  schema version of a provider version it does not know, a malformed
  value).  Problems are fatal: nothing is written.

Names: a kind whose API object has a name keeps it as ``metadata.name``;
any other gets one made of its Terraform address (module names and keys,
the resource's name and key), made unique with a digest of the address
when two would meet.  Secrets become ``{fromEnv}`` leaves in the spec, each
with an environment variable named after the Terraform address and
attribute (``FORMAL_INTEGRATION_LOG_SPLUNK_ACCESS_TOKEN``).  A ``*Id``
field holding the id of another migrated object becomes its ``*Ref``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from govsync import paths
from govsync.api.kinds import BY_KIND, Kind
from govsync.manifests.documents import check_spec
from govsync.manifests.names import invisible
from govsync.migrate.formal import (
    BOOKKEEPING,
    BY_TYPE,
    NOT_MIGRATED,
    PROVIDER,
    PROVIDER_VERSION,
    TYPE_PREFIX,
    Attribute,
    Block,
    Field,
    Ignored,
    JsonText,
    Owner,
    ResourceType,
    Unsupported,
    WriteOnly,
)
from govsync.migrate.terraform import Instance, State
from govsync.migrate.yamlout import FromEnv, plain_data
from govsync.paths import Path

_PROVIDER = re.compile(r'(^|\.)provider(\["([^"/]+/)?' + re.escape(PROVIDER) + r'"\]|\.formal)'
                       r'(\.[A-Za-z0-9_-]+)?$')
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_NAME_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_ENV_UNSAFE = re.compile(r"[^A-Z0-9]+")
# The variable a secret is checked with before variables are named.
_CHECK_VARIABLE = "GOVSYNC_MIGRATE_CHECK"
_OWNER_STAND_IN = "owner"


@dataclass
class Secret:
    """A secret of a migrated object: the ``{fromEnv: VAR}`` leaf in its spec, and where
    Terraform had it."""

    path: Path              # in the spec
    attribute: str          # where Terraform has it (datadog.0.api_key)
    in_state: bool          # the Terraform state holds its value (else: write-only)
    words: list[str]        # what its variable's name is made of
    # Checked with a stand-in variable; named once every secret is known.
    leaf: FromEnv = field(default_factory=lambda: FromEnv(_CHECK_VARIABLE))

    @property
    def variable(self) -> str:
        return self.leaf.variable


@dataclass
class Migrated:
    """One Terraform instance as a govsync object."""

    instance: Instance
    row: ResourceType
    kind: Kind
    id: str
    spec: dict[str, Any]               # FromEnv leaves at the secrets' paths
    name: str = ""
    derived: bool = False              # the name is made of the Terraform address
    secrets: list[Secret] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    owner_missing: bool = False

    @property
    def address(self) -> str:
        return f"{self.kind.name}/{self.name}"


@dataclass(frozen=True)
class Kept:
    """An instance that stays in Terraform, and why."""

    address: str
    type: str
    reason: str


@dataclass
class Conversion:
    """Everything ``convert`` found."""

    migrated: list[Migrated] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    others: int = 0                     # instances of other providers, untouched
    providers: set[str] = field(default_factory=set)   # formal provider configurations seen


def convert(state: State, owner_group: str | None = None) -> Conversion:
    """Sort every instance of ``state``; names, variables and references settled."""
    out = Conversion()
    for instance in state.instances:
        if not _PROVIDER.search(instance.provider):
            out.others += 1
            continue
        out.providers.add(instance.provider)
        row = BY_TYPE.get(instance.type)
        if row is None:
            reason = NOT_MIGRATED.get(instance.type) or (
                f"not a resource type of {PROVIDER} {PROVIDER_VERSION} that this migration "
                "knows" if instance.type.startswith(TYPE_PREFIX) else
                f"not a resource type of {PROVIDER}")
            out.kept.append(Kept(instance.address, instance.type, reason))
            continue
        result = _convert(instance, row, owner_group, out.problems)
        if isinstance(result, Kept):
            out.kept.append(result)
        elif result is not None:
            out.migrated.append(result)
    for address, rtype in state.deposed:
        out.kept.append(Kept(address, rtype, "a deposed object (left by create_before_destroy): "
                             "Terraform will destroy it"))
    _unique_names(out)
    _variables(out.migrated)
    references(out.migrated)
    out.migrated.sort(key=lambda m: (m.kind.name, m.name))
    out.kept.sort(key=lambda k: k.address)
    return out


def _convert(instance: Instance, row: ResourceType, owner_group: str | None,
             problems: list[str]) -> Migrated | Kept | None:
    address = instance.address
    start = len(problems)
    if instance.schema_version > row.schema_version:
        problems.append(f"{address}: schema version {instance.schema_version} of {row.type} is "
                        f"newer than this migration knows ({row.schema_version}, provider "
                        f"{PROVIDER_VERSION}): a newer govsync may know it")
        return None
    attributes = {k: v for k, v in instance.attributes.items() if k not in BOOKKEEPING}
    object_id = attributes.pop("id", None)
    if not isinstance(object_id, str) or not object_id:
        problems.append(f"{address}: attribute id: must be the object's id (a non-empty "
                        "string)")
        return None
    notes: list[str] = []
    for version in range(instance.schema_version, row.schema_version):
        upgrade = row.upgrades.get(version)
        if upgrade is not None:
            attributes, said = upgrade(attributes)
            notes += said
    if "id" in row.attributes:
        attributes["id"] = object_id
    kind = BY_KIND[row.kind]
    walk = _Walk(instance, kind, problems, notes)
    spec: dict[str, Any] = {}
    walk.block(row.attributes, attributes, (), (), spec)
    if len(problems) > start:
        return None
    if walk.leaks:
        return Kept(address, row.type, "; ".join(walk.leaks))
    migrated = Migrated(instance, row, kind, object_id, spec, secrets=walk.secrets,
                        notes=notes)
    if instance.tainted:
        notes.append("tainted in Terraform (it would have replaced the object): adopted as is")
    if kind.named:
        name = spec.pop("name", None)
        if not isinstance(name, str) or not name.strip():
            return Kept(address, row.type, "the state has no name for it")
        bad = invisible(name) or ("'/'" if "/" in name else None)
        if bad is not None:
            return Kept(address, row.type, f"its name holds {bad}, which a govsync name "
                        "cannot")
        migrated.name = name
    if any(isinstance(a, Owner) for a in row.attributes.values()) and not (
            "groupName" in spec or "userEmail" in spec):
        if owner_group:
            spec["groupName"] = owner_group
            notes.append("owner: the group given with --owner-group (the state has none)")
        else:
            migrated.owner_missing = True
    invalid = _invalid(migrated)
    if invalid:
        return Kept(address, row.type, f"govsync's {kind.name} cannot hold it as Terraform "
                    f"has it: {'; '.join(invalid)}")
    return migrated


@dataclass
class _Walk:
    """One instance's attributes, walked along its row of the table."""

    instance: Instance
    kind: Kind
    problems: list[str]
    notes: list[str]
    secrets: list[Secret] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)

    def problem(self, at: tuple[str | int, ...], message: str) -> None:
        self.problems.append(f"{self.instance.address}: attribute {_dotted(at)}: {message}")

    def block(self, table: Mapping[str, Attribute], values: Mapping[str, Any],
              attr_at: tuple[str | int, ...], spec_at: Path, out: dict[str, Any]) -> None:
        for key in values:
            if key not in table:
                self.problem((*attr_at, key), f"not an attribute of {self.instance.type} that "
                             f"this migration knows (provider {PROVIDER_VERSION}): the state "
                             "was written by a provider version it does not know; "
                             "`terraform apply -refresh-only` with the current provider, then "
                             "run this again")
        for key, attribute in table.items():
            self.attribute(attribute, values.get(key), (*attr_at, key), spec_at, out)

    def attribute(self, attribute: Attribute, value: Any, at: tuple[str | int, ...],
                  spec_at: Path, out: dict[str, Any]) -> None:
        if isinstance(attribute, Field):
            if _among(value, attribute.omit):
                return
            self.value(value, at, (*spec_at, *paths.split(attribute.to)), out, spec_at)
        elif isinstance(attribute, WriteOnly):
            path = (*spec_at, *paths.split(attribute.to))
            self.secret(path, at, in_state=value not in (None, ""), out=out, spec_at=spec_at)
        elif isinstance(attribute, Block):
            self.nested(attribute, value, at, spec_at, out)
        elif isinstance(attribute, Owner):
            if value in (None, ""):
                return
            if not isinstance(value, str):
                self.problem(at, "must be a string (a group's name or a user's email)")
                return
            if self.instance.is_sensitive(at):
                self.leaks.append(f"attribute {_dotted(at)} is sensitive in Terraform, and a "
                                  "policy's owner is not a secret field")
                return
            self.put(out, spec_at, ("userEmail",) if _EMAIL.match(value) else ("groupName",),
                     value, at)
        elif isinstance(attribute, JsonText):
            if value in (None, ""):
                return
            try:
                parsed = json.loads(value) if isinstance(value, str) else None
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict):
                self.problem(at, "must be a JSON object written as a string")
                return
            self.value(parsed, at, (*spec_at, *paths.split(attribute.to)), out, spec_at)
        elif isinstance(attribute, Unsupported):
            if not _among(value, (None, "", [], {}, False, attribute.default)):
                self.notes.append(f"{_dotted(at)} is set in Terraform, and govsync's "
                                  f"{self.kind.name} has no such field: not carried over")
        else:
            assert isinstance(attribute, Ignored)

    def nested(self, block: Block, value: Any, at: tuple[str | int, ...], spec_at: Path,
               out: dict[str, Any]) -> None:
        if value is None:
            return
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.problem(at, "must be a list of blocks")
            return
        path = (*spec_at, *paths.split(block.to))
        if block.single:
            if len(value) > 1:
                self.problem(at, f"holds {len(value)} blocks, and the provider allows one")
            elif value:
                inner: dict[str, Any] = {}
                self.put(out, spec_at, paths.split(block.to), inner, at)
                self.block(block.attributes, value[0], (*at, 0), path, out)
            return
        items: list[dict[str, Any]] = []
        self.put(out, spec_at, paths.split(block.to), items, at)
        for i, element in enumerate(value):
            item: dict[str, Any] = {}
            items.append(item)
            self.block(block.attributes, element, (*at, i), (*path, i), out)

    def value(self, value: Any, at: tuple[str | int, ...], path: Path, out: dict[str, Any],
              spec_at: Path) -> None:
        """A Field's value: a secret if govsync's kind or Terraform says so."""
        if _secret_field(self.kind, path):
            if value not in (None, ""):
                self.secret(path, at, in_state=True, out=out, spec_at=spec_at)
            return
        if self.instance.is_sensitive(at):
            if _in_open_variant(self.kind, path):
                self.secret(path, at, in_state=True, out=out, spec_at=spec_at)
            else:
                self.leaks.append(f"attribute {_dotted(at)} is sensitive in Terraform, and "
                                  f"govsync's {self.kind.name} spec.{paths.text(path)} is not a "
                                  "secret field: migrating it would write its value in a "
                                  "manifest")
            return
        self.put(out, spec_at, path[len(spec_at):], value, at)

    def secret(self, path: Path, at: tuple[str | int, ...], *, in_state: bool,
               out: dict[str, Any], spec_at: Path) -> None:
        if not (_secret_field(self.kind, path) or _in_open_variant(self.kind, path)):
            self.leaks.append(f"attribute {_dotted(at)} is a secret, and govsync's "
                              f"{self.kind.name} spec.{paths.text(path)} is not a secret field")
            return
        secret = Secret(path, _dotted(at), in_state,
                        [self.instance.type, *self.instance.words(), str(at[-1])])
        self.secrets.append(secret)
        self.put(out, spec_at, path[len(spec_at):], secret.leaf, at)

    def put(self, out: dict[str, Any], spec_at: Path, rel: Path, value: Any,
            at: tuple[str | int, ...]) -> None:
        """Set ``value`` at ``spec_at + rel`` in the spec being built (``out`` is the
        whole spec; the parents below ``spec_at`` exist already)."""
        node: Any = paths.get(out, spec_at) if spec_at else out
        for key in rel[:-1]:
            node = node.setdefault(key, {})
        if rel[-1] in node:
            self.problem(at, f"spec.{paths.text((*spec_at, *rel))} is filled by another "
                         "attribute too")
            return
        node[rel[-1]] = value


def _invalid(migrated: Migrated) -> list[str]:
    """What govsync's validation says of the object's spec (secrets as variables, a
    missing owner as a stand-in: the manifest says so itself)."""
    check = plain_data(migrated.spec)
    if migrated.owner_missing:
        check["groupName"] = _OWNER_STAND_IN
    messages: list[str] = []

    def report(where: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        messages.append(message)

    check_spec(migrated.kind, migrated.name or "placeholder", check, [], report)
    return messages


def _secret_field(kind: Kind, path: Path) -> bool:
    return paths.text(path) in kind.secrets


def _in_open_variant(kind: Kind, path: Path) -> bool:
    return any(len(path) > len(v) and paths.under(path, v)
               for v in (paths.split(o) for o in kind.open_variants))


def _among(value: Any, values: tuple[Any, ...]) -> bool:
    """``value in values``, telling booleans from numbers (False is not 0)."""
    return any(type(value) is type(v) and value == v for v in values)


def _dotted(at: tuple[str | int, ...]) -> str:
    return ".".join(str(a) for a in at)


# --- names, variables, references ----------------------------------------------------


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _unique_names(out: Conversion) -> None:
    """Derived names for kinds without one; every address unique, or kept in Terraform."""
    for m in out.migrated:
        if not m.kind.named:
            words = m.instance.words()
            base = _NAME_SAFE.sub("-", ".".join(words)).strip("-.") or "object"
            m.name, m.derived = base, True
            if base != ".".join(words):
                m.name = f"{base}-{_digest(m.instance.address)}"
    by_address: dict[str, list[Migrated]] = {}
    for m in out.migrated:
        by_address.setdefault(m.address, []).append(m)
    kept: list[Migrated] = []
    for address, group in by_address.items():
        if len(group) == 1:
            continue
        if all(m.derived for m in group):
            for m in group:
                m.name = f"{m.name}-{_digest(m.instance.address)}"
            continue
        for m in group:
            others = ", ".join(o.instance.address for o in group if o is not m)
            out.kept.append(Kept(m.instance.address, m.row.type,
                                 f"{others} has the same name, and govsync addresses an "
                                 f"object by kind and name ({address})"))
            kept.append(m)
    out.migrated = [m for m in out.migrated if not any(m is k for k in kept)]


def _variables(migrated: list[Migrated]) -> None:
    """Each secret's variable: named after its Terraform address and attribute; a digest
    of the address tells apart two that would meet."""
    names: dict[str, list[tuple[Secret, str]]] = {}
    for m in migrated:
        for s in m.secrets:
            base = _ENV_UNSAFE.sub("_", "_".join(s.words).upper()).strip("_")
            names.setdefault(base, []).append((s, f"{m.instance.address} {s.attribute}"))
    for base, group in names.items():
        for secret, where in group:
            secret.leaf.variable = (base if len(group) == 1
                                    else f"{base}_{_digest(where).upper()}")


class Adopted(Protocol):
    """An object written as a manifest to adopt it (migrated, or imported from the server)."""

    kind: Kind
    id: str
    name: str
    spec: dict[str, Any]


def references(migrated: Sequence[Adopted]) -> None:
    """``<x>Id: ID`` becomes ``<x>Ref: NAME`` where ID is another adopted object's."""
    names = {(m.kind.name, m.id): m.name for m in migrated}
    for m in migrated:
        for ref in m.kind.references:
            value = m.spec.get(ref.id_field)
            target = names.get((ref.target, value)) if isinstance(value, str) else None
            if target is not None:
                del m.spec[ref.id_field]
                m.spec[ref.ref_field] = target
