"""A Terraform state, format version 4 (what ``terraform state pull`` prints), read strictly.

Only what a migration needs is kept: every managed resource instance with
its address, provider, schema version, attributes and sensitive attribute
paths.  Data sources are counted and skipped; a deposed object (left by
``create_before_destroy``) is not an instance Terraform manages at its
address, so it is listed apart.  Provider bookkeeping (``private``,
``dependencies``, ``create_before_destroy``, identities) is ignored.

Every problem is one line that names its place (the JSON line and column,
or the resource's address), never a value of the state: values may be
secrets.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from govsync.errors import MigrateError

FORMAT_VERSION = 4
STDIN = "-"

IndexKey = int | str
# One step of an attribute path: an attribute's name, or None for any index
# of a list, set or map (sensitivity is kept for the whole collection).
AttrPath = tuple[str | None, ...]

_MODULE_STEP = re.compile(r'module\.([A-Za-z_][A-Za-z0-9_-]*)(?:\[(\d+|"(?:[^"\\]|\\.)*")\])?')


@dataclass(frozen=True)
class Instance:
    """One managed resource instance of the state."""

    module: str                 # 'module.team["a"]', or "" at the root
    type: str                   # formal_policy
    name: str                   # the resource's name in the configuration
    key: IndexKey | None        # count index or for_each key
    provider: str               # 'provider["registry.terraform.io/formalco/formal"]'
    schema_version: int
    attributes: dict[str, Any]
    sensitive: tuple[AttrPath, ...] = ()
    tainted: bool = False

    @property
    def address(self) -> str:
        """The instance's address, as ``terraform state list`` prints it."""
        prefix = f"{self.module}." if self.module else ""
        index = "" if self.key is None else f"[{key_text(self.key)}]"
        return f"{prefix}{self.type}.{self.name}{index}"

    def words(self) -> list[str]:
        """The names and keys along the address (modules, then the resource): what a
        name derived from it is made of."""
        out: list[str] = []
        for name, key in module_steps(self.module):
            out.append(name)
            if key is not None:
                out.append(str(key))
        out.append(self.name)
        if self.key is not None:
            out.append(str(self.key))
        return out

    def is_sensitive(self, path: tuple[str | int, ...]) -> bool:
        """Whether the attribute at ``path`` (names, and indexes into blocks) is sensitive."""
        return any(len(s) <= len(path) and all(
            step is None or step == part for step, part in zip(s, path, strict=False))
            for s in self.sensitive)


@dataclass
class State:
    """What a migration reads of a Terraform state."""

    serial: int = 0
    lineage: str = ""
    terraform_version: str = ""
    instances: list[Instance] = field(default_factory=list)
    deposed: list[tuple[str, str]] = field(default_factory=list)   # (address, type)
    data_sources: int = 0


def key_text(key: IndexKey) -> str:
    """An index key as Terraform writes it in an address: ``0``, ``"eu"``."""
    if isinstance(key, int):
        return str(key)
    out = ['"']
    for i, ch in enumerate(key):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "$%" and key[i + 1:i + 2] == "{":
            out.append(ch + ch)  # HCL's escape of a template sequence
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def module_steps(module: str) -> list[tuple[str, IndexKey | None]]:
    """``module.a["k"].module.b`` -> [("a", "k"), ("b", None)]; [] when it cannot be read."""
    steps: list[tuple[str, IndexKey | None]] = []
    at = 0
    while at < len(module):
        found = _MODULE_STEP.match(module, at)
        if found is None:
            return []
        raw = found.group(2)
        key: IndexKey | None = None
        if raw is not None:
            if raw.startswith('"'):
                try:
                    key = str(json.loads(raw.replace("$${", "${").replace("%%{", "%{")))
                except ValueError:
                    return []
            else:
                key = int(raw)
        steps.append((found.group(1), key))
        at = found.end()
        if at < len(module):
            if module[at] != ".":
                return []
            at += 1
    return steps


