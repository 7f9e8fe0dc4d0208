"""How manifest errors are worded: what a value is, what a field expects, what
the user may have meant.  Every message that names a place uses these, so
validate, plan and fmt speak alike."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any, get_args

from govsync import paths
from govsync.api.kinds import BY_KIND, Kind
from govsync.manifests.yamlio import BOOL, FLOAT, INT, core_tag

if TYPE_CHECKING:
    from pydantic import BaseModel


def explain(kind: Kind, err: Any, used_refs: dict[str, str]) -> tuple[tuple[Any, ...], str, bool]:
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
        shown = paths.text(path)
    if etype == "missing":
        ref = next((r for r in kind.references if loc and r.id_field == loc[0]), None)
        if ref is not None:
            return path[:-1], f"missing {shown}: give spec.{ref.id_field} or spec.{ref.ref_field}", False
        return path[:-1], f"missing required field {shown}: add it", False
    if etype == "extra_forbidden":
        valid = fields_at(kind, loc[:-1])
        listed = f"valid fields here: {', '.join(valid)}" if valid else "remove it"
        return path, unknown(f"field {shown}", str(loc[-1]), valid, otherwise=listed), True
    if etype == "exactly_one":
        ctx = err.get("ctx", {})
        return path, f"{shown}: exactly one of {ctx.get('fields')} must be set (got {ctx.get('got')})", False
    return path, f"{shown}: {describe(err)}", False


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


def describe(err: Any) -> str:
    """A pydantic error as 'must ... (got ...)'."""
    etype, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if etype in _EXPECTED:
        text = f"must be {_EXPECTED[etype]}, not {a_value(value)}"
        if isinstance(value, str) and unquoted_fits(etype, value):
            text += ": remove the quotes"
        elif etype == "string_type" and isinstance(value, int | float | bool):
            text += ": put it in quotes"
        return text
    if etype == "string_pattern_mismatch":
        words = _PATTERN_WORDS.get(ctx.get("pattern", ""), f"match {ctx.get('pattern')}")
        return f"must {words} (got {short(value)})"
    if etype == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    message = str(err["msg"])
    for prefix in ("Input should", "String should", "List should", "Value should"):
        if message.startswith(prefix):
            message = "must" + message[len(prefix):]
    if isinstance(value, str) and etype in ("string_too_short", "string_too_long"):
        return f"{message} (got {len(value)})"
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return f"{message} (got {short(value)})"
    return message


def unquoted_fits(etype: str, value: str) -> bool:
    """Whether a quoted string would have the expected type without its quotes."""
    tag = core_tag(value)  # as YAML would read it unquoted
    if etype.startswith("bool"):
        return tag == BOOL
    if etype.startswith("int"):
        return tag == INT
    if etype.startswith("float"):
        return tag in (INT, FLOAT)
    return False


def a_value(value: Any) -> str:
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
        return f"the string {short(value)}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def kinds() -> str:
    return ", ".join(BY_KIND)




def unknown_keys(body: Mapping[Any, Any], at: tuple[Any, ...], allowed: Sequence[str],
                 report: Callable[..., None], *, otherwise: str = "") -> bool:
    """Report each key of ``body`` that is not ``allowed``, at the key; whether any was."""
    found = False
    for key in body:
        if key not in allowed:
            report((*at, key), unknown(f"field {paths.text((*at, key))}", str(key), allowed,
                                       otherwise=otherwise or f"valid fields: {', '.join(allowed)}"),
                   key=True)
            found = True
    return found


def unknown(what: str, word: str, candidates: Iterable[str], *, otherwise: str = "") -> str:
    close = closest(word, candidates)
    if close:
        return f"unknown {what}: did you mean {close!r}?"
    return f"unknown {what}: {otherwise}" if otherwise else f"unknown {what}"


def closest(word: str, candidates: Iterable[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


@cache
def fields_at(kind: Kind, loc: tuple[Any, ...]) -> tuple[str, ...]:
    """The field names the manifest may write at ``loc`` of the spec."""
    models = [kind.request_model]
    for step in loc:
        if isinstance(step, int):
            continue  # an item of a list: the list's item models
        models = [
            sub
            for model in models
            if step in model.model_fields
            for sub in models_in(model.model_fields[step].annotation)
        ]
    names = {name for model in models for name in model.model_fields}
    if not loc:
        names |= {r.ref_field for r in kind.references}
        if kind.named:
            names.discard("name")
    return tuple(sorted(names))


def models_in(annotation: Any) -> list[type[BaseModel]]:
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in models_in(arg)]

def did_you_mean(address: str, objects: Collection[str]) -> str:
    kind = address.split("/", 1)[0]
    same_kind = [a for a in objects if a.startswith(kind + "/")]
    import difflib

    close = difflib.get_close_matches(address, same_kind, n=1, cutoff=0.8)
    if close:
        return f": did you mean {close[0]}?"
    return ": add a manifest for it or fix the name"


