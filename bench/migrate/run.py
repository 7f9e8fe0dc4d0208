"""bench/migrate: `govsync migrate terraform` on a generated state, whole process.

Generates a Terraform state (format version 4) of N formalco/formal resource
instances of twelve types, as the provider writes them: spaces, connectors in
them (in a module, with for_each), hooks (count), policies at schema versions
0, 1 and 2, log integrations holding a secret, connector AI providers with a
write-only key, forms, data labels, permissions, data discovery
configurations, and groups (which stay in Terraform).  Then times, best of
--runs, each as a separate process:

* migrate:  `govsync migrate terraform STATE --out DIR` into a new folder;
* again:    the same over its own output (nothing is rewritten);
* validate: `govsync validate DIR` of the folder written.

Usage: python bench/migrate/run.py [--sizes 1000,10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from common import compile_package  # noqa: E402

FORMAL = 'provider["registry.terraform.io/formalco/formal"]'
TYPES = 12


def instance(attributes: dict[str, Any], version: int = 0, key: Any = None,
             sensitive: tuple[str, ...] = ()) -> dict[str, Any]:
    out = {"schema_version": version, "attributes": attributes, "private": "e30=",
           "sensitive_attributes": [[{"type": "get_attr", "value": s}] for s in sensitive]}
    if key is not None:
        out["index_key"] = key
    return out


def generate(n: int) -> dict[str, Any]:
    """A state of ``n`` instances, in resources of up to 50 instances each."""
    resources: list[dict[str, Any]] = []
    code = ("package formal.v2\n\nimport future.keywords.if\n\n"
            "default session := {\"action\": \"allow\"}\n")
    for i in range(n):
        t = i % TYPES
        group = i // TYPES
        key, module, rtype, version, sensitive = None, "", "", 0, ()
        if t == 0:
            rtype, version = "formal_space", 1
            attrs = {"id": f"space-{group}", "name": f"space-{group}", "description": "s",
                     "created_at": 1, "termination_protection": False}
        elif t == 1:
            rtype, version, key, module = "formal_connector", 1, f"c{group}", 'module.region["eu"]'
            attrs = {"id": f"conn-{group}", "name": f"conn-{group}", "api_key": "k",
                     "termination_protection": True, "space_id": f"space-{group}"}
            sensitive = ("api_key",)
        elif t == 2:
            rtype, key = "formal_hook", group
            attrs = {"id": f"hook-{group}", "name": f"hook_{group}", "description": "",
                     "code": "export default function h(input) {\n  return 1;\n}\n",
                     "status": "active", "timeout_ms": 5000,
                     "allowlisted_environment_variables": ["TOKEN"],
                     "allowlisted_network_hosts": ["risk.internal"],
                     "created_at": "", "updated_at": ""}
        elif t in (3, 4, 5):
            rtype, version = "formal_policy", t - 3
            attrs = {"id": f"pol-{t}-{group}", "name": f"pol-{t}-{group}", "description": "p",
                     "module": code, "created_at": "", "updated_at": "", "status": "active",
                     "termination_protection": False}
            if version == 0:
                attrs.update(active=True, owners=["data-platform"], notification="all",
                             created_by="u", org_id="o", expire_at="")
            elif version == 1:
                attrs.update(owner="data-platform", notification="none")
        elif t == 6:
            rtype = "formal_integration_log"
            attrs = {"id": f"log-{group}", "name": f"log-{group}", "datadog": [], "aws_s3": [],
                     "gcs": [], "splunk": [{"host": "h", "port": 8088,
                                            "access_token": f"token-{group}"}]}
        elif t == 7:
            rtype = "formal_connector_ai_provider"
            attrs = {"id": f"cai-{group}", "connector_id": f"conn-{group}", "gemini": [],
                     "formal_ai_satellite": [], "google_vertex_ai": [], "anthropic": [],
                     "aws_bedrock": [], "openai": [{"api_key": None, "api_key_version": 1}],
                     "azure_ai": []}
        elif t == 8:
            rtype = "formal_form"
            attrs = {"id": f"form-{group}", "name": f"form-{group}", "description": "",
                     "created_at": "", "updated_at": "", "field": [
                         {"id": "why", "name": "Why", "type": "string", "config": []}]}
        elif t == 9:
            rtype, version = "formal_data_label", 1
            attrs = {"id": f"label-{group}", "name": f"label-{group}",
                     "classifier_type": "regex", "classifier_data": "[0-9]{16}"}
        elif t == 10:
            rtype = "formal_data_discovery"
            attrs = {"id": f"dd-{group}", "resource_id": "res-orders-db",
                     "native_user_id": "nu-1", "created_at": 1, "schedule": "24h",
                     "deletion_policy": "delete", "path": ""}
        else:
            rtype = "formal_group"
            attrs = {"id": f"grp-{group}", "name": f"group-{group}", "description": "",
                     "termination_protection": False}
        name = f"r{group // 50}"
        last = resources[-1] if resources else None
        if (last and last["type"] == rtype and last["name"] == name
                and last.get("module", "") == module and len(last["instances"]) < 50
                and key is not None):
            last["instances"].append(instance(attrs, version, key, sensitive))
            continue
        resource: dict[str, Any] = {"mode": "managed", "type": rtype,
                                    "name": name if key is not None else f"{name}_{i}",
                                    "provider": FORMAL,
                                    "instances": [instance(attrs, version, key, sensitive)]}
        if module:
            resource["module"] = module
        resources.append(resource)
    return {"version": 4, "terraform_version": "1.9.8", "serial": 1, "lineage": "bench",
            "outputs": {}, "resources": resources}


def timed(cmd: list[str], cwd: str, runs: int, before: Any = None) -> float:
    best = float("inf")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    compile_package()
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    py = sys.executable
    print(f"machine: {platform.machine()} {os.cpu_count()} cores, "
          f"{platform.processor() or platform.platform()}, Python {platform.python_version()}")
    print(f"{'instances':>9} {'state MB':>9} {'migrate s':>10} {'again s':>8} "
          f"{'validate s':>11} {'migrated':>9} {'files':>6}")
    for n in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            state = os.path.join(tmp, "terraform.tfstate")
            with open(state, "w") as fh:
                json.dump(generate(n), fh)
            out = os.path.join(tmp, "out")
            migrate = [py, "-m", "govsync", "migrate", "terraform", state, "--out", out,
                       "--owner-group", "data-platform"]
            first = timed(migrate, tmp, args.runs,
                          before=lambda out=out: shutil.rmtree(out, ignore_errors=True))
            again = timed(migrate, tmp, args.runs)
            validate = timed([py, "-m", "govsync", "validate", out], tmp, args.runs)
            with open(os.path.join(out, ".govsync-migrate.json")) as fh:
                files = len(json.load(fh)["files"])
            with open(os.path.join(out, "terraform-state-rm.sh")) as fh:
                migrated = sum(1 for line in fh if line.startswith("  '"))
            size = os.path.getsize(state) / 1e6
            print(f"{n:>9} {size:>9.1f} {first:>10.2f} {again:>8.2f} {validate:>11.2f} "
                  f"{migrated:>9} {files:>6}")


if __name__ == "__main__":
    main()
