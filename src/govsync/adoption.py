"""``govsync import``: manifests for what the server holds and no state records.

Contract section 12, "Adopting".  The server is read through the client, in
pages of each kind's List (``api-lifecycle.md``), concurrently across kinds;
a List that needs a scoping id (a native user's ``resourceId``...) is called
once per id known from the objects listed and the state; a kind without a List
whose Get reads it by its owner (a connector's AI provider) with one Get per
owner listed or recorded.  The kinds nothing finds (no read, or a Get that needs
an id nothing lists) are named, each with why.  Every object that
the workspace's state does not record becomes:

* a manifest: ``metadata.name`` is its API name (kinds without one: the name
  of the object it is read by, a connector's for its AI provider, else its id), its spec the fields of the kind's spec model as read,
  defaults left out; an ``<x>Id`` naming another imported object becomes
  ``<x>Ref``; every secret, which no read returns, becomes ``{fromEnv: VAR}``
  (the variables are listed, to be set before ``plan``);
* an ``Import`` document (``spec: {to, id}``), so that the plan adopts it
  without a create.

Objects whose spec cannot be made from what a read returns (a policy
suspension's ``expirationMinutes``) are left out, each with the reason.
The folder is written as ``govsync migrate terraform`` writes its own
(``migrate/writer.py``): checked whole by the manifest loader, then written
or refused.
"""

from __future__ import annotations

import asyncio
import copy
import fnmatch
import hashlib
import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from govsync import paths
from govsync.api.kinds import BY_KIND, KINDS, REFERENCES, Kind
from govsync.api.resource import Objects, through
from govsync.api.resource import listed as is_listed
from govsync.envvars import API_KEY as API_KEY_ENV
from govsync.errors import ApiError, ConfigError, MigrateError, NotFoundError, UnauthorizedError
from govsync.importfolders import Known, Layout, difference, scan
from govsync.manifests.documents import API_VERSION
from govsync.manifests.manifest import Context
from govsync.migrate.convert import references
from govsync.migrate.writer import (
    Output,
    Written,
    add,
    additions,
    check_with,
    file_stem,
    files,
)
from govsync.migrate.yamlout import Document, FromEnv, plain_data
from govsync.state.records import Snapshot

if TYPE_CHECKING:
    from pydantic import BaseModel

    from govsync.api.client import AsyncClient

IMPORTS_STEM = "imports"
PATCHES_STEM = "patches"
HEADER = ("Imported from the server by `govsync import`: set the variables it listed, "
          "then run `govsync plan`.",)
PAGE_SIZE = 500
_ENV_UNSAFE = re.compile(r"[^A-Z0-9]+")
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# A policy's owner is written by name; the object read carries it under ``owners``.
OWNERS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "Policy": (("groupName", "group", "name"), ("userEmail", "user", "human.email")),
}


@dataclass
class Found:
    """One object the server holds and the state does not record."""

    kind: Kind
    id: str
    name: str
    spec: dict[str, Any]
    secrets: list[tuple[tuple[str, ...], FromEnv]] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.kind.name}/{self.name}"


@dataclass
class Imported:
    """What ``govsync import`` did."""

    found: list[Found]
    written: Written
    skipped: list[str] = field(default_factory=list)  # "Kind id: why"
    unlisted: list[str] = field(default_factory=list)  # kinds it could not read, and why
    recorded: int = 0  # objects the state already records
    placed: Placed | None = None

    @property
    def variables(self) -> list[str]:
        if self.placed is not None:
            return self.placed.variables
        return [leaf.variable for f in self.found for _, leaf in f.secrets]


def findable(kind: Kind) -> bool:
    """Whether ``govsync import`` can find the objects of ``kind``: a List, or a Get by
    a reference to objects a List finds."""
    return kind.list is not None or through(kind) is not None


def unfindable_reason(kind: Kind) -> str:
    """Why ``govsync import`` cannot find the objects of ``kind``, plainly."""
    if kind.get is None:
        why = f"the API has no List and no Get for a {kind.name}"
    else:
        why = (f"the API has no List for a {kind.name}, and its {kind.get.name} needs "
               f"the {kind.get.by if kind.get.by != 'id' else 'id'} of one, which nothing "
               "lists")
    return f"{why}, so govsync cannot find them; adopt one with an Import document"


