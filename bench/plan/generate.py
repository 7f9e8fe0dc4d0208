"""Generate a manifest set of N objects of mixed kinds with references.

Graph depth is 4: Hook -> Policy (dependsOn) -> PolicySuspension (policyRef)
-> PolicyReport (policyRef, dependsOn the suspension); beside it Space ->
Connector (spaceRef) -> ConnectorAIProvider (connectorRef), and leaves
(DataLabel, Permission).  Objects are spread over files of 100 documents.

    python bench/plan/generate.py 10000 /tmp/m10k
"""

from __future__ import annotations

import os
import sys
from typing import Any

GROUP = "data-platform"  # exists in examples/server-seed.yaml

TEMPLATES = [
    ("Hook", "h{i}", """spec:
  description: risk hook {i}
  code: "export default function hook(input, env) {{ return {{allow: true}}; }}"
  timeoutMs: 1500
  allowlistedEnvironmentVariables: [RISK_TOKEN]
  allowlistedNetworkHosts: [risk.internal]
"""),
    ("Policy", "p{i}", """  dependsOn: [Hook/h{i}]
spec:
  description: policy {i}
  code: "package formal.v2\\n\\nimport rego.v1\\n\\nsession := {{\\"action\\": \\"block\\"}} if not input.hooks.h{i}.allow"
  groupName: {group}
  status: active
"""),
    ("PolicySuspension", "s{i}", """spec:
  policyRef: p{i}
  identityId: usr-{i}
  expirationMinutes: 60
  reason: on-call {i}
"""),
    ("PolicyReport", "r{i}", """  dependsOn: [PolicySuspension/s{i}]
spec:
  policyRef: p{i}
  policyCode: "allow := true"
  evaluationWindow: 7d
  logQuery: "user:{i}"
"""),
    ("Space", "space-{i}", """spec:
  description: space {i}
"""),
    ("Connector", "conn-{i}", """spec:
  spaceRef: space-{i}
  terminationProtection: true
"""),
    ("ConnectorAIProvider", "ai-{i}", """spec:
  connectorRef: conn-{i}
  config:
    providerB: {{model: m{i}, region: eu}}
"""),
    ("DataLabel", "label-{i}", """spec:
  classifierType: regex
  classifierData: "[0-9]{{4}}-{i}"
"""),
    ("Permission", "perm-{i}", """spec:
  description: permission {i}
  code: "package formal.app\\n\\nimport rego.v1\\n\\nallow if input.user.username == \\"u{i}\\""
"""),
    ("LogQuery", "q{i}", """spec:
  query:
    query: "status:denied AND user:{i}"
    relativeTime: 3600
"""),
]


def documents(n: int) -> list[str]:
    docs: list[str] = []
    i = 0
    while len(docs) < n:
        for kind, name, body in TEMPLATES:
            if len(docs) >= n:
                break
            meta = f"apiVersion: govsync/v1\nkind: {kind}\nmetadata:\n  name: {name.format(i=i)}\n"
            if not body.startswith("  dependsOn"):
                docs.append(meta + body.format(i=i, group=GROUP))
            else:
                docs.append(meta + body.format(i=i, group=GROUP))
        i += 1
    return docs


# The time an applied entry and its made-up answer carry.
STAMP = "2026-11-22T10:00:00.000000000Z"


def applied_entries(manifest_dir: str, snapshot: Any, *, responses: bool = False) -> list[Any]:
    """Every object of the manifests as an apply records it, with made-up ids: plan
    against ``snapshot`` and resolve each request with the ids so far.  With
    ``responses``, each entry also carries an answer of the API's shape for most
    kinds (the spec with id and timestamps)."""
    from govsync.manifests import load
    from govsync.plan import make_plan
    from govsync.state import APPLIED, Entry
    from govsync.values import Resolver

    manifests = load([manifest_dir])
    plan = make_plan(manifests, snapshot, environ={})
    ids: dict[str, str] = {}
    entries = []
    for change in plan.changes:
        kind = manifests.objects[change.address].kind
        _send, spec, _ = Resolver(ids, snapshot.fingerprint, {}).send(change.request or {})
        ids[change.address] = object_id = f"id-{len(ids)}"
        response = ({"id": object_id, **spec, "createdAt": STAMP, "updatedAt": STAMP}
                    if responses else None)
        entries.append(Entry(change.address, kind.name, object_id, APPLIED, spec, response,
                             STAMP if responses else ""))
    return entries


def write(n: int, directory: str, per_file: int = 100) -> None:
    os.makedirs(directory, exist_ok=True)
    docs = documents(n)
    for f in range(0, len(docs), per_file):
        with open(os.path.join(directory, f"m{f // per_file:04d}.yaml"), "w") as fh:
            fh.write("---\n".join(docs[f:f + per_file]))


if __name__ == "__main__":
    write(int(sys.argv[1]), sys.argv[2])
