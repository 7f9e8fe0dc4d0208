"""The reference server as the service's own generated clients see it (issue 43).

A Connect client generated from the service's schema (connect-es, connect-go)
speaks proto3's JSON form: it writes a 64-bit integer as a string, leaves out a
field at its default, sends an object back as it decoded it, and decodes every
answer strictly into the schema's message (an unknown field is an error).  This
module does the same with protobuf's own JSON codec (``google.protobuf.json_format``)
and the descriptors the service's Go SDK embeds (``connect/core-v1.binpb``,
written by ``tools/sdkdescriptors.py``; the SDK's commit is in ``connect/SOURCE``).

Where the spec rules otherwise, it does as the spec says: variant keys carry the
spec's neutral names (``NEUTRAL``), and errors are the spec's JSON bodies.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from google.protobuf import (
    any_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    json_format,
    message_factory,
    struct_pb2,
    timestamp_pb2,
    unknown_fields,
)
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

HERE = Path(__file__).resolve().parent / "connect"
SCHEMA = HERE / "core-v1.binpb"
REQUESTS = HERE / "requests.json"
PACKAGE = "core.v1"

# What a connect-es 2 client sends beside the body (unary, JSON).
HEADERS = {"Content-Type": "application/json", "Connect-Protocol-Version": "1",
           "Connect-Timeout-Ms": "15000", "User-Agent": "connect-es/2.1.2",
           "Accept-Encoding": "gzip"}

# api-spec.md's neutral variant names, and the SDK's names they stand for: the real
# names in alphabetical order, as in govsync.migrate.formal (which reads them from the
# service's Terraform provider).
NEUTRAL: Mapping[str, Mapping[str, str]] = {
    "core.v1.IntegrationLog": {"logStoreA": "awsS3", "logStoreB": "datadog",
                               "logStoreC": "gcs", "logStoreD": "splunk"},
    "core.v1.BIIntegration": {"biA": "fivetran", "biB": "metabase", "biC": "omni"},
    "core.v1.IntegrationMDM": {"mdmA": "fleet", "mdmB": "jamf", "mdmC": "kandji"},
    "core.v1.ConnectorAiProviderConfig": {
        "providerA": "anthropic", "providerB": "awsBedrock", "providerC": "azureAi",
        "providerD": "formalAiSatellite", "providerE": "gemini",
        "providerF": "googleVertexAi", "providerG": "openai"},
}

# Files the SDK's descriptors import only for options (buf.validate's rules, HTTP
# annotations): empty stand-ins, the options stay unknown fields of their own.
_OPTION_ONLY = {"buf/validate/validate.proto": "buf.validate",
                "google/api/annotations.proto": "google.api"}
# buf.validate: FieldOptions extension 1159 (FieldRules): 14 string rules (2: min_len),
# 25 required.
_RULES, _STRING, _MIN_LEN, _REQUIRED = 1159, 14, 2, 25


@cache
def pool() -> descriptor_pool.DescriptorPool:
    """The SDK's ``core.v1`` files, with the well-known types they use."""
    found = descriptor_pool.DescriptorPool()
    for module in (timestamp_pb2, duration_pb2, struct_pb2, any_pb2, empty_pb2):
        found.AddSerializedFile(module.DESCRIPTOR.serialized_pb)
    for name, package in _OPTION_ONLY.items():
        found.Add(descriptor_pb2.FileDescriptorProto(name=name, package=package,
                                                     syntax="proto3"))
    files = {f.name: f for f in descriptor_pb2.FileDescriptorSet.FromString(
        SCHEMA.read_bytes()).file}
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added or name not in files:
            return
        for dependency in files[name].dependency:
            add(dependency)
        found.Add(files[name])
        added.add(name)

    for name in sorted(files):
        add(name)
    return found


def method(service: str, name: str) -> MethodDescriptor | None:
    """The SDK's method ``core.v1.<service>/<name>`` (None: the SDK has none)."""
    try:
        return pool().FindServiceByName(f"{PACKAGE}.{service}").FindMethodByName(name)
    except KeyError:
        return None


def _message(descriptor: Descriptor) -> Message:
    message: Message = message_factory.GetMessageClass(descriptor)()
    return message


def _renamed(descriptor: Descriptor, value: Any, *, to_sdk: bool) -> Any:
    """``value`` (JSON of ``descriptor``) with its variant keys renamed: the spec's neutral
    names to the SDK's (``to_sdk``), or back."""
    if not isinstance(value, dict):
        return value
    table = NEUTRAL.get(descriptor.full_name, {})
    names = dict(table) if to_sdk else {sdk: neutral for neutral, sdk in table.items()}
    fields = {f.json_name: f for f in descriptor.fields}
    out = {}
    for key, item in value.items():
        new = names.get(key, key)
        field = fields.get(new if to_sdk else key)
        if field is not None and field.message_type is not None \
                and not field.message_type.GetOptions().map_entry:
            if isinstance(item, list):
                item = [_renamed(field.message_type, i, to_sdk=to_sdk) for i in item]
            else:
                item = _renamed(field.message_type, item, to_sdk=to_sdk)
        out[new] = item
    return out


