"""One manifest document checked on its own: envelope, metadata, spec.

``check_document`` turns a YAML document into a :class:`Manifest` or reports
every problem with its place.  The spec becomes a request template in four
steps: the API name from ``metadata.name``, references written by name,
secrets written ``{fromEnv: VAR}``, then the API's request model (defaults
filled in, every constraint checked).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from yaml.nodes import Node

from govsync import envvars, paths
from govsync.api._generated_checks import CHECKS, Unsure
from govsync.api.catalog import MAX_REQUEST_BYTES
from govsync.api.kinds import BY_KIND, HOOK_KIND, Kind
from govsync.errors import Problem
from govsync.manifests import wording
from govsync.manifests.links import Link
from govsync.manifests.manifest import Context, Manifest
from govsync.manifests.names import invisible
from govsync.manifests.yamlio import METADATA_KEYS, TOP_KEYS, RawDocument, locate
from govsync.paths import Path
from govsync.policycode import Role, hook_uses
from govsync.values import Ref, SecretRef

API_VERSION = "govsync/v1"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Reports a problem at a path of the document (at its key with key=True).
Report = Callable[..., None]

# Stand-ins that let the request model check a spec whose references and
# secrets are not values yet.
_REF_PLACEHOLDER = "ref"
_SECRET_PLACEHOLDER = "secret"
# The API name a spec is checked with when metadata.name is invalid: valid for
# every kind's name pattern, so only the spec's own errors are reported.
_NAME_STAND_IN = "placeholder"


class Override(NamedTuple):
    """Errors at or below ``prefix`` of a patched document point into a Patch."""

    prefix: Path
    file: str
    root: Node
    at: Path


def check_document(doc: RawDocument, problems: list[Problem], *, source: str = "",
                   context: Context | None = None,
                   overrides: Sequence[Override] = (),
                   links: list[Link] | None = None) -> Manifest | None:
    """Check one document's envelope and spec; append problems; return the manifest.

    A document with problems makes no manifest; its references, where they could be
    read, are appended to ``links``, so that a dangling one is reported with the
    document's other problems (every error at once)."""
    start = len(problems)
    context = context or Context()

    def problem(path: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        for o in reversed(overrides):  # the last patch to set a field is the one to fix
            if paths.under(path, o.prefix):
                where = locate(o.root, (*o.at, *path[len(o.prefix):]), key=key)
                problems.append(Problem(o.file, *where, message))
                return
        problems.append(Problem(doc.file, *locate(doc.root, path, key=key), message))

    value = doc.value
    if not isinstance(value, dict):
        problem((), "a manifest must be a mapping with apiVersion, kind, metadata and spec, "
                    f"not {wording.a_value(value)}")
        return None
    kind = _check_envelope(value, problem)
    name, depends = _check_metadata(value.get("metadata"), problem)
    spec = value.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        problem(("spec",), f"spec must be a mapping of the object's fields, not {wording.a_value(spec)}")
        return None
    if kind is None:
        return None
    if name is None:
        # The spec is still checked, under a stand-in name, so that its errors
        # are reported with the name's; no manifest is made.
        check_spec(kind, _NAME_STAND_IN, spec, [], problem)
        return None
    refs: list[tuple[str, str]] = []
    built = check_spec(kind, name, spec, refs, problem, context)
    if len(problems) > start or built is None:
        if links is not None:
            links.extend(Link(doc.file, *locate(doc.root, ("spec", field)),
                              f"spec.{field} refers to", address) for field, address in refs)
            links.extend(Link(doc.file, *locate(doc.root, ("metadata", "dependsOn", i)),
                              "metadata.dependsOn names", address)
                         for i, address in enumerate(depends))
        return None
    manifest = Manifest(kind, name, doc.file, doc.line, doc.col, built[0], built[1],
                        tuple(refs), tuple(depends), _uses(kind, built[0]),
                        source=source or doc.file, index=doc.index)
    if doc.chars > _SIZE_CHECK_CHARS:
        size = request_size(manifest.template)
        if size > MAX_REQUEST_BYTES:
            problem((), f"this object's request would be {size:,} bytes, over the API's "
                        f"{MAX_REQUEST_BYTES // 1024 // 1024} MiB limit: split it or shorten "
                        "its largest fields")
            return None
    return manifest


# Documents whose scalars hold fewer characters cannot come near the limit.
_SIZE_CHECK_CHARS = 256 * 1024


def _uses(kind: Kind, template: dict[str, Any]) -> tuple[str, ...]:
    """The hooks a policy's code reads (``input.hooks.<name>``): it depends on them."""
    code = template.get("code")
    if kind.code is not Role.POLICY or not isinstance(code, str):
        return ()
    return tuple(sorted({f"{HOOK_KIND}/{use.name}" for use in hook_uses(code)}))


def request_size(template: dict[str, Any]) -> int:
    """Bytes of the JSON body a template becomes (holes counted as short strings).
    Only documents near the limit are measured: json is imported then, not by
    every ``govsync validate``."""
    import json

    return len(json.dumps(template, default=lambda _leaf: "x" * 64, ensure_ascii=False,
                          separators=(",", ":")).encode())


def _check_envelope(value: dict[str, Any], problem: Report) -> Kind | None:
    for key in value:
        if key not in TOP_KEYS:
            problem((key,), wording.unknown(f"field {key!r}", str(key), TOP_KEYS), key=True)
    if value.get("apiVersion") != API_VERSION:
        if "apiVersion" not in value:
            problem((), f"missing apiVersion: add `apiVersion: {API_VERSION}`")
        else:
            problem(("apiVersion",), f"unknown apiVersion {value['apiVersion']!r}: use {API_VERSION}")
    kind_name = value.get("kind")
    kind = BY_KIND.get(kind_name) if isinstance(kind_name, str) else None
    if kind is None:
        if kind_name is None:
            problem((), f"missing kind: add `kind: KIND`, where KIND is one of {wording.kinds()}")
        else:
            problem(("kind",), wording.unknown(f"kind {kind_name!r}", str(kind_name), BY_KIND,
                                         otherwise=f"use one of {wording.kinds()}"))
    return kind


def _check_metadata(metadata: Any, problem: Report) -> tuple[str | None, list[str]]:
    if metadata is None:
        problem((), "missing metadata: add `metadata: {name: NAME}` (the object's name, "
                    "unique per kind)")
        return None, []
    if not isinstance(metadata, dict):
        problem(("metadata",), f"metadata must be a mapping with a name, not {wording.a_value(metadata)}")
        return None, []
    wording.unknown_keys(metadata, ("metadata",), METADATA_KEYS, problem,
                   otherwise="metadata holds only name and dependsOn")
    name = metadata.get("name")
    if name is None:
        problem(("metadata",), "missing metadata.name: add `name: NAME` under metadata "
                               "(the object's name, unique per kind)")
        name = None
    elif not isinstance(name, str) or not name.strip():
        problem(("metadata", "name"), "metadata.name must be a non-empty string, "
                                      f"not {wording.a_value(name)}")
        name = None
    elif (bad := invisible(name)) is not None:
        problem(("metadata", "name"), f"metadata.name must not contain {bad}: control, "
                "invisible and text-direction characters cannot be reviewed; retype the name")
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



def check_spec(
    kind: Kind, name: str, spec: dict[str, Any], refs: list[tuple[str, str]], problem: Report,
    context: Context | None = None,
) -> tuple[dict[str, Any], tuple[Path, ...]] | None:
    """The request template of a spec and the paths of its holes, or None (problems reported).

    Appends (ref field, target address) to ``refs`` for each reference."""
    failed: list[Path] = []  # {var: ...} that could not be used: reported once, there
    spec, uses = _take_variables(kind, spec, context or Context(), problem, failed)
    if not isinstance(spec, dict):
        # The whole spec was {var: NAME}, and the variable is not a mapping.
        if not failed:
            problem(("spec",), f"spec is variable {uses.get((), '?')!r}, whose value is "
                    f"{wording.a_value(spec)}: a spec is a mapping of fields; give the variable "
                    "a mapping, or write the fields here")
        return None

    def report(where: tuple[Any, ...], message: str, *, key: bool = False) -> None:
        if not (where[:1] == ("spec",) and any(paths.under(tuple(where[1:]), f)
                                                for f in failed)):
            problem(where, message, key=key)

    request = dict(spec)
    ok = _take_name(kind, name, spec, request, report)
    used_refs, ok_refs = _take_refs(kind, spec, request, refs, report)
    secrets, ok_secrets = _take_secrets(kind, request, report)
    validated = _validate(kind, request, used_refs, report, uses, context or Context())
    ok_vars = not failed
    if validated is None or not (ok and ok_refs and ok_secrets and ok_vars):
        return None
    holes: list[Path] = []
    for id_field, ref_field in used_refs.items():
        target = next(a for f, a in refs if f == ref_field)
        validated[id_field] = Ref(target)
        holes.append((id_field,))
    for keys, variable in secrets:
        validated = paths.replace(validated, keys, SecretRef(variable))
        holes.append(keys)
    return validated, tuple(holes)


def _take_variables(kind: Kind, spec: dict[str, Any], context: Context,
                    problem: Report, failed: list[Path]) -> tuple[dict[str, Any], dict[Path, str]]:
    """Replace each ``{var: NAME}`` by the variable's value; {path: NAME} of each use.
    The paths of uses that fail are appended to ``failed``."""
    uses: dict[Path, str] = {}
    if not _mentions_var(spec):
        return spec, uses
    filling = _Filling(context, problem, failed, uses, [paths.split(s) for s in kind.secrets])
    return filling.walk(spec, ()), uses


@dataclass
class _Filling:
    """One spec's ``{var: NAME}`` being filled in.  (A method, not a closure that
    calls itself: such a closure is a reference cycle, and would keep the
    document's node tree alive while the loader pauses the collector.)"""

    context: Context
    problem: Report
    failed: list[Path]
    uses: dict[Path, str]
    secrets: list[Path]

    def walk(self, value: Any, at: Path) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and "var" in value:
                return self.variable(value, at)
            return {k: self.walk(v, (*at, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.walk(v, (*at, i)) for i, v in enumerate(value)]
        return value

    def variable(self, value: dict[str, Any], at: Path) -> Any:
        name, context, problem = value["var"], self.context, self.problem
        if any(paths.under(at, s) for s in self.secrets):
            problem(("spec", *at), f"spec.{paths.text(at)} is a secret: variables are "
                    "not secrets (they are in git); write {fromEnv: VARIABLE}")
        elif not isinstance(name, str):
            problem(("spec", *at, "var"), f"{{var: NAME}} names a variable, not "
                    f"{wording.a_value(name)}")
        elif name not in context.variables:
            known = ", ".join(sorted(context.variables)) or "none"
            problem(("spec", *at, "var"), f"variable {name!r} is not defined in "
                    f"{context.where} (defined: {known}): add it to vars in govsync.yaml "
                    f"or pass --var {name}=VALUE")
        else:
            self.uses[at] = name
            return context.variables[name]
        self.failed.append(at)
        return value


def _mentions_var(value: Any) -> bool:
    if isinstance(value, dict):
        return "var" in value or any(_mentions_var(v) for v in value.values())
    if isinstance(value, list):
        return any(_mentions_var(v) for v in value)
    return False


def _take_name(kind: Kind, name: str, spec: dict[str, Any], request: dict[str, Any],
               problem: Report) -> bool:
    """The API name of a named kind is metadata.name; spec.name is refused."""
    if not kind.named:
        return True
    request["name"] = name
    if "name" in spec:
        problem(("spec", "name"), "spec.name is not allowed: the API name is metadata.name", key=True)
        return False
    return True


def _take_refs(kind: Kind, spec: dict[str, Any], request: dict[str, Any],
               refs: list[tuple[str, str]], problem: Report) -> tuple[dict[str, str], bool]:
    """Replace each ``<x>Ref`` by a stand-in ``<x>Id``; returns {id field: ref field written}."""
    used: dict[str, str] = {}
    ok = True
    for ref in kind.references:
        if ref.ref_field not in spec:
            continue
        target = spec[ref.ref_field]
        del request[ref.ref_field]
        request[ref.id_field] = _REF_PLACEHOLDER
        if ref.id_field in spec:
            problem(("spec", ref.ref_field),
                    f"give either spec.{ref.id_field} or spec.{ref.ref_field}, not both", key=True)
            ok = False
        if not isinstance(target, str) or not target:
            problem(("spec", ref.ref_field),
                    f"spec.{ref.ref_field} must be the metadata.name of a {ref.target}, "
                    f"not {wording.a_value(target)}")
            ok = False
            continue
        refs.append((ref.ref_field, f"{ref.target}/{target}"))
        used[ref.id_field] = ref.ref_field
    return used, ok


def _take_secrets(kind: Kind, request: dict[str, Any],
                  problem: Report) -> tuple[list[tuple[Path, str]], bool]:
    """Check each secret is ``{fromEnv: VAR}`` and put a stand-in in its place.

    Secrets are the kind's secret fields, and every ``{fromEnv: VAR}`` inside a
    variant whose fields the API leaves open (a connector AI provider's key)."""
    secrets: list[tuple[Path, str]] = []
    ok = True
    found: list[Path] = []
    for path in kind.secrets:
        keys = paths.split(path)
        if paths.has(request, keys):
            found.append(keys)
            value = paths.get(request, keys)
            if not isinstance(value, dict) or "fromEnv" not in value:
                problem(("spec", *keys),
                        f"spec.{path} is a secret: write it as {{fromEnv: VARIABLE}} and set "
                        "VARIABLE in govsync's environment (literal secrets are not allowed)")
                ok = False
    for path in kind.open_variants:
        keys = paths.split(path)
        found += _open_secrets(paths.get(request, keys), keys)
    for keys in found:
        value = paths.get(request, keys)
        variable = value.get("fromEnv") if isinstance(value, dict) else None
        dotted = paths.text(keys)
        if not isinstance(value, dict) or "fromEnv" not in value:
            pass  # reported above
        elif len(value) != 1:
            extra = sorted(str(k) for k in value if k != "fromEnv")
            problem(("spec", *keys, extra[0]),
                    f"spec.{dotted}: a secret is {{fromEnv: VARIABLE}} and nothing else: "
                    f"remove {', '.join(extra)}", key=True)
            ok = False
        elif not isinstance(variable, str) or not ENV_NAME.match(variable):
            problem(("spec", *keys, "fromEnv"),
                    f"spec.{dotted}.fromEnv must name an environment variable (letters, digits "
                    f"and '_', not starting with a digit), not {wording.short(variable)}")
            ok = False
        elif variable in envvars.OWN:
            problem(("spec", *keys, "fromEnv"),
                    f"spec.{path}.fromEnv: {variable} is one of govsync's own settings, not "
                    "a secret of this object (it would be sent to the API as this field): "
                    "use a variable of its own")
            ok = False
        request.update(paths.replace(request, keys, _SECRET_PLACEHOLDER))
        if isinstance(variable, str):
            secrets.append((keys, variable))
    return secrets, ok


def _open_secrets(value: Any, at: Path) -> list[Path]:
    """The paths of every mapping with a ``fromEnv`` key in ``value`` (at ``at``)."""
    if isinstance(value, dict):
        if "fromEnv" in value:
            return [at]
        return [p for k, v in value.items() for p in _open_secrets(v, (*at, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _open_secrets(v, (*at, i))]
    return []


def _validate(kind: Kind, request: dict[str, Any], used_refs: dict[str, str],
              problem: Report, uses: dict[Path, str], context: Context) -> dict[str, Any] | None:
    """The request through the API's model (defaults filled in), or None with its errors.

    The model's compiled check answers first; only what it cannot vouch for
    (every invalid spec among them) goes to the pydantic model, which words
    the errors.  Inputs are shown only by kind (or short, for enums and
    patterns); secrets were replaced by stand-ins before."""
    try:
        return CHECKS[kind.name](request)
    except Unsure:
        pass
    from pydantic import ValidationError

    try:
        model = kind.request_model.model_validate(request)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        # A misspelt required field is one error, not also "missing".
        misspelt = {
            (*err["loc"][:-1], close)
            for err in errors
            if err["type"] == "extra_forbidden"
            and (close := wording.closest(str(err["loc"][-1]), wording.fields_at(kind, err["loc"][:-1])))
        }
        for err in errors:
            if err["type"] == "missing" and tuple(err["loc"]) in misspelt:
                continue
            where, message, at_key = wording.explain(kind, err, used_refs)
            spec_path = tuple(where[1:]) if where[:1] == ("spec",) else None
            name = next((n for p, n in uses.items()
                         if spec_path is not None and paths.under(spec_path, p)), None)
            if name is not None:
                message += f" (the value of variable {name} in {context.where})"
            problem(where, message, key=at_key)
        return None
    validated: dict[str, Any] = model.model_dump(mode="json", exclude_none=True)
    return validated


def identity(value: Any) -> tuple[str | None, str | None]:
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