def importable(names: Iterable[str]) -> list[Kind]:
    """The kinds asked for (every kind it can find when none is named); ConfigError for a
    kind that is unknown or that nothing finds the objects of."""
    chosen = list(dict.fromkeys(names))
    if not chosen:
        return [k for k in KINDS if findable(k)]
    kinds = []
    for name in chosen:
        kind = BY_KIND.get(name)
        if kind is None:
            raise ConfigError(f"--kind {name}: no such kind (see docs/kinds.md)")
        if not findable(kind):
            raise ConfigError(f"--kind {name}: {unfindable_reason(kind)}")
        kinds.append(kind)
    return kinds


def unfound(names: Iterable[str]) -> list[str]:
    """A line for each kind ``govsync import`` reads no object of, when no kind is named."""
    if list(names):
        return []
    return [f"{k.name}: {unfindable_reason(k)}" for k in KINDS if not findable(k)]


# Gets in flight at once (a connector's AI provider, one per connector): the client's
# lanes (cli/importing.py makes it with as many).
READS_IN_FLIGHT = 64


async def read_server(client: AsyncClient, kinds: list[Kind], snapshot: Snapshot,
                      ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Every object of ``kinds`` on the server, by kind; and the kinds that could not be
    listed (a required scope no known object gives)."""
    reader = Objects(client, concurrency=READS_IN_FLIGHT)
    objects: dict[str, list[dict[str, Any]]] = {}
    unscoped = [k for k in kinds if is_listed(k)]
    scoped = [k for k in kinds if k.list is not None and not is_listed(k)]
    pages = await asyncio.gather(*(reader.all(k.list) for k in unscoped if k.list))
    objects.update(zip((k.name for k in unscoped), pages, strict=True))
    unlisted = []
    for kind in scoped:
        assert kind.list is not None
        bodies = [{s.field: value} for s in kind.list.scope
                  for value in sorted(_known(s.field, objects, snapshot))]
        if not bodies:
            unlisted.append(f"{kind.name}: its List needs "
                            f"{' or '.join(s.field for s in kind.list.scope)}, and no object "
                            "read or recorded names one")
            continue
        found = await asyncio.gather(*(reader.all(kind.list, b) for b in bodies))
        unique = {o["id"]: o for page in found for o in page if isinstance(o.get("id"), str)}
        objects[kind.name] = list(unique.values())
    await asyncio.gather(*(_read_through(reader, k, objects, snapshot)
                           for k in kinds if through(k) is not None))
    return objects, unlisted


async def _read_through(reader: Objects, kind: Kind,
                       objects: dict[str, list[dict[str, Any]]], snapshot: Snapshot) -> None:
    """A kind read by a Get per object of the kind it references (a connector's AI
    provider, per connector listed or recorded); a 404 is an object without one."""
    ref = through(kind)
    assert ref is not None and kind.get is not None
    target = BY_KIND[ref.target]
    assert target.list is not None
    listed = objects.get(target.name)
    if listed is None:  # not imported itself: listed only for its ids
        listed = await reader.all(target.list)
    ids = {o["id"] for o in listed if isinstance(o.get("id"), str)}
    ids |= {e.id for e in snapshot.entries.values() if e.kind == target.name and e.id}
    found = await asyncio.gather(*(reader.get(kind, value) for value in sorted(ids)))
    objects[kind.name] = [o for o in found if o is not None]


def _known(field_name: str, objects: Mapping[str, list[dict[str, Any]]],
           snapshot: Snapshot) -> set[str]:
    """Ids a scoping field may take: those of the kind it names, and every value of it
    in the objects read and the specs recorded."""
    values: set[str] = set()
    for ref in REFERENCES:
        if ref.id_field == field_name:
            values |= {o["id"] for o in objects.get(ref.target, []) if isinstance(o.get("id"), str)}
            values |= {e.id for e in snapshot.entries.values() if e.kind == ref.target and e.id}
    for listed in objects.values():
        values |= {o[field_name] for o in listed if isinstance(o.get(field_name), str)}
    for entry in snapshot.entries.values():
        value = (entry.read_spec() or {}).get(field_name)
        if isinstance(value, str):
            values.add(value)
    return values


def adoptable(objects: Mapping[str, list[dict[str, Any]]], snapshot: Snapshot,
              name_glob: str | None, elsewhere: Mapping[str, tuple[str, str]] | None = None,
              ) -> tuple[list[Found], list[str], int]:
    """The objects no state entry records, as manifests; those left out, and why; how
    many the state records.  ``elsewhere``: ids another workspace of the state records
    (id -> (workspace, address)): theirs, never imported here."""
    recorded = {(e.kind, e.id) for e in snapshot.entries.values() if e.id}
    owners = _owner_names(objects, snapshot)
    elsewhere = elsewhere or {}
    found, skipped, known = [], [], 0
    for kind_name, listed in objects.items():
        kind = BY_KIND[kind_name]
        for obj in listed:
            id_ = obj.get(kind.create.id_field)
            if not isinstance(id_, str) or not id_:
                continue
            if (kind.name, id_) in recorded:
                known += 1
                continue
            if id_ in elsewhere:
                workspace, address = elsewhere[id_]
                skipped.append(f"{kind.name} {id_}: recorded by workspace {workspace!r} as "
                               f"{address} (an object belongs to one workspace)")
                continue
            name = obj.get("name") if kind.named else _unnamed(kind, id_, obj, owners)
            if not isinstance(name, str) or not name:
                skipped.append(f"{kind.name} {id_}: the server gives it no name")
                continue
            if name_glob is not None and not fnmatch.fnmatchcase(name, name_glob):
                continue
            if not kind.named:
                name = _NAME_UNSAFE.sub("-", name)
            item = _found(kind, id_, name, obj)
            why = _invalid(item)
            if why:
                skipped.append(f"{kind.name} {id_}: {why}")
            else:
                found.append(item)
    _unique_names(found)
    _name_variables(found)
    references(found)
    return found, skipped, known


def _owner_names(objects: Mapping[str, list[dict[str, Any]]], snapshot: Snapshot
                 ) -> dict[tuple[str, str], str]:
    """The name of every object read or recorded, by (kind, id): what an object read by
    its owner (a connector's AI provider) is named after."""
    names = {(e.kind, e.id): e.address.split("/", 1)[1]
             for e in snapshot.entries.values() if e.id}
    for kind_name, listed in objects.items():
        for obj in listed:
            if isinstance(obj.get("id"), str) and isinstance(obj.get("name"), str):
                names[(kind_name, obj["id"])] = obj["name"]
    return names


def _unnamed(kind: Kind, id_: str, obj: Mapping[str, Any],
             owners: Mapping[tuple[str, str], str]) -> str:
    """The name of an object the API gives none: its owner's, where it is read by its
    owner (one a connector: ``ConnectorAIProvider/payments-eu``); else its id."""
    ref = through(kind)
    owner = obj.get(ref.id_field) if ref is not None else None
    if ref is not None and isinstance(owner, str):
        return owners.get((ref.target, owner), id_)
    return id_


def _fit(model: type[BaseModel], obj: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of ``obj`` that ``model`` takes, at every depth (a read also returns
    what only the server sets: a log store's default region), defaults and nulls left out."""
    out: dict[str, Any] = {}
    for key, info in model.model_fields.items():
        value = obj.get(key)
        if value is None or value == info.default:
            continue
        inner = _model_in(info.annotation)
        if inner is not None and isinstance(value, dict):
            value = _fit(inner, value)
        elif inner is not None and isinstance(value, list):
            value = [_fit(inner, v) if isinstance(v, dict) else v for v in value]
        out[key] = copy.deepcopy(value)
    return out


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (``X``, ``X | None``, ``list[X]``), if any."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _found(kind: Kind, id_: str, name: str, obj: Mapping[str, Any]) -> Found:
    spec = _fit(kind.request_model, obj)
    if kind.named:
        spec.pop("name", None)
    for spec_field, entry, match in OWNERS.get(kind.name, ()):
        for owner in obj.get("owners") or []:
            value = paths.get(owner.get(entry) if isinstance(owner, dict) else None,
                              paths.split(match))
            if isinstance(value, str):
                spec[spec_field] = value
                break
    item = Found(kind, id_, name, spec)
    for dotted in kind.secrets:
        keys = tuple(dotted.split("."))
        parent = paths.get(spec, keys[:-1]) if len(keys) > 1 else spec
        if isinstance(parent, dict):  # the variant the secret belongs to is the one used
            leaf = FromEnv("")
            parent[keys[-1]] = leaf
            item.secrets.append((keys, leaf))
    return item


def _invalid(item: Found) -> str | None:
    """Why the spec read cannot be a manifest (the request model's first complaint)."""
    from pydantic import ValidationError

    request = _plain(item.spec)
    if item.kind.named:
        request["name"] = item.name
    try:
        item.kind.request_model.model_validate(request)
    except ValidationError as exc:
        error = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in error["loc"]) or "spec"
        return f"spec.{where}: {error['msg']} (a read does not return what it needs)"
    return None


def _plain(value: Any) -> Any:
    """The spec with a stand-in for each secret (to validate it)."""
    if isinstance(value, FromEnv):
        return "secret"
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _unique_names(found: list[Found]) -> None:
    """Two objects of a kind with one name: each gets its id's digest appended."""
    seen: dict[str, int] = {}
    for f in found:
        seen[f.address] = seen.get(f.address, 0) + 1
    for f in found:
        if seen[f.address] > 1:
            f.name = f"{f.name}-{_digest(f.id)}"


def _name_variables(found: list[Found]) -> None:
    """``<KIND>_<NAME>_<FIELD>``, uppercase; a digest tells apart two that would meet."""
    names: dict[str, list[tuple[FromEnv, str]]] = {}
    for f in found:
        for keys, leaf in f.secrets:
            base = _ENV_UNSAFE.sub("_", "_".join([file_stem(f.kind.name), f.name, *keys])
                                   .upper()).strip("_")
            names.setdefault(base, []).append((leaf, f"{f.address} {'.'.join(keys)}"))
    for base, group in names.items():
        for leaf, where in group:
            leaf.variable = base if len(group) == 1 else f"{base}_{_digest(where).upper()}"


@dataclass
class Placed:
    """Where each object found goes (importfolders.py): manifests in the shared folder
    (``--out``) or the environment's own, an Import document each (the shared folder's
    without an environment), and a Patch where an environment differs."""

    shared: list[Found] = field(default_factory=list)
    own: list[Found] = field(default_factory=list)
    imports: list[Found] = field(default_factory=list)
    patches: list[tuple[Found, dict[str, Any]]] = field(default_factory=list)
    already: list[str] = field(default_factory=list)  # adopted by an Import already
    absent: list[str] = field(default_factory=list)  # defined there, not on this server
    variables: list[str] = field(default_factory=list)


def place(found: list[Found], where: Layout, known: Known, first: bool) -> Placed:
    """Each object: left out when an Import document there adopts it already; an Import
    document (and, with an environment's own folder, a Patch of what differs) when a
    manifest there defines its address; else a manifest, in the shared folder (without
    a folder of the environment's own, or for the first environment imported) or the
    environment's own."""
    placed = Placed()
    prefix = where.prefix
    for f in found:
        adopted = known.adopted.get((f.kind.name, f.id))
        if adopted is not None:
            placed.already.append(f"{f.kind.name} {f.id}: already adopted by an Import "
                                  f"document in {adopted}")
            continue
        placed.imports.append(f)
        env_names = [(keys, prefix + leaf.variable) for keys, leaf in f.secrets]
        placed.variables += [v for _, v in env_names]
        defined = known.defined.get(f.address)
        if defined is not None:
            if where.own is not None:
                merge = difference(_plain_as(f, env_names), defined[1], env_names)
                if merge:
                    placed.patches.append((f, merge))
        elif where.own is None:  # one folder: its secrets named after the environment
            for _, leaf in f.secrets:
                leaf.variable = prefix + leaf.variable
            placed.shared.append(f)
        elif first:
            placed.shared.append(f)
            if env_names:
                placed.patches.append((f, difference({}, {}, env_names)))
        else:
            for _, leaf in f.secrets:
                leaf.variable = prefix + leaf.variable
            placed.own.append(f)
    return placed


def _plain_as(f: Found, names: list[tuple[tuple[str, ...], str]]) -> dict[str, Any]:
    """``f``'s spec as written, each secret as ``{fromEnv}`` of the name given."""
    spec: dict[str, Any] = plain_data(f.spec)
    for keys, variable in names:
        spec = paths.put(spec, keys, {"fromEnv": variable})
    return spec


def render(manifests: list[Found], imports: list[Found] | None = None,
           patches: Sequence[tuple[Found, dict[str, Any]]] = (), prefix: str = "",
           environment: str | None = None) -> Output:
    """A folder's files in memory: one manifest file per kind, then ``imports.yaml`` and
    ``patches.yaml``."""
    imports = manifests if imports is None else imports
    output = Output(tool="govsync import", writer="govsync import", header=HEADER)
    by_kind: dict[str, list[Document]] = {}
    for f in manifests:
        by_kind.setdefault(f.kind.name, []).append(Document(
            {"apiVersion": API_VERSION, "kind": f.kind.name, "metadata": {"name": f.name},
             "spec": f.spec}, [f"{f.kind.name} {f.id} on the server" + (
                 f" of environment {environment}" if environment else "")]))
    for kind, documents in by_kind.items():
        files(output, file_stem(kind), documents)
    label = prefix.lower().replace("_", "-")
    documents = [Document({"apiVersion": API_VERSION, "kind": "Import",
                           "metadata": {"name": f"import-{label}{file_stem(f.kind.name)}-{f.name}"},
                           "spec": {"to": f.address, "id": f.id}}) for f in imports]
    if documents:
        files(output, IMPORTS_STEM, documents)
    documents = [Document({"apiVersion": API_VERSION, "kind": "Patch",
                           "metadata": {"name": f"{label}{file_stem(f.kind.name)}-{f.name}"},
                           "spec": {"target": f.address, "merge": merge}},
                          [f"What {f.address} ({f.id}) is here and not in the shared "
                           "manifest: its secrets' variables, and the fields it differs in"])
                 for f, merge in patches]
    if documents:
        files(output, PATCHES_STEM, documents)
    return output


async def _read(client: AsyncClient, kinds: list[Kind], snapshot: Snapshot
                ) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    try:
        async with client:
            return await read_server(client, kinds, snapshot)
    except NotFoundError as exc:
        raise ApiError(f"the endpoint does not offer {exc.operation or 'a List'} (404): "
                       "govsync import needs the reads of api-lifecycle.md, which this "
                       "endpoint lacks") from exc
    except UnauthorizedError as exc:
        raise ConfigError(f"the API rejected the key ({exc.status}): check {API_KEY_ENV} "
                          "for this endpoint") from exc
    except ApiError as exc:
        raise ApiError(f"cannot read the server: {exc}") from exc


def import_objects(client: AsyncClient, snapshot: Snapshot, where: Layout | str, *,
                   kinds: Iterable[str] = (), name_glob: str | None = None,
                   elsewhere: Callable[[Collection[str]], Mapping[str, tuple[str, str]]]
                   | None = None, merge: bool = False, context: Context | None = None,
                   ) -> Imported:
    """Read the server, add to the folders of ``where`` (importfolders.py); MigrateError
    when a folder is refused, ApiError when the server cannot be read (then nothing is
    written).  ``elsewhere``: which ids other workspaces of the state record (never
    imported here).  ``merge``: new files beside edited ones, never into them."""
    where = Layout(where) if isinstance(where, str) else where
    chosen = importable(kinds)
    objects, unlisted = asyncio.run(_read(client, chosen, snapshot))
    unlisted += unfound(kinds)
    ids = {o["id"] for listed in objects.values() for o in listed
           if isinstance(o.get("id"), str)}
    found, skipped, recorded = adoptable(objects, snapshot, name_glob,
                                         elsewhere(ids) if elsewhere is not None else None)
    read = [where.shared, *([where.own] if where.own else []), *where.paths]
    known = scan(read)
    placed = place(found, where, known, first=not scan([where.shared]).defined)
    if name_glob is None:
        seen = {f.address for f in found}
        plan = (f"`govsync plan --env {where.environment}` would create it; if it belongs "
                "to another environment only, move its manifest to that environment's folder"
                if where.environment else "`govsync plan` would create it")
        placed.absent = [f"{address} ({file}): {plan}"
                         for address, (file, _) in sorted(known.defined.items())
                         if address.split("/", 1)[0] in objects and address not in seen
                         and address not in snapshot.entries]
    done = Imported(found, Written(), [*placed.already, *skipped], unlisted, recorded,
                    placed=placed)
    if not placed.imports:
        return done
    outputs = [(where.shared, render(placed.shared, [] if where.own else placed.imports,
                                     environment=where.environment))]
    if where.own is not None:
        outputs.append((where.own, render(placed.own, placed.imports, placed.patches,
                                          where.prefix, where.environment)))
    outputs = [(folder, o) for folder, o in outputs if o.documents]
    check_with([o for _, o in outputs], read, context)
    planned, refused = [], []
    for folder, output in outputs:
        files_, why = additions(folder, output, merge=merge)
        planned.append((folder, files_))
        refused += why
    if refused:
        raise MigrateError(refused)
    for folder, files_ in planned:
        written = add(folder, files_)
        done.written.changed += [os.path.join(folder, n) for n in written.changed]
    return done
