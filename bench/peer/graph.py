"""One generated graph, written twice: govsync manifests and Terraform config.

The objects come from bench/plan/generate.py (the 1,000-object depth-4 mix
that bench/apply uses).  The manifests are written as that generator writes
them; govsync's own loader then reads them back, and from that one in-memory
graph (every object's spec, its references and its dependsOn entries) the
Terraform configuration is written: one ``terraform_data`` per object with
``input`` = the object's spec and ``depends_on`` = the objects it references
or depends on.  Both sides therefore have the same nodes and the same edges.

    python bench/peer/graph.py 1000 /tmp/peer1k    # -> manifests/ and tf/
"""

from __future__ import annotations

import glob
import json
import os
import re
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench", "plan"))
sys.path.insert(0, os.path.join(ROOT, "src"))

from generate import write  # noqa: E402

PER_FILE = 100  # resources per .tf file, as documents per manifest file


def tf_name(address: str) -> str:
    """``Space/space-1`` -> ``Space_space-1`` (a valid Terraform identifier)."""
    kind, name = address.split("/", 1)
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{kind}_{name}")


def hcl(value: Any, indent: str = "") -> str:
    """A JSON-like value as an HCL expression."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        body = "".join(f"{inner}{json.dumps(str(k))} = {hcl(v, inner)}\n" for k, v in value.items())
        return "{\n" + body + indent + "}"
    if isinstance(value, list):
        return "[" + ", ".join(hcl(v, indent) for v in value) + "]"
    if isinstance(value, str):
        # JSON string escapes are HCL's; template sequences must be doubled.
        return json.dumps(value).replace("${", "$${").replace("%{", "%%{")
    if value is None:
        return "null"
    return json.dumps(value)


def graph(manifest_dir: str) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(address, spec, dependencies) for every object, in file order.

    Dependencies are govsync's edges (govsync.graph.dependencies: references
    by name, then metadata.dependsOn) as its loader found them; the spec is
    the document's ``spec`` as written."""
    import yaml

    from govsync.graph import dependencies
    from govsync.manifests.loader import load

    objects = load([manifest_dir]).objects
    out = []
    for path in sorted(glob.glob(os.path.join(manifest_dir, "*.yaml"))):
        with open(path) as fh:
            for doc in yaml.load_all(fh, Loader=yaml.CSafeLoader):
                address = f"{doc['kind']}/{doc['metadata']['name']}"
                deps = sorted(set(d for d in dependencies(objects[address]) if d in objects))
                out.append((address, doc.get("spec") or {}, deps))
    if len(out) != len(objects):
        raise SystemExit(f"{len(out)} documents but govsync loaded {len(objects)} objects")
    return out


def write_tf(nodes: list[tuple[str, dict[str, Any], list[str]]], tf_dir: str) -> None:
    os.makedirs(tf_dir, exist_ok=True)
    blocks = []
    for address, spec, deps in nodes:
        block = f'resource "terraform_data" "{tf_name(address)}" {{\n  input = {hcl(spec, "  ")}\n'
        if deps:
            block += "  depends_on = [" + ", ".join(f"terraform_data.{tf_name(d)}" for d in deps) + "]\n"
        blocks.append(block + "}\n")
    for f in range(0, len(blocks), PER_FILE):
        with open(os.path.join(tf_dir, f"m{f // PER_FILE:04d}.tf"), "w") as fh:
            fh.write("\n".join(blocks[f:f + PER_FILE]))


def generate(n: int, root: str) -> dict[str, int]:
    """Write ``root``/manifests and ``root``/tf for ``n`` objects; return shape figures."""
    manifests = os.path.join(root, "manifests")
    write(n, manifests)
    nodes = graph(manifests)
    write_tf(nodes, os.path.join(root, "tf"))
    return {"objects": len(nodes), "edges": sum(len(d) for _, _, d in nodes),
            "depth": depth(nodes)}


def depth(nodes: list[tuple[str, dict[str, Any], list[str]]]) -> int:
    """Levels of the graph (longest path in nodes)."""
    deps = {a: d for a, _, d in nodes}
    level: dict[str, int] = {}

    def of(a: str) -> int:
        if a not in level:
            level[a] = 1 + max((of(d) for d in deps[a]), default=0)
        return level[a]

    return max((of(a) for a in deps), default=0)


if __name__ == "__main__":
    print(generate(int(sys.argv[1]), sys.argv[2]))


def cty_type(value: Any) -> Any:
    """The type Terraform records for a literal value (objects and tuples, as HCL infers them)."""
    if isinstance(value, dict):
        return ["object", {k: cty_type(v) for k, v in value.items()}]
    if isinstance(value, list):
        return ["tuple", [cty_type(v) for v in value]]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if value is None:
        return "dynamic"
    return "string"


def tf_state(nodes: list[tuple[str, dict[str, Any], list[str]]]) -> dict[str, Any]:
    """The terraform.tfstate an apply of ``write_tf``'s config leaves, ids aside.

    Used only where a real apply would take too long (Terraform at 10,000
    objects): `run.py` checks that this equals, as JSON, what a real apply
    wrote at the smaller size (ids, lineage and serial aside), and that `terraform
    plan` over it reports no changes before it times anything."""
    deps = {a: d for a, _, d in nodes}
    closure: dict[str, set[str]] = {}

    def upstream(a: str) -> set[str]:
        if a not in closure:
            closure[a] = set()
            for d in deps[a]:
                closure[a] |= {d} | upstream(d)
        return closure[a]

    resources = []
    for n, (address, spec, _) in enumerate(sorted(nodes, key=lambda x: tf_name(x[0]))):
        value = {"value": dict(sorted(spec.items())), "type": cty_type(dict(sorted(spec.items())))}
        instance: dict[str, Any] = {
            "schema_version": 0,
            "attributes": {"id": f"00000000-0000-0000-0000-{n:012d}", "input": value,
                           "output": value, "triggers_replace": None},
            "sensitive_attributes": [],
        }
        if deps[address]:
            instance["dependencies"] = sorted(f"terraform_data.{tf_name(d)}" for d in upstream(address))
        resources.append({"mode": "managed", "type": "terraform_data", "name": tf_name(address),
                          "provider": 'provider["terraform.io/builtin/terraform"]',
                          "instances": [instance]})
    return {"version": 4, "terraform_version": "1.11.4", "serial": len(nodes) + 1,
            "lineage": "00000000-0000-0000-0000-000000000000", "outputs": {},
            "resources": resources, "check_results": None}
