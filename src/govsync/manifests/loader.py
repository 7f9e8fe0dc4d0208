"""Manifests: find the files, read each document, check it against the table
of kinds and the API's request models, and report every error with its place.

A valid document becomes a :class:`Manifest`: its address (``Kind/name``) and
its *request template*, the create request with defaults filled in, where
references are ``{"$ref": "Kind/name"}`` and secrets ``{"$secret": "VAR"}``
until plan resolves them.
"""

from __future__ import annotations

import difflib
import functools
import gc
import hashlib
import os
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from govsync.api.kinds import BY_KIND, Kind
from govsync.errors import ManifestError, Problem
from govsync.files import manifest_files as find_files
from govsync.manifests.yamlio import (
    RawDocument,
    gc_paused,
    iter_documents,
    locate,
    read_text,
)

API_VERSION = "govsync/v1"
TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
METADATA_KEYS = ("name", "dependsOn")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REF = "$ref"
SECRET = "$secret"

Position = tuple[int, int]


@dataclass(slots=True)
class Manifest:
    """One valid manifest document."""

    kind: Kind
    name: str
    file: str
    line: int
    col: int
    # The create request with defaults; references and secrets as markers.
    template: dict[str, Any]
    # (field, target address) for every reference written by name.
    refs: list[tuple[str, str]] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    # Where the document is on disk, to find a node's line and column when an
    # error needs it (positions are not kept: 10,000 documents' worth would
    # cost a sixth of planning them).
    source: str = ""
    index: int = 0
    positions: dict[str, Position] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.kind.name}/{self.name}"

    def where(self, what: str = "") -> tuple[str, int, int]:
        """(file, line, col) of a dotted path such as ``spec.logStoreB.apiKey``."""
        if what and what not in self.positions:
            root = _document_root(os.path.abspath(self.source), _stamp(self.source), self.file,
                                  self.index)
            path = tuple(int(p) if p.isdigit() else p for p in what.split("."))
            self.positions[what] = locate(root, path) if root is not None else (self.line, self.col)
        line, col = self.positions.get(what, (self.line, self.col))
        return self.file, line, col


def _stamp(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=16)
def _document_root(source: str, stamp: tuple[int, int], display: str, index: int) -> Any:
    """The node tree of one document, read again from disk (errors only).

    Keyed by absolute path and modification stamp, so a changed file is read anew."""
    text, _problem = read_text(source, display)
    if text is None:
        return None
    for item in iter_documents(text, display):
        if isinstance(item, RawDocument) and item.index == index:
            return item.root
    return None


@dataclass
class ManifestSet:
    """Every manifest found under the given paths, by address."""

    objects: dict[str, Manifest]
    files: list[str]
    digest: str
    # Addresses in dependency order (ties by address): the order of plans.
    order: list[str] = field(default_factory=list)


def load(paths: Sequence[str]) -> ManifestSet:
    """Load and check every manifest under ``paths``; raise ManifestError
    listing every problem (syntax, schema, references, duplicates, cycles).

    The cyclic garbage collector is paused while loading and the loaded
    objects are frozen out of it afterwards: loading makes a million small
    acyclic objects, which the collector would otherwise scan again and again
    for nothing (a fifth of the time at 10,000 documents).
    """
    with gc_paused():
        result = _load(paths)
    gc.freeze()
    return result


@dataclass
class _FileResult:
    """What one file contributes; computed on its own, so files can be read in parallel."""

    digest: bytes = b""
    problems: list[Problem] = field(default_factory=list)
    unknown: set[tuple[str | None, str | None]] = field(default_factory=set)
    # (manifest or None, kind, name, file, line, source, index) per document
    documents: list[tuple[Manifest | None, str | None, str | None, str, int, str, int]] = field(
        default_factory=list)


def _read_file(path: str, display: str) -> _FileResult:
    result = _FileResult()
    text, problem = read_text(path, display)
    if problem is not None:
        result.problems.append(problem)
        result.unknown.add((None, None))
        return result
    assert text is not None
    result.digest = hashlib.sha256(display.encode() + b"\0" + text.encode()).digest()
    for item in iter_documents(text, display):
        if isinstance(item, Problem):
            result.problems.append(item)
            result.unknown.add((None, None))  # the rest of the file is unread
            continue
        if item.value is None:  # an empty document
            continue
        manifest = check_document(item, result.problems, source=path)
        kind, name = _identity(item.value)
        if manifest is None:
            result.unknown.add((kind, name))
        result.documents.append((manifest, kind, name, item.file, item.line, path, item.index))
    return result


