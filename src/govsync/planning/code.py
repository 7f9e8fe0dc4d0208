"""Which policies' code the service is asked about before a plan decides (contract
section 13: GetPolicyCodeValidity for every created policy and every policy whose
``code`` changes), known from the manifests and the state alone, so that the questions
go out beside the refresh's reads."""

from __future__ import annotations

from collections.abc import Mapping

from govsync.api.kinds import POLICY_KIND
from govsync.manifests.manifest import ManifestSet
from govsync.state import APPLIED, Entry

FIELD = "code"


def codes_to_check(manifests: ManifestSet, entries: Mapping[str, Entry]) -> dict[str, str]:
    """Address -> code of every Policy whose code state does not record as applied."""
    out: dict[str, str] = {}
    for address, manifest in manifests.objects.items():
        if manifest.kind.name != POLICY_KIND:
            continue
        code = manifest.template.get(FIELD)
        if not isinstance(code, str):
            continue
        entry = entries.get(address)
        recorded = (entry.read_spec() or {}).get(FIELD) if entry is not None and (
            entry.status == APPLIED) else None
        if recorded != code:
            out[address] = code
    return out
