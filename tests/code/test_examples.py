"""Each example policy compiles in the engine and does what its description says:
evaluated on inputs that show it (the hooks' results given, as the service passes
them), and the example hooks that need no network run on their inputs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from govsync import policycode
from govsync.manifests import load
from govsync.manifests.manifest import ManifestSet
from govsync.policycode import sandbox
from testkit import EXAMPLE_MANIFESTS, ROOT

TEMPLATES = ROOT / "src" / "govsync" / "templates" / "manifests"

ANA = {"username": "ana", "email": "ana@northwind.example", "groups": ["analysts"],
       "type": "human"}
DANA = {"username": "dana", "email": "dana@northwind.example", "groups": ["data-platform"],
        "type": "human"}
PAT = {"username": "pat", "email": "pat@northwind.example",
       "groups": ["payments-engineering"], "type": "human"}


@pytest.fixture(scope="module")
def examples() -> ManifestSet:
    return load([str(EXAMPLE_MANIFESTS)])


def code(manifests: ManifestSet, address: str) -> str:
    text = manifests.objects[address].template["code"]
    assert isinstance(text, str)
    return text


def decide(manifests: ManifestSet, address: str, stage: str, input: dict[str, Any],
           **kwargs: Any) -> Any:
    evaluation = sandbox.evaluate(code(manifests, address), stage, input, **kwargs)
    assert evaluation.error is None, evaluation.error
    return evaluation.decision


def test_every_example_policy_and_permission_compiles(examples: ManifestSet) -> None:
    coded = [m for m in examples.objects.values() if m.kind.code is not None]
    assert {m.kind.name for m in coded} == {"Policy", "Permission", "Hook"}
    for manifest in coded:
        if manifest.kind.code is policycode.Role.HOOK:
            continue
        validity = sandbox.validity(manifest.template["code"])
        assert validity.valid, (manifest.address, validity.error)
        assert validity.ast


def test_mask_pii_masks_found_columns_for_everyone_outside_data_platform(
        examples: ManifestSet) -> None:
    row = [{"path": "customers.email", "data_label": "email", "value": "jo@example.com"},
           {"path": "customers.iban", "data_label": "iban", "value": "DE89370400440532013000"},
           {"path": "customers.city", "data_label": "", "value": "Lyon"}]
    found = sandbox.run_hook(code(examples, "Hook/mask_pii"), {"row": row}, timeout_ms=800)
    assert found.error is None and found.value == {
        "columns": ["customers.email", "customers.iban"]}
    hooks = {"mask_pii": found.value}
    decision = decide(examples, "Policy/mask-pii-in-results", "post_request",
                      {"user": ANA, "row": row}, hooks=hooks)
    assert decision["action"] == "mask"
    assert decision["columns"] == ["customers.email", "customers.iban"]
    assert decide(examples, "Policy/mask-pii-in-results", "post_request",
                  {"user": DANA, "row": row}, hooks=hooks) is None
    assert decide(examples, "Policy/mask-pii-in-results", "post_request",
                  {"user": ANA, "row": row[2:]}, hooks={"mask_pii": {"columns": []}}) is None


def test_ledger_writes_need_an_approved_ticket(examples: ManifestSet) -> None:
    address = "Policy/ledger-change-needs-ticket"
    ledger = {"id": "res-payments-db", "name": "payments"}
    write = {"user": PAT, "resource": ledger,
             "query": {"query": "UPDATE ledger SET x = 1", "statement_type": "UPDATE"}}
    roster = {"oncall_roster": {}}
    blocked = decide(examples, address, "pre_request", write,
                     hooks={"ticket_check": {"approved": False}}, data=roster)
    assert blocked["action"] == "block" and blocked["type"] == "block_with_formal_message"
    assert decide(examples, address, "pre_request", write,
                  hooks={"ticket_check": {"approved": True}}, data=roster) is None
    read = {**write, "query": {"query": "SELECT 1", "statement_type": "SELECT"}}
    assert decide(examples, address, "pre_request", read,
                  hooks={"ticket_check": {"approved": False}}, data=roster) is None
    on_call = {"oncall_roster": {PAT["email"]: True}}
    assert decide(examples, address, "pre_request", write,
                  hooks={"ticket_check": {"approved": False}}, data=on_call) is None
    elsewhere = {**write, "resource": {"id": "res-warehouse"}}
    assert decide(examples, address, "pre_request", elsewhere,
                  hooks={"ticket_check": {"approved": False}}, data=roster) is None


def test_risk_based_access_blocks_scores_above_80(examples: ManifestSet) -> None:
    address = "Policy/risk-based-access"
    blocked = decide(examples, address, "session", {"user": ANA},
                     hooks={"risk_score": {"score": 81}})
    assert blocked["action"] == "block" and "81" in blocked["reason"]
    assert decide(examples, address, "session", {"user": ANA},
                  hooks={"risk_score": {"score": 80}}) is None


@pytest.mark.parametrize(("now", "blocked"), [
    ("2026-11-27T10:00:00Z", False),   # a Friday, 10:00
    ("2026-11-27T06:59:00Z", True),    # before 07:00
    ("2026-11-27T20:00:00Z", True),    # 20:00 is no longer business hours
    ("2026-11-28T10:00:00Z", True),    # a Saturday
])
def test_warehouse_business_hours(examples: ManifestSet, now: str, blocked: bool) -> None:
    address = "Policy/warehouse-business-hours"
    warehouse = {"id": "res-warehouse", "name": "dwh"}
    decision = decide(examples, address, "session", {"user": ANA, "resource": warehouse},
                      now=datetime.fromisoformat(now))
    assert (decision is not None and decision["action"] == "block") is blocked
    others = decide(examples, address, "session", {"user": PAT, "resource": warehouse},
                    now=datetime.fromisoformat(now))
    assert others is None  # only analysts are held to the hours


def test_llm_prompt_guard_blocks_prompts_with_an_email_address(examples: ManifestSet) -> None:
    address = "Policy/llm-prompt-guard"
    gateway = {"id": "res-llm-gateway"}
    prompt = {"query": "Summarise the complaint from jo.smith@example.com", "statement_type": ""}
    decision = decide(examples, address, "pre_request",
                      {"user": ANA, "resource": gateway, "query": prompt})
    assert decision["action"] == "block"
    clean = {"query": "Summarise last week's complaints", "statement_type": ""}
    assert decide(examples, address, "pre_request",
                  {"user": ANA, "resource": gateway, "query": clean}) is None


@pytest.mark.parametrize(("address", "input", "allowed"), [
    ("Permission/warehouse-read",
     {"resource": {"id": "res-warehouse"}, "query": {"statement_type": "SELECT"}}, True),
    ("Permission/warehouse-read",
     {"resource": {"id": "res-warehouse"}, "query": {"statement_type": "DELETE"}}, False),
    ("Permission/ledger-break-glass",
     {"resource": {"id": "res-payments-db"}, "session": {"tags": {"break_glass": "approved"}}},
     True),
    ("Permission/ledger-break-glass", {"resource": {"id": "res-payments-db"}}, False),
])
def test_permissions(examples: ManifestSet, address: str, input: dict[str, Any],
                     allowed: bool) -> None:
    assert decide(examples, address, "allow", input) is allowed


def test_policies_read_hooks_as_input_and_depend_on_them(examples: ManifestSet) -> None:
    """No dependsOn lists a hook: the code's input.hooks.<name> makes the edge."""
    order = examples.order
    for policy, hook in (("Policy/mask-pii-in-results", "Hook/mask_pii"),
                         ("Policy/ledger-change-needs-ticket", "Hook/ticket_check"),
                         ("Policy/risk-based-access", "Hook/risk_score")):
        manifest = examples.objects[policy]
        assert hook in manifest.uses and hook not in manifest.depends_on
        assert order.index(hook) < order.index(policy)


def test_the_init_template_policy_blocks_writes_without_a_ticket() -> None:
    template = load([str(TEMPLATES)], )
    text = code(template, "Policy/writes-need-ticket")
    write = {"query": {"query": "DELETE FROM t", "statement_type": "DELETE"}}
    blocked = sandbox.evaluate(text, "pre_request", write,
                                  hooks={"ticket_check": {"approved": False}})
    assert blocked.decision["action"] == "block"
    assert sandbox.evaluate(text, "pre_request", write,
                               hooks={"ticket_check": {"approved": True}}).decision is None