# Below this many bytes of YAML, one process reads everything: forking costs more.
PARALLEL_BYTES = 1024 * 1024


def _read_files(files: list[tuple[str, str]]) -> list[_FileResult]:
    """Read and check every file; large sets in two processes (two cores).

    The files are split in two halves by size; a forked child checks the
    second half and sends its results back pickled, while this process
    checks the first.  Anything unexpected falls back to doing it all here.
    """
    sizes = []
    for path, _ in files:
        try:
            sizes.append(os.path.getsize(path))
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    if total < PARALLEL_BYTES or len(files) < 2 or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return [_read_file(p, d) for p, d in files]
    half, acc = len(files), 0
    for i, size in enumerate(sizes):
        acc += size
        if acc >= total / 2:
            half = min(i + 1, len(files) - 1)
            break
    import pickle

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check the second half, send it, leave at once
        code = 0
        try:
            os.close(read_fd)
            data = pickle.dumps([_read_file(p, d) for p, d in files[half:]], protocol=5)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    first = [_read_file(p, d) for p, d in files[:half]]
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        if status != 0:
            raise ValueError("the reading process failed")
        second: list[_FileResult] = pickle.loads(data)
    except Exception:
        second = [_read_file(p, d) for p, d in files[half:]]
    return first + second


def _load(paths: Sequence[str]) -> ManifestSet:
    files, problems = find_files(paths)
    objects: dict[str, Manifest] = {}
    # Where each address was first defined, valid or not (duplicates).
    defined: dict[str, tuple[str, int]] = {}
    # What documents that could not be checked might define: references that
    # match are not reported as dangling, since they may be fine once those
    # documents are fixed.  (kind, name); None matches any.
    unknown: set[tuple[str | None, str | None]] = set()
    digest = hashlib.sha256()
    for result in _read_files(files):
        digest.update(result.digest)
        problems.extend(result.problems)
        unknown |= result.unknown
        for manifest, kind, name, file, line, source, index in result.documents:
            if kind is not None and name is not None:
                address = f"{kind}/{name}"
                first = defined.get(address)
                if first is not None:
                    root = _document_root(os.path.abspath(source), _stamp(source), file, index)
                    where = locate(root, ("metadata", "name")) if root is not None else (line, 1)
                    problems.append(Problem(
                        file, *where,
                        f"duplicate address {address}: also defined at {first[0]}:{first[1]}; "
                        "names must be unique per kind: rename one of them",
                    ))
                    continue
                defined[address] = (file, line)
            if manifest is not None:
                objects[manifest.address] = manifest
    problems.extend(check_links(objects.values(), objects.keys(), unknown))
    order: list[str] = []
    if not problems:
        from govsync.graph import order_or_cycles

        order, cycles = order_or_cycles(objects)
        problems.extend(cycles)
    if problems:
        raise ManifestError(problems)
    return ManifestSet(objects, [d for _, d in files], digest.hexdigest(), order)