def _in_oneof(field: FieldDescriptor) -> bool:
    """A member of a real oneof (not the synthetic one of a proto3 ``optional`` field)."""
    oneof = field.containing_oneof
    return oneof is not None and not (len(oneof.fields) == 1
                                      and oneof.name == f"_{field.name}")


def decode(descriptor: Descriptor, value: Any) -> Message:
    """``value`` as a generated client decodes it: strictly (an unknown field, or a value
    of the wrong type, raises json_format.ParseError)."""
    message = _message(descriptor)
    json_format.ParseDict(_renamed(descriptor, value, to_sdk=True), message,
                          ignore_unknown_fields=False)
    return message


def encode(message: Message) -> dict[str, Any]:
    """``message`` as a generated client sends it: proto3 JSON (fields at their default
    left out, 64-bit integers as strings), the spec's neutral variant names."""
    value = json_format.MessageToDict(message)
    renamed: dict[str, Any] = _renamed(message.DESCRIPTOR, value, to_sdk=False)
    return renamed


def required(field: FieldDescriptor) -> bool:
    """The SDK's own rules (buf.validate) say the field is never empty: a string of
    ``min_len`` 1 or more, or ``required``."""
    if _in_oneof(field):
        return False
    for rules in unknown_fields.UnknownFieldSet(field.GetOptions()):
        if rules.field_number != _RULES:
            continue
        for rule in _fields(rules.data):
            if rule == (_REQUIRED, 1):
                return True
            if rule[0] == _STRING and isinstance(rule[1], bytes) \
                    and any(k == _MIN_LEN and isinstance(v, int) and v >= 1
                            for k, v in _fields(rule[1])):
                return True
    return False


def missing(descriptor: Descriptor, value: Any, at: str = "") -> list[str]:
    """The dotted paths of the fields ``required`` leaves absent (or null) in ``value``,
    an answer's JSON of ``descriptor``, at every depth."""
    if not isinstance(value, dict) or descriptor.file.package != PACKAGE:
        return []
    found = []
    names = {sdk: neutral for neutral, sdk in NEUTRAL.get(descriptor.full_name, {}).items()}
    for field in descriptor.fields:
        key = names.get(field.json_name, field.json_name)
        item = value.get(key)
        if item is None:
            if required(field):
                found.append(f"{at}{key}")
            continue
        if field.message_type is not None:
            items = item if isinstance(item, list) else [item]
            for i, one in enumerate(items):
                where = f"{at}{key}.{i}." if isinstance(item, list) else f"{at}{key}."
                found += missing(field.message_type, one, where)
    return found


def _varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        byte = data[i]
        i += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return n, i


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(number, value) of each field of a serialized message: varints and length-delimited
    values (the only wire types buf.validate's rules read here use)."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            yield number, data[i:i + size]
            i += size
        elif wire in (1, 5):
            i += 8 if wire == 1 else 4
        else:
            return


# --- the recorded requests --------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One request of ``requests.json``."""

    service: str
    operation: str
    request: Mapping[str, Any]
    # Saved for later requests: name -> dotted path of the answer.
    save: Mapping[str, str]
    # The object as an earlier answer of this operation held it, sent back whole.
    as_read: str | None
    # Fields laid over the object as read.
    set: Mapping[str, Any]
    # Dotted paths of the answer that must be present (beyond the SDK's own rules).
    present: tuple[str, ...]
    # A call the SDK's schema has no method for (a step the probes depend on).
    setup: bool

    @property
    def path(self) -> str:
        return f"/{PACKAGE}.{self.service}/{self.operation}"


def probes() -> list[Probe]:
    data = json.loads(REQUESTS.read_text())
    out = []
    for raw in data["setup"] + data["probes"]:
        out.append(Probe(
            service=raw["service"], operation=raw["operation"],
            request=raw.get("request", {}), save=raw.get("save", {}),
            as_read=raw.get("asRead"), set=raw.get("set", {}),
            present=tuple(raw.get("present", ())), setup=raw in data["setup"]))
    return out


def filled(value: Any, saved: Mapping[str, Any]) -> Any:
    """``value`` with each ``"$name"`` string replaced by what was saved as ``name``
    (``"$$..."`` is a string that starts with one ``$``)."""
    if isinstance(value, str) and value.startswith("$"):
        return value[1:] if value.startswith("$$") else saved[value[1:]]
    if isinstance(value, dict):
        return {k: filled(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [filled(v, saved) for v in value]
    return value


def at(value: Any, dotted: str) -> Any:
    """The value at a dotted path of an answer (list items by index); None: absent."""
    for part in dotted.split("."):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value
