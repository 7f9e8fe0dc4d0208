"""Live references: spec fields naming objects govsync does not manage but
can read (a Policy's owner ``groupName``, read with ListGroups).

One function finds what to check and one finds what is missing; plan turns
the missing into errors at the field's place, drift into a failed live check.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from govsync.api.kinds import LiveRef
from govsync.manifests.manifest import Manifest, ManifestSet

if TYPE_CHECKING:
    from govsync.api.client import AsyncClient


class LiveValue(NamedTuple):
    manifest: Manifest
    ref: LiveRef
    value: str

    @property
    def message(self) -> str:
        return (f"{self.manifest.address}: spec.{self.ref.field} names {self.ref.word} "
                f"{self.value!r}, which does not exist on the server ({self.ref.read_operation})")


def wanted(manifests: ManifestSet, addresses: Iterable[str] | None = None) -> list[LiveValue]:
    """The live references of ``addresses`` (default: every manifest), sorted by address."""
    chosen = sorted(manifests.objects) if addresses is None else sorted(addresses)
    return [
        LiveValue(m, ref, m.template[ref.field])
        for address in chosen
        for m in [manifests.objects[address]]
        for ref in m.kind.live_refs
        if isinstance(m.template.get(ref.field), str)
    ]


def refs(values: Iterable[LiveValue]) -> list[LiveRef]:
    """The distinct live references of ``values``, in order."""
    return list(dict.fromkeys(v.ref for v in values))


def operations(values: Iterable[LiveValue]) -> list[str]:
    """The read operations that ``values`` need, sorted (ListGroups)."""
    return sorted({v.ref.read_operation for v in values})


def failed(values: Iterable[LiveValue], error: object) -> str:
    """Why the live checks of ``values`` could not be made: which reads failed, and how."""
    return f"{' and '.join(operations(values))} failed ({error})"


def missing(values: Iterable[LiveValue], existing: Mapping[str, set[str]]) -> list[LiveValue]:
    """The values whose object is not among ``existing`` (names by read operation)."""
    return [v for v in values if v.value not in existing.get(v.ref.read_operation, set())]


async def read(client: AsyncClient, values: Iterable[LiveValue]) -> dict[str, set[str]]:
    """Names of every object the read operations of ``values`` list (every page)."""
    out: dict[str, set[str]] = {}
    for operation in operations(values):
        out[operation] = {item["name"] for item in await READERS[operation](client)}
    return out


# How to read every page of each read operation a LiveRef may name.
READERS: dict[str, Callable[[AsyncClient], Awaitable[list[dict[str, Any]]]]] = {
    "ListGroups": lambda client: client.list_all_groups(),
}
