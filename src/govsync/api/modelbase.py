"""The base of the API's pydantic models (``models.py`` is their face): ``Model``
(a strict request model, exactly one of its VARIANTS), ``Output`` (an object as
returned), the scalar types they share, and ``wrap_key``."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

# --- scalar types ---------------------------------------------------------

NonEmpty = Annotated[str, Field(min_length=1)]
Identifier = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ConnectorName = Annotated[str, Field(min_length=3, max_length=256, pattern=r"^[0-9a-z\-]+$")]
SidecarName = Annotated[str, Field(min_length=3, max_length=63, pattern=r"^[0-9a-z\-]+$")]

# RFC 3339 date-time in UTC (``Z`` or ``+00:00``), 0001-01-01..9999-12-31, up to
# nanoseconds.  The same pattern is the OpenAPI document's; the day of the
# month is checked beside it (``format: date-time`` there).
TIMESTAMP_PATTERN = (
    r"^(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|\+00:00)$"
)
_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)


def _check_timestamp(value: str) -> str:
    if not _TIMESTAMP.match(value):
        raise PydanticCustomError(
            "timestamp", "must be an RFC 3339 UTC timestamp such as 2024-01-31T12:00:00.000000000Z"
        )
    y, mo, d = int(value[:4]), int(value[5:7]), int(value[8:10])
    if d > calendar.monthrange(y, mo)[1]:
        raise PydanticCustomError("timestamp", "timestamp has no such day")
    return value


Timestamp = Annotated[
    str,
    AfterValidator(_check_timestamp),
    Field(json_schema_extra={"format": "date-time", "pattern": TIMESTAMP_PATTERN}),
]

# --- 64-bit integers -------------------------------------------------------
#
# proto3's JSON form writes a 64-bit integer as a string of decimal digits, and every
# client generated from the service's schema sends it so (``"relativeTime": "3600"``).
# Contract section 12: a request may carry either form; an answer carries numbers.
# The string is read as the number it writes, so a manifest's ``"3600"`` is 3600 in
# the plan, the request sent and the state.

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1
# Decimal digits, as proto3's JSON writes them (no sign but '-', no leading zero, no
# exponent); at most 20 digits, the longest a 64-bit integer takes.
DECIMAL_TEXT = re.compile(r"-?(0|[1-9][0-9]{0,19})")
# The description of the string form in the JSON Schemas (the docs know it by it).
DECIMAL_TEXT_SCHEMA = "the same integer as a string of decimal digits (proto3's JSON form)"


def decimal_text(value: Any) -> Any:
    """A string of decimal digits as the integer it writes; any other value as it is
    (the integer check that follows refuses what is not an integer)."""
    if type(value) is str and DECIMAL_TEXT.fullmatch(value):
        return int(value)
    return value


@dataclass(frozen=True)
class Int64Text:
    """The metadata of a 64-bit integer field: a number, or its decimal digits as a string
    (read as the number), within ``[lo, hi]`` and any bound the field adds (``ge=1``).

    ``tools/checkgen.py`` compiles it; the JSON Schema offers both forms."""

    lo: int
    hi: int

    def _in_range(self, value: int) -> int:
        if value < self.lo:
            raise PydanticCustomError("greater_than_equal",
                                      "Input should be greater than or equal to {ge}",
                                      {"ge": self.lo})
        if value > self.hi:
            raise PydanticCustomError("less_than_equal",
                                      "Input should be less than or equal to {le}",
                                      {"le": self.hi})
        return value

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        checked = core_schema.no_info_after_validator_function(self._in_range, handler(source))
        return core_schema.no_info_before_validator_function(decimal_text, checked)

    def __get_pydantic_json_schema__(self, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        number = dict(handler(schema))
        lo = max(number.get("minimum", self.lo), self.lo)
        number.update(minimum=lo, maximum=min(number.get("maximum", self.hi), self.hi))
        digits = "[1-9][0-9]{0,19}" if lo >= 1 else "(0|[1-9][0-9]{0,19})"
        text = {"type": "string", "pattern": f"^{'-?' if lo < 0 else ''}{digits}$",
                "description": DECIMAL_TEXT_SCHEMA}
        return {"anyOf": [number, text]}


# A signed and an unsigned 64-bit integer of the service's schema (int64, uint64).
Int64 = Annotated[int, Int64Text(INT64_MIN, INT64_MAX)]
UInt64 = Annotated[int, Int64Text(0, UINT64_MAX)]

# Sidecar technology: ssh, http, llm and multi are named by the spec; ten more
# values (database engines, storage, orchestrator, cloud platforms) are not
# reproduced there, so any lowercase token is accepted beside the four.
KNOWN_TECHNOLOGIES = ("ssh", "http", "llm", "multi")
Technology = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z][a-z0-9_\-]*$",
        json_schema_extra={"examples": list(KNOWN_TECHNOLOGIES)},
    ),
]


def _variants_schema(schema: dict[str, Any], model: type[BaseModel]) -> None:
    """``oneOf``: exactly one of the model's VARIANTS is present and not null."""
    variants: tuple[str, ...] = getattr(model, "VARIANTS", ())
    if variants:
        schema["oneOf"] = [
            {"required": [key], "properties": {key: {"not": {"type": "null"}}}}
            for key in variants
        ]


class Model(BaseModel):
    """A request model: strict types, unknown fields rejected.

    A model with ``VARIANTS`` requires exactly one of those fields to be set
    (rule 1 of the spec: none or several is 400), in validation and in its
    JSON Schema alike.
    """

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=_variants_schema,
                              defer_build=True)
    VARIANTS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _exactly_one_variant(self) -> Model:
        if self.VARIANTS:
            _exactly_one(self, self.VARIANTS)
        return self


class Output(BaseModel):
    """An object as the API returns it (documentation only)."""

    model_config = ConfigDict(extra="allow", defer_build=True)


def _exactly_one(model: BaseModel, keys: tuple[str, ...]) -> None:
    """Rule 1 of the spec: exactly one variant key; none or several is 400."""
    present = [k for k in keys if getattr(model, k) is not None]
    if len(present) != 1:
        got = "none" if not present else ", ".join(present)
        raise PydanticCustomError(
            "exactly_one",
            "exactly one of {fields} must be set (got {got})",
            {"fields": ", ".join(keys), "got": got},
        )


def wrap_key(request: type[BaseModel]) -> str | None:
    """The key a request wraps its object under (``{"hook": {...}}``), if any."""
    fields = request.model_fields
    if len(fields) != 1:
        return None
    (key, info), = fields.items()
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return key
    return None


class Empty(Model):
    """A variant without fields."""