def read_source(source: str) -> bytes:
    """The bytes of ``source``: a file, or ``-`` for standard input."""
    try:
        if source == STDIN:
            return sys.stdin.buffer.read()
        with open(source, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise MigrateError([f"{source}: cannot read it: {exc.strerror}"]) from None


def read_state(data: bytes, source: str) -> State:
    """The state in ``data`` (read from ``source``, a path or ``-``); MigrateError
    lists every problem found."""
    shown = "standard input" if source == STDIN else source
    text = _text(data, shown)
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        # An unterminated string runs to the end: the text stops inside it.
        ends = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        truncated = " (it ends too early: is it truncated?)" if ends else ""
        raise MigrateError([f"{shown}:{exc.lineno}:{exc.colno}: not a JSON document: "
                            f"{exc.msg}{truncated}"]) from None
    except ValueError as exc:
        raise MigrateError([f"{shown}: not a JSON document: {exc}"]) from None
    except RecursionError:
        raise MigrateError([f"{shown}: not a Terraform state: nested too deeply"]) from None
    reader = _Reader(shown)
    state = reader.state(document)
    if reader.problems:
        raise MigrateError(reader.problems)
    return state


def _text(data: bytes, shown: str) -> str:
    if not data.strip():
        raise MigrateError([f"{shown}: empty: expected the JSON that `terraform state pull` "
                            "prints"])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MigrateError([f"{shown}: not UTF-8 text (byte {exc.start}): expected the JSON "
                            "that `terraform state pull` prints"]) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


@dataclass
class _Reader:
    shown: str
    problems: list[str] = field(default_factory=list)

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{self.shown}: {where}: {message}" if where
                             else f"{self.shown}: {message}")

    def state(self, document: Any) -> State:
        if not isinstance(document, dict):
            self.problem("", f"not a Terraform state: the JSON is {_a(document)}, not an object")
            return State()
        version = document.get("version")
        if version != FORMAT_VERSION:
            what = (f"format version {version}" if isinstance(version, int)
                    and not isinstance(version, bool) else "no format version")
            self.problem("", f"a Terraform state of {what}: this reads format version "
                         f"{FORMAT_VERSION} (Terraform 0.12 and later; `terraform state pull` "
                         "prints it)")
            return State()
        state = State(
            serial=self._typed(document, "serial", int, "", 0),
            lineage=self._typed(document, "lineage", str, "", ""),
            terraform_version=self._typed(document, "terraform_version", str, "", ""))
        resources = document.get("resources")
        if not isinstance(resources, list):
            self.problem("", "resources: must be a list (the state's resources)")
            return state
        for i, resource in enumerate(resources):
            self.resource(resource, i, state)
        return state

    def _typed(self, obj: dict[str, Any], key: str, kind: type, where: str, default: Any) -> Any:
        value = obj.get(key, default)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            self.problem(where, f"{key}: must be {'an integer' if kind is int else 'a string'}, "
                         f"not {_a(value)}")
            return default
        return value

    def resource(self, resource: Any, i: int, state: State) -> None:
        where = f"resources[{i}]"
        if not isinstance(resource, dict):
            self.problem(where, f"must be an object, not {_a(resource)}")
            return
        start = len(self.problems)
        mode = self._typed(resource, "mode", str, where, "")
        rtype = self._typed(resource, "type", str, where, "")
        name = self._typed(resource, "name", str, where, "")
        provider = self._typed(resource, "provider", str, where, "")
        module = self._typed(resource, "module", str, where, "")
        instances = resource.get("instances")
        if mode not in ("managed", "data"):
            self.problem(where, "mode: must be managed or data")
        if not isinstance(instances, list):
            self.problem(where, "instances: must be a list")
        if len(self.problems) > start:
            return
        assert isinstance(instances, list)
        if mode == "data":
            state.data_sources += 1
            return
        prefix = f"{module}." if module else ""
        for j, raw in enumerate(instances):
            self.instance(raw, f"{prefix}{rtype}.{name}", f"{where}.instances[{j}]", module,
                          rtype, name, provider, state)

    def instance(self, raw: Any, resource: str, where: str, module: str, rtype: str,
                 name: str, provider: str, state: State) -> None:
        if not isinstance(raw, dict):
            self.problem(f"{resource} ({where})", f"an instance must be an object, not {_a(raw)}")
            return
        key = raw.get("index_key")
        if key is not None and (not isinstance(key, int | str) or isinstance(key, bool)):
            self.problem(f"{resource} ({where})", "index_key: must be an integer (count) or a "
                         f"string (for_each), not {_a(key)}")
            return
        address = resource + ("" if key is None else f"[{key_text(key)}]")
        start = len(self.problems)
        version = self._typed(raw, "schema_version", int, address, 0)
        if version < 0:
            self.problem(address, "schema_version: must not be negative")
        deposed = raw.get("deposed")
        status = raw.get("status")
        if deposed is not None and not isinstance(deposed, str):
            self.problem(address, f"deposed: must be a string, not {_a(deposed)}")
        if status is not None and status != "tainted":
            self.problem(address, "status: must be tainted when set")
        attributes = raw.get("attributes")
        if attributes is None and "attributes_flat" in raw:
            self.problem(address, "its attributes are in the flat form of Terraform 0.11: "
                         "`terraform apply -refresh-only` with a current Terraform rewrites "
                         "them; then run this again")
            return
        if not isinstance(attributes, dict):
            self.problem(address, f"attributes: must be an object, not {_a(attributes)}")
            return
        sensitive = self.sensitive(raw.get("sensitive_attributes", []), address)
        if len(self.problems) > start:
            return
        if deposed is not None:
            state.deposed.append((address, rtype))
            return
        state.instances.append(Instance(module, rtype, name, key, provider, version,
                                        attributes, sensitive, status == "tainted"))

    def sensitive(self, raw: Any, address: str) -> tuple[AttrPath, ...]:
        """``sensitive_attributes``: cty paths ([{type: get_attr|index, value}...])."""
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.problem(address, f"sensitive_attributes: must be a list, not {_a(raw)}")
            return ()
        out: list[AttrPath] = []
        for path in raw:
            parsed: list[str | None] = []
            for step in path if isinstance(path, list) else [None]:
                step = step if isinstance(step, dict) else {}
                kind = step.get("type")
                if kind == "get_attr" and isinstance(step.get("value"), str):
                    parsed.append(step["value"])
                elif kind == "index" and "value" in step:
                    parsed.append(None)
                else:
                    self.problem(address, "sensitive_attributes: a path in a form this does not "
                                 "know (expected lists of {type: get_attr|index, value} steps); "
                                 "nothing is migrated rather than a secret missed")
                    return ()
            out.append(tuple(parsed))  # an empty path: the whole object is sensitive
        return tuple(out)


def _a(value: Any) -> str:
    """What kind of JSON value ``value`` is (never the value: it may be a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"
