"""``govsync state import ADDRESS ID`` verifies the id by a read (as an ``Import``
document does) and refuses an id the server does not hold; where no read can verify
it, it says so and records the id as given."""

from __future__ import annotations

import dataclasses

import pytest
from refreshkit import Gov, copy_examples

# address -> the read that verifies it: a Get by id, a Get by another field (a
# connector's AI provider, by its connector), a List (a signing key has no Get).
READS = {
    "Hook/risk_score": "GetHook",
    "ConnectorAIProvider/prod-eu-assistant": "GetConnectorAiProvider",
    "SigningKey/release-pipeline": "ListSigningKeys",
}


def forgotten(gov: Gov, address: str) -> tuple[str, str]:
    """Apply the examples, then forget ``address``: (the manifests, its id)."""
    manifests = str(copy_examples(gov.folder))
    gov.ok("apply", manifests, "--auto-approve")
    object_id = gov.entries()[address]["id"]
    gov.ok("state", "forget", address)
    return manifests, object_id


@pytest.mark.parametrize("address", sorted(READS))
def test_an_id_the_server_holds_is_verified(gov: Gov, address: str) -> None:
    manifests, object_id = forgotten(gov, address)
    run = gov.ok("state", "import", address, object_id, manifests)
    assert f"Recorded {address} as {object_id}, verified by {READS[address]}." in run.out
    assert gov.entries()[address]["id"] == object_id
    assert gov.run("plan", manifests, "--detailed-exitcode").code == 0


@pytest.mark.parametrize("address", sorted(READS))
def test_an_id_the_server_does_not_hold_is_refused(gov: Gov, address: str) -> None:
    manifests, object_id = forgotten(gov, address)
    wrong = object_id[:-4] + ("0000" if not object_id.endswith("0000") else "1111")
    run = gov.run("state", "import", address, wrong, manifests)
    assert run.code == 1, run
    kind = address.split("/")[0]
    assert (f"no {kind} {wrong} exists on the server ({READS[address]} found none): check "
            "the id; nothing was recorded") in run.err
    assert address not in gov.entries()


def test_what_no_read_can_verify_is_recorded_as_given(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests, alias_id = forgotten(gov, "ResourceAlias/orders-db-short")
    run = gov.ok("state", "import", "ResourceAlias/orders-db-short", alias_id, manifests)
    assert ("without verification: the API cannot read a ResourceAlias, check the id "
            "yourself.") in run.out
    # Without an endpoint nothing is read, and it says so.
    hook_id = gov.entries()["Hook/risk_score"]["id"]
    gov.ok("state", "forget", "Hook/risk_score")
    run = gov.run("state", "import", "Hook/risk_score", hook_id, manifests,
                  env={"GOVSYNC_ENDPOINT": ""})
    assert run.code == 0, run
    assert "without verification: no endpoint is configured to read it from" in run.out


def test_an_endpoint_without_the_reads_records_as_given(sqlite_gov: Gov) -> None:
    gov = sqlite_gov
    manifests, hook_id = forgotten(gov, "Hook/risk_score")
    spec = dataclasses.replace(gov, env={**gov.env, "GOVSYNC_LOCAL_OPERATIONS": "spec"})
    run = spec.ok("state", "import", "Hook/risk_score", hook_id, manifests)
    assert ("without verification: this endpoint does not offer the reads of a Hook, check "
            "the id yourself.") in run.out
