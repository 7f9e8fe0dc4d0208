"""Helpers of the migration tests: a Terraform state as the provider writes it, and the
control API called as Terraform would have called it.

The reference server and govsync as processes come from
``tests/apply/applykit.py`` (imported from there, not copied).  A state is
built instance by instance with every attribute the provider's schema has
(formalco/terraform-provider-formal 4.23.2, ``formal/resources/*.go``):
read-only ones filled in, absent blocks as empty lists, write-only
attributes null, sensitive ones listed in ``sensitive_attributes`` as cty
paths, Terraform's ``private`` and ``dependencies`` beside them.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

APPLY_TESTS = Path(__file__).resolve().parents[1] / "apply"
if str(APPLY_TESTS) not in sys.path:
    sys.path.insert(0, str(APPLY_TESTS))
pytest.register_assert_rewrite("applykit")

from applykit import EXAMPLE_SEED, KEY, Govsync, Run, Server  # noqa: E402

from govsync.api.catalog import BY_NAME  # noqa: E402
from testkit import LOOPBACK_TLS  # noqa: E402

__all__ = ["EXAMPLE_SEED", "FORMAL", "KEY", "Api", "Govsync", "Run", "Server", "TerraformState",
           "attr", "instance"]

FORMAL = 'provider["registry.terraform.io/formalco/formal"]'
# What the plugin SDK keeps in ``private`` (a create timeout, the schema version).
PRIVATE = ("eyJlMmJmYjczMC1lY2FhLTExZTYtOGY4OC0zNDM2M2JjN2M0YzAiOnsiY3JlYXRlIjoxNTAwMDAwMDAwMDAw"
           "fSwic2NoZW1hX3ZlcnNpb24iOiIxIn0=")


def attr(*steps: str | int) -> list[dict[str, Any]]:
    """A cty path, as ``sensitive_attributes`` lists it: names and list indexes."""
    return [{"type": "get_attr", "value": s} if isinstance(s, str)
            else {"type": "index", "value": {"value": s, "type": "number"}} for s in steps]


def instance(attributes: dict[str, Any], *, schema_version: int = 0, key: int | str | None = None,
             sensitive: tuple[list[dict[str, Any]], ...] = (),
             dependencies: tuple[str, ...] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"schema_version": schema_version, "attributes": attributes,
                           "sensitive_attributes": list(sensitive), "private": PRIVATE}
    if key is not None:
        out["index_key"] = key
    if dependencies:
        out["dependencies"] = list(dependencies)
    return out


@dataclass
class TerraformState:
    """A state of format version 4, built resource by resource."""

    resources: list[dict[str, Any]] = field(default_factory=list)
    serial: int = 42
    lineage: str = "8d1c4bde-5f0e-4c1e-a8b2-9a3c7f1e2d40"

    def add(self, rtype: str, name: str, *instances: dict[str, Any], module: str = "",
            mode: str = "managed", provider: str = FORMAL) -> None:
        resource: dict[str, Any] = {"mode": mode, "type": rtype, "name": name,
                                    "provider": provider, "instances": list(instances)}
        if module:
            resource["module"] = module
        if any("index_key" in i for i in instances):
            keys = [i["index_key"] for i in instances]
            resource["each"] = "list" if all(isinstance(k, int) for k in keys) else "map"
        self.resources.append(resource)

    def document(self) -> dict[str, Any]:
        return {"version": 4, "terraform_version": "1.9.8", "serial": self.serial,
                "lineage": self.lineage, "outputs": {}, "resources": self.resources,
                "check_results": None}

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.document(), indent=2), encoding="utf-8")
        return path


@dataclass
class Api:
    """The reference server's API, called with the tests' key."""

    url: str

    def call(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """Send one operation; the object it answers with (unwrapped)."""
        op = BY_NAME[operation]
        response = httpx.post(self.url + op.path, json=body, headers={"X-API-KEY": KEY},
                              timeout=30, verify=LOOPBACK_TLS)
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer[op.response_key] if op.response_key else answer
