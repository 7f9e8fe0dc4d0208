"""The base of the API's pydantic models (``models.py`` is their face): ``Model``
(a strict request model, exactly one of its VARIANTS), ``Output`` (an object as
returned), the scalar types they share, and ``wrap_key``."""

from __future__ import annotations

import calendar
import re
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic_core import PydanticCustomError

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
