"""Values that are not yet values, and the one resolver that fills them in.

A manifest's spec becomes a *template*: the API request with plain JSON data
everywhere except at a few leaves, which hold one of these types:

=============== ============================================================
``Ref``         ``spaceRef: analytics``: the id of another managed object,
                known once that object exists
``SecretRef``   ``{fromEnv: VAR}``: a secret read from the environment
``PlannedSecret`` a secret as a plan records it: its variable and a keyed
                fingerprint of the value seen at plan time, never the value
=============== ============================================================

They are types, not marker keys inside dicts, so user data in a free-form
field (``{"$ref": "x"}`` in a ConnectorAIProvider's ``config``) is data and
is sent and shown exactly as written.  The one marker a manifest has is
``{fromEnv: VAR}``, read where the kind has a secret: its secret fields, and
anywhere inside a variant whose fields the API leaves open (``Kind.open_variants``).  Markers exist only in the saved-plan
file format (``planfile.py``), with an escape for user keys.

``Resolver`` is the one place that turns these leaves into values, for the
three readers that need them: plan (what to compare with state and what to
send later), apply (what to send now and what to record) and drift.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from govsync import paths
from govsync.paths import Path

# How a person sees a secret and an id that does not exist yet.  Written once.
SENSITIVE: Final = "(sensitive)"
KNOWN_AFTER_APPLY_TEXT: Final = "(known after apply)"
# A value shorter than this is no secret an answer is scrubbed of: it would tear every
# answer apart ("x" in "exec-dashboards"), and a commit naming a short, common value as
# a secret must not make govsync lose track of its objects.
SHORTEST_SECRET: Final = 4


def sought(secrets: Iterable[str]) -> list[str]:
    """What an answer is scrubbed of (``scrub``), written once for every scrubbing of
    answers (the API client's, and apply's of what it records): each of ``secrets`` of
    at least ``SHORTEST_SECRET`` characters, once, longest first.  One rule on both
    paths, so that an object recorded from its answer and read again later is
    scrubbed alike and a secret never shows as a change."""
    return sorted({s for s in secrets if len(s) >= SHORTEST_SECRET}, key=len, reverse=True)


def scrub(value: Any, secrets: Sequence[str], keep: Collection[str] = ()) -> Any:
    """``value`` (JSON data: an answer, an object as read) with each of ``secrets``
    (``sought``: longest first) replaced by ``SENSITIVE``, whole or inside a longer
    string ("key abc123 accepted"), in values and in keys: the one mechanism that keeps
    what a server echoes (the API key, a secret sent) out of what govsync shows, writes
    and records, for write answers (apply) and every read (the API client).  The values
    of the keys in ``keep`` (the fields objects are found by) stay as they are."""
    if not secrets:
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): v if k in keep else scrub(v, secrets, keep)
                for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets, keep) for v in value]
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, SENSITIVE)
    return value


@dataclass(frozen=True, slots=True)
class Ref:
    """The id of the managed object at ``address`` (``Kind/name``)."""

    address: str


@dataclass(frozen=True, slots=True)
class SecretRef:
    """A secret whose value is in environment variable ``variable``."""

    variable: str


@dataclass(frozen=True, slots=True)
class PlannedSecret:
    """A secret in a plan: its variable and the fingerprint of the value planned."""

    variable: str
    fingerprint: str


# The fingerprint of a secret a plan did not read (``plan --without-secrets``).
UNREAD: Final = "(not read)"


class _KnownAfterApply:
    """The id of an object this plan creates: compared as unequal to any id."""

    __slots__ = ()

    def __repr__(self) -> str:
        return KNOWN_AFTER_APPLY_TEXT

    def __reduce__(self) -> str:
        return "KNOWN_AFTER_APPLY"


KNOWN_AFTER_APPLY: Final = _KnownAfterApply()

HOLE_TYPES: Final = (Ref, SecretRef, PlannedSecret)


def holes(value: Any, at: Path = ()) -> list[Path]:
    """The paths of every hole in ``value``."""
    if isinstance(value, HOLE_TYPES):
        return [at]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in holes(v, (*at, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in holes(v, (*at, i))]
    return []


def secret_variables(value: Any, where: Collection[Path] | None = None) -> list[str]:
    """The variables of the secrets in ``value`` (a template, a plan's request): at the
    paths ``where`` (its holes, where known), else wherever they are."""
    found = []
    for path in holes(value) if where is None else where:
        hole = paths.get(value, path)
        if isinstance(hole, SecretRef | PlannedSecret):
            found.append(hole.variable)
    return found


def fill(value: Any, where: Collection[Path], leaf: Callable[[Any], Any]) -> Any:
    """``value`` with each hole at ``where`` replaced by ``leaf(hole)`` (copied, not changed)."""
    for path in where:
        value = paths.replace(value, path, leaf(paths.get(value, path)))
    return value


def shown(value: Any) -> Any:
    """A value as a person may see it: secrets hidden, unknown ids named."""
    if isinstance(value, SecretRef | PlannedSecret):
        return SENSITIVE
    if isinstance(value, Ref) or value is KNOWN_AFTER_APPLY:
        return KNOWN_AFTER_APPLY_TEXT
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown(v) for v in value]
    return value


class MissingSecret(LookupError):
    """A secret's environment variable is not set (or empty)."""

    def __init__(self, path: Path, variable: str) -> None:
        super().__init__(variable)
        self.path = path
        self.variable = variable


class UnknownId(LookupError):
    """A reference to an object whose id is not known."""

    def __init__(self, address: str) -> None:
        super().__init__(address)
        self.address = address


@dataclass
class Resolver:
    """Fills a template's holes from what is known.

    ``ids``: the id of every object that exists (from state, and during apply
    from the answers so far); ``fingerprint``: the state's keyed fingerprint of a
    secret value; ``environ``: where secrets' values are read.
    """

    ids: Mapping[str, str]
    fingerprint: Callable[[str], str]
    environ: Mapping[str, str]
    # False: plan without reading secrets' values (a pull request's plan): each is
    # planned as ``PlannedSecret(variable, UNREAD)`` and compared as ``UNREAD``.
    read_secrets: bool = True

    def _secret_value(self, path: Path, variable: str) -> str:
        value = self.environ.get(variable)
        if not value:
            raise MissingSecret(path, variable)
        return value

    def plan(self, template: Any, where: Collection[Path]) -> tuple[Any, Any]:
        """(request, compared) for a plan.

        ``request`` is what apply will send: known ids filled in, references to
        objects created by this plan kept as ``Ref``, secrets as ``PlannedSecret``.
        ``compared`` is what state would hold after apply: ids, fingerprints,
        and ``KNOWN_AFTER_APPLY`` for ids not known yet.  Raises MissingSecret.
        """
        request = compared = template
        for path in where:
            hole = paths.get(template, path)
            if isinstance(hole, Ref):
                known = self.ids.get(hole.address)
                if known is not None:
                    request = paths.replace(request, path, known)
                compared = paths.replace(compared, path, KNOWN_AFTER_APPLY if known is None
                                         else known)
            elif isinstance(hole, SecretRef | PlannedSecret):
                fingerprint = (self.fingerprint(self._secret_value(path, hole.variable))
                               if self.read_secrets else UNREAD)
                request = paths.replace(request, path, PlannedSecret(hole.variable, fingerprint))
                compared = paths.replace(compared, path, fingerprint)
        return request, compared

    def send(self, request: Any) -> tuple[Any, Any, list[str]]:
        """(body to send, spec to record, secret values) of a planned request.

        Raises UnknownId for a reference whose object has no id, MissingSecret
        for a secret whose variable is gone."""
        send = spec = request
        secrets: list[str] = []
        for path in holes(request):
            hole = paths.get(request, path)
            if isinstance(hole, Ref):
                known = self.ids.get(hole.address)
                if known is None:
                    raise UnknownId(hole.address)
                send = paths.replace(send, path, known)
                spec = paths.replace(spec, path, known)
            else:
                value = self._secret_value(path, hole.variable)
                secrets.append(value)
                send = paths.replace(send, path, value)
                spec = paths.replace(spec, path, self.fingerprint(value))
        return send, spec, secrets

    def stale_secrets(self, request: Any) -> list[tuple[Path, str, str]]:
        """(path, variable, why) for each planned secret whose value is gone or changed."""
        out: list[tuple[Path, str, str]] = []
        for path in holes(request):
            hole = paths.get(request, path)
            if not isinstance(hole, PlannedSecret):
                continue
            value = self.environ.get(hole.variable)
            if not value:
                out.append((path, hole.variable, "is not set"))
            elif self.fingerprint(value) != hole.fingerprint:
                out.append((path, hole.variable, "changed since the plan was made"))
        return out