def check_document(doc: RawDocument, problems: list[Problem], *, source: str = "") -> Manifest | None:
    """Check one document's envelope and spec; append problems; return the manifest."""
    start = len(problems)

    def problem(path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        problems.append(Problem(doc.file, *locate(doc.root, path, key=key), message))

    value = doc.value
    if not isinstance(value, dict):
        problem((), "a manifest must be a mapping with apiVersion, kind, metadata and spec, "
                    f"not {_a_value(value)}")
        return None
    for key in value:
        if key not in TOP_KEYS:
            problem((key,), _unknown(f"field {key!r}", str(key), TOP_KEYS), key=True)
    if value.get("apiVersion") != API_VERSION:
        if "apiVersion" not in value:
            problem((), f"missing apiVersion: add `apiVersion: {API_VERSION}`")
        else:
            problem(("apiVersion",), f"unknown apiVersion {value['apiVersion']!r}: use {API_VERSION}")
    kind_name = value.get("kind")
    kind = BY_KIND.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        if kind_name is None:
            problem((), f"missing kind: add `kind: KIND`, where KIND is one of {_kinds()}")
        else:
            problem(("kind",), _unknown(f"kind {kind_name!r}", str(kind_name), BY_KIND,
                                        otherwise=f"use one of {_kinds()}"))
    name, depends = _check_metadata(value.get("metadata"), problem)
    spec = value.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        problem(("spec",), f"spec must be a mapping of the object's fields, not {_a_value(spec)}")
        return None
    if kind is None or name is None:
        return None
    manifest = Manifest(kind, name, doc.file, doc.line, doc.col, {}, source=source or doc.file,
                        index=doc.index)
    manifest.depends_on.extend(depends)
    template = _check_spec(kind, name, spec, manifest, problem)
    if len(problems) > start or template is None:
        return None
    manifest.template = template
    return manifest


def _check_metadata(metadata: Any, problem: Any) -> tuple[str | None, list[str]]:
    if metadata is None:
        problem((), "missing metadata: add `metadata: {name: NAME}` (the object's name, "
                    "unique per kind)")
        return None, []
    if not isinstance(metadata, dict):
        problem(("metadata",), f"metadata must be a mapping with a name, not {_a_value(metadata)}")
        return None, []
    for key in metadata:
        if key not in METADATA_KEYS:
            problem(("metadata", key), _unknown(f"field metadata.{key}", str(key), METADATA_KEYS,
                                                otherwise="metadata holds only name and dependsOn"),
                    key=True)
    name = metadata.get("name")
    if name is None:
        problem(("metadata",), "missing metadata.name: add `name: NAME` under metadata "
                               "(the object's name, unique per kind)")
        name = None
    elif not isinstance(name, str) or not name.strip():
        problem(("metadata", "name"), "metadata.name must be a non-empty string, "
                                      f"not {_a_value(name)}")
        name = None
    elif any(ch < " " or ch == "\x7f" for ch in name):
        problem(("metadata", "name"), "metadata.name must not contain control characters "
                "(newlines, tabs...)")
        name = None
    elif "/" in name:
        problem(("metadata", "name"), "metadata.name must not contain '/' (addresses are Kind/name)")
        name = None
    depends = metadata.get("dependsOn", [])
    out: list[str] = []
    if depends is None:
        depends = []
    if not isinstance(depends, list):
        problem(("metadata", "dependsOn"), "metadata.dependsOn must be a list of addresses (Kind/name)")
        return name, []
    for i, item in enumerate(depends):
        if not isinstance(item, str) or item.count("/") != 1 or item.split("/")[0] not in BY_KIND:
            problem(
                ("metadata", "dependsOn", i),
                f"metadata.dependsOn[{i}] must be an address Kind/name with a known kind, got {item!r}",
            )
        else:
            out.append(item)
    return name, out


def _check_spec(
    kind: Kind, name: str, spec: dict[str, Any], manifest: Manifest, problem: Any
) -> dict[str, Any] | None:
    """Turn a manifest spec into a request template, or report why not."""
    request = dict(spec)
    used_refs: dict[str, str] = {}  # id field -> ref field written
    ok = True
    if "name" in spec and kind.named:
        problem(("spec", "name"), "spec.name is not allowed: the API name is metadata.name", key=True)
        ok = False
    if kind.named:
        request["name"] = name
    for ref in kind.references:
        if ref.ref_field not in spec:
            continue
        target = spec[ref.ref_field]
        del request[ref.ref_field]
        if ref.id_field in spec:
            problem(("spec", ref.ref_field),
                    f"give either spec.{ref.id_field} or spec.{ref.ref_field}, not both", key=True)
            ok = False
        if not isinstance(target, str) or not target:
            problem(("spec", ref.ref_field),
                    f"spec.{ref.ref_field} must be the metadata.name of a {ref.target}, "
                    f"not {_a_value(target)}")
            ok = False
            request[ref.id_field] = "ref"
            continue
        address = f"{ref.target}/{target}"
        manifest.refs.append((ref.ref_field, address))
        used_refs[ref.id_field] = ref.ref_field
        request[ref.id_field] = "ref"  # placeholder for validation
    secrets: list[tuple[tuple[str, ...], str]] = []
    for path in kind.secrets:
        keys = tuple(path.split("."))
        parent = _get(request, keys[:-1])
        if not isinstance(parent, dict) or keys[-1] not in parent:
            continue
        value = parent[keys[-1]]
        variable = value.get("fromEnv") if isinstance(value, dict) else None
        if not isinstance(value, dict) or "fromEnv" not in value:
            problem(("spec", *keys),
                    f"spec.{path} is a secret: write it as {{fromEnv: VARIABLE}} and set VARIABLE "
                    "in govsync's environment (literal secrets are not allowed)")
            ok = False
        elif len(value) != 1:
            extra = sorted(str(k) for k in value if k != "fromEnv")
            problem(("spec", *keys, extra[0]),
                    f"spec.{path}: a secret is {{fromEnv: VARIABLE}} and nothing else: "
                    f"remove {', '.join(extra)}", key=True)
            ok = False
        elif not isinstance(variable, str) or not ENV_NAME.match(variable):
            problem(("spec", *keys, "fromEnv"),
                    f"spec.{path}.fromEnv must name an environment variable (letters, digits "
                    f"and '_', not starting with a digit), not {_short(variable)}")
            ok = False
        parent = _copy_path(request, keys[:-1])
        parent[keys[-1]] = "secret"  # placeholder for validation
        if isinstance(variable, str):
            secrets.append((keys, variable))
    try:
        model = kind.request_model.model_validate(request)
    except ValidationError as exc:
        # Inputs are shown only by kind (or short, for enums and patterns);
        # secrets were replaced by placeholders above.
        errors = exc.errors(include_url=False)
        # A misspelt required field is one error, not also "missing".
        misspelt = {
            (*err["loc"][:-1], close)
            for err in errors
            if err["type"] == "extra_forbidden"
            and (close := _closest(str(err["loc"][-1]), _fields_at(kind, err["loc"][:-1])))
        }
        for err in errors:
            if err["type"] == "missing" and tuple(err["loc"]) in misspelt:
                continue
            where, message, at_key = _explain(kind, err, used_refs)
            problem(where, message, key=at_key)
        return None
    if not ok:
        return None
    template: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    for id_field, ref_field in used_refs.items():
        target = next(a for f, a in manifest.refs if f == ref_field)
        template[id_field] = {REF: target}
    for keys, variable in secrets:
        _copy_path(template, keys[:-1])[keys[-1]] = {SECRET: variable}
    return template


def _get(data: Any, keys: Iterable[str]) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _copy_path(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The dict at ``keys``, copying each level so the caller's input is untouched."""
    for key in keys:
        data[key] = dict(data[key])
        data = data[key]
    return data


def _explain(kind: Kind, err: Any, used_refs: dict[str, str]) -> tuple[tuple[Any, ...], str, bool]:
    """Map a pydantic error on the request to (manifest path, message, point at key)."""
    loc = tuple(err["loc"])
    etype = err["type"]
    if loc and loc[0] == "name" and kind.named:
        path: tuple[Any, ...] = ("metadata", "name")
        shown = "metadata.name"
    else:
        if loc and loc[0] in used_refs:
            loc = (used_refs[loc[0]], *loc[1:])
        path = ("spec", *loc)
        shown = _dotted(path)
    if etype == "missing":
        ref = next((r for r in kind.references if loc and r.id_field == loc[0]), None)
        if ref is not None:
            return path[:-1], f"missing {shown}: give spec.{ref.id_field} or spec.{ref.ref_field}", False
        return path[:-1], f"missing required field {shown}: add it", False
    if etype == "extra_forbidden":
        valid = _fields_at(kind, loc[:-1])
        listed = f"valid fields here: {', '.join(valid)}" if valid else "remove it"
        return path, _unknown(f"field {shown}", str(loc[-1]), valid, otherwise=listed), True
    if etype == "exactly_one":
        ctx = err.get("ctx", {})
        return path, f"{shown}: exactly one of {ctx.get('fields')} must be set (got {ctx.get('got')})", False
    return path, f"{shown}: {_describe(err)}", False


# What each pydantic type error expects, in YAML words.
_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number",
    "string_type": "a string", "bool_type": "true or false", "bool_parsing": "true or false",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
    "list_type": "a list",
}
# The API's name patterns, in words.
_PATTERN_WORDS = {
    r"^[0-9a-z\-]+$": "use only lowercase letters, digits and '-'",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "start with a letter or '_' and use only letters, digits and '_'",
    r"^[a-z][a-z0-9_\-]*$": "start with a lowercase letter and use only lowercase letters, "
                             "digits, '_' and '-'",
}


def _describe(err: Any) -> str:
    """A pydantic error as 'must ... (got ...)'."""
    etype, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if etype in _EXPECTED:
        text = f"must be {_EXPECTED[etype]}, not {_a_value(value)}"
        if isinstance(value, str) and _unquoted_fits(etype, value):
            text += ": remove the quotes"
        elif etype == "string_type" and isinstance(value, int | float | bool):
            text += ": put it in quotes"
        return text
    if etype == "string_pattern_mismatch":
        words = _PATTERN_WORDS.get(ctx.get("pattern", ""), f"match {ctx.get('pattern')}")
        return f"must {words} (got {_short(value)})"
    if etype == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    message = str(err["msg"])
    for prefix in ("Input should", "String should", "List should", "Value should"):
        if message.startswith(prefix):
            message = "must" + message[len(prefix):]
    if isinstance(value, str) and etype in ("string_too_short", "string_too_long"):
        return f"{message} (got {len(value)})"
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"{message} (got {_short(value)})"
    return message


def _unquoted_fits(etype: str, value: str) -> bool:
    """Whether a quoted string would have the expected type without its quotes."""
    if etype.startswith("bool"):
        return value.lower() in ("true", "false")
    if etype.startswith(("int", "float")):
        try:
            float(value)
        except ValueError:
            return False
        return True
    return False


def _a_value(value: Any) -> str:
    """What a YAML value is, for messages ('a list', 'the string "12"'...)."""
    if value is None:
        return "null (empty)"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {_short(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _kinds() -> str:
    return ", ".join(BY_KIND)


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _unknown(what: str, word: str, candidates: Iterable[str], *, otherwise: str = "") -> str:
    close = _closest(word, candidates)
    if close:
        return f"unknown {what}: did you mean {close!r}?"
    return f"unknown {what}: {otherwise}" if otherwise else f"unknown {what}"


def _closest(word: str, candidates: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


@cache
def _fields_at(kind: Kind, loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The field names the manifest may write at ``loc`` of the spec."""
    models = [kind.request_model]
    for step in loc:
        if isinstance(step, int):
            continue  # an item of a list: the list's item models
        models = [
            sub
            for model in models
            if step in model.model_fields
            for sub in _models_in(model.model_fields[step].annotation)
        ]
    names = {name for model in models for name in model.model_fields}
    if not loc:
        names |= {r.ref_field for r in kind.references}
        if kind.named:
            names.discard("name")
    return tuple(sorted(names))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _identity(value: Any) -> tuple[str | None, str | None]:
    """(kind, name) of a document as far as they can be read (None: cannot)."""
    if not isinstance(value, dict):
        return None, None
    kind = value.get("kind")
    metadata = value.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return (
        kind if isinstance(kind, str) and kind in BY_KIND else None,
        name if isinstance(name, str) and name else None,
    )


def check_links(
    manifests: Iterable[Manifest],
    objects: Collection[str],
    unknown: Collection[tuple[str | None, str | None]] = (),
) -> list[Problem]:
    """References and dependsOn entries must name objects in the manifests.

    An address that a document with errors may define (``unknown``) is not
    reported: that document's own errors are.
    """
    problems: list[Problem] = []
    everything = (None, None) in unknown

    def missing(address: str) -> bool:
        if address in objects or everything:
            return False
        kind, name = address.split("/", 1)
        return not ({(kind, name), (kind, None), (None, name)} & set(unknown))

    for m in manifests:
        for ref_field, address in m.refs:
            if missing(address):
                problems.append(Problem(
                    *m.where(f"spec.{ref_field}"),
                    f"spec.{ref_field} refers to {address}, which no manifest defines"
                    f"{_did_you_mean(address, objects)}",
                ))
        for i, address in enumerate(m.depends_on):
            if missing(address):
                problems.append(Problem(
                    *m.where(f"metadata.dependsOn.{i}"),
                    f"metadata.dependsOn names {address}, which no manifest defines"
                    f"{_did_you_mean(address, objects)}",
                ))
    return problems


def _did_you_mean(address: str, objects: Collection[str]) -> str:
    kind = address.split("/", 1)[0]
    same_kind = [a for a in objects if a.startswith(kind + "/")]
    close = difflib.get_close_matches(address, same_kind, n=1, cutoff=0.8)
    if close:
        return f": did you mean {close[0]}?"
    return ": add a manifest for it or fix the name"


__all__ = ["Manifest", "ManifestError", "ManifestSet", "find_files", "load"]
